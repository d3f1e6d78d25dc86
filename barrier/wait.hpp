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

/// How long a waiter spins and yields before it sleeps.  Measured on the 2-core test machine
/// (docs/measurements/barrier.md): on idle cores a barrier of 2 processes takes 0.1 us when waiters spin a
/// few hundred iterations and 2-20 us when they sleep at once; with more runnable processes
/// than cores (other jobs, or 4 ranks on 2 cores) spins of 2000+ made it 10-100x slower,
/// because the spinner holds the core the rank it waits for needs.  So the spin budget adapts
/// between min_spins and max_spins (next_spins): a wait satisfied while spinning grows it
/// slowly; a wait that slept grows it fast when the sleep was short (under `quick_wake_ns`: the
/// peer came soon, so a longer spin would have met it without the futex's round trip), and
/// resets it to min_spins when the sleep was long (spinning would have been wasted).
/// kOversubscribed fixes it at the minimum.  After the spin a waiter yields up to `yields`
/// times (64: some tens of microseconds where nothing else wants the core, nothing where
/// something does: sched_yield hands it over) before it sleeps: a futex sleep and wake-up costs
/// tens of microseconds on a VM, and with 2 yields 2 ranks with a core each took 3-18 us a
/// barrier against MPICH's polling 1.1, with 64 0.25-0.32 (docs/measurements/barrier-yields.md).
///
/// `progress`, when set, is called after every nap (of at most `progress_nap_us`) that did not
/// end the wait: the shim drives MPI's progress with it, so that a peer whose MPI call
/// (a synchronous send, a passive-target unlock) needs this rank's MPI to act completes while
/// this rank waits here, as it would in MPI's own barrier.  Null: sleep until woken.
///
/// `stalled`, when set (with `progress`: it is looked at between naps), is called with
/// `stall_context` once per wait that has gone on for `stall_ns` without ending: the shim's
/// watchdog, which says which ranks the barrier still waits for.
struct WaitPolicy {
  int spins = 64;         ///< current pause-loop budget before the first sched_yield
  int yields = 64;        ///< sched_yield calls before sleeping on the futex (see above)
  int min_spins = 16;
  int max_spins = 256;    ///< ~10 us of pause on current x86 cores
  void (*progress)() = nullptr;
  int progress_nap_us = 1000;
  long quick_wake_ns = 30000;  ///< a sleep shorter than this grows the spin budget
  void (*stalled)(void* context, std::uint64_t waited_ns) = nullptr;
  void* stall_context = nullptr;
  std::uint64_t stall_ns = 0;
};
/// How a wait ended, for the next spin budget.
enum class WaitEnd {
  spun,    ///< satisfied while spinning
  yielded, ///< satisfied while yielding
  slept,   ///< satisfied after sleeping on the futex
};
/// The spin budget after a wait that ended as `end`, having slept `slept_ns` (slept only).
int next_spins(const WaitPolicy& policy, WaitEnd end, long slept_ns);

/// For nodes with more ranks than cores: spin briefly, yield, sleep.
inline constexpr WaitPolicy kOversubscribed{16, 2, 16, 16};

/// True if episode counter `v` has reached `target` (wrap-safe).
inline bool reached(std::uint32_t v, std::uint32_t target) {
  return static_cast<std::int32_t>(v - target) >= 0;
}

/// What an access to a line is, for the access model (numa_model.hpp).
enum class Access {
  read,   ///< a completed wait (counted once, however long it spun)
  write,  ///< a store
  rmw,    ///< an atomic read-modify-write
};

/// Observer of line accesses made by the current thread; null (the default) costs one
/// thread-local load per access.  Used by the NUMA cost model, never by the shim.
class AccessRecorder {
 public:
  virtual ~AccessRecorder() = default;
  virtual void record(const Line& line, Access kind) = 0;
};
/// initial-exec: the shim is preloaded, so its TLS is static and costs no __tls_get_addr.
extern thread_local AccessRecorder* t_access_recorder __attribute__((tls_model("initial-exec")));

inline void note_access(const Line& line, Access kind) {
  if (t_access_recorder != nullptr) [[unlikely]] t_access_recorder->record(line, kind);
}

/// Stores `v` without waking anybody (nobody waits on the line: counter resets).
inline void reset(Line& line, std::uint32_t v) {
  note_access(line, Access::write);
  line.value.store(v, std::memory_order_relaxed);
}

/// Stores `v` into the line and wakes its sleepers, if any.
void publish(Line& line, std::uint32_t v);
/// Atomically subtracts one, wakes sleepers; returns the previous value.
std::uint32_t decrement(Line& line);
/// Wakes the line's sleepers if any (after a plain atomic update made by the caller).
void wake(Line& line);

/// Returns once reached(line.value, target).
void wait_reached(Line& line, std::uint32_t target, WaitPolicy& policy);
/// Returns once line.value == target.
void wait_equal(Line& line, std::uint32_t target, WaitPolicy& policy);

}  // namespace tnbc::barrier
