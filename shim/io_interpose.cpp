// See io_interpose.hpp.  Each wrapper: one atomic load; if something is guarded, release the
// buffers through the mode; then the real function.  errno is whatever the real call leaves.
#include "io_interpose.hpp"

#include <cstdio>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mode.hpp"

extern "C" {
// glibc's own entry points, used while dlsym is still resolving free/realloc (dlsym may free).
void __libc_free(void*);
void* __libc_realloc(void*, size_t);
}

namespace tnbc::shim {

std::atomic<int> g_guarded_calls{0};

namespace {

thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

// The next definition of `name` after ours, looked up once.
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

inline bool guarded() { return g_guarded_calls.load(std::memory_order_acquire) != 0; }

void release(const void* p, std::size_t n, ReleaseReason why) {
  if (p != nullptr && n != 0) mode().release_range(p, n, why);
}

void release_iov(const struct iovec* iov, int count) {
  if (iov == nullptr) return;
  for (int i = 0; i < count; ++i) release(iov[i].iov_base, iov[i].iov_len, ReleaseReason::io);
}

void release_msg(const struct msghdr* msg) {
  if (msg == nullptr) return;
  release_iov(msg->msg_iov, static_cast<int>(msg->msg_iovlen));
  release(msg->msg_control, msg->msg_controllen, ReleaseReason::io);
}

using ReadFn = ssize_t (*)(int, void*, size_t);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using PreadFn = ssize_t (*)(int, void*, size_t, off_t);
using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);
using IovFn = ssize_t (*)(int, const struct iovec*, int);
using SendFn = ssize_t (*)(int, const void*, size_t, int);
using RecvFn = ssize_t (*)(int, void*, size_t, int);
using SendtoFn = ssize_t (*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
using RecvfromFn = ssize_t (*)(int, void*, size_t, int, struct sockaddr*, socklen_t*);
using SendmsgFn = ssize_t (*)(int, const struct msghdr*, int);
using RecvmsgFn = ssize_t (*)(int, struct msghdr*, int);
using FreadFn = size_t (*)(void*, size_t, size_t, FILE*);
using FwriteFn = size_t (*)(const void*, size_t, size_t, FILE*);
using FreeFn = void (*)(void*);
using ReallocFn = void* (*)(void*, size_t);
using MunmapFn = int (*)(void*, size_t);

std::atomic<ReadFn> r_read;
std::atomic<WriteFn> r_write;
std::atomic<PreadFn> r_pread, r_pread64;
std::atomic<PwriteFn> r_pwrite, r_pwrite64;
std::atomic<IovFn> r_readv, r_writev;
std::atomic<SendFn> r_send;
std::atomic<RecvFn> r_recv;
std::atomic<SendtoFn> r_sendto;
std::atomic<RecvfromFn> r_recvfrom;
std::atomic<SendmsgFn> r_sendmsg;
std::atomic<RecvmsgFn> r_recvmsg;
std::atomic<FreadFn> r_fread;
std::atomic<FwriteFn> r_fwrite;
std::atomic<FreeFn> r_free;
std::atomic<ReallocFn> r_realloc;
std::atomic<MunmapFn> r_munmap;

std::size_t product(size_t a, size_t b) { return (b != 0 && a > SIZE_MAX / b) ? SIZE_MAX : a * b; }

// The parts of libucm's API we use (ucm/api/ucm.h), declared here so that nothing links libucm.
constexpr int kUcmEventVmUnmapped = 1 << 17;  // UCM_EVENT_VM_UNMAPPED: callbacks run before
struct UcmVmEvent {                           // ucm_event_t's vm_unmapped member (offset 0)
  void* address;
  size_t size;
};
using UcmCallback = void (*)(int type, void* event, void* arg);
using UcmSetHandler = int (*)(int events, int priority, UcmCallback cb, void* arg);

void on_ucm_unmapped(int, void* event, void*) {
  if (!guarded() || event == nullptr) return;
  const auto* e = static_cast<const UcmVmEvent*>(event);
  release(e->address, e->size, ReleaseReason::memory);
}

}  // namespace

bool subscribe_memory_events() {
  static std::atomic<int> state{0};  // 0 not tried, 1 registered, 2 unavailable
  int s = state.load(std::memory_order_acquire);
  if (s != 0) return s == 1;
  auto set = reinterpret_cast<UcmSetHandler>(dlsym(RTLD_DEFAULT, "ucm_set_event_handler"));
  // Negative priority: called before the memory goes away.
  bool ok = set != nullptr && set(kUcmEventVmUnmapped, -1, on_ucm_unmapped, nullptr) == 0;
  state.store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

}  // namespace tnbc::shim

using namespace tnbc::shim;

#define TNBC_EXPORT extern "C" __attribute__((visibility("default")))

TNBC_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_read, "read")(fd, buf, n);
}
TNBC_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_write, "write")(fd, buf, n);
}
// meson builds with _FILE_OFFSET_BITS=64, under which <unistd.h> renames pread to pread64: give
// each definition its exact symbol name with an asm label.  Programs built with large-file support
// (ROMIO among them) call the *64 names.
TNBC_EXPORT ssize_t tnbc_pread(int fd, void* buf, size_t n, off_t off) __asm__("pread");
TNBC_EXPORT ssize_t tnbc_pwrite(int fd, const void* buf, size_t n, off_t off) __asm__("pwrite");
TNBC_EXPORT ssize_t tnbc_pread64(int fd, void* buf, size_t n, off_t off) __asm__("pread64");
TNBC_EXPORT ssize_t tnbc_pwrite64(int fd, const void* buf, size_t n, off_t off) __asm__("pwrite64");
ssize_t tnbc_pread(int fd, void* buf, size_t n, off_t off) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_pread, "pread")(fd, buf, n, off);
}
ssize_t tnbc_pwrite(int fd, const void* buf, size_t n, off_t off) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_pwrite, "pwrite")(fd, buf, n, off);
}
ssize_t tnbc_pread64(int fd, void* buf, size_t n, off_t off) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_pread64, "pread64")(fd, buf, n, off);
}
ssize_t tnbc_pwrite64(int fd, const void* buf, size_t n, off_t off) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_pwrite64, "pwrite64")(fd, buf, n, off);
}
TNBC_EXPORT ssize_t readv(int fd, const struct iovec* iov, int count) {
  if (guarded()) release_iov(iov, count);
  return next(r_readv, "readv")(fd, iov, count);
}
TNBC_EXPORT ssize_t writev(int fd, const struct iovec* iov, int count) {
  if (guarded()) release_iov(iov, count);
  return next(r_writev, "writev")(fd, iov, count);
}
TNBC_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_send, "send")(fd, buf, n, flags);
}
TNBC_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_recv, "recv")(fd, buf, n, flags);
}
TNBC_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* to,
                           socklen_t len) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_sendto, "sendto")(fd, buf, n, flags, to, len);
}
TNBC_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* from,
                             socklen_t* len) {
  if (guarded()) release(buf, n, ReleaseReason::io);
  return next(r_recvfrom, "recvfrom")(fd, buf, n, flags, from, len);
}
TNBC_EXPORT ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if (guarded()) release_msg(msg);
  return next(r_sendmsg, "sendmsg")(fd, msg, flags);
}
TNBC_EXPORT ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  if (guarded()) release_msg(msg);
  return next(r_recvmsg, "recvmsg")(fd, msg, flags);
}
TNBC_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* f) {
  if (guarded()) release(buf, product(size, n), ReleaseReason::io);
  return next(r_fread, "fread")(buf, size, n, f);
}
TNBC_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* f) {
  if (guarded()) release(buf, product(size, n), ReleaseReason::io);
  return next(r_fwrite, "fwrite")(buf, size, n, f);
}
TNBC_EXPORT void free(void* p) {
  if (p != nullptr && guarded()) release(p, malloc_usable_size(p), ReleaseReason::memory);
  if (t_resolving) return __libc_free(p);
  next(r_free, "free")(p);
}
TNBC_EXPORT void* realloc(void* p, size_t n) {
  if (p != nullptr && guarded()) release(p, malloc_usable_size(p), ReleaseReason::memory);
  if (t_resolving) return __libc_realloc(p, n);
  return next(r_realloc, "realloc")(p, n);
}
TNBC_EXPORT int munmap(void* p, size_t n) {
  if (guarded()) release(p, n, ReleaseReason::memory);
  return next(r_munmap, "munmap")(p, n);
}
