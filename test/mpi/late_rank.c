/* One rank arrives late at one call (test/shim/replay/test_mpi_replay.py: a decision point of
 * libtnbc.so's per-call decision there, whose vote the others post and complete without it).
 *
 *   late_rank ITERS AT LATE_RANK SLEEP_MS
 *
 * ITERS MPI_Alltoall calls of 64 KiB blocks on MPI_COMM_WORLD, each followed by a read of the
 * data and 20 ms of computation; rank LATE_RANK sleeps SLEEP_MS before call AT.  Every rank
 * prints "R call K checksum S" of what each call gave it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;

static void compute_ms(double ms) {
  const double end = MPI_Wtime() + ms / 1e3;
  double x = 1.0;
  while (MPI_Wtime() < end) x = x * 1.0000001 + 1e-9;
  sink = x;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 5) {
    if (rank == 0) fprintf(stderr, "usage: late_rank ITERS AT LATE_RANK SLEEP_MS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int iters = atoi(argv[1]), at = atoi(argv[2]), late = atoi(argv[3]);
  const double sleep_ms = atof(argv[4]);
  const int block = 64 * 1024;
  unsigned char *s = malloc((size_t)block * size), *r = malloc((size_t)block * size);
  for (int i = 0; i < iters; i++) {
    for (size_t k = 0; k < (size_t)block * size; k++) s[k] = (unsigned char)(rank * 7 + i * 13 + k * 3);
    if (rank == late && i == at) {
      const long long ns = (long long)(sleep_ms * 1e6);
      struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
      nanosleep(&ts, NULL);
    }
    MPI_Alltoall(s, block, MPI_BYTE, r, block, MPI_BYTE, MPI_COMM_WORLD);
    unsigned long sum = 0;
    for (size_t k = 0; k < (size_t)block * size; k++) sum = sum * 31 + r[k];
    printf("%d call %d checksum %lu\n", rank, i, sum);
    compute_ms(20);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
