// Per-rank statistics, written as JSON at MPI_Finalize when TNBC_STATS=PREFIX is set.
//
// Counters are atomics: collectives may be called from several threads.  The fallback reasons
// (a rare path) sit behind a mutex.  No MPI here, so the tests drive it directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace tnbc::shim {

/// Counters of one intercepted collective (alltoall, alltoallv, bcast).
class OpStats {
 public:
  void count_call() { calls_.fetch_add(1, std::memory_order_relaxed); }
  void count_early_return() { early_return_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts a call whose priorities came from the plan (TNBC_PLAN).
  void count_planned() { planned_.fetch_add(1, std::memory_order_relaxed); }
  /// Counts a call that ran the plain blocking collective, and why (a short keyword).
  void count_fallback(std::string_view reason);

  std::uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  std::uint64_t early_returns() const { return early_return_.load(std::memory_order_relaxed); }
  std::uint64_t fallbacks() const { return fallback_.load(std::memory_order_relaxed); }
  std::uint64_t planned() const { return planned_.load(std::memory_order_relaxed); }
  std::map<std::string, std::uint64_t> fallback_reasons() const;

  /// {"calls":N,"early_return":N,"fallback":N,"fallback_reasons":{...},"planned":N}
  std::string to_json() const;

 private:
  std::atomic<std::uint64_t> calls_{0}, early_return_{0}, fallback_{0}, planned_{0};
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t, std::less<>> reasons_;  // less<>: found by string_view
};

struct Stats {
  OpStats alltoall, alltoallv, bcast;
  std::atomic<std::uint64_t> barrier_calls{0};
  std::string barrier_algo = "mpich";  ///< MPI_COMM_WORLD's, set at its first MPI_Barrier (replay mode)
  std::string publish;                 ///< how received pages were published (replay mode), set at start
  int barrier_root = 0;
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> fault_wait_ns{0};
  std::atomic<std::uint64_t> init_ns{0};  ///< time inside early-returning calls before return
  std::atomic<std::uint64_t> turn_calls{0};    ///< collectives that took turns on their node
  std::atomic<std::uint64_t> gated_sends{0};   ///< inter-node sends held for the node's turn
  std::atomic<std::uint64_t> turn_wait_ns{0};  ///< time spent waiting for the node's turn
  std::atomic<std::uint64_t> send_window_max{0};  ///< deepest send window to other nodes under turns
  bool progress_started = false;  ///< the engine had work for its progress thread, which started
  std::uint64_t progress_starts = 0;  ///< the times it started (it ends after a second idle)
  std::atomic<std::uint64_t> progress_cpu_ns{0};  ///< CPU time of the progress thread
  std::atomic<std::uint64_t> progress_rounds{0};  ///< its rounds (post, test, publish)
  std::atomic<std::uint64_t> progress_user_ns{0}, progress_system_ns{0};  ///< its CPU, user and kernel
  std::atomic<std::uint64_t> progress_wakeups{0};  ///< times it gave up its core and was woken again
  std::atomic<std::uint64_t> fence_wait_ns{0};    ///< waited for the engine in fences
  std::atomic<std::uint64_t> fence_drains{0};     ///< fences that found something in flight (fence.hpp)
  std::string adapt_json = "null";  ///< replay mode's per-call decisions (a JSON object), set at stop

  /// The whole document, as docs/config.md describes it.
  std::string to_json(int rank, std::string_view library, std::string_view version) const;
};

}  // namespace tnbc::shim
