// The C library's own memory, signal and system-call functions, past any definition that
// interposes them (the preloaded libraries export mprotect, mmap, munmap, sigaction and syscall
// themselves: shim/libc_functions.tsv).  tnbc's own page protection, mirror mapping, SIGSEGV
// handler and futex calls use these, so that they neither wait for guarded pages nor count as
// the program's mapping changes or signal handlers.  Resolved (dlsym RTLD_NEXT) when the library is loaded; each call is then one
// indirect call, async-signal-safe as the function it reaches.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <type_traits>

namespace tnbc::util::raw {

int mprotect(void* p, std::size_t n, int prot);
void* mmap(void* p, std::size_t n, int prot, int flags, int fd, off_t off);
int munmap(void* p, std::size_t n);
int sigaction(int sig, const struct sigaction* act, struct sigaction* old);
long syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6);

/// An argument of syscall() as the kernel takes it: a pointer's address or an integer.
template <typename T>
long arg(T v) {
  if constexpr (std::is_null_pointer_v<T>) return 0;
  else if constexpr (std::is_pointer_v<T>) return static_cast<long>(reinterpret_cast<std::uintptr_t>(v));
  else return static_cast<long>(v);
}

/// syscall(number, args...) with up to six arguments of pointer or integer type.
template <typename... A>
long syscall(long number, A... a) {
  static_assert(sizeof...(A) <= 6, "a system call takes at most six arguments");
  long v[6] = {arg(a)...};
  return syscall6(number, v[0], v[1], v[2], v[3], v[4], v[5]);
}

}  // namespace tnbc::util::raw
