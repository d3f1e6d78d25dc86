// The node-wide shared segment of the barrier: every flag and counter of every algorithm,
// each alone in a 64-byte line (no false sharing between writers).
//
//   offset 0                 Global block (one page), first written by the root
//   +--------------------------------------------------------------+
//   | line 0  count          central_counter: ranks still to arrive |
//   | line 1  release        root-based algorithms: episode released|
//   | line 2  node_release   hierarchical: episode the leader freed  |
//   | ...     unused up to the page end                             |
//   +--------------------------------------------------------------+
//   offset kPageBytes * (1 + r)   Block of local rank r (one page), first written by r
//   +--------------------------------------------------------------+
//   | line 0  arrive         flat_tree, gather_release, combining_tree,
//   |                        dissemination: episode/round r reached |
//   | line 1  wakeup         gather_release, mcs: release of rank r  |
//   | line 2  count          combining_tree_atomic: children missing |
//   | line 3..6  child[4]    mcs: arrival of child i of r            |
//   | line 7..22 round[16]   tournament: loser of round i reached r  |
//   | line 23 entered        every algorithm: episode r last entered |
//   |                        (enter(); read only by absent())        |
//   +--------------------------------------------------------------+
//
// Why pages: Linux places a page on the NUMA node of the CPU that first writes it, so the root
// writes the global block and each rank its own block before anybody uses them (place_*).
// Lines a rank spins on are in its own block wherever the algorithm allows (the paper's
// layout, Kurnosov & Tokmasheva 2020, section 3).
#pragma once

#include <cstddef>
#include <cstdint>

#include "wait.hpp"

namespace tnbc::barrier {

inline constexpr std::size_t kPageBytes = 4096;
inline constexpr int kMcsFanIn = 4;     ///< mcs arrival tree degree (paper: fan-in 4)
inline constexpr int kMcsFanOut = 2;    ///< mcs wakeup tree degree (paper: fan-out 2)
inline constexpr int kMaxRounds = 16;   ///< tournament rounds: up to 2^16 ranks per node
inline constexpr int kMaxLocalSize = 1 << kMaxRounds;

struct alignas(kPageBytes) GlobalBlock {
  Line count;
  Line release;
  Line node_release;
};

struct alignas(kPageBytes) RankBlock {
  Line arrive;
  Line wakeup;
  Line count;
  Line child[kMcsFanIn];
  Line round[kMaxRounds];
  Line entered;
};
static_assert(sizeof(GlobalBlock) == kPageBytes && sizeof(RankBlock) == kPageBytes);

/// View of a segment mapped at `base` (page aligned) for `size` local ranks.  Owns nothing.
class Segment {
 public:
  /// Bytes a segment for `size` ranks needs.
  static std::size_t bytes(int size) { return kPageBytes * (1 + static_cast<std::size_t>(size)); }

  Segment(void* base, int size) : base_(static_cast<std::byte*>(base)), size_(size) {}

  int size() const { return size_; }
  GlobalBlock& global() const { return *reinterpret_cast<GlobalBlock*>(base_); }
  RankBlock& rank(int r) const {
    return *reinterpret_cast<RankBlock*>(base_ + kPageBytes * (1 + static_cast<std::size_t>(r)));
  }

  /// Called by the root only, before any rank runs a barrier: writes the initial values of
  /// the global block (and so places its page on the root's NUMA node).
  void place_global() const;
  /// Called by rank `r` only, before any rank runs a barrier: initialises and places its
  /// block.  `root` is needed for the tree shapes.
  void place_rank(int r, int root) const;

 private:
  std::byte* base_;
  int size_;
};

}  // namespace tnbc::barrier
