#include "wait.hpp"

#include <algorithm>
#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "util/clock.hpp"
#include "util/raw.hpp"

namespace tnbc::barrier {

thread_local AccessRecorder* t_access_recorder __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, const timespec* timeout) {
  // EAGAIN (value changed), EINTR, ETIMEDOUT and spurious wake-ups all just return: the caller
  // re-checks.
  util::raw::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, timeout,
          nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  util::raw::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

template <typename Done>
void wait_until(Line& line, WaitPolicy& policy, Done done) {
  for (int i = 0; i < policy.spins; ++i) {
    if (done(line.value.load(std::memory_order_acquire))) {
      policy.spins = next_spins(policy, WaitEnd::spun, 0);
      return;
    }
    cpu_relax();
  }
  for (int i = 0; i < policy.yields; ++i) {
    if (done(line.value.load(std::memory_order_acquire))) return;
    sched_yield();
  }
  const timespec nap{policy.progress_nap_us / 1000000, policy.progress_nap_us % 1000000 * 1000L};
  std::uint64_t slept_from = 0;  // when the first futex wait began (0: none)
  bool stall_told = policy.stalled == nullptr;
  for (;;) {
    std::uint32_t v = line.value.load(std::memory_order_seq_cst);
    if (done(v)) break;
    if (slept_from == 0) slept_from = util::now_ns();
    line.sleepers.fetch_add(1, std::memory_order_seq_cst);
    // The kernel sleeps only if value still equals v, so a publish() that came after the
    // load above either changed value (no sleep) or sees sleepers > 0 (wakes us).
    futex_wait(&line.value, v, policy.progress != nullptr ? &nap : nullptr);
    line.sleepers.fetch_sub(1, std::memory_order_relaxed);
    // A nap that did not end the wait: let the caller's MPI act before the next one.
    if (policy.progress == nullptr || done(line.value.load(std::memory_order_acquire))) continue;
    policy.progress();
    if (stall_told) continue;
    // One clock read per nap (of up to progress_nap_us): the watchdog's look.
    if (const std::uint64_t waited = util::now_ns() - slept_from; waited >= policy.stall_ns) {
      stall_told = true;
      policy.stalled(policy.stall_context, waited);
    }
  }
  // Satisfied right after the yields, before any futex call: as a wait that ended yielding.
  policy.spins = slept_from != 0 ? next_spins(policy, WaitEnd::slept, static_cast<long>(util::now_ns() - slept_from))
                                 : next_spins(policy, WaitEnd::yielded, 0);
}

}  // namespace

int next_spins(const WaitPolicy& policy, WaitEnd end, long slept_ns) {
  switch (end) {
    case WaitEnd::spun:  // spinning paid off: allow a longer spin next time
      return std::min(policy.max_spins, policy.spins + policy.spins / 8 + 1);
    case WaitEnd::yielded:
      return policy.spins;
    case WaitEnd::slept:
      // Woken soon: the peer was running and a longer spin would have met it without the
      // futex's round trip (resetting here can keep 2 ranks with a core each sleeping at every
      // barrier: docs/measurements/barrier.md).  Woken late: spinning was wasted (the core was
      // probably needed elsewhere): start again from the least.
      if (slept_ns < policy.quick_wake_ns) {
        const int doubled = policy.spins > policy.max_spins / 2 ? policy.max_spins : 2 * policy.spins;
        return std::min(policy.max_spins, std::max(policy.min_spins, doubled));
      }
      return policy.min_spins;
  }
  return policy.spins;
}

void wake(Line& line) {
  if (line.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&line.value);
}

void publish(Line& line, std::uint32_t v) {
  note_access(line, Access::write);
  line.value.store(v, std::memory_order_seq_cst);
  wake(line);
}

std::uint32_t decrement(Line& line) {
  note_access(line, Access::rmw);
  std::uint32_t old = line.value.fetch_sub(1, std::memory_order_seq_cst);
  wake(line);
  return old;
}

void wait_reached(Line& line, std::uint32_t target, WaitPolicy& policy) {
  note_access(line, Access::read);
  wait_until(line, policy, [target](std::uint32_t v) { return reached(v, target); });
}

void wait_equal(Line& line, std::uint32_t target, WaitPolicy& policy) {
  note_access(line, Access::read);
  wait_until(line, policy, [target](std::uint32_t v) { return v == target; });
}

}  // namespace tnbc::barrier
