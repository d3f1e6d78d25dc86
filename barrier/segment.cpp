#include "segment.hpp"

#include "barrier.hpp"
#include "tree.hpp"

namespace tnbc::barrier {

void Segment::place_global() const {
  GlobalBlock& g = global();
  g.count.value.store(static_cast<std::uint32_t>(size_), std::memory_order_relaxed);
  g.release.value.store(0, std::memory_order_relaxed);
  g.node_release.value.store(0, std::memory_order_relaxed);
  g.count.sleepers.store(0, std::memory_order_relaxed);
  g.release.sleepers.store(0, std::memory_order_relaxed);
  g.node_release.sleepers.store(0, std::memory_order_release);
}

void Segment::place_rank(int r, int root) const {
  RankBlock& b = rank(r);
  // Writing every line faults the page in on this rank's NUMA node (first touch).
  for (Line* l = &b.arrive; l != &b.entered + 1; ++l) {
    l->value.store(0, std::memory_order_relaxed);
    l->sleepers.store(0, std::memory_order_relaxed);
  }
  KaryTree tree{kCombiningTreeArity, size_};
  b.count.value.store(static_cast<std::uint32_t>(tree.child_count(to_virtual(r, root, size_))),
                      std::memory_order_release);
}

}  // namespace tnbc::barrier
