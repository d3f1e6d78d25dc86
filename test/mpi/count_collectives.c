/* Preloaded ahead of libtnbc.so by the tests: counts the collective PMPI calls that reach MPI
 * (the library calls PMPI_ by name; MPI's own internals do not), and passes each on.  The test
 * program start_collectives reads the count through tnbctest_collectives().
 *
 *   LD_PRELOAD="count_collectives.so libtnbc.so" mpiexec -n 4 start_collectives
 *
 * Counted: the blocking and nonblocking collectives a start could use, and the calls that make
 * or free a communicator or make a window (collective too). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_int g_count;

int tnbctest_collectives(void) { return atomic_load(&g_count); }

/* The next definition of `name` after this library's (MPI's), or an abort with a message. */
static void* next_fn(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    fprintf(stderr, "count_collectives: %s not found\n", name);
    abort();
  }
  return f;
}

#define COUNTED(name, params, args)                    \
  int name params {                                    \
    static int(*next) params = NULL;                   \
    if (next == NULL) next = (int(*) params)next_fn(#name); \
    atomic_fetch_add(&g_count, 1);                     \
    return next args;                                  \
  }

COUNTED(PMPI_Allgather, (const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c),
        (s, sc, st, r, rc, rt, c))
COUNTED(PMPI_Allreduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED(PMPI_Iallreduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
        (s, r, n, t, op, c, q))
COUNTED(PMPI_Iallgather,
        (const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q),
        (s, sc, st, r, rc, rt, c, q))
COUNTED(PMPI_Alltoall, (const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c),
        (s, sc, st, r, rc, rt, c))
COUNTED(PMPI_Bcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c))
COUNTED(PMPI_Barrier, (MPI_Comm c), (c))
COUNTED(PMPI_Ibarrier, (MPI_Comm c, MPI_Request* q), (c, q))
COUNTED(PMPI_Reduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c),
        (s, r, n, t, op, root, c))
COUNTED(PMPI_Gather, (const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm c),
        (s, sc, st, r, rc, rt, root, c))
COUNTED(PMPI_Comm_dup, (MPI_Comm c, MPI_Comm* out), (c, out))
COUNTED(PMPI_Comm_split, (MPI_Comm c, int color, int key, MPI_Comm* out), (c, color, key, out))
COUNTED(PMPI_Comm_split_type, (MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm* out), (c, type, key, info, out))
COUNTED(PMPI_Comm_create, (MPI_Comm c, MPI_Group g, MPI_Comm* out), (c, g, out))
COUNTED(PMPI_Comm_create_group, (MPI_Comm c, MPI_Group g, int tag, MPI_Comm* out), (c, g, tag, out))
COUNTED(PMPI_Allgatherv,
        (const void* s, int sc, MPI_Datatype st, void* r, const int rc[], const int rd[], MPI_Datatype rt, MPI_Comm c),
        (s, sc, st, r, rc, rd, rt, c))
COUNTED(PMPI_Alltoallv,
        (const void* s, const int sc[], const int sd[], MPI_Datatype st, void* r, const int rc[], const int rd[],
         MPI_Datatype rt, MPI_Comm c),
        (s, sc, sd, st, r, rc, rd, rt, c))
COUNTED(PMPI_Ibcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q), (b, n, t, root, c, q))
COUNTED(PMPI_Scan, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED(PMPI_Reduce_scatter_block, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
        (s, r, n, t, op, c))
COUNTED(PMPI_Comm_idup, (MPI_Comm c, MPI_Comm* out, MPI_Request* q), (c, out, q))
COUNTED(PMPI_Comm_free, (MPI_Comm* c), (c))
COUNTED(PMPI_Win_create, (void* base, MPI_Aint n, int unit, MPI_Info info, MPI_Comm c, MPI_Win* w),
        (base, n, unit, info, c, w))
COUNTED(PMPI_Win_allocate, (MPI_Aint n, int unit, MPI_Info info, MPI_Comm c, void* base, MPI_Win* w),
        (n, unit, info, c, base, w))
COUNTED(PMPI_Win_allocate_shared, (MPI_Aint n, int unit, MPI_Info info, MPI_Comm c, void* base, MPI_Win* w),
        (n, unit, info, c, base, w))
