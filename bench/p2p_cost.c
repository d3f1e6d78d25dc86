/* What the wrappers add to small nonblocking point-to-point messages: each iteration every rank
 * posts an MPI_Irecv from its left neighbour and an MPI_Isend to its right one, then MPI_Waitall.
 * Under libtnbc.so both requests are recorded and forgotten (shim/requests.hpp).  With HOLD=1 a
 * persistent receive is held (inactive) throughout, so every wait takes the slow path.
 *
 *   mpiexec -n 2 [env LD_PRELOAD=libtnbc.so] build/bench/p2p_cost [ITERATIONS [HOLD]]
 *
 * Prints the slowest rank's time per iteration in microseconds (docs/measurements/p2p-cost.md). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "refuse.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = argc > 1 ? atoi(argv[1]) : 200000, hold = argc > 2 ? atoi(argv[2]) : 0;
  if (iterations <= 0) bench_refuse(rank, "p2p_cost: ITERATIONS must be a positive number");
  double out[2] = {rank, 1.0}, in[2] = {0, 0}, held = 0;
  MPI_Request keep = MPI_REQUEST_NULL;
  if (hold) MPI_Recv_init(&held, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &keep);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) {
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Irecv(in, 2, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(out, 2, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, st);
  }
  t = MPI_Wtime() - t;
  double slowest = 0;
  MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (hold) MPI_Request_free(&keep);
  if (rank == 0) printf("%.3f us per iteration (%d ranks, %d iterations%s)\n", slowest / iterations * 1e6, size,
                        iterations, hold ? ", a persistent request held" : "");
  MPI_Finalize();
  return 0;
}
