/* Cluster sanity check: every rank prints its processor name, then rank 0 sends BYTES (default
 * 16 MiB) to the first rank of the other node (rank PPN) and rank 0 prints the measured rate:
 *   name <rank> <processor name>
 *   rate_mbit <megabits per second>
 * Usage: netcheck PPN [BYTES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(name, &len);
  printf("name %d %s\n", rank, name);
  fflush(stdout);
  int ppn = argc > 1 ? atoi(argv[1]) : 1;
  long bytes = argc > 2 ? atol(argv[2]) : 16L << 20;
  char *buf = calloc(1, bytes);
  int peer = ppn < size ? ppn : size - 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && peer != 0) {
    MPI_Send(buf, 1, MPI_CHAR, peer, 0, MPI_COMM_WORLD); /* connection set-up, not timed */
    MPI_Recv(buf, 1, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t = MPI_Wtime();
    MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
    MPI_Recv(buf, 1, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t = MPI_Wtime() - t;
    printf("rate_mbit %.1f\n", bytes * 8.0 / t / 1e6);
  } else if (rank == peer && peer != 0) {
    MPI_Recv(buf, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    MPI_Recv(buf, (int)bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
