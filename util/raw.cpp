// See raw.hpp.
#include "raw.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace tnbc::util::raw {
namespace {

using MprotectFn = int (*)(void*, std::size_t, int);
using MmapFn = void* (*)(void*, std::size_t, int, int, int, off_t);
using MunmapFn = int (*)(void*, std::size_t);
using SyscallFn = long (*)(long, ...);
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

struct Table {
  MprotectFn mprotect = nullptr;
  MmapFn mmap = nullptr;
  MunmapFn munmap = nullptr;
  SyscallFn syscall = nullptr;
  SigactionFn sigaction = nullptr;
};

template <typename F>
F resolve(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (f == nullptr) std::abort();  // the C library always has them
  return f;
}

const Table& table() {
  static const Table t{resolve<MprotectFn>("mprotect"), resolve<MmapFn>("mmap"),
                       resolve<MunmapFn>("munmap"), resolve<SyscallFn>("syscall"),
                       resolve<SigactionFn>("sigaction")};
  return t;
}

// Resolve at load time, so that the first use (possibly in a signal handler) finds it done.
[[gnu::constructor]] void resolve_at_load() { (void)table(); }

}  // namespace

int mprotect(void* p, std::size_t n, int prot) { return table().mprotect(p, n, prot); }
void* mmap(void* p, std::size_t n, int prot, int flags, int fd, off_t off) {
  return table().mmap(p, n, prot, flags, fd, off);
}
int munmap(void* p, std::size_t n) { return table().munmap(p, n); }
int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return table().sigaction(sig, act, old);
}
long syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  return table().syscall(number, a1, a2, a3, a4, a5, a6);
}

}  // namespace tnbc::util::raw
