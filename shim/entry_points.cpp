// The MPI entry points written by hand: the `custom` functions of shim/mpi_functions.tsv.
//
// Each collective passes straight to PMPI when the runtime is not active (before MPI_Init,
// after MPI_Finalize, TNBC_DISABLE=1), when MPI itself is the caller (nested_in_mpi()), or when
// MPI would refuse its arguments (the checks below).  Otherwise it counts the call and hands it
// to the library's Mode.
#include "custom.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "fence.hpp"
#include "log.hpp"
#include "mode.hpp"
#include "mpi_own.hpp"
#include "requests.hpp"
#include "runtime.hpp"

// MPICH's mpi_f08 bindings call PMPI_Init, PMPI_Init_thread, PMPI_Finalize and PMPI_Query_thread
// themselves (the C MPI_ symbols only for calls with buffers), so under MPICH the libraries
// define those four as well: a `use mpi_f08` program is then set up, and its collectives caught,
// as a C program's.  This library's own calls go to MPI's definitions (mpi_own::).  Open MPI's
// Fortran bindings call PMPI_ for everything: there the libraries stay out of Fortran programs.
#if !defined(OMPI_MAJOR_VERSION)
#define TNBC_INTERPOSE_PMPI_INIT 1
#endif

namespace tnbc::shim {
namespace mpi_own {
#if TNBC_INTERPOSE_PMPI_INIT
namespace {
/// MPI's own definition of `name`: the next one after this library's.
template <class F>
F next(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) {
    log::warn("{} not found after this library: is MPI loaded?", name);
    std::abort();
  }
  F f;
  static_assert(sizeof f == sizeof p);
  std::memcpy(&f, &p, sizeof f);
  return f;
}
}  // namespace
int Init(int* argc, char*** argv) {
  static const auto f = next<int (*)(int*, char***)>("PMPI_Init");
  return f(argc, argv);
}
int Init_thread(int* argc, char*** argv, int required, int* provided) {
  static const auto f = next<int (*)(int*, char***, int, int*)>("PMPI_Init_thread");
  return f(argc, argv, required, provided);
}
int Finalize() {
  static const auto f = next<int (*)()>("PMPI_Finalize");
  return f();
}
int Query_thread(int* provided) {
  static const auto f = next<int (*)(int*)>("PMPI_Query_thread");
  return f(provided);
}
#else
int Init(int* argc, char*** argv) { return PMPI_Init(argc, argv); }
int Init_thread(int* argc, char*** argv, int required, int* provided) {
  return PMPI_Init_thread(argc, argv, required, provided);
}
int Finalize() { return PMPI_Finalize(); }
int Query_thread(int* provided) { return PMPI_Query_thread(provided); }
#endif
}  // namespace mpi_own

namespace custom {
namespace {

// Arguments MPI refuses with an error before it moves any data.  Such a call goes straight to
// PMPI, which reports the error through the communicator's error handler (MPI_ERRORS_RETURN:
// the code comes back to the program) exactly as without the library; the modes only ever see
// calls MPI would carry out.  (NULL count or displacement arrays are not checked: MPICH itself
// reads them.)
bool bad_comm(MPI_Comm comm) { return comm == MPI_COMM_NULL; }
bool bad_type(MPI_Datatype type) { return type == MPI_DATATYPE_NULL; }
bool intercomm(MPI_Comm comm) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return inter != 0;
}
bool bad_root(int root, MPI_Comm comm) {
  if (intercomm(comm)) return false;  // MPI_ROOT, MPI_PROC_NULL and remote ranks: MPI checks them
  int size = 0;
  PMPI_Comm_size(comm, &size);
  return root < 0 || root >= size;
}
/// The ranks an Alltoallv's count arrays name: the remote group's of an inter-communicator.
int peers(MPI_Comm comm) {
  int n = 0;
  if (intercomm(comm)) PMPI_Comm_remote_size(comm, &n);
  else PMPI_Comm_size(comm, &n);
  return n;
}
bool bad_counts(const int counts[], int n) {
  if (counts == nullptr) return false;
  for (int i = 0; i < n; ++i)
    if (counts[i] < 0) return true;
  return false;
}

bool refused_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm) {
  return bad_comm(comm) || recvcount < 0 || bad_type(recvtype) ||
         (sendbuf != MPI_IN_PLACE && (sendcount < 0 || bad_type(sendtype)));
}
bool refused_alltoallv(const void* sendbuf, const int sendcounts[], MPI_Datatype sendtype,
                       const int recvcounts[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (bad_comm(comm) || bad_type(recvtype) || (sendbuf != MPI_IN_PLACE && bad_type(sendtype))) return true;
  const int n = peers(comm);
  return bad_counts(recvcounts, n) || (sendbuf != MPI_IN_PLACE && bad_counts(sendcounts, n));
}
bool refused_bcast(int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bad_comm(comm) || count < 0 || bad_type(datatype) || bad_root(root, comm);
}

}  // namespace

int MPI_Init(int* argc, char*** argv) {
  MpiScope scope;
  const int level = runtime().thread_level_for(MPI_THREAD_SINGLE);
  int provided = MPI_THREAD_SINGLE;
  int rc = level == MPI_THREAD_SINGLE ? mpi_own::Init(argc, argv)
                                      : mpi_own::Init_thread(argc, argv, level, &provided);
  if (rc == MPI_SUCCESS) runtime().set_program_thread_level(MPI_THREAD_SINGLE);
  if (rc == MPI_SUCCESS) runtime().start();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  MpiScope scope;
  int rc = mpi_own::Init_thread(argc, argv, runtime().thread_level_for(required), provided);
  // The application sees the level it asked for (never less than MPI gave it): a mode that
  // needs more must not change what the application believes it runs with.
  if (rc == MPI_SUCCESS && *provided > required) *provided = required;
  if (rc == MPI_SUCCESS) runtime().set_program_thread_level(*provided);
  if (rc == MPI_SUCCESS) runtime().start();
  return rc;
}

// The level the application was given, not the one the mode asked for (MPI_Init_thread above).
int MPI_Query_thread(int* provided) {
  const int rc = mpi_own::Query_thread(provided);
  const int level = runtime().program_thread_level();
  if (rc == MPI_SUCCESS && level >= 0 && *provided > level) *provided = level;
  return rc;
}

int MPI_Finalize() {
  MpiScope scope;
  runtime().stop();
  return mpi_own::Finalize();
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi() ||
      refused_alltoall(sendbuf, sendcount, sendtype, recvcount, recvtype, comm))
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  MpiScope scope;
  runtime().stats().alltoall.count_call();
  return mode().alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi() ||
      refused_alltoallv(sendbuf, sendcounts, sendtype, recvcounts, recvtype, comm))
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  MpiScope scope;
  runtime().stats().alltoallv.count_call();
  return mode().alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi() || refused_bcast(count, datatype, root, comm))
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  MpiScope scope;
  runtime().stats().bcast.count_call();
  return mode().bcast(buffer, count, datatype, root, comm);
}

int MPI_Barrier(MPI_Comm comm) {
  if (!runtime().active() || nested_in_mpi() || bad_comm(comm)) return PMPI_Barrier(comm);
  MpiScope scope;
  runtime().stats().barrier_calls.fetch_add(1, std::memory_order_relaxed);
  return mode().barrier(comm);
}

}  // namespace custom
}  // namespace tnbc::shim

#if TNBC_INTERPOSE_PMPI_INIT
// The PMPI_ names MPICH's mpi_f08 bindings call (above).  A program that calls MPI_Init comes
// through custom::MPI_Init and never here; one that comes here is set up as it would be there.
// Its MPI_Start, waits and tests call PMPI_ too and pass unseen: its persistent requests count
// as active from their init on (shim/requests.hpp).
namespace {
/// Before MPI_Init's work: MPI_Start and the waits and tests pass unseen too.
void came_through_pmpi() { tnbc::shim::requests::assume_started(); }
/// After it, once the log level is known.
int said(int rc) {
  tnbc::log::debug("MPI initialised through PMPI_Init (a Fortran `use mpi_f08` program): set up as through MPI_Init");
  return rc;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) int PMPI_Init(int* argc, char*** argv) {
  came_through_pmpi();
  return said(tnbc::shim::custom::MPI_Init(argc, argv));
}
__attribute__((visibility("default"))) int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  came_through_pmpi();
  return said(tnbc::shim::custom::MPI_Init_thread(argc, argv, required, provided));
}
__attribute__((visibility("default"))) int PMPI_Finalize() { return tnbc::shim::custom::MPI_Finalize(); }
__attribute__((visibility("default"))) int PMPI_Query_thread(int* provided) {
  return tnbc::shim::custom::MPI_Query_thread(provided);
}
}  // extern "C"
#endif
