#include "schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace tnbc::shim::schedule {
namespace {

/// The priority order as a permutation of 0..n-1: the listed entries first (duplicates and
/// out-of-range entries ignored), then the missing ones in `fallback` order.
std::vector<int> complete_order(std::span<const int> order, const std::vector<int>& fallback) {
  const int n = static_cast<int>(fallback.size());
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  std::vector<int> out;
  out.reserve(fallback.size());
  auto take = [&](int i) {
    if (i >= 0 && i < n && !seen[static_cast<std::size_t>(i)]) {
      seen[static_cast<std::size_t>(i)] = 1;
      out.push_back(i);
    }
  };
  for (int i : order) take(i);
  for (int i : fallback) take(i);
  return out;
}

/// The pieces a sub-message of n bytes travels as: {offset, bytes, piece, edge}.
struct Piece {
  std::size_t offset, bytes;
  int piece;
  bool edge;
};
std::vector<Piece> pieces(std::size_t n, std::size_t chunk) {
  if (n < 3 * kEdgeBytes) return {{0, n, 0, true}};
  std::vector<Piece> out{{0, kEdgeBytes, 0, true}, {n - kEdgeBytes, kEdgeBytes, 1, true}};
  const std::size_t body = n - 2 * kEdgeBytes;
  if (chunk == 0 || chunk >= body) chunk = body;
  chunk = std::max(chunk, (body + kMaxChunks - 1) / kMaxChunks);
  for (std::size_t off = 0, c = 0; off < body; off += chunk, ++c)
    out.push_back({kEdgeBytes + off, std::min(chunk, body - off), 2 + static_cast<int>(c), false});
  return out;
}

}  // namespace

/*
 * Algorithm: prioritised alltoall(v)
 *   Idea: every rank posts all its receives and sends at once; what differs is the order, which
 *   decides what completes first when the network is the bottleneck.
 *   Phases: 1. copy of the own block (no network, needed by any read order);
 *           2. edge pieces (head and tail of each block, see kEdgeBytes): receives in
 *              priority order, sends in staggered order; the call waits for these only;
 *           3. receives of the bodies in priority order (plan order, else (rank - k) mod p),
 *              chunk by chunk;
 *           4. sends of the bodies sorted by (position of this rank in the receiver's order,
 *              chunk, staggered position of the receiver).
 *   Edge cases: zero-byte blocks get no step; blocks under 3 pages travel whole; size 1 is a
 *   copy only.
 *   Cost: (p-1) messages each way, 2 + chunks per block of 3 pages or more:
 *   Cost = (2 + c)(p-1)·α + n·β per rank; sorting the sends O(s log s), s send steps.
 */
Schedule alltoallv(int rank, int size, std::span<const std::size_t> send_bytes,
                   std::span<const std::size_t> send_displs,
                   std::span<const std::size_t> recv_bytes,
                   std::span<const std::size_t> recv_displs, std::span<const int> recv_order,
                   const AlltoallvOptions& options) {
  const auto n = static_cast<std::size_t>(size);
  if (rank < 0 || rank >= size || send_bytes.size() != n || send_displs.size() != n ||
      recv_bytes.size() != n || recv_displs.size() != n)
    throw std::invalid_argument("alltoallv schedule: sizes do not match the communicator");
  Schedule s;
  const auto r = static_cast<std::size_t>(rank);
  // 1. own block
  if (recv_bytes[r] > 0)
    s.steps.push_back({Kind::copy, rank, recv_displs[r], recv_bytes[r], rank, 0, false, -1, send_displs[r]});
  std::vector<int> staggered_recv;
  for (int k = 1; k < size; ++k) staggered_recv.push_back((rank - k + size) % size);
  staggered_recv.push_back(rank);
  const std::vector<int> sources = complete_order(recv_order, staggered_recv);
  auto receives = [&](bool edge) {  // 2a (edge pieces) and 3 (bodies): in priority order
    for (int src : sources) {
      auto i = static_cast<std::size_t>(src);
      if (src == rank || recv_bytes[i] == 0) continue;
      for (const Piece& pc : pieces(recv_bytes[i], options.chunk_bytes))
        if (pc.edge == edge) s.steps.push_back({Kind::recv, src, recv_displs[i] + pc.offset, pc.bytes, src, pc.piece, edge});
    }
  };
  receives(true);
  struct BodySend {
    std::size_t chunk;
    int k;
    Step step;
  };
  std::vector<BodySend> bodies;
  for (int k = 1; k < size; ++k) {  // 2b. edge sends; the body sends, ordered below
    int dst = (rank + k) % size;
    auto i = static_cast<std::size_t>(dst);
    if (send_bytes[i] == 0) continue;
    for (const Piece& pc : pieces(send_bytes[i], options.chunk_bytes)) {
      Step st{Kind::send, dst, send_displs[i] + pc.offset, pc.bytes, rank, pc.piece, pc.edge};
      if (pc.edge) s.steps.push_back(st);
      else bodies.push_back({static_cast<std::size_t>(pc.piece), k, st});
    }
  }
  receives(false);
  // 4. Body sends by where this rank's block stands in each receiver's order.  The plan's list
  // is the same for every receiver: a listed rank stands at the same place for all of them, so
  // chunk 0 goes to each receiver before chunk 1.  An unlisted rank comes after the listed
  // ones, staggered: receiver rank + k has it at k - 1, so receivers go one after the other in
  // k order, which is the order the bodies were collected in.
  if (std::find(recv_order.begin(), recv_order.end(), rank) != recv_order.end())
    std::stable_sort(bodies.begin(), bodies.end(), [](const BodySend& a, const BodySend& b) {
      return std::tie(a.chunk, a.k) < std::tie(b.chunk, b.k);
    });
  for (const BodySend& b : bodies) s.steps.push_back(b.step);  // 4. body sends
  return s;
}

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

}  // namespace tnbc::shim::schedule
