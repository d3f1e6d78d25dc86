// One collective in flight (Op), built from the parts each concern owns: its steps and their
// state, the send copy (send_copy.hpp), the receive mirror and edge pages
// (receive_mirror.hpp), the node's turn and the send window (node_turn.hpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "costs.hpp"
#include "node_turn.hpp"
#include "pages.hpp"
#include "receive_mirror.hpp"
#include "schedule.hpp"
#include "send_copy.hpp"

namespace tnbc::shim::replay::engine {

using schedule::Kind;
using schedule::Step;

/// One collective in flight.  Built by the calling thread, then owned by the progress thread;
/// afterwards the calling thread only fills the send copy (and the own block in the mirror),
/// marking `send.copied`, and reads edges.edge_pending and done.
struct Op {
  MPI_Comm comm = MPI_COMM_NULL;
  int tag = 0;
  std::vector<Step> steps;
  std::vector<MPI_Request> reqs;
  std::vector<std::uint8_t> state;  // 0 waiting, 1 posted, 2 done
  std::size_t remaining = 0;

  SendCopy send;
  bool sends_from_mirror = false;  // bcast forwards read what they received
  ReceiveMirror recv;
  EdgePages edges;
  // The calling thread is done with the op (edges copied): only then may it be retired, since
  // retiring unmaps the mirror the edges are copied from.
  std::atomic<bool> caller_released{false};
  std::atomic<bool> done{false};
  NodeTurn turn;
  SendWindow window;
  // Where this call's costs go (costs.hpp), or null.
  engine::Costs* costs = nullptr;
  // The collective, for the watchdog's report ("alltoall(v)", "bcast"), the sequence number on
  // its shadow communicator, when a step of it last completed (or it began), and whether the
  // watchdog reported it (progress.cpp).
  const char* what = "";
  std::uint32_t seq = 0;
  std::uint64_t last_moved_ns = 0;
  bool watchdog_told = false;

  // The send copy and the mirror go back to the pool (buffer_pool.hpp) when the op is destroyed.
  Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
};

}  // namespace tnbc::shim::replay::engine
