// Replay mode's collectives (alltoall.cpp, bcast.cpp; each a Collective of call.hpp's run_call):
// decide, per call, between the plain blocking call and the engine, translate datatypes into
// bytes, and count what happened.
//
// Consistency rule: whether a call goes to the engine at all must be decided from facts that are
// the same on every rank (in-place, inter-communicator, the message size of Alltoall and Bcast,
// and the per-call decision of adapt/policy.hpp, agreed at points every rank reaches), because the
// engine's messages only match the engine's messages.  Facts that differ between
// ranks (buffer alignment, local datatypes, Alltoallv's local sizes) only decide whether this
// rank returns early or completes the engine's exchange before returning.
#pragma once

#include <mpi.h>

#include "shim/runtime.hpp"

namespace tnbc::shim::replay {

int alltoall(Runtime& rt, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int alltoallv(Runtime& rt, const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
              MPI_Datatype recvtype, MPI_Comm comm);
int bcast(Runtime& rt, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);

}  // namespace tnbc::shim::replay
