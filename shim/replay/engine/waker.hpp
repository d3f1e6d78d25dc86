// The progress thread's nap and its wake-up: one futex word (Waker, g_waker).  A calling thread
// that waits for the engine keeps the progress thread awake with begin_wait/end_wait
// (Progress::watched_wait, the fault handlers).
#pragma once

#include <atomic>
#include <cstdint>

namespace tnbc::shim::replay::engine {

/// The progress thread naps between rounds that moved nothing, longer and longer while nothing
/// happens (a thread that wakes every few microseconds takes a real share of a core the
/// program computes on).  Whoever starts waiting for the engine -- a fault handler, a fence,
/// a call waiting for its edge pages -- wakes it at once and keeps its naps short until the
/// wait ends.  Async-signal-safe (atomics and the futex system call): the fault handler uses it.
class Waker {
 public:
  std::uint32_t word() const { return word_.load(std::memory_order_acquire); }
  void kick();
  void begin_wait() {
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    kick();
  }
  void end_wait() { waiters_.fetch_sub(1, std::memory_order_acq_rel); }
  bool waited_for() const { return waiters_.load(std::memory_order_acquire) > 0; }
  /// Sleeps `us` microseconds unless kicked since word() returned `seen`, or, when `fd` is not
  /// -1, until `fd` is readable (the userfaultfd: a thread the kernel holds on a missing page
  /// wakes the nap as a fault handler's kick does).  Only the progress thread naps.
  void nap(unsigned us, std::uint32_t seen, int fd = -1);

 private:
  std::atomic<std::uint32_t> word_{0};
  std::atomic<int> waiters_{0};
  // While the nap polls a descriptor, a kick writes this eventfd (made at the first such nap).
  std::atomic<bool> polling_{false};
  std::atomic<int> event_fd_{-1};
};

extern Waker g_waker;
/// g_waker.begin_wait / end_wait as plain functions: the ReplayGuard's wait hooks (shim/replay/engine/replay_guard.hpp).
void waker_begin_wait();
void waker_end_wait();

}  // namespace tnbc::shim::replay::engine
