// One synchronisation word per cache line, and how to wait on it without crawling when a node
// runs more ranks than it has cores.
//
//   Line (64 bytes, alignas(64))
//   +----------------+----------------+------------------------------------------+
//   | value (u32)    | sleepers (u32) | padding (56 bytes)                       |
//   +----------------+----------------+------------------------------------------+
//
// `value` is the flag or counter the algorithms read and write.  `sleepers` counts waiters
// parked in futex(2) on `value`, so a writer makes the wake system call only when somebody
// sleeps.  Both sit in the same line: the writer touches one line, not two.
//
// Waiting spins with a pause instruction, then yields the core, then sleeps on a futex
// (FUTEX_WAIT without _PRIVATE: the line lives in memory shared between processes).  The
// lost-wakeup race is closed by sequential consistency: the waiter increments `sleepers` and
// then lets the kernel compare `value`; the writer stores `value` and then reads `sleepers`.
//
// Values are episode numbers that grow by one per barrier and wrap at 2^32; "at least" is
// judged on the signed difference, so wrapping is harmless.
#pragma once

#include <atomic>
#include <cstdint>

namespace tnbc::barrier {

inline constexpr std::size_t kLineBytes = 64;

struct alignas(kLineBytes) Line {
  std::atomic<std::uint32_t> value{0};
  std::atomic<std::uint32_t> sleepers{0};
};
static_assert(sizeof(Line) == kLineBytes);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

/// How long a waiter spins and yields before it sleeps.  The defaults are short on purpose:
/// measured on the 2-core test machine (docs/barrier.md), 2000 spins + 20 yields made a
/// barrier of 4 processes 20-40x slower than 20 spins + 2 yields, because a spinning waiter
/// holds the core the rank it waits for needs; the futex wake-up costs a few microseconds.
struct WaitPolicy {
  int spins = 20;   ///< pause-loop iterations before the first sched_yield
  int yields = 2;   ///< sched_yield calls before sleeping on the futex
};

/// True if episode counter `v` has reached `target` (wrap-safe).
inline bool reached(std::uint32_t v, std::uint32_t target) {
  return static_cast<std::int32_t>(v - target) >= 0;
}

/// Stores `v` into the line and wakes its sleepers, if any.
void publish(Line& line, std::uint32_t v);
/// Atomically subtracts one, wakes sleepers; returns the previous value.
std::uint32_t decrement(Line& line);
/// Wakes the line's sleepers if any (after a plain atomic update made by the caller).
void wake(Line& line);

/// Returns once reached(line.value, target).
void wait_reached(Line& line, std::uint32_t target, const WaitPolicy& policy);
/// Returns once line.value == target.
void wait_equal(Line& line, std::uint32_t target, const WaitPolicy& policy);

}  // namespace tnbc::barrier
