#include "schedule_pieces.hpp"

#include <algorithm>

#include "schedule.hpp"

namespace tnbc::shim::replay::engine::schedule {

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

std::size_t send_window(std::size_t configured, std::size_t remote_peers) {
  return configured == 0 ? 0 : std::max(configured, remote_peers);
}

std::vector<Piece> pieces(std::size_t n, std::size_t chunk) {
  if (n < 3 * kEdgeBytes) return {{0, n, 0, true}};
  std::vector<Piece> out{{0, kEdgeBytes, 0, true}, {n - kEdgeBytes, kEdgeBytes, 1, true}};
  const std::size_t body = n - 2 * kEdgeBytes;
  if (chunk == 0 || chunk >= body) chunk = body;
  chunk = std::min(std::max(chunk, (body + kMaxChunks - 1) / kMaxChunks), kMaxPieceBytes);
  for (std::size_t off = 0, c = 0; off < body; off += chunk, ++c)
    out.push_back({kEdgeBytes + off, std::min(chunk, body - off), 2 + static_cast<int>(c), false});
  return out;
}

std::vector<int> turn_order(std::vector<int> members, std::span<const int> order) {
  auto pos = [&](int r) {
    auto it = std::find(order.begin(), order.end(), r);
    return it == order.end() ? static_cast<long>(order.size()) + r : static_cast<long>(it - order.begin());
  };
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return pos(a) < pos(b); });
  return members;
}

}  // namespace tnbc::shim::replay::engine::schedule
