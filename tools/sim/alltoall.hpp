// One MPI_Alltoall (or MPI_Alltoallv) simulated on SimGrid, twice: as plain MPICH runs it and as
// the replay engine runs it, one actor per rank, every message a SimGrid communication.
//
// The engine's side runs the step lists of shim/replay/engine/schedule.hpp, built by the engine's own
// builder with the arguments Engine::alltoallv gets for an MPI_Alltoall, and posts them as the
// progress thread does (shim/replay/engine/progress.cpp): every receive at once; the send side copied
// by the caller at memory speed, edge pieces first, each send posted once its bytes are copied;
// body sends only after all of this rank's heads and tails arrived; the call returns when the
// sub-messages on the partial first and last page of the receive buffer are in and the send side
// is copied.  Messages to one destination leave one after the other in schedule order (MPICH
// keeps one connection per peer, and a connection delivers in order); messages to different
// destinations share the links as SimGrid's flow model says.  Under a plan's per-node turns a
// node's members send their inter-node bodies one after the other, each passing the turn on as a
// message of no bytes within the node (as the fluid model does: fluid.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "platform.hpp"
#include "shim/replay/engine/schedule.hpp"

namespace tnbc::sim {

namespace schedule = tnbc::shim::replay::engine::schedule;

/// The step list rank `rank` of `size` runs for an MPI_Alltoall of `block` bytes per rank:
/// shim/replay/engine/schedule.hpp's builder with the counts and displacements alltoall.cpp passes
/// (block i at i * block on both sides).  `order`: a plan's read order, empty = none.
schedule::Schedule alltoall_steps(int rank, int size, std::size_t block, std::span<const int> order,
                                    std::size_t chunk_bytes);

/// The same for an MPI_Alltoallv in which every rank sends rank d `blocks[d]` bytes (one entry
/// per rank): the counts and displacements alltoall.cpp hands the engine for it (send side packed
/// in destination order, receive side block s at s * blocks[rank]).
schedule::Schedule alltoallv_steps(int rank, int size, std::span<const std::size_t> blocks,
                                   std::span<const int> order, std::size_t chunk_bytes);

/// The bytes every rank sends rank d in bench/is's MPI_Alltoallv: `mean` bytes per pair on
/// average, spread over the destinations as NPB IS spreads its keys (a key is the mean of four
/// uniform numbers, rank d owns the d-th of `size` equal key ranges, so middle ranks receive
/// most), 4-byte keys, each rank's count rounded so that the blocks add up to its keys.
std::vector<std::size_t> is_like_blocks(int size, std::size_t mean);

/// MPICH's algorithm for MPI_Alltoall of `block` bytes per rank on `size` ranks, by its default
/// thresholds (MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE 256, MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE
/// 32768): "pairwise" exchange (blocks over 32768 bytes), "scattered" (all isend/irecv, 32 at
/// a time) up to 32768.  Bruck's algorithm, which MPICH picks for blocks up to 256 bytes on 8
/// ranks or more, is not modelled: "scattered" stands in for it.  MPI_Alltoallv (`alltoallv`)
/// is always "scattered" (MPICH's choice unless the send buffer is MPI_IN_PLACE), without the
/// messages of zero bytes.
std::string plain_algorithm(std::size_t block, int size, bool alltoallv = false);

/// What one rank did in one simulated call (seconds of simulated time).
struct RankRun {
  double entry = 0;      ///< the call began
  double ret = 0;        ///< the call returned
  double done = 0;       ///< the last of its messages (either way) completed
  std::vector<schedule::Step> steps;  ///< the engine's steps (tnbc only)
  std::vector<double> step_done;        ///< when each step completed (tnbc only)
};

struct SimOptions {
  std::size_t block = 1 << 20;  ///< bytes per rank and destination
  std::size_t chunk_bytes = 0;  ///< the engine's body chunks (tools pass TNBC_CHUNK_BYTES' size across nodes)
  /// Messages to one destination in flight at once.  1: each waits for the one before (a
  /// connection delivers in order) and pays the route's latency alone; 2: the next one's
  /// latency (UCX's rendezvous handshake) overlaps the transfer of the one before, as on a
  /// connection that streams, at the price of the two sharing the bandwidth while both move.
  int connection_depth = 2;
  bool plain = true;            ///< simulate plain MPICH
  bool tnbc = true;             ///< simulate the engine without a plan
  /// Simulate the engine once more with a plan's read order (per-message priorities: receives
  /// and sends posted in `plan_order`) and, with `plan_per_node`,
  /// per-node turns in that order with a send window of `chunk_window` synchronous sends.
  bool tnbc_plan = false;
  std::vector<int> plan_order = {};  ///< source ranks, read first first
  bool plan_per_node = false;
  std::size_t chunk_window = 2;  ///< TNBC_CHUNK_WINDOW (tools pass its default)
  std::vector<std::string> cfg; ///< SimGrid settings ("network/model:CM02"), as --cfg takes them
  /// The engine's own time inside the call before it copies the send side (TNBC_STATS'
  /// setup_us per early call: the send copy allocated, the mirror mapped, pages protected), and
  /// the rate of the send copy (bytes/s; 0: the platform's memory bandwidth).  tnbc-stats --sim
  /// derives both from a real run.
  double setup_s = 0;
  double copy_Bps = 0;
  /// The progress thread's CPU per call (TNBC_STATS' progress_cpu_us per early call), spread
  /// evenly over the rank's sends: each send is posted that share later than it could be, one
  /// after the other (the thread does one thing at a time).  0: sends cost no CPU.
  double progress_cpu_s = 0;
  /// An MPI_Alltoallv: the bytes every rank sends rank d (one entry per rank, e.g.
  /// is_like_blocks).  Empty: an MPI_Alltoall of `block` bytes per pair.
  std::vector<std::size_t> blocks = {};

  bool alltoallv() const { return !blocks.empty(); }
  double copy_rate(const PlatformSpec& spec) const { return copy_Bps > 0 ? copy_Bps : spec.mem_Bps; }
  /// The bytes each rank sends rank `dst`.
  std::size_t bytes_to(int dst) const { return blocks.empty() ? block : blocks[static_cast<std::size_t>(dst)]; }
  /// The step list of `rank` of `size` for this call (alltoall_steps or alltoallv_steps).
  schedule::Schedule steps(int rank, int size, std::span<const int> order) const;
};

struct SimResult {
  std::string plain_algorithm;
  std::vector<RankRun> plain, tnbc, tnbc_plan;  ///< per rank; empty when not simulated
};

/// Builds the platform and runs the calls, one after the other with a barrier between them
/// (the network is idle when each begins).  SimGrid allows one engine per process: call this
/// once.
SimResult simulate(const PlatformSpec& spec, const SimOptions& options);

/// The offset of a receive buffer within its first page: glibc's malloc hands out large blocks
/// 16 bytes into a fresh mapping, so the first and last pages of the buffer are partial.
inline constexpr std::size_t kBufferPageOffset = 16;
inline constexpr std::size_t kPageBytes = 4096;

/// Per-node turns: each node's ranks in the order the engine gives them turns under a plan's
/// `order` (schedule::turn_order).
std::vector<std::vector<int>> turn_members(const PlatformSpec& spec, std::span<const int> order);

/// Per-node turns: the place, at `from` or after, of the first of a node's `members` (in turn
/// order) with inter-node bodies to send, `has_bodies(rank)` -- the member the turn goes to, since
/// one with none passes it on at once; members.size() when there is none.  Both models' rule.
template <typename HasBodies>
std::size_t next_turn(std::span<const int> members, std::size_t from, HasBodies&& has_bodies) {
  while (from < members.size() && !has_bodies(members[from])) ++from;
  return from;
}

/// When each page of a rank's receive buffer is published (the engine makes a page readable
/// once every step writing it completed); the partial first and last pages when the call
/// returned.  Page k holds buffer bytes [k * kPageBytes - kBufferPageOffset, ...).
std::vector<double> page_ready(const RankRun& run, std::size_t total_bytes);

/// When the call may return: the send side copied and every receive step that touches the
/// partial first or last page done (engine.cpp: wait_edges).  `copied` is when the caller
/// finished copying the send side.
double return_time(const RankRun& run, std::size_t total_bytes, double copied);

}  // namespace tnbc::sim
