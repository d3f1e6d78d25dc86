// Online learning's state and its rules, without MPI (learn.hpp holds the rest): what a key and
// each of its call sites learned, which blocking calls are observed, and the hysteresis that
// keeps an adopted order until two learn points in a row agree on another.  Unit-tested in
// test/shim/replay/learn/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "priority/consensus.hpp"
#include "priority/observations.hpp"
#include "priority/plan.hpp"

namespace tnbc::shim::replay::learn {

inline constexpr std::size_t kWindow = 8;            ///< observed calls per site and rank, at most
inline constexpr std::size_t kMaxSites = 8;          ///< sites learned per key
inline constexpr int kMaxRanks = 256;                ///< larger communicators do not learn
/// 1 in this many calls of a blocking run.  Prime: a program that cycles through a few call
/// sites of one key (two sites alternating, say) gets each of them observed.
inline constexpr std::uint64_t kBlockingRunEvery = 13;
inline constexpr double kKeepConcordance = 0.9;      ///< an order this close to the current is the same
/// Pages protected per sub-message of an observed call: its first and last whole page
/// (shim/observe/page_guard.hpp, sampled).  Protecting and opening then cost two pages per
/// sub-message, not its length, and the pages stay writable without a fault each (a page
/// opened by mprotect takes one more fault at its first write); neighbouring sub-messages'
/// pages are protected with one call.  A sub-message read from either end is seen at its first
/// touch (bench/trace_cost and docs/measurements/trace-cost.md measure both ways).
inline constexpr std::size_t kSampledPages = 2;

/// The orders a site has adopted, and the hysteresis's candidate (update).
struct LearnedOrder {
  /// Every order adopted, oldest first: never freed, calls in flight may point at one.
  std::deque<priority::PlanEntry> entries;
  const priority::PlanEntry* current = nullptr;
  std::size_t current_ordered = 0;     ///< length of current's evidence-ordered head
  std::vector<std::size_t> candidate;  ///< an order seen once that differs from current
  std::size_t candidate_ordered = 0;
  std::uint64_t learned_at_call = 0;   ///< key call at which current was adopted
  std::uint64_t changes = 0;           ///< orders replaced after the first
};

/// What one call site of one key learned (and this rank's own observations of it).
struct SiteLearning {
  std::uint64_t hash = 0;    ///< of the site's plan key: the same on every rank
  std::int64_t site = -1;    ///< this rank's index in the call-site table (-1: seen only in a gather)
  std::string key;           ///< its plan key (empty: seen only in a gather)
  std::size_t messages = 0;  ///< sub-messages per call
  std::uint64_t message_bytes = 0;  ///< their mean size
  std::uint64_t total_bytes = 0;    ///< the buffer's bytes (a Bcast's size class)
  /// Bcast: the segments and tree (0 = binomial, else chains) its calls are cut into; a learned
  /// order of units becomes an order of these segments (priority::segment_order).
  int bcast_segments = 0, bcast_chains = 0;
  std::deque<priority::CallRecord> records;  ///< this rank's calls observed since the last learn point
  LearnedOrder order;
  std::uint64_t observed = 0;          ///< this rank's calls observed here, in all
  double agreement = 1.0;              ///< mean concordance of the ranks with order.current
};

/// The learning of one key (decide.hpp's Key holds one).
struct KeyLearning {
  priority::Op op = priority::Op::alltoall;
  int comm_size = 0;
  std::deque<SiteLearning> sites;
  std::uint64_t designated = 0;          ///< calls designated for observation (same on every rank)
  std::uint64_t designated_learned = 0;  ///< ... up to the last learn point
  std::uint64_t points = 0;              ///< learn points held
  /// The order per-node turns follow (a site's current order, the same on every rank), or
  /// nullptr before one is learned or with TNBC_LEARN_PER_NODE=0.
  const priority::PlanEntry* turns = nullptr;
  /// The order of the site most ranks observed (the same on every rank), whether or not turns
  /// follow it: a Bcast's root takes it when it calls from a site of its own that nobody
  /// observed (a compiler may give the root's call its own copy).  nullptr before a learn point.
  const priority::PlanEntry* majority = nullptr;
  /// The send window of early calls that take turns in `turns`' order: the window `tnbc-order
  /// plan --per-node` writes for a site read right after the call
  /// (priority::PlannerOptions::read_at_once_window) where most ranks that observed the turns'
  /// site found its data read so (verdict CRC), else 0 (TNBC_CHUNK_WINDOW).  The same on every
  /// rank, from the same gathered numbers, and set at learn points only.
  int turn_window = 0;
  bool turns_chosen = false;  ///< the per-call decision measured turns cheaper (TNBC_PLAN_OUT says so)
  // Costs (this rank): observed calls, time protecting them, time in learn points on this
  // rank's own work (settling the observations, summaries, consensus) and in their two
  // MPI_Allgathers (which includes waiting for the ranks that come later).
  std::uint64_t observed = 0, protect_ns = 0, learn_ns = 0, gather_ns = 0;
  /// Early calls whose receive, turn or segment order came from learning (not from a plan).
  std::uint64_t applied = 0;
};

/// Whether the blocking call that is a key's `call`-th is observed: every call of the warm-up
/// and of the blocking probes (`probing`), 1 in kBlockingRunEvery of a blocking run.  The same
/// on every rank (the calls are).
bool designated(std::uint64_t call, bool probing);

/// The hysteresis, applied to a learn point's consensus `c` for site `s` at the key's `call`:
/// the first order is adopted at once; one whose concordance with the current is at least
/// kKeepConcordance keeps the current (and forgets a candidate); any other becomes the
/// candidate, and replaces the current (one more change) when the next learn point's order
/// agrees with it as closely.  An adopted order is a new entry: the old one stays valid for
/// calls in flight.
void update(const KeyLearning& k, LearnedOrder& s, const priority::Consensus& c, std::uint64_t call);

}  // namespace tnbc::shim::replay::learn
