// What an early call costs, part by part, per key: written by the engine (engine.hpp) and the
// replay handlers, read by the decision (shim/replay/adapt/policy.hpp) and the statistics.
#pragma once

#include <atomic>
#include <cstdint>

namespace tnbc::shim::replay::engine {

/// What calls cost the program, kept per call site of a key for the statistics (decide.hpp).
/// Written by any thread (the caller, the progress thread, a fault handler: plain atomics,
/// async-signal-safe).  Never freed while the library runs: operations in flight and guard
/// slots point here.
struct Costs {
  std::atomic<std::uint64_t> early_calls{0};      ///< calls that went to the engine
  std::atomic<std::uint64_t> init_ns{0};          ///< inside those calls, before returning:
  std::atomic<std::uint64_t> setup_ns{0};         ///<   send copy allocated, mirror mapped, pages protected
  std::atomic<std::uint64_t> send_copy_ns{0};     ///<   the send side copied
  std::atomic<std::uint64_t> inside_wait_ns{0};   ///<   waiting: edge pages, or the whole exchange when not early
  std::atomic<std::uint64_t> publish_ns{0};       ///< progress thread's CPU putting received pages in place
  std::atomic<std::uint64_t> wait_ns{0};          ///< waited afterwards: faults, fences, I/O
  std::atomic<std::uint64_t> progress_cpu_ns{0};  ///< progress thread CPU for them
  std::atomic<std::uint64_t> blocking_calls{0};   ///< calls that ran the plain blocking call
  std::atomic<std::uint64_t> blocking_ns{0};      ///< inside those calls
  /// Of the blocking calls, those the engine's exchange ran (TNBC_BLOCKING; their
  /// progress-thread CPU is the rank's, not counted here).
  std::atomic<std::uint64_t> engine_blocking_calls{0};
  /// Of the early calls: those whose receive (Bcast: segment) order came from a plan entry, and
  /// from learning (the others had none: the default order); those that took per-node turns.
  std::atomic<std::uint64_t> order_plan_calls{0}, order_learned_calls{0}, turn_calls{0};
  /// Bytes this rank received from other ranks of its node and of other nodes (both paths).
  std::atomic<std::uint64_t> intra_node_bytes{0}, inter_node_bytes{0};

  void add_wait(std::uint64_t ns) { wait_ns.fetch_add(ns, std::memory_order_relaxed); }
  void add_received(bool same_node, std::uint64_t bytes) {
    (same_node ? intra_node_bytes : inter_node_bytes).fetch_add(bytes, std::memory_order_relaxed);
  }
};

}  // namespace tnbc::shim::replay::engine
