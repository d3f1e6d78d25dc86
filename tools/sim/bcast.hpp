// One MPI_Bcast simulated on SimGrid: as plain MPICH runs it and as the replay engine runs it in
// one or more tree shapes, one actor per rank, every message a SimGrid communication.
//
// The engine's side runs the step list shim/replay/engine/schedule.hpp's bcast builder makes (edges
// first, then the segments; a rank forwards a piece to its children once it has received it),
// posted as progress.cpp posts it: every receive at once, a send once its `after` step is done
// (the root's once the caller copied its bytes, edge pieces first), messages to one child in
// schedule order, `connection_depth` at a time.  A non-root rank's call returns when its edge
// pieces are in; the root's when its buffer is copied.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "alltoall.hpp"
#include "priority/cost_model.hpp"
#include "platform.hpp"

namespace tnbc::sim {

/// The engine's segments and tree, and the shape it picks without a plan or settings
/// (priority/cost_model.hpp, as the replay library's).
using priority::BcastShape;
using priority::default_bcast_shape;

/// MPICH's algorithm for MPI_Bcast of `bytes` on `size` ranks by its classic thresholds
/// (MPIR_CVAR_BCAST_SHORT_MSG_SIZE 12288, MPIR_CVAR_BCAST_LONG_MSG_SIZE 524288,
/// MPIR_CVAR_BCAST_MIN_PROCS 8): "binomial" below 12288 bytes or 8 ranks; "scatter + recursive
/// doubling allgather" below 524288 bytes on a power of two; "scatter + ring allgather" else.
std::string plain_bcast_algorithm(std::size_t bytes, int size);

/// Whether MPICH broadcasts on MPI_COMM_WORLD node by node (MPIR_Bcast_intra_smp, its default on
/// a communicator with more than one rank on a node, one node or many): where the classic
/// choice on all ranks is binomial (then: the root's node's local rank 0 gets the buffer, the
/// nodes' local rank 0s broadcast among themselves, each node within) or scatter + recursive
/// doubling (then: the root's node within, among the nodes, the other nodes within); each part
/// picks its classic algorithm by its own size.  Scatter + ring allgather stays on all ranks.
bool plain_bcast_smp(const PlatformSpec& spec, std::size_t bytes);
/// plain_bcast_algorithm, or the SMP composition in words.
std::string plain_bcast_description(const PlatformSpec& spec, std::size_t bytes);

struct BcastOptions {
  std::size_t bytes = 1 << 20;
  int root = 0;
  bool plain = true;
  std::vector<BcastShape> shapes;  ///< one engine call per shape
  int connection_depth = 2;        ///< as SimOptions::connection_depth
  std::vector<std::string> cfg;    ///< SimGrid settings, as --cfg takes them
  double setup_s = 0;              ///< as SimOptions::setup_s (every rank's call)
  double copy_Bps = 0;             ///< as SimOptions::copy_Bps (the root's copy of its buffer)
};

struct BcastResult {
  std::string plain_algorithm;
  std::vector<RankRun> plain;               ///< per rank; empty when not simulated
  std::vector<std::vector<RankRun>> tnbc;   ///< per shape, per rank (steps and their times kept)
};

/// Builds the platform and runs the calls one after the other, each from a barrier.  SimGrid
/// allows one engine per process: call this (or simulate) once.
BcastResult simulate_bcast(const PlatformSpec& spec, const BcastOptions& options);

/// When a rank has the whole buffer: the call's return, or the last of its receive steps.
double bcast_ready(const RankRun& run);

/// Seed 003's time of one unsegmented message over k chains, t(k) = ((P-1)/k + 1)·a + (k-1)·b,
/// with the platform's a (one hop: 2 latencies and the bytes at the link's rate) and b (what one
/// more send costs the root: the bytes at the link's rate), in seconds.
double seed_chains_time(const PlatformSpec& spec, std::size_t bytes, int k);
/// Where that t(k) is least, k* = sqrt(a(P-1)/b), with the same a and b.
double seed_best_chains(const PlatformSpec& spec, std::size_t bytes);

}  // namespace tnbc::sim
