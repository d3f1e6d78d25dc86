// userfaultfd's page moves (page_move.hpp).
#include "page_move.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pages.hpp"
#include "util/raw.hpp"

// Linux 6.8's UFFDIO_MOVE, for headers older than the kernel.
#ifndef UFFDIO_MOVE
struct uffdio_move {
  __u64 dst;
  __u64 src;
  __u64 len;
  __u64 mode;
  __s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFDIO_MOVE_MODE_DONTWAKE
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#endif

namespace tnbc::shim::replay::engine::page_move {

namespace {

int g_fd = -1;
bool g_kernel_faults = false;  // opened without UFFD_USER_MODE_ONLY
std::string g_why;  // "" once moving works
// What a page never touched holds (pages up to 64 KiB).
alignas(4096) const char g_zeros[1 << 16] = {};

void close_in_child() {
  // The descriptor speaks for the parent's memory: a fork()ed child must not use it.
  if (g_fd >= 0) ::close(g_fd);
  g_fd = -1;
}

long ioctl_raw(unsigned long request, void* arg) {
  return util::raw::syscall(SYS_ioctl, g_fd, request, arg);
}

int open_fd() {
  // All faults first (a system call that meets a missing page then waits as a thread does);
  // where this process may not handle faults taken in the kernel, user-mode faults only.
  for (int flags : {O_CLOEXEC | O_NONBLOCK, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY}) {
    const int fd = static_cast<int>(util::raw::syscall(SYS_userfaultfd, flags));
    if (fd < 0) continue;
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_MOVE;
    if (util::raw::syscall(SYS_ioctl, fd, UFFDIO_API, &api) == 0 && (api.features & UFFD_FEATURE_MOVE)) {
      g_kernel_faults = (flags & UFFD_USER_MODE_ONLY) == 0;
      return fd;
    }
    ::close(fd);
    return -2;
  }
  return -1;
}

/// Two pages: one moved into the other and back, their bytes checked.
bool probe() {
  const std::size_t ps = system_page_size();
  void* m = util::raw::mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const auto a = reinterpret_cast<std::uintptr_t>(m), b = a + ps;
  std::memcpy(m, "tnbc", 5);
  bool ok = register_range(b, ps) && move(b, a, ps, true) == ps &&
            std::memcmp(reinterpret_cast<void*>(b), "tnbc", 5) == 0;
  ok = ok && register_range(a, ps) && move(a, b, ps, true) == ps && std::memcmp(m, "tnbc", 5) == 0;
  util::raw::munmap(m, 2 * ps);
  return ok;
}

}  // namespace

const std::string& start() {
  static const bool once = [] {
    const int fd = open_fd();
    if (fd == -1) {
      g_why = std::string("userfaultfd refused: ") + std::strerror(errno);
      return false;
    }
    if (fd == -2) {
      g_why = "the kernel has no UFFDIO_MOVE (Linux 6.8 and later)";
      return false;
    }
    g_fd = fd;
    if (!probe()) {
      ::close(g_fd);
      g_fd = -1;
      g_why = std::string("a page move failed: ") + std::strerror(errno);
      return false;
    }
    pthread_atfork(nullptr, nullptr, close_in_child);
    return true;
  }();
  (void)once;
  return g_why;
}

bool available() { return g_fd >= 0; }
bool kernel_faults_wait() { return g_fd >= 0 && g_kernel_faults; }
int fd() { return g_fd; }

bool register_range(std::uintptr_t p, std::size_t n) {
  uffdio_register reg{};
  reg.range.start = p;
  reg.range.len = n;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  return ioctl_raw(UFFDIO_REGISTER, &reg) == 0;
}

void unregister_range(std::uintptr_t p, std::size_t n) {
  uffdio_range range{p, n};
  ioctl_raw(UFFDIO_UNREGISTER, &range);
}

std::size_t move(std::uintptr_t dst, std::uintptr_t src, std::size_t n, bool wake) {
  const std::size_t ps = system_page_size();
  std::size_t done = 0;
  for (int tries = 0; done < n && tries < 1000; ++tries) {
    uffdio_move mv{};
    mv.dst = dst + done;
    mv.src = src + done;
    mv.len = n - done;
    mv.mode = wake ? 0 : UFFDIO_MOVE_MODE_DONTWAKE;
    const long rc = ioctl_raw(UFFDIO_MOVE, &mv);
    if (mv.move > 0) done += static_cast<std::size_t>(mv.move);
    if (rc == 0 && done >= n) break;
    if (rc == 0 || errno == EAGAIN || errno == EINTR) continue;
    // A page never touched at the source: the destination gets zeros, as a first touch gives;
    // where the destination already holds a page (placed before: nothing of the source's is
    // left to move), it stays as it is.
    if (errno == ENOENT && done < n && ps <= sizeof g_zeros && (copy(dst + done, g_zeros, ps) || errno == EEXIST)) {
      done += ps;
      continue;
    }
    return done;
  }
  return done;  // the kernel kept answering EAGAIN: the caller takes another way
}

bool copy(std::uintptr_t dst, const void* src, std::size_t n) {
  std::size_t done = 0;
  for (int tries = 0; done < n && tries < 1000; ++tries) {
    uffdio_copy cp{};
    cp.dst = dst + done;
    cp.src = reinterpret_cast<std::uintptr_t>(src) + done;
    cp.len = n - done;
    const long rc = ioctl_raw(UFFDIO_COPY, &cp);
    if (cp.copy > 0) done += static_cast<std::size_t>(cp.copy);
    if (rc == 0 && done >= n) return true;
    if (rc != 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return done >= n;
}

bool zero_missing(std::uintptr_t p, std::size_t n) {
  const std::size_t ps = system_page_size();
  std::size_t done = 0;
  // Each ioctl maps pages up to the first that is there (EEXIST on it: skipped) or until the
  // kernel stops early (EAGAIN, with the bytes done).
  for (std::size_t tries = 0; done < n && tries < 2 * (n / ps) + 16; ++tries) {
    uffdio_zeropage z{};
    z.range.start = p + done;
    z.range.len = n - done;
    const long rc = ioctl_raw(UFFDIO_ZEROPAGE, &z);
    if (z.zeropage > 0) done += static_cast<std::size_t>(z.zeropage);
    if (rc == 0 || z.zeropage > 0 || errno == EAGAIN || errno == EINTR) continue;
    if (errno != EEXIST) return false;
    done += ps;
  }
  return done >= n;
}

void wake(std::uintptr_t page) {
  uffdio_range range{page, system_page_size()};
  ioctl_raw(UFFDIO_WAKE, &range);
}

bool populated(std::uintptr_t p) {
  // /proc/self/pagemap: one 64-bit entry per page; bit 63 present, bit 62 swapped.
  static const int fd = static_cast<int>(util::raw::syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return true;  // cannot tell: as before
  std::uint64_t entry = 0;
  const auto at = static_cast<long>(p / system_page_size() * sizeof entry);
  if (util::raw::syscall(SYS_pread64, fd, &entry, sizeof entry, at) != static_cast<long>(sizeof entry)) return true;
  return (entry >> 62) != 0;
}

std::size_t take_faults(std::uintptr_t* addrs, std::size_t max) {
  if (g_fd < 0 || max == 0) return 0;
  uffd_msg msgs[16];
  std::size_t out = 0;
  while (out < max) {
    const long r = util::raw::syscall(SYS_read, g_fd, msgs, sizeof msgs);
    if (r <= 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(r) / sizeof(uffd_msg) && out < max; ++i)
      if (msgs[i].event == UFFD_EVENT_PAGEFAULT) addrs[out++] = msgs[i].arg.pagefault.address;
    if (static_cast<std::size_t>(r) < sizeof msgs) break;
  }
  return out;
}

}  // namespace tnbc::shim::replay::engine::page_move
