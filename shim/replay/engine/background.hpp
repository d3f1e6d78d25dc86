// A request that the progress thread completes in the background: a small collective the
// library posts after one call and needs at the next (adapt/tally.hpp, the decision's sums).
// Left to MPI, it would move only when the program's next collective waits for it, right
// before that collective: on NPB FT class A (2 emulated nodes, 8 calls of 32 MiB) the sum posted
// after the key's seventh call and waited for at its eighth cost 0.8-1.1 s of an 11.2 s run, the
// whole of what the library cost there when it changed nothing
// (docs/measurements/background-tally.md).  Tested between the progress thread's naps, it
// completes while the program computes.
//
// Its owner says whether to wake the thread for it.  On a node with more ranks than cores each
// wake-up of the thread may hand the core to another rank for a scheduler slice: fftMPI's pencils
// on unshaped links (2 emulated nodes, a key's calls 10-20 ms apart, 8 sums a rank) ran 5-6%
// longer than with no thread taking the sums at all, the whole of what the library cost there
// when it changed nothing (docs/measurements/sums-wake.md).  So a sum whose key's calls come
// close together is only taken up at the thread's next look (it wakes on its own at least twice a
// second, progress.cpp's kIdleLookMs, or is awake for the engine's calls); meanwhile the
// program's own MPI calls move it (MPICH's progress is global), and its next call completes what
// is left.  "Close" is judged by the key's last interval alone (Tally::post): a key whose calls
// come in bursts with long gaps between them has the sum of a burst's last call finished at the
// call after the gap, unless the thread's look falls in the gap.
#pragma once

#include <mpi.h>

namespace tnbc::shim::replay::engine {

/// One MPI request that its owner hands to the progress thread and later waits for.  Only one
/// thread uses the request at a time: the progress thread tests it while it holds it, and
/// wait() takes it back first (Progress::take_back).  Where no progress thread runs, wait()
/// completes it as MPI_Wait would.
class BackgroundRequest {
 public:
  BackgroundRequest() = default;
  /// Leaves the progress thread (a program that exits without MPI_Finalize destroys its keys
  /// while the thread runs); the request itself is left to MPI.
  ~BackgroundRequest();
  BackgroundRequest(const BackgroundRequest&) = delete;
  BackgroundRequest& operator=(const BackgroundRequest&) = delete;

  /// Hands `request`, just posted, to the progress thread, which it wakes where `wake` says so
  /// (else the thread takes it up at its next look).  False where no thread took it (none runs):
  /// wait() completes it.
  bool start(MPI_Request request, bool wake);
  /// Started and not yet waited for.
  bool pending() const { return started_; }
  /// Completes it: true where it was complete already (the progress thread completed it, or a
  /// test finds it done: the program's MPI calls moved it), else MPI_Wait (false).  Nothing where
  /// it was not started (false).
  bool wait();

 private:
  friend class Progress;
  /// Leaves the progress thread, if it holds the request.
  void take_back();
  MPI_Request request_ = MPI_REQUEST_NULL;  // MPI_REQUEST_NULL once complete
  bool started_ = false;                    // the owner's: between start() and wait()
  bool adopted_ = false;                    // the owner's: the progress thread took it
};

}  // namespace tnbc::shim::replay::engine
