// A tally: one sum over a communicator's ranks that a key posts after one of its calls and completes
// at its next call (decide.cpp: the path votes; blocking.cpp: the CPU weight, the engine's samples
// and the trial's rounds).  Posted after a call, when that call's data is complete, and
// completed at the next call, when every rank has long posted it: the program waits for no rank
// it would not have waited for (docs/replay.md, "Deciding per call").
#pragma once

#include <mpi.h>

#include <cassert>
#include <span>
#include <vector>

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
    if (PMPI_Iallreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm,
                        &request_) == MPI_SUCCESS)
      return true;
    request_ = MPI_REQUEST_NULL;
    return false;
  }
  /// Sums this rank's part over `comm` now, waiting for every rank.
  void sum(MPI_Comm comm) {
    PMPI_Allreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm);
  }
  /// Whether a posted sum is still in flight.
  bool pending() const { return request_ != MPI_REQUEST_NULL; }
  /// Waits for the posted sum; nothing where none is in flight.
  void complete() {
    if (pending()) PMPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  std::span<const double> mine() const { return mine_; }
  std::span<const double> sums() const { return sums_; }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<double> mine_, sums_;
};

}  // namespace tnbc::shim::replay::adapt
