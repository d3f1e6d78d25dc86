// Algorithm: combining_tree_atomic
//
// Idea: the combining tree with atomics (Yew, Tzeng & Lawrie 1987; paper section 4.4, figure
// 3a): every rank v of a complete k-ary tree (k = kCombiningTreeArity) owns a counter of
// children still to arrive.  When v's counter is zero its whole subtree has arrived; v resets
// the counter and decrements its parent's.  At most k+1 ranks contend for one counter instead
// of p for one (central_counter).  The root releases everybody through one global flag.
//
// Phases:
//   1. Gather: v waits until rank(v).count == 0 (place_rank() set it to the child count).
//   2. Reset: rank(v).count = child count, for the next episode.
//   3. Arrive: non-root v atomically decrements rank(parent).count.
//   4. Root: release = episode.  Others: wait until release reaches the episode.
//
// Edge cases: size 1: the root has no children and a zero counter.  Step 2 precedes step 3,
// and no child can decrement for episode e+1 before the root released episode e, which comes
// after step 2 of every rank: the reset cannot lose a decrement.
//
// Cost: ceil(log_k p) levels, each up to k atomic decrements on one line:
// t = k·log_k p·t_atomic + t_w = O(k log_k p).
#include "barrier.hpp"
#include "tree.hpp"

namespace tnbc::barrier {

void combining_tree_atomic(Participant& self) {
  const Segment& seg = self.segment;
  const std::uint32_t episode = ++self.episode;
  const KaryTree tree{kCombiningTreeArity, self.size};
  const int v = to_virtual(self.rank, self.root, self.size);
  Line& mine = seg.rank(self.rank).count;
  // 1. Gather the children.
  wait_equal(mine, 0, self.wait);
  // 2. Reset for the next episode.
  reset(mine, static_cast<std::uint32_t>(tree.child_count(v)));
  if (v == 0) {
    // 4. Release.
    publish(seg.global().release, episode);
    return;
  }
  // 3. Announce this subtree to the parent.
  decrement(seg.rank(to_real(tree.parent(v), self.root, self.size)).count);
  // 4. Wait for the release.
  wait_reached(seg.global().release, episode, self.wait);
}

}  // namespace tnbc::barrier
