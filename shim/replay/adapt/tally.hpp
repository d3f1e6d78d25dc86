// A tally: one sum over a communicator's ranks that a key posts after one of its calls and needs
// at its next call (decide.cpp: the path votes; blocking.cpp: the CPU weight, the engine's samples
// and the trial's rounds).  Posted after a call, when that call's data is complete, and needed at
// the next call, when every rank has long posted it: the program waits for no rank it would not
// have waited for (docs/replay.md, "Deciding per call").  In between it completes, so that nothing
// of it is exchanged right before the next call: moved by the progress thread, woken for it where
// the key's calls come far apart, and by the program's own MPI calls (engine/background.hpp); the
// next call completes what is left.
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
  /// Calls of a key this far apart, or more, wake the progress thread for their sums: a wake-up
  /// costs at most a scheduler slice (a few milliseconds), little against the interval, and the
  /// sum is then complete long before the next call if it comes as late as this one did, even
  /// where the program makes no MPI call in between.  Closer calls leave theirs to the thread's
  /// next look (engine/background.hpp).
  static constexpr std::uint64_t kWakeApartNs = 50'000'000;

  /// Posts the sum of this rank's part over `comm` (an MPI_Iallreduce, every rank after the same
  /// call), after a call that came `apart_ns` after the key's call before (0: unknown, as far
  /// apart as can be); false where MPI refused it, and nothing is in flight.
  bool post(MPI_Comm comm, std::uint64_t apart_ns) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (PMPI_Iallreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm,
                        &request) != MPI_SUCCESS)
      return false;
    const bool wake = apart_ns == 0 || apart_ns >= kWakeApartNs;
    const bool adopted = request_.start(request, wake);
    posted_.fetch_add(1, std::memory_order_relaxed);
    if (wake && adopted) woke_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  /// Sums this rank's part over `comm` now, waiting for every rank.
  void sum(MPI_Comm comm) {
    PMPI_Allreduce(mine_.data(), sums_.data(), static_cast<int>(mine_.size()), MPI_DOUBLE, MPI_SUM, comm);
  }
  /// Whether a posted sum is still in flight.
  bool pending() const { return request_.pending(); }
  /// Waits for the posted sum (done already where it completed in between); nothing where none
  /// is in flight.  Counted `ready` where the progress thread had completed it or one test finds
  /// it complete (the program's MPI calls, or that test's own progress, finished it): at the
  /// key's next call, or at MPI_Finalize for a sum no call followed.
  void complete() {
    if (request_.wait()) ready_.fetch_add(1, std::memory_order_relaxed);
  }
  /// This rank's sums posted, of them the ones handed to the progress thread with a wake-up (it
  /// may have been awake already), and the ones complete when their key waited for them (the
  /// statistics' "sums").
  static std::uint64_t posted() { return posted_.load(std::memory_order_relaxed); }
  static std::uint64_t woke() { return woke_.load(std::memory_order_relaxed); }
  static std::uint64_t ready() { return ready_.load(std::memory_order_relaxed); }
  std::span<const double> mine() const { return mine_; }
  std::span<const double> sums() const { return sums_; }

 private:
  inline static std::atomic<std::uint64_t> posted_{0}, woke_{0}, ready_{0};
  std::vector<double> mine_, sums_;
  // After the buffers MPI writes: destroyed first, it leaves the progress thread before they go.
  engine::BackgroundRequest request_;
};

}  // namespace tnbc::shim::replay::adapt
