// A tally: one sum over a communicator's ranks that a key posts after one of its calls and needs
// at its next call (decide.cpp: the path votes; blocking.cpp: the CPU weight, the engine's samples
// and the trial's rounds).  Posted after a call, when that call's data is complete, and needed at
// the next call, when every rank has long posted it: the program waits for no rank it would not
// have waited for (docs/replay.md, "Deciding per call").  In between the progress thread
// completes it (engine/background.hpp), so that nothing of it is exchanged right before the next
// call; the next call completes what is left.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cassert>
#include <cstdint>
#include <span>
#include <vector>

#include "shim/replay/engine/background.hpp"

namespace tnbc::shim::replay::adapt {

class Tally {
 public:
  /// This rank's part: `mine` is copied (set before post or sum, never while one is pending).
  void set(std::span<const double> mine) {
    assert(!pending());
    mine_.assign(mine.begin(), mine.end());
    sums_.assign(mine_.size(), 0.0);
  }
  /// Posts the sum of this rank's part over `comm` (an MPI_Iallreduce, every rank after the same
  /// call); false where MPI refused it, and nothing is in flight.
  bool post(MPI_Comm comm) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (PMPI_Iallreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm,
                        &request) != MPI_SUCCESS)
      return false;
    request_.start(request);
    posted_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  /// Sums this rank's part over `comm` now, waiting for every rank.
  void sum(MPI_Comm comm) {
    PMPI_Allreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm);
  }
  /// Whether a posted sum is still in flight.
  bool pending() const { return request_.pending(); }
  /// Waits for the posted sum (done already where the progress thread completed it); nothing
  /// where none is in flight.  Counted `ready` where the progress thread had completed it: at
  /// the key's next call, or at MPI_Finalize for a sum no call followed.
  void complete() {
    if (request_.wait()) ready_.fetch_add(1, std::memory_order_relaxed);
  }
  /// This rank's sums posted, and of them the ones the progress thread had completed when their
  /// key waited for them (the statistics' "sums").
  static std::uint64_t posted() { return posted_.load(std::memory_order_relaxed); }
  static std::uint64_t ready() { return ready_.load(std::memory_order_relaxed); }
  std::span<const double> mine() const { return mine_; }
  std::span<const double> sums() const { return sums_; }

 private:
  inline static std::atomic<std::uint64_t> posted_{0}, ready_{0};
  std::vector<double> mine_, sums_;
  // After the buffers MPI writes: destroyed first, it leaves the progress thread before they go.
  engine::BackgroundRequest request_;
};

}  // namespace tnbc::shim::replay::adapt
