// libtnbc.so: replay mode.  Alltoall, Alltoallv and Bcast return early and finish in the
// background (replay.hpp, engine/engine.hpp); MPI_Barrier runs on shared memory (barrier_shim.hpp).
#include "barrier_shim.hpp"
#include "fence.hpp"
#include "mode.hpp"
#include "replay.hpp"

namespace tnbc::shim {
namespace {

void drain_engine() { Engine::instance().drain(); }

class ReplayMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc"; }
  int thread_level() const override { return MPI_THREAD_MULTIPLE; }

  void start(Runtime& rt) override {
    if (replay::start(rt)) set_drain_hook(drain_engine);
    barrier_start(rt);
  }
  void stop(Runtime& rt) override {
    barrier_stop(rt);
    replay::stop(rt);
    set_drain_hook(nullptr);
  }

  int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm) override {
    return replay::alltoall(runtime(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                MPI_Datatype recvtype, MPI_Comm comm) override {
    return replay::alltoallv(runtime(), sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                             rdispls, recvtype, comm);
  }
  int bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) override {
    return replay::bcast(runtime(), buffer, count, datatype, root, comm);
  }
  int barrier(MPI_Comm comm) override { return shim::barrier(comm); }
  void release_range(const void* p, std::size_t n, ReleaseReason) override {
    replay::release_range(p, n);
  }
};

}  // namespace

Mode& mode() {
  static ReplayMode instance;
  return instance;
}

}  // namespace tnbc::shim
