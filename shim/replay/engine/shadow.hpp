// The engine's own messages: per user communicator a shadow communicator they travel on, the
// sequence number of each collective and the tags built from it, and, for per-node priority,
// the node communicator and the node's turn counters in shared memory.
//
// Tags: the sequence number of the collective (the bits MPI_TAG_UB leaves, at least 4) above the
// piece of the message (8 bits, schedule.hpp), so several collectives can be in flight on one
// communicator:
//
//   tag = (seq & seq_mask) << 8 | piece
//
// Turn counters (per-node priority, node_turn.hpp): one shared-memory segment per shadow
// communicator and node (shm_segment.hpp), created by the node's first member and mapped by
// every member of the node:
//
//   turns: byte offset
//   0                 8                 16                  8 * (kTurnSlots - 1)
//   +-----------------+-----------------+------- ... -------+---------------------+
//   | slot 0          | slot 1          |                   | slot kTurnSlots - 1 |
//   +-----------------+-----------------+------- ... -------+---------------------+
//     one std::atomic<std::uint64_t> each, 0 when made; collective `seq` uses slot seq % kTurnSlots:
//
//       seq * kTurnStride + k     the first k ranks of the node, in the plan's order, have
//       |                  |      injected their inter-node sends for collective `seq`
//       '-- collective     '-- turns taken (k < kTurnStride)
//
// The member at position k sends once its slot reads at least seq * kTurnStride + k and, once
// its own inter-node sends completed, raises it to seq * kTurnStride + k + 1.  A counter is never
// lowered: a later collective on the same slot may already have moved it on.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tnbc::shim::replay::engine {

/// Per user communicator: the shadow communicator our messages travel on (so they never match
/// the application's) and the sequence number of the next collective, which goes into the tags
/// so several collectives can be in flight on one communicator.  Cached as an attribute and
/// freed with the communicator.
struct Shadow {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request dup = MPI_REQUEST_NULL;  // an MPI_Comm_idup of shadow_start() not yet completed
  std::uint32_t seq = 0;
  // Per-node priority (set up the first time a call takes turns, on every rank at once):
  // which ranks of `comm` share this node, and the node's turn counters in shared memory
  // (private memory when no other rank of `comm` is on this node).
  bool node_ready = false;
  std::vector<char> on_node;  // on_node[r]: rank r of comm is on this node
  std::vector<int> node_members;
  std::atomic<std::uint64_t>* turns = nullptr;  // kTurnSlots counters, one per recent collective
  void* turn_map = nullptr;                     // their mapping (munmap), or nullptr
};

/// Turn counters per node and communicator: slot seq % kTurnSlots holds seq * kTurnStride + k
/// once the first k ranks (in plan order) of the node have injected their inter-node sends.
constexpr std::uint32_t kTurnSlots = 256;
constexpr std::uint64_t kTurnStride = 1u << 16;

/// Sizes the tags' sequence bits from MPI_TAG_UB and creates the communicator attribute that
/// caches a Shadow (at engine start).
std::optional<std::string> start_shadows();

/// At engine stop, in MPI_Finalize before PMPI_Finalize: frees MPI_COMM_WORLD's shadow (its
/// communicators and window) while MPI still works; from then on a shadow deleted with its
/// communicator only frees memory (Open MPI deletes every attribute left late in its finalize).
void stop_shadows();

/// `comm`'s Shadow, created (collective over `comm`: PMPI_Comm_dup) at its first collective.
Shadow* shadow(MPI_Comm comm);
/// Starts `comm`'s Shadow ahead of its first collective (collective over `comm`, nonblocking: an
/// MPI_Comm_idup that shadow() completes, or stop_shadows() where no collective came).  Nothing
/// where it exists already.
void shadow_start(MPI_Comm comm);

/// The tag of collective `seq`, piece 0 (post() adds the piece).
int tag_of(std::uint32_t seq);

/// Sets up per-node priority for `sh` (every rank of the communicator calls it for the same
/// collective, because the plan or the learned decision says so everywhere).  Collective over
/// the communicator's ranks on each node only: the members follow from node.hpp without a
/// message, and a node's members agree among themselves (a member that waits for a turn waits
/// only for members of its own node).  False when the node's counters could not be made (no
/// per-node priority on this node's ranks).
bool prepare_node(Shadow& sh);

}  // namespace tnbc::shim::replay::engine
