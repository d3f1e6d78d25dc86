#include "schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "schedule_pieces.hpp"

namespace tnbc::shim::replay::engine::schedule {

/*
 * Algorithm: pipelined, prioritised broadcast
 *   Idea: cut the buffer into m segments; every rank receives each segment from its parent and
 *   forwards it to its children, so segments flow down the tree one behind the other.  The
 *   order of segments is the priority order: the segment read first arrives first.
 *   Phases (per message, edges first, then segments in priority order):
 *           1. recv from parent (not at the root);
 *           2. send to each child, after the recv of step 1.
 *   Edge cases: buffers of 3 pages or more send their first and last kEdgeBytes first, as their
 *   own messages (the call waits for those only); m larger than the bytes is reduced so no
 *   segment is empty; total 0 gives no steps.
 *   Cost: (m + depth - 1) segment times along the longest path.
 */
Schedule bcast(int rank, int size, int root, std::size_t total, int segments, int chains,
               std::span<const int> segment_order) {
  if (rank < 0 || rank >= size || root < 0 || root >= size || segments < 1 || segments > 253)
    throw std::invalid_argument("bcast schedule: bad rank, root or segment count");
  Schedule s;
  if (total == 0) return s;
  const TreeNode node = bcast_tree(rank, size, root, chains);
  auto message = [&](std::size_t off, std::size_t len, int sub, int piece, bool edge = false) {
    int recv_step = -1;
    if (node.parent >= 0) {
      recv_step = static_cast<int>(s.steps.size());
      s.steps.push_back({Kind::recv, node.parent, off, len, sub, piece, edge});
    }
    for (int child : node.children) s.steps.push_back({Kind::send, child, off, len, sub, piece, edge, recv_step});
  };
  const bool edges = total >= 3 * kEdgeBytes;
  std::size_t lo = 0, body = total;
  if (edges) {
    message(0, kEdgeBytes, -1, 0, true);
    message(total - kEdgeBytes, kEdgeBytes, -1, 1, true);
    lo = kEdgeBytes;
    body = total - 2 * kEdgeBytes;
  }
  const auto m = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(segments), body));
  std::vector<int> identity(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) identity[static_cast<std::size_t>(i)] = i;
  const std::size_t base = body / static_cast<std::size_t>(m);
  const std::size_t extra = body % static_cast<std::size_t>(m);
  for (int seg : complete_order(segment_order, identity)) {
    const auto i = static_cast<std::size_t>(seg);
    const std::size_t off = lo + i * base + std::min(i, extra);
    const std::size_t len = base + (i < extra ? 1 : 0);
    message(off, len, seg, edges ? 2 + seg : seg);
  }
  return s;
}

}  // namespace tnbc::shim::replay::engine::schedule
