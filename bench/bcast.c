/* MPI_Bcast read at once: the time until every rank has read the whole buffer (bench/sim_bcast.py
 * compares it with tnbc-sim --op bcast, which predicts the same quantity).
 *
 *   bcast BYTES ITERS [ROOT]
 *
 * Each iteration: MPI_Barrier, then MPI_Bcast of BYTES from ROOT (default 0), then every byte
 * of the buffer read (under libtnbc.so a read waits for the pages still on their way).  The
 * iteration's time is the slowest rank's, from the barrier to the end of its read.  The root
 * writes a pattern that changes with the iteration, and every rank checks what it read.
 *
 * Prints (rank 0): "result bytes=… ranks=… root=… median_us=… min_us=… checksum=…" where the
 * median and min are over the iterations of the slowest rank's time, the first (warm-up)
 * iteration left out when there are more than one.  Exit 1 when a rank read a wrong byte. */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "refuse.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static unsigned char pattern(size_t i, int iter) { return (unsigned char)(i * 131u + (unsigned)iter * 7u + 1u); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) bench_refuse(rank, "usage: bcast BYTES ITERS [ROOT]");
  const long long bytes_arg = atoll(argv[1]);
  const int iters = atoi(argv[2]);
  const int root = argc > 3 ? atoi(argv[3]) : 0;
  if (bytes_arg < 1 || bytes_arg > 2147483647LL || iters < 1 || root < 0 || root >= size)
    bench_refuse(rank, "bcast: BYTES 1..2^31-1, ITERS >= 1, ROOT a rank");
  const size_t bytes = (size_t)bytes_arg;
  unsigned char *buf = malloc(bytes);
  double *t = malloc(sizeof *t * (size_t)iters), *slowest = malloc(sizeof *t * (size_t)iters);
  if (!buf || !t || !slowest) MPI_Abort(MPI_COMM_WORLD, 3);
  uint64_t checksum = 0;
  int bad = 0;
  for (int it = 0; it < iters; it++) {
    if (rank == root)
      for (size_t i = 0; i < bytes; i++) buf[i] = pattern(i, it);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes; i++) {
      sum += buf[i];
      bad |= buf[i] != pattern(i, it);
    }
    t[it] = MPI_Wtime() - t0;
    checksum = checksum * 31 + sum;
  }
  MPI_Reduce(t, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int any_bad = 0;
  MPI_Reduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const int skip = iters > 1;
    qsort(slowest + skip, (size_t)(iters - skip), sizeof *slowest, cmp);
    printf("result bytes=%zu ranks=%d root=%d median_us=%.1f min_us=%.1f checksum=%016llx%s\n", bytes, size, root,
           slowest[skip + (iters - skip) / 2] * 1e6, slowest[skip] * 1e6, (unsigned long long)checksum,
           any_bad ? " WRONG" : "");
  }
  free(buf);
  free(t);
  free(slowest);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
