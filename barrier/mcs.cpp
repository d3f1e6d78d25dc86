// Algorithm: mcs
//
// Idea: the Mellor-Crummey & Scott tree barrier (paper section 4.5): arrival climbs a 4-ary
// tree (fan-in kMcsFanIn) in which each child reports in its own line of its parent's block;
// wakeup descends a binary tree (fan-out kMcsFanOut) in which each parent writes its children's
// own wakeup lines.  Every rank spins only on lines of its own block.
//
// Phases:
//   1. Gather: v waits until child[i] of its block reaches the episode for each arrival child.
//   2. Arrive: non-root v stores the episode in child[slot(v)] of its arrival parent, then
//      waits until its own wakeup line reaches the episode.
//   3. Wake: v stores the episode in the wakeup line of each of its wakeup-tree children.
//
// Edge cases: size 1: no children in either tree.  Trees are built on virtual ranks, so the
// root of both trees is the chosen root (the paper keeps rank 0 and notes that MinNumaDist
// cannot help it; with the root moved, the trees at least start where the flags are).
//
// Cost: t = (s·k·t_r + t_w)·log_k p + (s·t_r + q·t_w)·log_q p = O(k log_k p + q log_q p),
// k = 4, q = 2.
#include "barrier.hpp"
#include "tree.hpp"

namespace tnbc::barrier {

void mcs(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  const KaryTree arrival{kMcsFanIn, self.size};
  const KaryTree wakeup{kMcsFanOut, self.size};
  const int v = to_virtual(self.rank, self.root, self.size);
  RankBlock& mine = seg.rank(self.rank);
  // 1. Gather the arrival children.
  for (int i = 0, n = arrival.child_count(v); i < n; ++i)
    wait_reached(mine.child[i], episode, self.wait);
  if (v != 0) {
    // 2. Report to the arrival parent, wait for the wakeup.
    const int parent = to_real(arrival.parent(v), self.root, self.size);
    publish(seg.rank(parent).child[arrival.slot(v)], episode);
    wait_reached(mine.wakeup, episode, self.wait);
  }
  // 3. Wake the wakeup children.
  for (int c = wakeup.first_child(v), n = wakeup.child_count(v); n > 0; ++c, --n)
    publish(seg.rank(to_real(c, self.root, self.size)).wakeup, episode);
}

}  // namespace tnbc::barrier
