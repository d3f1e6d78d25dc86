// What the schedule builders share (schedule_*.cpp): completing a priority order, and cutting a
// sub-message into the pieces it travels as.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tnbc::shim::schedule {

/// The priority order as a permutation of 0..n-1: the listed entries first (duplicates and
/// out-of-range entries ignored), then the missing ones in `fallback` order.
std::vector<int> complete_order(std::span<const int> order, const std::vector<int>& fallback);

/// The members of one node in the order they take their per-node turns (node_turn.hpp): by
/// their place in the priority `order`, members it does not list after them, by rank.
std::vector<int> turn_order(std::vector<int> members, std::span<const int> order);

/// The pieces a sub-message of n bytes travels as: {offset, bytes, piece, edge}.
struct Piece {
  std::size_t offset, bytes;
  int piece;
  bool edge;
};
/// Head, tail and body chunks of `chunk` bytes (kEdgeBytes, kMaxChunks in schedule.hpp); a
/// sub-message under 3 * kEdgeBytes travels whole.
std::vector<Piece> pieces(std::size_t n, std::size_t chunk);

}  // namespace tnbc::shim::schedule
