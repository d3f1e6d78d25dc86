// Shadow communicators, tags and the node's turn window (shadow.hpp).
#include "shadow.hpp"

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "../comm_attr.hpp"
#include "../log.hpp"

namespace tnbc::shim::engine {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
int g_seq_mask = 0;  // sequence bits that fit in a tag next to the 8 segment bits

bool g_stopped = false;  // after stop_shadows(): MPI may be finalising

int delete_shadow(MPI_Comm, int, void* value, void*) {
  auto* s = static_cast<Shadow*>(value);
  if (g_stopped) {
    // Open MPI deletes the attributes of every communicator left, MPI_COMM_WORLD's included,
    // late in MPI_Finalize, when its one-sided layer is gone (PMPI_Win_free would crash): the
    // memory is freed, MPI is not called.
    delete s;
    return MPI_SUCCESS;
  }
  if (s->turn_win != MPI_WIN_NULL) PMPI_Win_free(&s->turn_win);
  if (s->node_comm != MPI_COMM_NULL) PMPI_Comm_free(&s->node_comm);
  PMPI_Comm_free(&s->comm);
  delete s;
  return MPI_SUCCESS;
}

}  // namespace

std::optional<std::string> start_shadows() {
  void* tag_ub = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  int ub = flag ? *static_cast<int*>(tag_ub) : 32767;
  g_seq_mask = 1;
  while ((static_cast<long>(g_seq_mask) << 9) - 1 <= ub) g_seq_mask <<= 1;
  g_seq_mask -= 1;  // seq bits: (seq & mask) << 8 | segment stays <= ub
  if (g_seq_mask < 15) return std::string("MPI_TAG_UB is too small for the engine's tags");
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_shadow, &g_keyval, nullptr) != MPI_SUCCESS)
    return std::string("cannot create the communicator attribute");
  return std::nullopt;
}

void stop_shadows() {
  if (g_keyval == MPI_KEYVAL_INVALID || g_stopped) return;
  // Collective over MPI_COMM_WORLD's node communicator (its window): every rank is in
  // MPI_Finalize.
  delete_attr_if_set(MPI_COMM_WORLD, g_keyval);
  g_stopped = true;
}

Shadow* shadow(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &flag);
  if (flag) return static_cast<Shadow*>(value);
  auto s = std::make_unique<Shadow>();
  // Every rank of `comm` is in this same collective, so the (collective) dup cannot mismatch.
  // A failure reaches the communicator's error handler (mode_replay.cpp), as MPICH's own would.
  if (PMPI_Comm_dup(comm, &s->comm) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_dup of the engine's communicator failed");
  // A failed message of a call that already returned cannot be returned to it: MPI reports it
  // and ends the job, as the blocking call would have under the default error handler.
  PMPI_Comm_set_errhandler(s->comm, MPI_ERRORS_ARE_FATAL);
  PMPI_Comm_set_attr(comm, g_keyval, s.get());
  return s.release();
}

int tag_of(std::uint32_t seq) { return static_cast<int>((seq & static_cast<std::uint32_t>(g_seq_mask)) << 8); }

bool prepare_node(Shadow& sh) {
  if (sh.node_ready) return sh.turns != nullptr;
  sh.node_ready = true;
  int rank = 0, size = 0, node_rank = 0, node_size = 0;
  PMPI_Comm_rank(sh.comm, &rank);
  PMPI_Comm_size(sh.comm, &size);
  if (PMPI_Comm_split_type(sh.comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &sh.node_comm) != MPI_SUCCESS)
    return false;
  PMPI_Comm_rank(sh.node_comm, &node_rank);
  PMPI_Comm_size(sh.node_comm, &node_size);
  sh.node_members.resize(static_cast<std::size_t>(node_size));
  PMPI_Allgather(&rank, 1, MPI_INT, sh.node_members.data(), 1, MPI_INT, sh.node_comm);
  sh.on_node.assign(static_cast<std::size_t>(size), 0);
  for (int m : sh.node_members) sh.on_node[static_cast<std::size_t>(m)] = 1;
  void* base = nullptr;
  const MPI_Aint bytes = node_rank == 0 ? static_cast<MPI_Aint>(kTurnSlots * sizeof(std::uint64_t)) : 0;
  // The window may fail where the MPI's one-sided layer cannot make one (Open MPI with a
  // one-sided component that has no shared windows): then per-node turns are off on every
  // rank of the communicator, agreed, since a rank gated on node members that never take
  // their turn would wait forever.  The error returns here instead of ending the job.
  PMPI_Comm_set_errhandler(sh.node_comm, MPI_ERRORS_RETURN);
  const int rc = PMPI_Win_allocate_shared(bytes, sizeof(std::uint64_t), MPI_INFO_NULL, sh.node_comm,
                                          &base, &sh.turn_win);
  int node_ok = rc == MPI_SUCCESS ? 1 : 0, all_ok = 0;
  PMPI_Allreduce(MPI_IN_PLACE, &node_ok, 1, MPI_INT, MPI_MIN, sh.node_comm);
  PMPI_Allreduce(&node_ok, &all_ok, 1, MPI_INT, MPI_MIN, sh.comm);
  if (!all_ok) {
    // Freed where the whole node has it (Win_free is collective over the node); a window
    // made on some ranks of a node only is left to MPI_Finalize.
    if (node_ok) PMPI_Win_free(&sh.turn_win);
    sh.turn_win = MPI_WIN_NULL;
    if (rank == 0) {
      std::string why = "on another node";
      if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, text, &len);
        why = std::string(text, static_cast<std::size_t>(len));
      }
      log::warn("per-node priority off: MPI_Win_allocate_shared failed ({}); calls run with "
                "per-message priorities only", why);
    }
    return false;
  }
  MPI_Aint qsize = 0;
  int disp = 0;
  PMPI_Win_shared_query(sh.turn_win, 0, &qsize, &disp, &base);
  auto* turns = static_cast<std::atomic<std::uint64_t>*>(base);
  if (node_rank == 0)
    for (std::uint32_t i = 0; i < kTurnSlots; ++i) new (&turns[i]) std::atomic<std::uint64_t>(0);
  PMPI_Barrier(sh.node_comm);  // initialised before anybody reads
  sh.turns = turns;
  return true;
}

}  // namespace tnbc::shim::engine
