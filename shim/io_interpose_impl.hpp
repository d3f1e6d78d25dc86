// What the interposed C library functions share (io_interpose.hpp): the guard test, resolving the
// next definition, and the "before the call" helpers the table shim/libc_functions.tsv names.
// The helpers do nothing on a thread inside MPI (fence.hpp), the progress thread included.
// Included by the generated wrappers (shim/gen_interposers.py) and by io_interpose.cpp.
#pragma once

#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <mqueue.h>
#include <poll.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "io_interpose.hpp"

namespace tnbc::shim::interpose {

/// True while this thread resolves a definition (dlsym may call free or realloc).
extern thread_local bool t_resolving __attribute__((tls_model("initial-exec")));

inline bool guarded() { return g_guarded_calls.load(std::memory_order_acquire) != 0; }

/// The next definition of `name` after ours, looked up once.
template <typename F>
F next(std::atomic<F>& slot, const char* name) {
  F f = slot.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  t_resolving = true;
  f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  t_resolving = false;
  slot.store(f, std::memory_order_release);
  return f;
}

// Before the call: wait until the named bytes are there (Mode::release_range).  io: the kernel
// is about to read or write them; mem: the memory is being given back, re-protected or advised.
void io(const void* p, std::size_t n);
void mem(const void* p, std::size_t n);
void io_iov(const struct iovec* v, int n);
void mem_iov(const struct iovec* v, int n);
void io_msg(const struct msghdr* m);
void io_mmsg(const struct mmsghdr* v, unsigned int n);
/// A NUL-terminated string (read in place first, so a guarded page faults and is waited for).
void io_str(const char* s);
void io_aiocb(const struct aiocb* cb);
void io_aiolist(struct aiocb* const list[], int n);
/// A heap block about to be freed or moved (its usable size).
void mem_usable(void* p);
/// Every guarded page of the process (calls whose memory effect cannot be bounded).
void everything();
/// shmat(id, p, flags) with SHM_REMAP replaces the segment's size of pages at p.
void shm_remap(const void* p, int flags, int id);
/// a * b, saturating.
inline std::size_t times(std::size_t a, std::size_t b) {
  return (b != 0 && a > SIZE_MAX / b) ? SIZE_MAX : a * b;
}

}  // namespace tnbc::shim::interpose
