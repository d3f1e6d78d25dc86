#include "schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "schedule_pieces.hpp"

namespace tnbc::shim::replay::engine::schedule {

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

}  // namespace tnbc::shim::replay::engine::schedule
