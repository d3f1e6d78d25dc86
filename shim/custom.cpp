// Hand-written handlers of the `custom` functions of shim/mpi_functions.tsv.
//
// Each collective passes straight to PMPI when the runtime is not active (before MPI_Init,
// after MPI_Finalize, TNBC_DISABLE=1) or when MPI itself is the caller (nested_in_mpi()).
// Otherwise it counts the call and hands it to the library's Mode.
#include "custom.hpp"

#include "fence.hpp"
#include "mode.hpp"
#include "runtime.hpp"

namespace tnbc::shim::custom {

int MPI_Init(int* argc, char*** argv) {
  MpiScope scope;
  const int level = runtime().thread_level_for(MPI_THREAD_SINGLE);
  int provided = MPI_THREAD_SINGLE;
  int rc = level == MPI_THREAD_SINGLE ? PMPI_Init(argc, argv)
                                      : PMPI_Init_thread(argc, argv, level, &provided);
  if (rc == MPI_SUCCESS) runtime().start();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  MpiScope scope;
  int rc = PMPI_Init_thread(argc, argv, runtime().thread_level_for(required), provided);
  // The application sees the level it asked for (never less than MPI gave it): a mode that
  // needs more must not change what the application believes it runs with.
  if (rc == MPI_SUCCESS && *provided > required) *provided = required;
  if (rc == MPI_SUCCESS) runtime().start();
  return rc;
}

int MPI_Finalize() {
  MpiScope scope;
  runtime().stop();
  return PMPI_Finalize();
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi())
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  MpiScope scope;
  runtime().stats().alltoall.count_call();
  return mode().alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi())
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  MpiScope scope;
  runtime().stats().alltoallv.count_call();
  return mode().alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi())
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  MpiScope scope;
  runtime().stats().bcast.count_call();
  return mode().bcast(buffer, count, datatype, root, comm);
}

int MPI_Barrier(MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi()) return PMPI_Barrier(comm);
  MpiScope scope;
  runtime().stats().barrier_calls.fetch_add(1, std::memory_order_relaxed);
  return mode().barrier(comm);
}

}  // namespace tnbc::shim::custom
