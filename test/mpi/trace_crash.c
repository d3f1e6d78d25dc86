/* A program that really crashes after a traced collective: it must still die by SIGSEGV. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t blk = 64 * 1024;
  char *s = malloc(blk * size), *r = malloc(blk * size);
  memset(s, rank, blk * size);
  MPI_Alltoall(s, (int)blk, MPI_BYTE, r, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  printf("%d first byte %d\n", rank, r[0]);
  fflush(stdout);
  if (rank == size - 1) {
    volatile int *p = NULL;
    *p = 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
