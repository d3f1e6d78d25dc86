#include "schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "schedule_pieces.hpp"

namespace tnbc::shim::replay::engine::schedule {

/*
 * Algorithm: broadcast tree (k chains, or binomial)
 *   Idea: relative rank v = (rank - root) mod p.  With k chains the p-1 non-root ranks are cut
 *   into k chains of nearly equal length, each hanging off the root (docs/ordering.md, "Bcast:
 *   segment count and tree": time ((p-1)/k + 1)·a + (k-1)·b, best near k* = sqrt(a(p-1)/b)).  Binomial (k = 0): parent of v
 *   is v with its lowest set bit cleared; children are v + 2^j for 2^j below that bit.
 *   Edge cases: k larger than p-1 becomes p-1 (a flat tree); p = 1 has no edges.
 *   Cost: chains: root sends k times per segment, others once; binomial: log2 p rounds.
 */
TreeNode bcast_tree(int rank, int size, int root, int chains) {
  TreeNode t;
  const int v = (rank - root + size) % size;
  auto abs_rank = [&](int rel) { return (rel + root) % size; };
  if (size <= 1) return t;
  if (chains <= 0) {
    int low = v == 0 ? 1 : (v & -v);
    if (v != 0) t.parent = abs_rank(v - low);
    for (int bit = 1; (v == 0 ? bit < size : bit < low); bit <<= 1)
      if (v + bit < size) t.children.push_back(abs_rank(v + bit));
    // Largest subtree first: it has the longest way to go.
    std::reverse(t.children.begin(), t.children.end());
    return t;
  }
  const int k = std::min(chains, size - 1);
  const int others = size - 1;
  // Chain c holds relative ranks [start(c), start(c+1)), starting at 1.
  auto start = [&](int c) { return 1 + c * (others / k) + std::min(c, others % k); };
  if (v == 0) {
    for (int c = 0; c < k; ++c) t.children.push_back(abs_rank(start(c)));
    return t;
  }
  int c = 0;
  while (start(c + 1) <= v) ++c;
  t.parent = v == start(c) ? abs_rank(0) : abs_rank(v - 1);
  if (v + 1 < start(c + 1)) t.children.push_back(abs_rank(v + 1));
  return t;
}

}  // namespace tnbc::shim::replay::engine::schedule
