/* What a run pays before and after its work: MPI_Init, a first collective, MPI_Finalize.  A short
 * program (a few seconds, tens of calls) pays the library's fixed cost in full, whatever it
 * decides later.
 *
 *   startup [CALLS]
 *
 * Times (CLOCK_MONOTONIC, on every rank): MPI_Init (or MPI_Init_thread with MPI_THREAD_FUNNELED
 * when TNBC_BENCH_THREAD=1), then CALLS rounds (default 2) of an MPI_Barrier and an 8-byte
 * MPI_Alltoall on MPI_COMM_WORLD (their bytes checked), then MPI_Finalize.
 *
 * Prints (rank 0): "result ranks=… init_ms=… calls_ms=… finalize_ms=… total_ms=…", each the
 * largest over the ranks (finalize_ms: rank 0's own, measured after the others reported).
 * Exit 1 when a rank received a wrong byte. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
  const double t0 = now_ms();
  const char *thread = getenv("TNBC_BENCH_THREAD");
  if (thread != NULL && thread[0] == '1') {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  const double t1 = now_ms();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int calls = argc > 1 ? atoi(argv[1]) : 2;
  if (calls < 0) {
    if (rank == 0) fprintf(stderr, "usage: startup [CALLS]  (CALLS >= 0, default 2)\n");
    MPI_Finalize();
    return 2;
  }
  long *send = malloc(sizeof(long) * (size_t)size), *recv = malloc(sizeof(long) * (size_t)size);
  if (send == NULL || recv == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  int bad = 0;
  for (int c = 0; c < calls; ++c) {
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < size; ++p) send[p] = (long)rank * 1000003L + p * 17L + c;
    MPI_Alltoall(send, 1, MPI_LONG, recv, 1, MPI_LONG, MPI_COMM_WORLD);
    for (int p = 0; p < size; ++p)
      if (recv[p] != (long)p * 1000003L + rank * 17L + c) bad = 1;
  }
  const double t2 = now_ms();
  double mine[3] = {t1 - t0, t2 - t1, (double)bad}, most[3];
  MPI_Reduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  free(send);
  free(recv);
  MPI_Finalize();
  const double t3 = now_ms();
  if (rank == 0) {
    printf("result ranks=%d init_ms=%.2f calls_ms=%.2f finalize_ms=%.2f total_ms=%.2f\n", size,
           most[0], most[1], t3 - t2, t3 - t0);
    if (most[2] != 0) fprintf(stderr, "startup: a rank received a wrong byte\n");
  }
  return most[2] != 0 && rank == 0 ? 1 : 0;
}
