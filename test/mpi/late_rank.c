/* One rank arrives late at one call (test/shim/replay/test_mpi_replay.py: a decision point of
 * libtnbc.so's per-call decision there, whose vote the others post and complete without it; the
 * watchdog's report of a call that waits for a rank).
 *
 *   late_rank ITERS AT LATE_RANK SLEEP_MS [stop|stop-at-barrier]
 *
 * ITERS MPI_Alltoall calls of 64 KiB blocks on MPI_COMM_WORLD, each followed by a read of the
 * data and 20 ms of computation; rank LATE_RANK sleeps SLEEP_MS before call AT.  With `stop` it
 * is stopped instead, every thread of it, by SIGSTOP, which a child it forked first undoes with
 * SIGCONT after SLEEP_MS: to the others it is a rank that a debugger or a job scheduler halted.
 * With `stop-at-barrier` an MPI_Barrier on MPI_COMM_WORLD follows each call's computation, and
 * the rank is stopped (as with `stop`) before the barrier of call AT instead.
 * Every rank prints "R call K checksum S" of what each call gave it. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

static void sleep_ms(double ms) {
  const long long ns = (long long)(ms * 1e6);
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  nanosleep(&ts, NULL);
}

/* Stops this process (all its threads) for `ms`: a forked child sends SIGCONT after that long.
 * The child calls only async-signal-safe functions and leaves by _exit, so it touches no state
 * of MPI or of a preloaded library. */
static void stop_ms(double ms) {
  const pid_t self = getpid(), child = fork();
  if (child < 0) {
    perror("late_rank: fork");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (child == 0) {
    sleep_ms(ms);
    kill(self, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(child, NULL, 0);
}

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
  const char *mode = argc > 5 ? argv[5] : "";
  const int stop = strcmp(mode, "stop") == 0, at_barrier = strcmp(mode, "stop-at-barrier") == 0;
  if (argc < 5 || (argc > 5 && !stop && !at_barrier)) {
    if (rank == 0) fprintf(stderr, "usage: late_rank ITERS AT LATE_RANK SLEEP_MS [stop|stop-at-barrier]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int iters = atoi(argv[1]), at = atoi(argv[2]), late = atoi(argv[3]);
  const double late_ms = atof(argv[4]);
  const int block = 64 * 1024;
  unsigned char *s = malloc((size_t)block * size), *r = malloc((size_t)block * size);
  for (int i = 0; i < iters; i++) {
    for (size_t k = 0; k < (size_t)block * size; k++) s[k] = (unsigned char)(rank * 7 + i * 13 + k * 3);
    if (rank == late && i == at && !at_barrier) {
      if (stop)
        stop_ms(late_ms);
      else
        sleep_ms(late_ms);
    }
    MPI_Alltoall(s, block, MPI_BYTE, r, block, MPI_BYTE, MPI_COMM_WORLD);
    unsigned long sum = 0;
    for (size_t k = 0; k < (size_t)block * size; k++) sum = sum * 31 + r[k];
    printf("%d call %d checksum %lu\n", rank, i, sum);
    compute_ms(20);
    if (at_barrier) {
      if (rank == late && i == at) stop_ms(late_ms);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
