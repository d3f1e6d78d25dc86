// libtnbc.so: replay mode.  Alltoall, Alltoallv and Bcast return early and finish in the
// background (replay.hpp, engine/engine.hpp); MPI_Barrier runs on shared memory (barrier_shim.hpp).
//
// Errors: no exception reaches the C caller.  One that escapes replay.cpp (memory exhausted
// beyond what TNBC_MAX_MEMORY bounds: the schedule's own vectors, an MPI object) is reported
// through the communicator's error handler, as MPICH reports its own failures: fatal by
// default, an error code under MPI_ERRORS_RETURN.  It is not turned into the blocking call:
// the other ranks may already exchange the engine's messages for this call, and a rank that
// ran the plain collective instead would leave them waiting for good.
#include <cstdio>
#include <exception>
#include <new>

#include "barrier_shim.hpp"
#include "shim/fence.hpp"
#include "shim/log.hpp"
#include "shim/mode.hpp"
#include "replay.hpp"
#include "shim/replay/decide/decide.hpp"

namespace tnbc::shim::replay {
namespace {

void drain_engine() { replay::drain(); }

/// Runs `call`; an exception becomes the communicator's error handler and an MPI error code.
template <typename F>
int reported(const char* what, MPI_Comm comm, F&& call) noexcept {
  int code = MPI_ERR_INTERN;
  char detail[160] = "unknown exception";  // a copy: the exception is gone after its handler
  try {
    return call();
  } catch (const std::bad_alloc&) {
    code = MPI_ERR_NO_MEM;
    std::snprintf(detail, sizeof detail, "out of memory");
  } catch (const std::exception& e) {
    std::snprintf(detail, sizeof detail, "%s", e.what());
  } catch (...) {
  }
  try {  // the message itself may not find memory
    log::warn("{}: the replay engine failed ({}); reported to the communicator's error handler", what,
              static_cast<const char*>(detail));
  } catch (...) {
  }
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

class ReplayMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc"; }
  int thread_level() const override { return MPI_THREAD_MULTIPLE; }

  void start(Runtime& rt) override {
    if (replay::start(rt)) set_drain_hook(drain_engine);
    barrier_start(rt);
    decide::set_trial_barrier(replay::barrier);
  }
  void stop(Runtime& rt) override {
    barrier_stop(rt);
    replay::stop(rt);
    set_drain_hook(nullptr);
  }

  int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm) override {
    return reported("MPI_Alltoall", comm, [&] {
      return replay::alltoall(runtime(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    });
  }
  int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                MPI_Datatype recvtype, MPI_Comm comm) override {
    return reported("MPI_Alltoallv", comm, [&] {
      return replay::alltoallv(runtime(), sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                               rdispls, recvtype, comm);
    });
  }
  int bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) override {
    return reported("MPI_Bcast", comm, [&] { return replay::bcast(runtime(), buffer, count, datatype, root, comm); });
  }
  int barrier(MPI_Comm comm) override { return replay::barrier(comm); }
  void release_range(const void* p, std::size_t n, ReleaseReason why) override {
    if (why == ReleaseReason::mpi) replay::complete_at(p);
    else replay::release_range(p, n, why == ReleaseReason::io);
  }
};

}  // namespace
}  // namespace tnbc::shim::replay

// The library's mode (shim/mode.hpp): one per library.
tnbc::shim::Mode& tnbc::shim::mode() {
  static tnbc::shim::replay::ReplayMode instance;
  return instance;
}
