// A Mode is what one library does with the intercepted calls.  libtnbc.so links the replay
// mode, libtnbc_trace.so the trace mode; each defines tnbc::shim::mode().
//
// The base class runs every collective as the plain blocking PMPI call, so a mode overrides
// only what it changes.  Handlers are called from the C wrappers with the runtime active and
// the thread not nested inside another MPI call; they must not let an exception escape.
#pragma once

#include <mpi.h>
#include <cstddef>
#include <string_view>

#include "node.hpp"

namespace tnbc::shim {

class Runtime;

/// Why release_range() is called.
enum class ReleaseReason {
  io,      ///< a system call is about to read or write the bytes (the kernel gets EFAULT, not a fault)
  memory,  ///< the bytes are being freed, reallocated or unmapped
  /// An MPI function that never waits for in-flight work (class `local`, shim/mpi_functions.tsv)
  /// is about to read or write memory at `p`, through a pointer argument whose extent it alone
  /// knows (n is 1): every collective whose receive pages hold `p` completes first.  MPI would
  /// otherwise meet such a page holding its own lock, which the thread that completes the page
  /// needs (legal_edges local_calls hung).  Never in a signal handler; may wait.
  mpi,
};

class Mode {
 public:
  virtual ~Mode() = default;

  /// "tnbc" or "tnbc_trace": the "library" field of the statistics.
  virtual std::string_view library() const = 0;

  /// The MPI thread level the mode needs (asked of MPI at initialisation, at least what the
  /// application asked for).
  virtual int thread_level() const { return MPI_THREAD_SINGLE; }

  /// After MPI initialisation and configuration, unless TNBC_DISABLE=1, before the start's one
  /// collective (Runtime::start, node::learn): what the mode starts on this rank alone, which may
  /// fail there, and in `agree` (zeros as given) what every rank must agree on.
  virtual void prepare(Runtime&, node::StartValues& agree) { (void)agree; }
  /// After that collective, where the settings agree: `agreed` holds the minimum over the ranks
  /// of each value prepare() gave.  May turn the runtime's features off.
  virtual void start(Runtime&, const node::StartValues& agreed) { (void)agreed; }
  /// After that collective, where the settings differ between ranks: stops what prepare()
  /// started and puts back what it changed in MPI (the runtime stays passive).
  virtual void abandon(Runtime&) {}
  /// At MPI_Finalize, before PMPI_Finalize, after in-flight work completed.
  virtual void stop(Runtime&) {}

  virtual int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  virtual int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  }
  virtual int bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  }
  virtual int barrier(MPI_Comm comm) { return PMPI_Barrier(comm); }

  /// Called by the interposed system calls and memory functions (io_interpose.cpp) before they
  /// use [p, p + n), and by generated MPI wrappers of class `local` for their pointers
  /// (ReleaseReason::mpi), only while g_guarded_calls is non-zero.  On return no page of the
  /// range may be protected or in flight.  For io and memory it may run in a signal handler
  /// (write() is async-signal-safe), on any thread, inside MPI: it must not allocate, lock, or
  /// call MPI.  For mpi it runs on an application thread outside MPI, and may lock and wait.
  virtual void release_range(const void* p, std::size_t n, ReleaseReason why) {
    (void)p, (void)n, (void)why;
  }
};

/// The mode of this library (defined once per library).
Mode& mode();

}  // namespace tnbc::shim
