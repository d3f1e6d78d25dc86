/* Alltoalls with idle time between them: each rank sleeps after every call, as a program that
 * waits for I/O or another device would.  libtnbc.so's decision posts its sums after a call
 * (shim/replay/adapt/tally.hpp) and needs them at the key's next call; its progress thread
 * completes them in between (shim/replay/engine/background.hpp), which the test reads from the
 * statistics.  Prints one checksum line per call and rank; the test compares them with plain
 * MPICH's.  With FORK 1 each rank fork()s right after every call, while the progress thread may
 * be testing the sum just posted, and waits for the child, which exits at once through exit()
 * (the libraries' exit handlers and static destructors run in it).
 *
 *   sums_idle [CALLS] [SLEEP_MS] [FORK] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long sum(const unsigned char *p, size_t n) {
  unsigned long s = 0;
  for (size_t i = 0; i < n; i++) s = s * 31 + p[i];
  return s;
}

int main(int argc, char **argv) {
  const int calls = argc > 1 ? atoi(argv[1]) : 16;
  const int sleep_ms = argc > 2 ? atoi(argv[2]) : 50;
  const int forks = argc > 3 ? atoi(argv[3]) : 0;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t block = 256 * 1024;
  unsigned char *s = malloc(block * (size_t)size), *r = malloc(block * (size_t)size);
  if (s == NULL || r == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  const struct timespec nap = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
  for (int c = 0; c < calls; c++) {
    for (size_t i = 0; i < block * (size_t)size; i++) s[i] = (unsigned char)(rank * 7 + c * 13 + i * 3);
    MPI_Alltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    printf("%d %d %lu\n", c, rank, sum(r, block * (size_t)size));
    if (forks) {
      fflush(stdout);  /* the child's exit must not print the parent's buffered lines again */
      const pid_t child = fork();
      if (child < 0) MPI_Abort(MPI_COMM_WORLD, 3);
      if (child == 0) exit(0);
      int status = 0;
      if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    nanosleep(&nap, NULL);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
