// The futex system calls behind Waker (waker.hpp) and the one Waker of the engine.
#include "waker.hpp"

#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include "util/raw.hpp"

namespace tnbc::shim::replay::engine {

Waker g_waker;

void waker_begin_wait() { g_waker.begin_wait(); }
void waker_end_wait() { g_waker.end_wait(); }

void Waker::kick() {
  // Sequentially consistent with nap's: either the nap sees the new word, or this sees it polling.
  word_.fetch_add(1, std::memory_order_seq_cst);
  util::raw::syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  if (polling_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    util::raw::syscall(SYS_write, event_fd_.load(std::memory_order_acquire), &one, sizeof one);
  }
}

void Waker::nap(unsigned us, std::uint32_t seen, int fd) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  if (fd >= 0 && event_fd_.load(std::memory_order_acquire) < 0)
    event_fd_.store(static_cast<int>(util::raw::syscall(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK)),
                    std::memory_order_release);
  const int efd = event_fd_.load(std::memory_order_acquire);
  if (fd < 0 || efd < 0) {
    util::raw::syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    return;
  }
  polling_.store(true, std::memory_order_seq_cst);
  if (word_.load(std::memory_order_seq_cst) == seen) {
    pollfd fds[2] = {{efd, POLLIN, 0}, {fd, POLLIN, 0}};
    util::raw::syscall(SYS_ppoll, fds, 2, &ts, nullptr, 0);
    std::uint64_t drained = 0;
    if (fds[0].revents & POLLIN) util::raw::syscall(SYS_read, efd, &drained, sizeof drained);
  }
  polling_.store(false, std::memory_order_seq_cst);
}

}  // namespace tnbc::shim::replay::engine
