// Shared-memory barriers of one node, without MPI.
//
// Every algorithm is a function of one Participant: the shared segment, the caller's local
// rank, the number of local ranks and the root.  Callers (the shim with processes, the tests
// with threads or fork()ed processes) map a Segment, have the root call place_global() and each
// rank place_rank(), synchronise once by other means, and then call the same algorithm on every
// rank any number of times.  One file per algorithm; the name of the file, the function and the
// TNBC_BARRIER_ALGO value is the same (docs/barrier.md).
//
// Every algorithm uses episode counters instead of sense bits: a rank's n-th barrier is
// episode n (Participant::episode, starting at 1), flags hold the last episode their writer
// reached, and a waiter waits until the flag reaches its own episode.  Back-to-back barriers
// need no reset of flags, and a rank racing ahead into episode n+1 cannot be confused with
// episode n.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "algorithms.hpp"
#include "segment.hpp"
#include "wait.hpp"

namespace tnbc::barrier {

inline constexpr int kCombiningTreeArity = 4;  ///< combining_tree(_atomic): k of the k-ary tree

/// One rank's handle on a node barrier.  Not shared: each rank (process or thread) has its own.
struct Participant {
  Segment segment;
  int rank = 0;             ///< local rank, 0 <= rank < size
  int size = 1;             ///< local ranks on the segment
  int root = 0;             ///< local rank that placed the global block and roots the trees
  std::uint32_t episode = 0;  ///< barriers completed by this rank
  WaitPolicy wait;
};

// Algorithm, kAllAlgorithms, to_string and parse_algorithm: algorithms.hpp.

// The algorithms (barrier/<name>.cpp).  Each returns when every rank of the segment has
// entered the same episode; each increments self.episode.
void central_counter(Participant& self);
void flat_tree(Participant& self);
void gather_release(Participant& self);
void combining_tree(Participant& self);
void combining_tree_atomic(Participant& self);
void mcs(Participant& self);
void tournament(Participant& self);
void dissemination(Participant& self);

/// The algorithm of TNBC_BARRIER_ALGO=auto for `local_size` ranks on a node (docs/barrier.md):
/// central_counter up to kAutoCentralCounterMax ranks (fastest at 4 ranks in every measurement
/// here: one line, no tree), mcs above (the counter's contention grows with p, paper section 6;
/// MCS spins only on own lines with O(log p) depth).
inline constexpr int kAutoCentralCounterMax = 8;
Algorithm choose_auto(int local_size);

/// Arrival marks, for a watchdog that names the ranks a barrier waits for: the caller marks
/// each barrier with enter() before it runs the algorithm (one store into the rank's own line),
/// and absent() lists the local ranks that have not yet entered the episode `self` is in.
inline void enter(const Participant& self) {
  self.segment.rank(self.rank).entered.value.store(self.episode + 1, std::memory_order_release);
}
std::vector<int> absent(const Participant& self, std::uint32_t episode);

using BarrierFn = void (*)(Participant&);
/// The function of algorithm `a` (the one table of them).
BarrierFn function_of(Algorithm a);
/// Runs algorithm `a`.
inline void run(Algorithm a, Participant& self) { function_of(a)(self); }

/// Barrier over several nodes (barrier/hierarchical.cpp): the node barrier `a`, then the
/// root (the node leader) calls `leaders_sync` (the barrier among node leaders) and releases
/// its node through global().node_release.  `leaders_sync` runs on the root only.
/// `leaders_sync(context)` must return only when every node leader has called it.
void hierarchical(Algorithm a, Participant& self, void (*leaders_sync)(void*), void* context);

}  // namespace tnbc::barrier
