// One driver for the three collectives of replay mode (run_call), and the state replay mode
// keeps between calls (whether the engine runs, the plan, the call sites).  Each collective
// (alltoall.cpp: Alltoall and Alltoallv; bcast.cpp: Bcast) is a Collective that supplies only
// what differs; run_call takes every call through the same steps, in this order:
//   1. release_guarded: what learning still guards of the call's buffers is opened;
//   2. the exclusions every rank shares (shared_exclusion), then the collective's own (sizes);
//   3. begin(): the call site, the plan entry, the agreed decision (adapt/), the site's learning;
//   4. the blocking path (MPI's call, or the engine's exchange run to completion; then
//      observe() for learning) or the early path (the engine's exchange in call_order's order).
// Internal to shim/replay/.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "priority/plan.hpp"
#include "shim/fence.hpp"
#include "shim/replay/adapt/decide.hpp"
#include "shim/replay/engine/engine.hpp"
#include "shim/replay/learn/learn.hpp"
#include "shim/stats.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {

/// Whether the engine runs (start() to stop()): every call's first shared exclusion.
bool running();
void set_running(bool on);

/// Reads TNBC_PLAN.  Any problem: one message from rank 0, and default priorities.
void load_plan(const std::string& path);
/// The plan read, or nullptr.
const priority::Plan* plan();
/// With TNBC_STATS set every call's site is captured, for the statistics per call site.
void set_site_statistics(bool on);
/// The key of a call site (an index of the call-site table) as plans spell it.
std::string site_key(std::int64_t site);
/// The statistics' name of a call site: its key, and its innermost frame's function and module.
adapt::SiteName site_name(std::int64_t site);

/// One call's start, after its exclusions: where it was called from, what the plan says of it,
/// the path every rank agreed on, and what learning keeps of its site.
struct CallStart {
  std::int64_t site = -1;
  const priority::PlanEntry* entry = nullptr;
  adapt::Decision d;
  learn::SiteLearning* ls = nullptr;
};

/// What one collective supplies to run_call: everything that differs between Alltoall,
/// Alltoallv and Bcast.  Whatever decides whether the engine runs at all must be the same on
/// every rank (collectives.hpp).
class Collective {
 public:
  Collective(OpStats& st, MPI_Comm comm, priority::Op op) : st_(st), comm_(comm), op_(op) {
    PMPI_Comm_size(comm, &size_);
    PMPI_Comm_rank(comm, &rank_);
  }
  virtual ~Collective() = default;
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  /// Step 1, where learning guards anything: release_guarded() on the call's buffers.
  virtual void release_guarded() = 0;
  /// The buffer whose MPI_IN_PLACE every rank shares (the send buffer; Bcast's buffer).
  virtual const void* in_place_buffer() const = 0;
  /// Step 2: the collective's own reason, the same on every rank, to run MPI's call, or nullptr.
  virtual const char* exclusion() = 0;
  /// The bytes that find this rank's plan entry (per block of an Alltoall, the buffer of a Bcast,
  /// the mean block of an Alltoallv) and the decision's key (the same on every rank: 0 for
  /// Alltoallv).  Asked after exclusion().
  virtual std::uint64_t plan_bytes() const = 0;
  virtual std::uint64_t key_bytes() const = 0;
  /// Counts what the call receives from each rank (adapt::count_received).
  virtual void count_received(const adapt::Decision& d) = 0;
  /// MPI's blocking call.
  virtual int blocking() = 0;
  /// The engine's exchange: on the early path (`early`: it may return before the data is in),
  /// or a blocking call the engine runs (Decision::engine: complete before returning).  It counts
  /// the call on the decision's key (adapt::done) and in the statistics.
  virtual int exchange(const CallStart& s, bool early) = 0;
  /// A blocking call returned MPI_SUCCESS after `ns`: where the decision designated it, learning
  /// watches its received data.
  virtual void observe(const CallStart& s, std::uint64_t ns) = 0;

  OpStats& stats() const { return st_; }
  MPI_Comm comm() const { return comm_; }
  priority::Op op() const { return op_; }
  int size() const { return size_; }
  int rank() const { return rank_; }

 private:
  OpStats& st_;
  MPI_Comm comm_;
  priority::Op op_;
  int size_ = 0, rank_ = 0;
};

/// Runs one call of `c` through the steps above.
int run_call(Collective& c);

/// Before a collective uses a buffer that an observed call may still guard: opens it (`touch`:
/// MPI reads it, which counts as the program's first touch; else it is overwritten).
void release_guarded(const void* p, std::size_t elements, MPI_Datatype type, bool touch);
/// A designated blocking call of `ls` returned: watch the blocks of its receive buffer
/// (contiguous receive types only, as trace mode watches them).
void observe_blocks(const adapt::Decision& d, learn::SiteLearning* ls, void* recvbuf, const int counts[],
                    const int displs[], int size, MPI_Datatype recvtype, std::uint64_t tcomm_ns);
/// Why this rank must receive [p, p + n) in place rather than return early, or nullptr.
const char* receive_in_place(const void* p, std::size_t n);

/// The order of an engine call on the early path, the one place it is chosen.  For an Alltoall
/// or Alltoallv (`segments` 0): the receive order, whether it takes per-node turns, and its send
/// window under them (0: TNBC_CHUNK_WINDOW).  For a Bcast of `segments` segments: the segment
/// order (per_node false), on its blocking engine calls too.  Counts where the order came from.
struct CallOrder {
  std::vector<int> order;
  bool per_node = false;
  int window = 0;
};
CallOrder call_order(const CallStart& s, int segments = 0);

/// `rc` keeps the first error of a call's steps: the exchange still runs (the other ranks wait
/// for its messages), and the program gets the error MPI gave.
inline void keep_first_error(int& rc, int step) {
  if (rc == MPI_SUCCESS) rc = step;
}

/// MPI's blocking call, counted under `why`, after completing what is in flight (its buffers may
/// be guarded, and MPI must never meet a guarded page while it holds its own locks).
template <typename F>
int plain(OpStats& st, std::string_view why, F&& call) {
  st.count_fallback(why);
  if (g_in_flight.load(std::memory_order_acquire) != 0) engine::Engine::instance().drain();
  return call();
}

}  // namespace tnbc::shim::replay
