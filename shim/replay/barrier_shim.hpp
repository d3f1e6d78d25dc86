// MPI_Barrier of libtnbc.so on shared memory (barrier/), per communicator.
//
// Once a communicator's MPICH barriers have cost a build (TNBC_BARRIER_AFTER=auto, the default:
// rent() in the .cpp, at its 10th call at the latest), or at its call TNBC_BARRIER_AFTER + 1, the
// ranks build, collectively, a CommBarrier cached on the communicator with an attribute (freed
// with it):
//
//   comm ──split_type(SHARED)──▶ node comm ──allgather NUMA nodes──▶ root (MinNumaDist)
//        root: removes segments of dead creators (once per process; docs/barrier.md),
//              shm_open(/tnbc-barrier-<pid ns>-<pid>-<random>, O_CREAT|O_EXCL, 0600),
//              places the global block
//        bcast name on node comm; others open + map; everybody places its own block
//        allreduce(ok, MIN) on node comm (all mapped) ──▶ root shm_unlink()s at once
//        several nodes: allreduce(ok, MIN) on comm; leaders comm = split(comm, node roots only)
//
// Failures anywhere (shm_open, mmap, ...) turn that communicator into a pass-through to
// PMPI_Barrier on every rank (the allreduce agrees), with one message.  Inter-communicators and
// TNBC_BARRIER_ALGO=mpich always pass through.
#pragma once

#include <mpi.h>

namespace tnbc::shim {
class Runtime;
}  // namespace tnbc::shim

namespace tnbc::shim::replay {

/// At mode start: reads the barrier settings and loads the topology (MPI_COMM_WORLD's barrier is
/// built as every other communicator's, and the statistics say "unused" until its first call).
void barrier_start(Runtime& rt);
/// At mode stop, before PMPI_Finalize: frees MPI_COMM_WORLD's barrier; later deletions of
/// cached barriers only unmap memory.
void barrier_stop(Runtime& rt);
/// MPI_Barrier(comm): the shared-memory barrier, or PMPI_Barrier where it does not apply.
int barrier(MPI_Comm comm);

}  // namespace tnbc::shim::replay
