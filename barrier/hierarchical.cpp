// Algorithm: hierarchical
//
// Idea: a barrier over several nodes from a node barrier and a barrier among one leader per
// node (the node's root): intra-node arrival, leaders synchronise across nodes, intra-node
// release (architecture guide, "Barrier").  Any node algorithm serves for the arrival.
//
// Phases:
//   1. Arrive: the node barrier `a` (every local rank entered).
//   2. Root (leader): leaders_sync() (returns when every leader finished phase 1 on its node),
//      then node_release = episode.
//   3. Others: wait until node_release reaches the episode.
//
// Edge cases: one node: leaders_sync() is the caller's no-op.  The episode of phase 3 is the
// one phase 1 just completed (self.episode after the node barrier), identical on every rank.
//
// Cost: node barrier + leaders' barrier + one flag write read by p-1 ranks.  Phase 1 releases
// before phase 2, so the node's ranks do one release more than a fused version would; it keeps
// every algorithm usable unchanged.
#include "barrier.hpp"

namespace tnbc::barrier {

void hierarchical(Algorithm a, Participant& self, void (*leaders_sync)(void*), void* context) {
  // 1. Node arrival.
  run(a, self);
  Line& node_release = self.segment.global().node_release;
  if (self.rank == self.root) {
    // 2. Across nodes, then release the node.
    leaders_sync(context);
    publish(node_release, self.episode);
  } else {
    // 3. Wait for the leader.
    wait_reached(node_release, self.episode, self.wait);
  }
}

}  // namespace tnbc::barrier
