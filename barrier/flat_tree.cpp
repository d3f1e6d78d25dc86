// Algorithm: flat_tree
//
// Idea: every rank announces its arrival in its own line; the root reads all of them and then
// flips one release flag in the global block that everybody else watches (paper section 4.2).
// No atomic read-modify-write at all.
//
// Phases:
//   1. Arrive: rank r stores the episode in rank(r).arrive (its own page).
//   2. Root: waits until every other rank's arrive line reaches the episode.
//   3. Root: release = episode.  Others: wait until release reaches the episode.
//
// Edge cases: size 1: the root waits for nobody.  A rank already in episode e+1 has stored
// e+1 >= e, which the root accepts; it still waits at step 3 for release e+1.
//
// Cost: the root reads p-1 remote lines, then one write seen by p-1 readers:
// t = s·p·t_r + t_w = O(p).
#include "barrier.hpp"

namespace tnbc::barrier {

void flat_tree(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  // 1. Arrive.
  publish(seg.rank(self.rank).arrive, episode);
  if (self.rank == self.root) {
    // 2. Gather.
    for (int r = 0; r < self.size; ++r)
      if (r != self.root) wait_reached(seg.rank(r).arrive, episode, self.wait);
    // 3. Release.
    publish(seg.global().release, episode);
  } else {
    // 3. Wait for the release.
    wait_reached(seg.global().release, episode, self.wait);
  }
}

}  // namespace tnbc::barrier
