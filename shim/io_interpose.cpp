// The hand-written interposers of shim/libc_functions.tsv (rows "custom"), the helpers every
// generated one uses (io_interpose_impl.hpp), the fork guard and libucm's memory events.  Each
// wrapper: one atomic load; if something is guarded, release the bytes through the mode; then
// the real function.  errno is whatever the real call leaves.
#include "io_interpose.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "fence.hpp"
#include "io_interpose_impl.hpp"
#include "mapping.hpp"
#include "mode.hpp"
#include "util/raw.hpp"

extern "C" {
// glibc's own entry points, used while dlsym is still resolving free/realloc (dlsym may free).
void __libc_free(void*);
void* __libc_realloc(void*, size_t);
}

namespace tnbc::shim {

std::atomic<int> g_guarded_calls{0};

namespace {
std::atomic<bool> g_io_uring{false};
}

bool io_uring_in_use() {
  if (g_io_uring.load(std::memory_order_relaxed)) return true;
  // liburing enters the kernel by its own system-call instructions, past syscall(): that it is
  // loaded is all we can see.  (RTLD_NOLOAD: only asks.)
  static const bool liburing = [] {
    for (const char* name : {"liburing.so.2", "liburing.so"})
      if (void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
        dlclose(h);
        return true;
      }
    return false;
  }();
  return liburing;
}

namespace interpose {

thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

namespace {
// Never inside MPI: MPI's own system calls (UCX attaching shared memory, freeing its buffers)
// never name guarded pages -- the fence completes every collective before a user buffer reaches
// MPI -- and waiting there could never end: the progress thread, which alone publishes pages,
// counts as inside MPI for good, and an application thread inside MPI may hold the lock the
// progress thread needs.
void release(const void* p, std::size_t n, ReleaseReason why) {
  if (p != nullptr && n != 0 && !nested_in_mpi()) mode().release_range(p, n, why);
}
void release_iov(const struct iovec* v, int n, ReleaseReason why) {
  if (v == nullptr) return;
  for (int i = 0; i < n; ++i) release(v[i].iov_base, v[i].iov_len, why);
}
}  // namespace

void io(const void* p, std::size_t n) { release(p, n, ReleaseReason::io); }
void mem(const void* p, std::size_t n) { release(p, n, ReleaseReason::memory); }
void io_iov(const struct iovec* v, int n) { release_iov(v, n, ReleaseReason::io); }
void mem_iov(const struct iovec* v, int n) { release_iov(v, n, ReleaseReason::memory); }
void io_msg(const struct msghdr* m) {
  if (m == nullptr) return;
  io(m, sizeof *m);
  io_iov(m->msg_iov, static_cast<int>(m->msg_iovlen));
  io(m->msg_control, m->msg_controllen);
  io(m->msg_name, m->msg_namelen);
}
void io_mmsg(const struct mmsghdr* v, unsigned int n) {
  if (v == nullptr) return;
  io(v, times(n, sizeof *v));
  for (unsigned int i = 0; i < n; ++i) io_msg(&v[i].msg_hdr);
}
void io_str(const char* s) {
  if (s != nullptr) io(s, std::strlen(s) + 1);
}
void io_aiocb(const struct aiocb* cb) {
  if (cb == nullptr) return;
  io(cb, sizeof *cb);
  io(const_cast<const void*>(cb->aio_buf), cb->aio_nbytes);
}
void io_aiolist(struct aiocb* const list[], int n) {
  if (list == nullptr) return;
  for (int i = 0; i < n; ++i) io_aiocb(list[i]);
}
void mem_usable(void* p) {
  if (p != nullptr) mem(p, malloc_usable_size(p));
}
void everything() {
  if (!nested_in_mpi()) mode().release_range(nullptr, SIZE_MAX, ReleaseReason::memory);
}
void shm_remap(const void* p, int flags, int id) {
  struct shmid_ds ds;
  if (p != nullptr && (flags & SHM_REMAP) != 0 && shmctl(id, IPC_STAT, &ds) == 0) mem(p, ds.shm_segsz);
}

namespace {

// Publishing moves mirror pages over a receive buffer's full pages while its partial first and
// last pages stay: one private mapping of the program becomes several, and mremap refuses a
// range over several (EFAULT) where it moved one under plain MPI.  For private memory whose
// pages may be replaced (mapping.hpp), a move by copy gives the same bytes at the new address:
// a new private anonymous mapping (read-write), the old contents copied, the old range unmapped.
void* move_by_copy(void* old, size_t old_n, size_t new_n, int flags, void* target) {
  if (old_n == 0 || new_n == 0 || !mapping::replaceable(old, old_n)) {
    errno = EFAULT;
    return MAP_FAILED;
  }
  const bool fixed = (flags & MREMAP_FIXED) != 0;
  void* moved = tnbc::util::raw::mmap(fixed ? target : nullptr, new_n, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | (fixed ? MAP_FIXED : 0), -1, 0);
  if (moved == MAP_FAILED) return MAP_FAILED;  // errno from mmap (ENOMEM)
  std::memcpy(moved, old, std::min(old_n, new_n));
  tnbc::util::raw::munmap(old, old_n);
  return moved;
}

/// mremap's `result`, or, when it refused a move with EFAULT, the move redone by copy.
void* redo_refused_move(void* result, void* old, size_t old_n, size_t new_n, int flags, void* target) {
  if (result != MAP_FAILED || errno != EFAULT || (flags & MREMAP_MAYMOVE) == 0) return result;
  return move_by_copy(old, old_n, new_n, flags, target);
}

// The parts of libucm's API we use (ucm/api/ucm.h), declared here so that nothing links libucm.
constexpr int kUcmEventMremap = 1 << 2;       // UCM_EVENT_MREMAP
constexpr int kUcmEventVmMapped = 1 << 16;    // UCM_EVENT_VM_MAPPED: callbacks run after
constexpr int kUcmEventVmUnmapped = 1 << 17;  // UCM_EVENT_VM_UNMAPPED: callbacks run before
struct UcmVmEvent {                           // ucm_event_t's vm_mapped/vm_unmapped member
  void* address;
  size_t size;
};
struct UcmMremapEvent {                       // ucm_event_t's mremap member (UCX 1.13)
  void* result;
  void* address;
  size_t old_size;
  size_t new_size;
  int flags;
};
using UcmCallback = void (*)(int type, void* event, void* arg);
using UcmSetHandler = int (*)(int events, int priority, UcmCallback cb, void* arg);

void on_ucm_event(int type, void* event, void*) {
  if (event == nullptr) return;
  const auto* e = static_cast<const UcmVmEvent*>(event);
  if (type == kUcmEventVmUnmapped && guarded()) mem(e->address, e->size);
  mapping::forget(e->address, e->size);
}

// libucm replaces the code of our mremap (as of munmap) and calls the kernel itself: the move by
// copy runs as its event handler after the original instead.  (libucm drops MREMAP_FIXED's new
// address: only a move the kernel may place is redone.)
void on_ucm_mremap(int, void* event, void*) {
  auto* e = static_cast<UcmMremapEvent*>(event);
  if (e == nullptr || (e->flags & MREMAP_FIXED) != 0) return;
  e->result = redo_refused_move(e->result, e->address, e->old_size, e->new_size, e->flags, nullptr);
  if (e->result != MAP_FAILED) mapping::forget(e->result, e->new_size);
}

// fork(): the child has no progress thread, so nothing may be in flight when it starts, and it
// must not inherit the mapping cache's lock taken.
void fork_prepare() {
  if (g_in_flight.load(std::memory_order_acquire) != 0 && !nested_in_mpi()) drain_in_flight();
  if (guarded()) everything();
  mapping::before_fork();
}
void fork_done() { mapping::after_fork(); }

[[gnu::constructor]] void install_fork_guard() { pthread_atfork(fork_prepare, fork_done, fork_done); }

}  // namespace
}  // namespace interpose

bool subscribe_memory_events() {
  static std::atomic<int> state{0};  // 0 not tried, 1 registered, 2 unavailable
  int s = state.load(std::memory_order_acquire);
  if (s != 0) return s == 1;
  auto set = reinterpret_cast<interpose::UcmSetHandler>(dlsym(RTLD_DEFAULT, "ucm_set_event_handler"));
  // Negative priority: called before the memory goes away.
  bool ok = set != nullptr &&
            set(interpose::kUcmEventVmUnmapped | interpose::kUcmEventVmMapped, -1, interpose::on_ucm_event, nullptr) == 0;
  // Positive priority: after the original mremap, to redo a move it refused.
  if (ok) ok = set(interpose::kUcmEventMremap, 1000, interpose::on_ucm_mremap, nullptr) == 0;
  state.store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

void release_pointers(std::initializer_list<const void*> pointers) {
  if (nested_in_mpi()) return;  // MPI's own calls: their caller released what it passed
  for (const void* p : pointers)
    if (p != nullptr) mode().release_range(p, 1, ReleaseReason::mpi);
}

}  // namespace tnbc::shim

using namespace tnbc::shim;
using namespace tnbc::shim::interpose;

#define TNBC_EXPORT extern "C" __attribute__((visibility("default")))

TNBC_EXPORT void free(void* p) {
  static std::atomic<void (*)(void*)> real{nullptr};
  if (p != nullptr && guarded()) mem_usable(p);
  if (t_resolving) return __libc_free(p);
  next(real, "free")(p);
}
TNBC_EXPORT void* realloc(void* p, size_t n) {
  static std::atomic<void* (*)(void*, size_t)> real{nullptr};
  if (p != nullptr && guarded()) mem_usable(p);
  if (t_resolving) return __libc_realloc(p, n);
  return next(real, "realloc")(p, n);
}

// open and openat take their mode only with O_CREAT or O_TMPFILE; the real one gets it either
// way (an unused argument costs nothing).  TNBC_OPEN_MODE reads it in the variadic function.
namespace {
using OpenFn = int (*)(const char*, int, ...);
using OpenAtFn = int (*)(int, const char*, int, ...);
bool takes_mode(int flags) { return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE; }
int open_path(std::atomic<OpenFn>& real, const char* name, const char* path, int flags, mode_t mode) {
  if (guarded()) io_str(path);
  return next(real, name)(path, flags, mode);
}
int open_at(std::atomic<OpenAtFn>& real, const char* name, int dir, const char* path, int flags, mode_t mode) {
  if (guarded()) io_str(path);
  return next(real, name)(dir, path, flags, mode);
}
}  // namespace
#define TNBC_OPEN_MODE(flags, mode)                                         \
  mode_t mode = 0;                                                          \
  if (takes_mode(flags)) {                                                  \
    va_list ap;                                                             \
    va_start(ap, flags);                                                    \
    mode = static_cast<mode_t>(va_arg(ap, int));                            \
    va_end(ap);                                                             \
  }

TNBC_EXPORT int tnbc_open(const char* path, int flags, ...) __asm__("open");
TNBC_EXPORT int tnbc_open64(const char* path, int flags, ...) __asm__("open64");
TNBC_EXPORT int tnbc_openat(int dir, const char* path, int flags, ...) __asm__("openat");
TNBC_EXPORT int tnbc_openat64(int dir, const char* path, int flags, ...) __asm__("openat64");
int tnbc_open(const char* path, int flags, ...) {
  static std::atomic<OpenFn> real{nullptr};
  TNBC_OPEN_MODE(flags, mode)
  return open_path(real, "open", path, flags, mode);
}
int tnbc_open64(const char* path, int flags, ...) {
  static std::atomic<OpenFn> real{nullptr};
  TNBC_OPEN_MODE(flags, mode)
  return open_path(real, "open64", path, flags, mode);
}
int tnbc_openat(int dir, const char* path, int flags, ...) {
  static std::atomic<OpenAtFn> real{nullptr};
  TNBC_OPEN_MODE(flags, mode)
  return open_at(real, "openat", dir, path, flags, mode);
}
int tnbc_openat64(int dir, const char* path, int flags, ...) {
  static std::atomic<OpenAtFn> real{nullptr};
  TNBC_OPEN_MODE(flags, mode)
  return open_at(real, "openat64", dir, path, flags, mode);
}
#undef TNBC_OPEN_MODE

TNBC_EXPORT int munmap(void* p, size_t n) {
  static std::atomic<int (*)(void*, size_t)> real{nullptr};
  if (guarded()) mem(p, n);
  mapping::forget(p, n);
  return next(real, "munmap")(p, n);
}

namespace {
void* mmap_common(std::atomic<void* (*)(void*, size_t, int, int, int, off_t)>& real, const char* name,
                  void* p, size_t n, int prot, int flags, int fd, off_t off) {
  if (guarded() && (flags & MAP_FIXED) != 0) mem(p, n);
  void* r = next(real, name)(p, n, prot, flags, fd, off);
  if (r != MAP_FAILED) mapping::forget(r, n);
  return r;
}
}  // namespace

TNBC_EXPORT void* tnbc_mmap(void* p, size_t n, int prot, int flags, int fd, off_t off) __asm__("mmap");
TNBC_EXPORT void* tnbc_mmap64(void* p, size_t n, int prot, int flags, int fd, off_t off) __asm__("mmap64");
void* tnbc_mmap(void* p, size_t n, int prot, int flags, int fd, off_t off) {
  static std::atomic<void* (*)(void*, size_t, int, int, int, off_t)> real{nullptr};
  return mmap_common(real, "mmap", p, n, prot, flags, fd, off);
}
void* tnbc_mmap64(void* p, size_t n, int prot, int flags, int fd, off_t off) {
  static std::atomic<void* (*)(void*, size_t, int, int, int, off_t)> real{nullptr};
  return mmap_common(real, "mmap64", p, n, prot, flags, fd, off);
}

TNBC_EXPORT void* mremap(void* old, size_t old_n, size_t new_n, int flags, ...) {
  static std::atomic<void* (*)(void*, size_t, size_t, int, ...)> real{nullptr};
  void* target = nullptr;
  if ((flags & MREMAP_FIXED) != 0) {
    va_list ap;
    va_start(ap, flags);
    target = va_arg(ap, void*);
    va_end(ap);
  }
  if (guarded()) {
    mem(old, old_n);
    if (target != nullptr) mem(target, new_n);
  }
  mapping::forget(old, old_n);
  void* r = next(real, "mremap")(old, old_n, new_n, flags, target);
  r = redo_refused_move(r, old, old_n, new_n, flags, target);
  if (r != MAP_FAILED) mapping::forget(r, new_n);
  return r;
}

TNBC_EXPORT void* shmat(int id, const void* p, int flags) {
  static std::atomic<void* (*)(int, const void*, int)> real{nullptr};
  if (guarded()) shm_remap(p, flags, id);
  void* r = next(real, "shmat")(id, p, flags);
  mapping::forget_all();
  return r;
}
// Shared memory is never guarded (mapping.hpp): detaching it waits for nothing.
TNBC_EXPORT int shmdt(const void* p) {
  static std::atomic<int (*)(const void*)> real{nullptr};
  mapping::forget_all();
  return next(real, "shmdt")(p);
}

TNBC_EXPORT int mlock(const void* p, size_t n) {
  static std::atomic<int (*)(const void*, size_t)> real{nullptr};
  if (guarded()) mem(p, n);
  int r = next(real, "mlock")(p, n);
  if (r == 0) mapping::locked(p, n);
  return r;
}
TNBC_EXPORT int mlock2(const void* p, size_t n, unsigned int flags) {
  static std::atomic<int (*)(const void*, size_t, unsigned int)> real{nullptr};
  if (guarded()) mem(p, n);
  int r = next(real, "mlock2")(p, n, flags);
  if (r == 0) mapping::locked(p, n);
  return r;
}
TNBC_EXPORT int munlock(const void* p, size_t n) {
  static std::atomic<int (*)(const void*, size_t)> real{nullptr};
  int r = next(real, "munlock")(p, n);
  if (r == 0) mapping::unlocked(p, n);
  return r;
}
TNBC_EXPORT int mlockall(int flags) {
  static std::atomic<int (*)(int)> real{nullptr};
  if (guarded()) everything();
  int r = next(real, "mlockall")(flags);
  if (r == 0) mapping::locked_all();
  return r;
}
TNBC_EXPORT int munlockall() {
  static std::atomic<int (*)()> real{nullptr};
  int r = next(real, "munlockall")();
  if (r == 0) mapping::unlocked_all();
  return r;
}

namespace {

/// What syscall() completes before a guarded call `number` with arguments `a`: the buffers it
/// takes and the memory it changes.
void release_syscall_arguments(long number, const long a[6]) {
  auto ptr = [&](int i) { return reinterpret_cast<void*>(a[i]); };
  auto len = [&](int i) { return static_cast<size_t>(a[i]); };
  auto iov = [&](int i) { return reinterpret_cast<const struct iovec*>(a[i]); };
  switch (number) {
    case SYS_read: case SYS_write: case SYS_pread64: case SYS_pwrite64: case SYS_getdents64:
    case SYS_recvfrom: case SYS_sendto: case SYS_readlink: case SYS_mq_timedsend:
    case SYS_mq_timedreceive:
      io(ptr(1), len(2));
      break;
    case SYS_readv: case SYS_writev: case SYS_preadv: case SYS_pwritev: case SYS_preadv2:
    case SYS_pwritev2: case SYS_vmsplice: case SYS_process_vm_readv: case SYS_process_vm_writev:
      io_iov(iov(1), static_cast<int>(a[2]));
      break;
    case SYS_recvmsg: case SYS_sendmsg:
      io_msg(reinterpret_cast<const struct msghdr*>(a[1]));
      break;
    case SYS_recvmmsg: case SYS_sendmmsg:
      io_mmsg(reinterpret_cast<const struct mmsghdr*>(a[1]), static_cast<unsigned int>(a[2]));
      break;
    case SYS_getrandom:
      io(ptr(0), len(1));
      break;
    case SYS_readlinkat:
      io(ptr(2), len(3));
      break;
    case SYS_msgsnd: case SYS_msgrcv:
      io(ptr(1), len(2) + sizeof(long));
      break;
    case SYS_splice: case SYS_copy_file_range:
      io(ptr(1), sizeof(loff_t));
      io(ptr(3), sizeof(loff_t));
      break;
    case SYS_sendfile:
      io(ptr(2), sizeof(off_t));
      break;
    case SYS_mprotect: case SYS_pkey_mprotect: case SYS_madvise: case SYS_msync: case SYS_mlock:
    case SYS_mlock2: case SYS_munmap: case SYS_remap_file_pages: case SYS_mbind:
      mem(ptr(0), len(1));
      break;
    case SYS_mremap:
      mem(ptr(0), len(1));
      if ((a[3] & MREMAP_FIXED) != 0) mem(ptr(4), len(2));
      break;
    case SYS_mmap:
      if ((a[3] & MAP_FIXED) != 0) mem(ptr(0), len(1));
      break;
    case SYS_process_madvise:
      mem_iov(iov(1), static_cast<int>(a[2]));
      break;
    case SYS_shmat:
      shm_remap(ptr(1), static_cast<int>(a[2]), static_cast<int>(a[0]));
      break;
    // Whose buffers are not in the arguments (io_uring's rings, kernel AIO's control blocks,
    // page migration lists), or whose effect on memory is not bounded: wait for everything.
    case SYS_io_uring_enter: case SYS_io_submit: case SYS_move_pages: case SYS_migrate_pages:
    case SYS_brk: case SYS_mlockall: case SYS_fork: case SYS_vfork:
    case SYS_clone: case SYS_clone3:
      everything();
      break;
    default:
      break;
  }
}

/// What syscall() learns of the mappings from `number` (mapping.hpp, io_uring_in_use).
void note_syscall(long number) {
  switch (number) {
    case SYS_munmap: case SYS_mmap: case SYS_mremap:
    case SYS_shmat: case SYS_shmdt: case SYS_remap_file_pages:
      mapping::forget_all();
      break;
    case SYS_mlock: case SYS_mlock2: case SYS_mlockall:
      mapping::locked_all();  // conservative: the raw call does not say what stays locked
      break;
    case SYS_io_uring_setup:  // from now on, no receive page is guarded (io_uring_in_use)
      g_io_uring.store(true, std::memory_order_relaxed);
      if (guarded()) everything();
      break;
    default:
      break;
  }
}

}  // namespace

// syscall(): the system calls that take a buffer of the caller, or change its memory, get what
// their library functions get.  A number not listed takes no buffer, or only a small structure
// (docs/replay.md, "What the program may do").
TNBC_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a) x = va_arg(ap, long);
  va_end(ap);
  if (guarded()) release_syscall_arguments(number, a);
  note_syscall(number);
  return tnbc::util::raw::syscall6(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
