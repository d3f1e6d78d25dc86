/* Fixed work after the call: MPI_Alltoall, then a fixed amount of computation that does not
 * touch the received data (CURC), then every received byte read.  The computation is a count
 * of loop iterations calibrated alone (`curc calibrate`), not a deadline: CPU time the library
 * takes from the program (a progress thread on a full node) makes the run longer, as it would
 * in a real program.  bench/never_slower.py runs it.
 *
 *   curc calibrate MS                     prints "loops_per_ms=N" (run it as 1 rank, alone)
 *   curc BLOCK_BYTES ITERS MODE LOOPS     MODE: blocking (MPI_Alltoall; plain MPICH, or
 *                                         libtnbc.so when preloaded), mpi3 (MPI_Ialltoall,
 *                                         the work, MPI_Wait, then the reads) or mpi3test (the
 *                                         same, with MPI_Test between slices of the work until
 *                                         the exchange completes: progress by hand, no thread)
 *                                         or none (no exchange at all: the same work and reads,
 *                                         the floor no way of communicating can beat; its
 *                                         checksum is of bytes no one sent)
 *
 * LOOPS = 0 reads the data at once after each call (back-to-back exchanges, as osu_alltoall
 * does).  Prints (rank 0): "result mode=… block=… ranks=… iters=… loops=… total_ms=…
 * per_iter_us=… cpu_per_iter_ms=… helper_cpu_per_iter_ms=… tests=… checksum=…": total the
 * slowest rank's time for all iterations after one warm-up; cpu_per_iter_ms the CPU time (user +
 * system, every thread: the program's, MPI's and a library's progress threads) of all ranks
 * together over the same iterations, divided by ITERS; helper_cpu_per_iter_ms the part of it on
 * threads other than the program's own (a library's or MPI's progress thread, from
 * /proc/self/task/TID/schedstat); tests the MPI_Test calls of mpi3test, warm-up included, summed
 * over the ranks (0 in the other modes); checksum a hash of every byte every rank received (the
 * same under every library).  The work is fixed, so CPU beyond plain MPICH's is what a library or
 * progress thread added.
 *
 * CURC_WAIT_MS=T: after the computation each rank waits T ms without using a core, as a program
 * waits for its I/O or an accelerator, before it reads the data (tools/demo uses it).
 *
 * CURC_TEST_LOOPS=N (mpi3test): loops of work between two MPI_Test calls (default LOOPS / 20;
 * bench/never_slower.py gives a millisecond's worth).
 *
 * CURC_SKEW_MS=T: every rank but 0 sleeps T ms before each call, so rank 0's call is in flight
 * with nothing to move for about T ms each time (what a progress thread costs while it waits;
 * bench/never_slower.py reads rank 0's statistics). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "refuse.h"
#include "thread_cpu.h"

static volatile double sink;

/* The computation: dependent floating-point operations, no memory traffic. */
static void work(long loops) {
  double x = 1.0, y = 0.5;
  for (long i = 0; i < loops; i++) {
    x = x * 0.999999 + y;
    y = y * 0.999998 + 1e-7;
  }
  sink = x + y;
}

/* The same work in slices of `slice` loops with MPI_Test on `req` between them, as a program that
 * drives MPI's progress by hand does, until the request completes (then the rest at once). */
static long tests; /* MPI_Test calls made (all iterations) */
static void work_testing(long loops, long slice, MPI_Request *req) {
  int done = 0;
  while (loops > 0) {
    long n = !done && slice < loops ? slice : loops;
    work(n);
    loops -= n;
    if (!done) MPI_Test(req, &done, MPI_STATUS_IGNORE), tests++;
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t hash(const unsigned char *p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, n - i >= 8 ? 8 : n - i);
    h = (h ^ v) * 0x100000001b3ull;
  }
  return h;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "calibrate") == 0) {
    /* No MPI: the calibration must not depend on it. */
    double ms = atof(argv[2]);
    long loops = 1 << 20;
    double t;
    for (;;) {
      double t0 = now();
      work(loops);
      t = now() - t0;
      if (t > ms * 1e-3) break;
      loops *= 2;
    }
    /* Best of five at that size: the machine's speed, not its noise. */
    for (int i = 0; i < 5; i++) {
      double t0 = now();
      work(loops);
      double ti = now() - t0;
      if (ti < t) t = ti;
    }
    printf("loops_per_ms=%.0f\n", loops / (t * 1e3));
    return 0;
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 5) bench_refuse(rank, "usage: curc BLOCK_BYTES ITERS blocking|mpi3|mpi3test|none LOOPS | curc calibrate MS");
  size_t block = strtoul(argv[1], NULL, 10);
  int iters = atoi(argv[2]);
  const char *mode = argv[3];
  int testing = strcmp(mode, "mpi3test") == 0, mpi3 = testing || strcmp(mode, "mpi3") == 0;
  int none = strcmp(mode, "none") == 0;
  long loops = atol(argv[4]);
  const char *test_env = getenv("CURC_TEST_LOOPS");
  long slice = test_env ? atol(test_env) : loops / 20 > 0 ? loops / 20 : 1;
  const char *bad = !mpi3 && !none && strcmp(mode, "blocking") != 0 ? "MODE must be blocking, mpi3, mpi3test or none"
                    : slice < 1                            ? "CURC_TEST_LOOPS must be 1 or more"
                                                           : NULL;
  if (bad != NULL) bench_refuse(rank, "curc: %s (MODE '%s')", bad, mode);
  const char *skew_env = getenv("CURC_SKEW_MS");
  double skew_ms = skew_env ? atof(skew_env) : 0;
  const char *wait_env = getenv("CURC_WAIT_MS");
  double wait_ms = wait_env ? atof(wait_env) : 0;
  unsigned char *s = malloc(block * size), *r = calloc(block * size, 1);
  uint64_t h = 0xcbf29ce484222325ull;
  double t0 = 0, c0 = 0, h0 = 0;
  for (int it = -1; it < iters; it++) {
    if (it == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      c0 = cpu_s();
      h0 = helper_cpu_s();
    }
    for (size_t i = 0; i < block * size; i += 512) s[i] = (unsigned char)(rank * 31 + it * 7 + i / 512);
    if (skew_ms > 0 && rank != 0) {
      struct timespec ts = {(time_t)(skew_ms / 1000), (long)(skew_ms * 1e6) % 1000000000L};
      nanosleep(&ts, NULL);
    }
    MPI_Request req;
    if (mpi3) MPI_Ialltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD, &req);
    else if (!none) MPI_Alltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    if (testing) work_testing(loops, slice, &req);
    else work(loops);
    if (wait_ms > 0) {
      struct timespec ts = {(time_t)(wait_ms / 1000), (long)(wait_ms * 1e6) % 1000000000L};
      nanosleep(&ts, NULL);
    }
    if (mpi3) MPI_Wait(&req, MPI_STATUS_IGNORE);
    h = hash(r, block * size, h);
  }
  double mine = MPI_Wtime() - t0, total, cpu = cpu_s() - c0, cpu_all, helper = helper_cpu_s() - h0, helper_all;
  MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&helper, &helper_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  long tests_all = 0;
  MPI_Reduce(&tests, &tests_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  uint64_t *all = rank == 0 ? malloc(sizeof(uint64_t) * size) : NULL;
  MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    uint64_t c = 0;
    for (int i = 0; i < size; i++) c = (c ^ all[i]) * 0x100000001b3ull;
    printf("result mode=%s block=%zu ranks=%d iters=%d loops=%ld total_ms=%.1f per_iter_us=%.0f cpu_per_iter_ms=%.1f helper_cpu_per_iter_ms=%.1f tests=%ld checksum=%016llx\n",
           mode, block, size, iters, loops, total * 1e3, total * 1e6 / iters, cpu_all * 1e3 / iters, helper_all * 1e3 / iters,
           tests_all, (unsigned long long)c);
    free(all);
  }
  free(s);
  free(r);
  MPI_Finalize();
  return 0;
}
