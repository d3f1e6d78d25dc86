// The futex system calls behind Waker (waker.hpp) and the one Waker of the engine.
#include "waker.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include "util/raw.hpp"

namespace tnbc::shim::replay::engine {

Waker g_waker;

void waker_begin_wait() { g_waker.begin_wait(); }
void waker_end_wait() { g_waker.end_wait(); }

void Waker::kick() {
  word_.fetch_add(1, std::memory_order_acq_rel);
  util::raw::syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void Waker::nap(unsigned us, std::uint32_t seen) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  util::raw::syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
}

}  // namespace tnbc::shim::replay::engine
