/* An MPI program that uses a bit of everything: point-to-point, non-blocking, RMA, MPI-IO,
 * communicator management and the four intercepted collectives.  It prints one checksum line
 * per phase and rank, so a run under a tnbc library can be compared byte for byte with a plain
 * run.  Usage: mixed <scratch-file-for-MPI-IO> */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *file = argc > 1 ? argv[1] : "mixed.io";
  enum { N = 4096 };
  int *a = malloc(sizeof(int) * N * size), *b = malloc(sizeof(int) * N * size);
  for (int i = 0; i < N * size; i++) a[i] = rank * 1000003 + i;

  /* point-to-point: ring */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Sendrecv(a, N, MPI_INT, next, 1, b, N, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("%d p2p %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N));

  /* non-blocking */
  MPI_Request rq[2];
  MPI_Irecv(b, N, MPI_INT, prev, 2, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend(a + N, N, MPI_INT, next, 2, MPI_COMM_WORLD, &rq[1]);
  MPI_Status st[2];
  MPI_Waitall(2, rq, st);
  printf("%d nonblocking %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N));

  /* collectives */
  MPI_Alltoall(a, N, MPI_INT, b, N, MPI_INT, MPI_COMM_WORLD);
  printf("%d alltoall %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N * size));
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  for (int p = 0; p < size; p++) {
    sc[p] = 1 + (rank + p) % 7; sd[p] = p * N;
    rc[p] = 1 + (p + rank) % 7; rd[p] = p * N;
  }
  memset(b, 0, sizeof(int) * N * size);
  MPI_Alltoallv(a, sc, sd, MPI_INT, b, rc, rd, MPI_INT, MPI_COMM_WORLD);
  printf("%d alltoallv %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N * size));
  if (rank == 0) memcpy(b, a, sizeof(int) * N);
  MPI_Bcast(b, N, MPI_INT, 0, MPI_COMM_WORLD);
  printf("%d bcast %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N));
  MPI_Barrier(MPI_COMM_WORLD);

  /* communicator management */
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  MPI_Comm_dup(half, &dup);
  int hr, hs, total = 0;
  MPI_Comm_rank(dup, &hr);
  MPI_Comm_size(dup, &hs);
  MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, dup);
  printf("%d comms %d/%d %d\n", rank, hr, hs, total);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&half);

  /* RMA: fence epoch with a put, passive-target epoch with an accumulate and a get.  Only
   * completion is printed, not the data: Debian's MPICH 4.0.2 (ch4:ucx) returns wrong RMA data
   * on one node even without tnbc (pmodels/mpich#6110), so the data is no reference. */
  int *wbuf;
  MPI_Win win;
  MPI_Win_allocate(sizeof(int) * 2, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &wbuf, &win);
  MPI_Win_fence(0, win);
  int val[2] = {rank, rank * rank}, got[2];
  MPI_Put(val, 2, MPI_INT, next, 0, 2, MPI_INT, win);
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, prev, 0, win);
  MPI_Accumulate(val, 2, MPI_INT, prev, 0, 2, MPI_INT, MPI_SUM, win);
  MPI_Win_flush(prev, win);
  MPI_Get(got, 2, MPI_INT, prev, 0, 2, MPI_INT, win);
  MPI_Win_unlock(prev, win);
  MPI_Win_free(&win);
  printf("%d rma done\n", rank);

  /* MPI-IO: each rank writes its block, reads its neighbour's back */
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  MPI_File_write_at_all(fh, (MPI_Offset)rank * N * sizeof(int), a, N, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_sync(fh);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_File_read_at_all(fh, (MPI_Offset)next * N * sizeof(int), b, N, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  printf("%d io %016llx\n", rank, (unsigned long long)sum(b, sizeof(int) * N));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) MPI_File_delete(file, MPI_INFO_NULL);

  free(a); free(b); free(sc); free(sd); free(rc); free(rd);
  MPI_Finalize();
  return 0;
}
