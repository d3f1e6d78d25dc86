// Algorithm: tournament
//
// Idea: the tournament barrier (Hensgen, Finkel & Manber 1988; paper section 4.6): in round i
// rank v plays against v xor 2^i; the higher virtual rank loses, tells the winner through the
// winner's round[i] line, and drops out.  The champion (virtual rank 0, the root) has seen,
// transitively, every arrival and releases everybody through one global flag.
//
// Phases:
//   1. Rounds i = 0, 1, ... while 2^i < size: peer = v xor 2^i.  If peer >= size, no game.
//      Loser (v > peer): store the episode in round[i] of the peer, leave the rounds.
//      Winner: wait until its own round[i] reaches the episode.
//   2. Root: release = episode.  Others: wait until release reaches the episode.
//
// Edge cases: size not a power of two: games against missing peers are skipped (a bye).
// size 1: no round.  A loser of round i has won every round before i, so it reports its whole
// subtree of 2^i ranks.
//
// Cost: the root waits for ceil(log2 p) rounds: t = s·t_r·log2 p + t_w = O(log p).
#include "barrier.hpp"
#include "tree.hpp"

namespace tnbc::barrier {

void tournament(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  const int v = to_virtual(self.rank, self.root, self.size);
  // 1. Play.
  for (int round = 0, mask = 1; mask < self.size; ++round, mask <<= 1) {
    const int peer = v ^ mask;
    if (peer >= self.size) continue;
    if (v > peer) {
      publish(seg.rank(to_real(peer, self.root, self.size)).round[round], episode);
      break;
    }
    wait_reached(seg.rank(self.rank).round[round], episode, self.wait);
  }
  // 2. Release.
  if (v == 0) publish(seg.global().release, episode);
  else wait_reached(seg.global().release, episode, self.wait);
}

}  // namespace tnbc::barrier
