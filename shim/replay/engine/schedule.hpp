// Schedules: what one rank sends and receives to complete a collective, as plain data.
//
// A Schedule lists steps in issue order (highest priority first).  The engine posts them in that
// order, a recv into the receive side, a send from the (copied) send side; a step with
// `after >= 0` may be posted only when step `after` has completed (a tree broadcast forwards a
// segment only after receiving it).  Builders are pure functions of (rank, size, sizes,
// priorities), so tests check them on every rank of a simulated job without MPI.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tnbc::shim::replay::engine::schedule {

enum class Kind {
  send,  ///< send `bytes` at `offset` of the send side to `peer`
  recv,  ///< receive `bytes` at `offset` of the receive side from `peer`
  copy,  ///< local copy of `bytes` from send offset `src_offset` to receive offset `offset`
};

struct Step {
  Kind kind;
  int peer;                    ///< communicator rank; own rank for copy
  std::size_t offset;          ///< receive-side offset (recv, copy) or send-side offset (send)
  std::size_t bytes;
  int sub;                     ///< sub-message: source rank (alltoall[v]) or segment (bcast)
  int piece = 0;               ///< message on the wire: goes into the tag (0..255), see below
  bool edge = false;           ///< a head or tail piece (the call waits for those; never gated)
  int after = -1;              ///< index of a step that must complete first, or -1
  std::size_t src_offset = 0;  ///< copy only: send-side offset
};

struct Schedule {
  std::vector<Step> steps;
};

/// Edge pieces.  A receive must complete the bytes on the partial first and last page of the
/// receive buffer before the call returns (those pages cannot be guarded).  Those bytes always
/// lie within the first kEdgeBytes of the first sub-message or the last kEdgeBytes of the last
/// one, so every sub-message of at least 3 * kEdgeBytes travels as a head [0, kEdgeBytes), a
/// tail [n - kEdgeBytes, n) and a body between them, and heads and tails go first: the call then
/// waits for two small messages instead of two whole sub-messages.  Sender and receiver split
/// by the same rule (the byte count they both know), so the messages match.
inline constexpr std::size_t kEdgeBytes = 4096;

/// Bodies travel as chunks of `chunk_bytes` (the last one shorter; 0 = one message), so that
/// their pages are published front to back while the rest is still on the wire: a reader that
/// works through a sub-message page by page starts after the first chunk, not after the whole
/// sub-message.  At most kMaxChunks per body (larger chunks when a body needs more).
inline constexpr int kMaxChunks = 254;

struct AlltoallvOptions {
  std::size_t chunk_bytes = 0;  ///< body chunk size, 0 = bodies travel whole
};

/// Alltoall(v) on `rank` of `size`.  Block i of the send side goes to rank i, block j of the
/// receive side comes from rank j; counts and displacements are in bytes.  `recv_order` lists
/// source ranks, the block read first first (a plan's consensus order, the same on every rank);
/// empty = the default staggered order (rank - k) mod size.  The own block is a copy, issued
/// first; then the edge pieces (heads and tails) of every block, then the bodies.  Body sends
/// are ordered by what their receivers need first: by the position of this rank in the
/// receiver's order, then chunk by chunk, then staggered (rank + k) mod size, so the blocks
/// every receiver reads first go out first and, when several receivers want theirs equally
/// soon, chunk 0 goes to each of them before chunk 1.  Pieces: 0 whole or head, 1 tail, 2 + c
/// body chunk c.  (Under per-node priority the engine keeps a window of the inter-node body
/// sends in flight, in this order.)
Schedule alltoallv(int rank, int size, std::span<const std::size_t> send_bytes,
                   std::span<const std::size_t> send_displs,
                   std::span<const std::size_t> recv_bytes,
                   std::span<const std::size_t> recv_displs, std::span<const int> recv_order,
                   const AlltoallvOptions& options = {});

/// Pipelined broadcast of `total` bytes from `root`, cut into `segments` nearly equal segments
/// (the last may be shorter), sent down a tree of `chains` chains (1 = one chain, 0 = binomial
/// tree).  `segment_order` lists segments, the one read first first; empty = 0, 1, 2, ….  When
/// total >= 3 * kEdgeBytes the first and last kEdgeBytes travel first as pieces 0 and 1 and the
/// segments cut the rest (piece = 2 + segment); otherwise piece = segment.  At most 253 segments.
Schedule bcast(int rank, int size, int root, std::size_t total, int segments, int chains,
               std::span<const int> segment_order);

/// Parent and children of `rank` in the broadcast tree (ranks relative to the communicator).
struct TreeNode {
  int parent = -1;
  std::vector<int> children;
};
TreeNode bcast_tree(int rank, int size, int root, int chains);

}  // namespace tnbc::shim::replay::engine::schedule
