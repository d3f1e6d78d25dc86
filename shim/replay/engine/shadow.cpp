// Shadow communicators, tags and the node's turn window (shadow.hpp).
#include "shadow.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <sys/mman.h>

#include "shim/comm_attr.hpp"
#include "shim/log.hpp"
#include "shim/node.hpp"
#include "shim/shm_segment.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay::engine {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
int g_seq_mask = 0;  // sequence bits that fit in a tag next to the 8 segment bits

bool g_stopped = false;  // after stop_shadows(): MPI may be finalising
std::vector<Shadow*> g_starting;  // shadows whose MPI_Comm_idup may still be in flight

/// Completes `s`'s MPI_Comm_idup (every rank of the communicator started it at the same call).
void finish_dup(Shadow& s) {
  if (s.dup == MPI_REQUEST_NULL) return;
  PMPI_Wait(&s.dup, MPI_STATUS_IGNORE);
  g_starting.erase(std::remove(g_starting.begin(), g_starting.end(), &s), g_starting.end());
  PMPI_Comm_set_errhandler(s.comm, MPI_ERRORS_ARE_FATAL);
}

int delete_shadow(MPI_Comm, int, void* value, void*) {
  auto* s = static_cast<Shadow*>(value);
  if (!g_stopped) finish_dup(*s);
  if (s->turn_map != nullptr) munmap(s->turn_map, kTurnSlots * sizeof(std::uint64_t));
  // Open MPI deletes the attributes of every communicator left, MPI_COMM_WORLD's included,
  // late in MPI_Finalize: then the memory is freed and MPI is not called.
  if (!g_stopped) PMPI_Comm_free(&s->comm);
  delete s;
  return MPI_SUCCESS;
}

/// `comm`'s Shadow where one was made or started, else nullptr.
Shadow* attached(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &flag);
  return flag ? static_cast<Shadow*>(value) : nullptr;
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
  // Frees MPI_COMM_WORLD's shadow communicator while MPI still works: every rank is in
  // MPI_Finalize.  A dup started for a communicator that no collective used since completes
  // here (its ranks all started it).
  while (!g_starting.empty()) finish_dup(*g_starting.back());
  delete_attr_if_set(MPI_COMM_WORLD, g_keyval);
  g_stopped = true;
}

Shadow* shadow(MPI_Comm comm) {
  if (Shadow* existing = attached(comm)) {
    finish_dup(*existing);
    return existing;
  }
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

void shadow_start(MPI_Comm comm) {
  if (attached(comm) != nullptr) return;
  auto s = std::make_unique<Shadow>();
  // A failure leaves the dup to the first collective (shadow()).
  if (PMPI_Comm_idup(comm, &s->comm, &s->dup) != MPI_SUCCESS) return;
  g_starting.push_back(s.get());
  PMPI_Comm_set_attr(comm, g_keyval, s.get());
  s.release();
}

int tag_of(std::uint32_t seq) { return static_cast<int>((seq & static_cast<std::uint32_t>(g_seq_mask)) << 8); }

bool prepare_node(Shadow& sh) {
  if (sh.node_ready) return sh.turns != nullptr;
  sh.node_ready = true;
  if (!node::known()) return false;
  const std::uint64_t t0 = util::now_ns();
  int rank = 0;
  PMPI_Comm_rank(sh.comm, &rank);
  sh.on_node = node::peers(sh.comm);
  for (std::size_t r = 0; r < sh.on_node.size(); ++r)
    if (sh.on_node[r]) sh.node_members.push_back(static_cast<int>(r));
  constexpr std::size_t kBytes = kTurnSlots * sizeof(std::uint64_t);
  void* base = nullptr;
  if (sh.node_members.size() == 1) {  // alone on the node: nobody to share the counters with
    base = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return false;
  } else {
    // The node's members of `comm` only: one MPI_Comm_create_group (no message leaves the
    // node), the name from the first member, and an agreement that all mapped it.  Unlike
    // MPI_Comm_split_type and MPI_Win_allocate_shared over the whole communicator, each a few
    // rounds between nodes (60 and 30 ms on the emulated cluster, docs/replay.md), this costs
    // what three collectives within a node cost.
    MPI_Comm node_comm = MPI_COMM_NULL;
    const int rc = node::communicator(sh.comm, 0, &node_comm);
    if (rc != MPI_SUCCESS || node_comm == MPI_COMM_NULL) return false;
    int node_rank = 0;
    PMPI_Comm_rank(node_comm, &node_rank);
    char name[shm::kNameBytes] = {};
    std::string err;
    if (node_rank == 0) err = shm::create(shm::kTurns, kBytes, name, &base);
    PMPI_Bcast(name, shm::kNameBytes, MPI_CHAR, 0, node_comm);
    if (node_rank != 0) err = name[0] == '\0' ? "the node's first rank could not create it" : shm::open(name, kBytes, &base);
    int ok = err.empty() ? 1 : 0;
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node_comm);
    if (node_rank == 0 && name[0] != '\0') shm_unlink(name);
    PMPI_Comm_free(&node_comm);
    if (!ok) {
      if (base != nullptr) munmap(base, kBytes);
      // A node's members agree; other nodes may take turns (nobody waits across nodes).
      if (node_rank == 0)
        log::warn("per-node priority off on this node: its turn counters could not be shared ({}); "
                  "calls run with per-message priorities only", err.empty() ? "failed on another rank" : err);
      return false;
    }
  }
  sh.turn_map = base;
  sh.turns = static_cast<std::atomic<std::uint64_t>*>(base);  // zeros: every counter starts at 0
  log::debug("per-node turns: {} of the communicator's {} ranks on this node, counters set up in {:.1f} ms",
             sh.node_members.size(), sh.on_node.size(), static_cast<double>(util::now_ns() - t0) / 1e6);
  return true;
}

}  // namespace tnbc::shim::replay::engine
