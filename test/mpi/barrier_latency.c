/* MPI_Barrier latency: `warmup` barriers (MPICH switches to its shared-memory barrier after a
 * few calls), then `iterations` timed ones; prints the mean microseconds per barrier, the
 * maximum over ranks.  usage: barrier_latency <iterations> [warmup]  (benchmark, not a test) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int iterations = argc > 1 ? atoi(argv[1]) : 10000;
  int warmup = argc > 2 ? atoi(argv[2]) : iterations / 10 + 100;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 0; i < warmup; i++) MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iterations; i++) MPI_Barrier(MPI_COMM_WORLD);
  double us = (MPI_Wtime() - start) * 1e6 / iterations, max_us = 0;
  MPI_Reduce(&us, &max_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%d %.3f\n", size, max_us);
  MPI_Finalize();
  return 0;
}
