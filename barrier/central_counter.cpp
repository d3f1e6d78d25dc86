// Algorithm: central_counter
//
// Idea: one counter of ranks still to arrive and one release flag, both in the global block
// (placed by the root).  Each rank decrements the counter atomically; the one that brings it to
// zero resets it and releases everybody (Graham & Shipman 2008; paper section 4.1).
//
// Phases:
//   1. Arrive: atomic fetch-and-decrement of global().count.
//   2. Last arrival (old value 1): count = size, then release = episode.  The reset comes
//      before the release, so no rank can decrement for episode+1 before it.
//   3. Everybody else waits until release reaches the episode.
//
// Edge cases: size 1 decrements to zero and releases itself.  The root plays no special part
// except placing the lines.
//
// Cost: p atomic read-modify-writes on one contended line (each an RFO), serialised:
// t = p·t_atomic + t_w = O(p).
#include "barrier.hpp"

namespace tnbc::barrier {

void central_counter(Participant& self) {
  GlobalBlock& g = self.segment.global();
  const std::uint32_t episode = ++self.episode;
  // 1. Arrive.
  if (decrement(g.count) == 1) {
    // 2. Last arrival: reset, then release.
    reset(g.count, static_cast<std::uint32_t>(self.size));
    publish(g.release, episode);
    return;
  }
  // 3. Wait for the release.
  wait_reached(g.release, episode, self.wait);
}

}  // namespace tnbc::barrier
