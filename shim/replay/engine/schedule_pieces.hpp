// What the schedule builders share (schedule_*.cpp): completing a priority order, and cutting a
// sub-message into the pieces it travels as.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "schedule.hpp"

namespace tnbc::shim::replay::engine::schedule {

/// The priority order as a permutation of 0..n-1: the listed entries first (duplicates and
/// out-of-range entries ignored), then the missing ones in `fallback` order.
std::vector<int> complete_order(std::span<const int> order, const std::vector<int>& fallback);

/// The members of one node in the order they take their per-node turns (node_turn.hpp): by
/// their place in the priority `order`, members it does not list after them, by rank.
std::vector<int> turn_order(std::vector<int> members, std::span<const int> order);

/// The send window of a rank's turn (node_turn.hpp, SendWindow): at least `configured`
/// (TNBC_CHUNK_WINDOW; 0 = no window stays 0) and at least one chunk per peer on another node
/// that the rank sends bodies to, `remote_peers`.  Chunks go in schedule order, chunk 0 to
/// every peer before chunk 1, so a window of one chunk per peer keeps every destination busy;
/// a window of 2 across many peers leaves the links idle while a node's members wait their turns
/// one after the other (tnbc-sim: the plan 1.4x slower than no plan at 16 nodes x 4 ranks,
/// 6.5x at 2 x 32; docs/measurements/scale.md, "The send window at scale").  On 2 nodes x 2 ranks a rank
/// has 2 such peers, the default window.
std::size_t send_window(std::size_t configured, std::size_t remote_peers);

/// The pieces a sub-message of n bytes travels as: {offset, bytes, piece, edge}.
struct Piece {
  std::size_t offset, bytes;
  int piece;
  bool edge;
};
/// The largest piece: each goes as one MPI message, whose count is an int.
inline constexpr std::size_t kMaxPieceBytes = std::size_t{1} << 30;
/// The largest sub-message the engine moves (its body at most kMaxChunks chunks of
/// kMaxPieceBytes); alltoall.cpp runs the blocking call for anything larger.
inline constexpr std::size_t kMaxSubMessageBytes = static_cast<std::size_t>(kMaxChunks) * kMaxPieceBytes;

/// Head, tail and body chunks of `chunk` bytes (kEdgeBytes, kMaxChunks in schedule.hpp; 0:
/// the body whole), never more than kMaxChunks of them and none above kMaxPieceBytes (a body
/// over 2 GiB sent whole would not fit MPI's int count); a sub-message under 3 * kEdgeBytes
/// travels whole.  At most kMaxSubMessageBytes.
std::vector<Piece> pieces(std::size_t n, std::size_t chunk);

}  // namespace tnbc::shim::replay::engine::schedule
