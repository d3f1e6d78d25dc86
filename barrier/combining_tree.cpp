// Algorithm: combining_tree
//
// Idea: the combining tree without atomics (paper section 4.4, figure 3b): ranks form a
// complete k-ary tree (k = kCombiningTreeArity) rooted at the root; each inner rank waits
// until all its children arrived, then announces its own (combined) arrival in its own line,
// which its parent reads.  The root releases everybody through one global flag.
//
// Phases:
//   1. Gather: rank v (virtual rank, see tree.hpp) waits until the arrive line of each child
//      reaches the episode.
//   2. Arrive: v stores the episode in its own arrive line (a leaf does this at once).
//   3. Root: release = episode.  Others: wait until release reaches the episode.
//
// Edge cases: size 1: the root has no children.  Incomplete last level: child_count() stops
// at size.  A subtree is announced only when all of it arrived, so the root's view is exact.
//
// Cost: the root waits for ceil(log_k p) levels of k reads each: t = s·k·log_k p·t_r + t_w =
// O(k log_k p); each line has a single writer, no atomic read-modify-write.
#include "barrier.hpp"
#include "tree.hpp"

namespace tnbc::barrier {

void combining_tree(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  const KaryTree tree{kCombiningTreeArity, self.size};
  const int v = to_virtual(self.rank, self.root, self.size);
  // 1. Gather the children.
  for (int c = tree.first_child(v), n = tree.child_count(v); n > 0; ++c, --n)
    wait_reached(seg.rank(to_real(c, self.root, self.size)).arrive, episode, self.wait);
  // 2. Announce this subtree.
  publish(seg.rank(self.rank).arrive, episode);
  // 3. Release.
  if (v == 0) publish(seg.global().release, episode);
  else wait_reached(seg.global().release, episode, self.wait);
}

}  // namespace tnbc::barrier
