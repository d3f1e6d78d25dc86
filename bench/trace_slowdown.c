/* trace_slowdown: one Alltoall followed by reading all received data, repeated; prints the mean
 * time per iteration, so a plain run and a run under libtnbc_trace.so can be compared.
 * Usage: trace_slowdown <block bytes> [iterations] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t block = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
  int iters = argc > 2 ? atoi(argv[2]) : 50;
  char *s = malloc(block * size), *r = malloc(block * size);
  memset(s, rank + 1, block * size);
  double comm = 0, total = 0;
  long sum = 0;
  for (int it = -2; it < iters; it++) { /* two warm-up iterations */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Alltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    for (size_t i = 0; i < block * size; i += 64) sum += r[i];
    double t2 = MPI_Wtime();
    if (it >= 0) { comm += t1 - t0; total += t2 - t0; }
  }
  if (rank == 0)
    printf("block %zu iterations %d alltoall_us %.1f alltoall_plus_read_us %.1f (sum %ld)\n", block, iters,
           comm / iters * 1e6, total / iters * 1e6, sum);
  free(s); free(r);
  MPI_Finalize();
  return 0;
}
