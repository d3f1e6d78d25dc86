/* How many collectives the preloaded library made while MPI_Init ran (its start), as counted by
 * count_collectives.so preloaded ahead of it; then one MPI_Allreduce of the program's, which the
 * library passes to PMPI_Allreduce and the counter must see (a counter that sees nothing would
 * report a start of no collectives).  Prints, on each rank:
 *   rank R start_collectives=N allreduce_counted=M */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int (*count)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "tnbctest_collectives");
  int rank = 0, one = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (count == NULL) {
    fprintf(stderr, "start_collectives: count_collectives.so is not preloaded\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int at_start = count();
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d start_collectives=%d allreduce_counted=%d\n", rank, at_start, count() - at_start);
  MPI_Finalize();
  return 0;
}
