// Algorithm: dissemination
//
// Idea: the dissemination barrier (Hensgen, Finkel & Manber 1988; paper section 4.7): in
// round i rank r announces it reached round i and waits until rank (r + 2^i) mod p did too.
// After round i, r knows that ranks r .. r + 2^(i+1) - 1 arrived; after ceil(log2 p) rounds,
// all.  Symmetric: no root, no release phase.
//
// Phases:
//   1. Rounds i = 0 .. R-1 (R = ceil(log2 p)): store the round count reached so far,
//      (episode-1)·R + i + 1, in the own arrive line; wait until the arrive line of rank
//      (r + 2^i) mod p reaches the same value.
//
// Edge cases: size 1: R = 0, nothing to do.  p not a power of two: the ranges wrap modulo p
// and overlap, which only adds knowledge.  The counter grows by R per episode, so a peer that
// runs ahead into the next episode still satisfies "reached" (wrap-safe comparison).
//
// Cost: R rounds of one write and one remote wait each: t = (t_w + s·t_r)·log2 p = O(log p).
// The root is unused (no line is global).
#include "barrier.hpp"

namespace tnbc::barrier {

void dissemination(Participant& self) {
  const Segment& seg = self.segment;
  ++self.episode;
  int rounds = 0;
  while ((1 << rounds) < self.size) ++rounds;
  std::uint32_t reached_count = (self.episode - 1) * static_cast<std::uint32_t>(rounds);
  Line& mine = seg.rank(self.rank).arrive;
  // 1. Rounds.
  for (int i = 0; i < rounds; ++i) {
    ++reached_count;
    publish(mine, reached_count);
    wait_reached(seg.rank((self.rank + (1 << i)) % self.size).arrive, reached_count, self.wait);
  }
}

}  // namespace tnbc::barrier
