// Which processes share this rank's node: learned once, at start, with one MPI_Iallgather of
// every rank's host name and boot id over MPI_COMM_WORLD, waited for with naps between tests
// (the start's one collective, which carries what the ranks must agree on too); from then on
// any communicator's node members follow from its group without a message.  Used by the
// per-call decision (a communicator within one node), the engine's per-node turns (the ranks
// that take turns on this node) and the trace file's node index.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <vector>

namespace tnbc::shim::node {

/// Values every rank must agree on at start (Mode::prepare): the collective below gives back
/// each one's minimum over the ranks.
using StartValues = std::array<int, 8>;

/// Collective over MPI_COMM_WORLD (every rank, at start; Runtime::start).  Carries each rank's
/// `digest` of the settings that must agree, and returns whether every rank's equals this
/// rank's (the same answer on every rank); replaces each of `values` by its minimum over the
/// ranks: one collective for the three questions (each collective of the start cost a run
/// 10-12 ms on 2 emulated nodes x 2 ranks, docs/measurements/startup-nodes.md).  When the
/// exchange fails nobody seems to share a node (every communicator then counts as spanning
/// nodes), `values` are all 0, and it returns false.
bool learn(std::uint64_t digest, StartValues& values);

/// Whether learn() found the node's members.
bool known();

/// Per rank of `comm`: 1 if it shares this rank's node (this rank included).  Local (no
/// message); all 0 before learn() or when it found nothing.
std::vector<char> peers(MPI_Comm comm);

/// Ranks of MPI_COMM_WORLD on this rank's node (at least 1).
int world_ranks_here();

/// Whether the job's ranks lie on more than one node (the same answer on every rank; false
/// before learn() or when it found nothing, where every communicator counts as spanning nodes).
bool job_spans_nodes();

/// The members of `comm` on this rank's node (peers()), as a communicator of their own: one
/// MPI_Comm_create_group with `tag`, collective over those members only (no message leaves
/// the node; MPI_Comm_split_type costs 50-100 ms a call in MPICH 4.0.2, which loads the hwloc
/// topology each time).  After learn(); returns MPI's error code.
int communicator(MPI_Comm comm, int tag, MPI_Comm* out);

/// The ranks `members` of `comm` (in that order), as a communicator of their own: one
/// MPI_Comm_create_group with `tag`, called by those members only.  Returns MPI's error code.
int group_communicator(MPI_Comm comm, const std::vector<int>& members, int tag, MPI_Comm* out);

/// The index of this rank's node among the job's nodes, numbered in world-rank order of their
/// first ranks (0 when learn() found nothing).  Local.
std::uint32_t index();

}  // namespace tnbc::shim::node
