// Algorithm: gather_release
//
// Idea: flat_tree with an explicit release: the root writes each rank's own wakeup line
// instead of one global flag (Jain et al. SC'18, the Intel OpenMP runtime's barrier; paper
// section 4.3).  Each rank then spins on a line in its own page.
//
// Phases:
//   1. Gather: rank r stores the episode in rank(r).arrive; the root waits until every other
//      rank's arrive line reaches the episode.
//   2. Release: the root stores the episode in rank(c).wakeup of every other rank c; each
//      non-root rank waits until its wakeup line reaches the episode.
//
// Edge cases: size 1: nothing to gather or release.
//
// Cost: the root reads p-1 lines and writes p-1 lines, all remote:
// t = (p-1)·s·t_r + (p-1)·t_w = O(p).  The writes go to the ranks' NUMA nodes, which is why
// the root's position matters most here (paper: 23-134% with MinNumaDist).
#include "barrier.hpp"

namespace tnbc::barrier {

void gather_release(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  if (self.rank == self.root) {
    // 1. Gather.
    for (int r = 0; r < self.size; ++r)
      if (r != self.root) wait_reached(seg.rank(r).arrive, episode, self.wait);
    // 2. Release.
    for (int r = 0; r < self.size; ++r)
      if (r != self.root) publish(seg.rank(r).wakeup, episode);
  } else {
    // 1. Arrive.
    publish(seg.rank(self.rank).arrive, episode);
    // 2. Wait for the release.
    wait_reached(seg.rank(self.rank).wakeup, episode, self.wait);
  }
}

}  // namespace tnbc::barrier
