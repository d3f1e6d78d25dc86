/* Overlap micro-benchmark (the paper's Table 1): MPI_Alltoall followed by communication-unrelated
 * work (CURC, t_curc) and communication-related work (CRC: the blocks read in order, t_crc in
 * all, spread evenly over the blocks).  Work times are absolute (microseconds), so that runs with
 * and without the library do the same work; bench/overlap.py derives them from Tcomm.
 *
 *   overlap BLOCK_BYTES ITERS MODE CURC_US CRC_US [PARTS]
 *     MODE blocking  MPI_Alltoall (plain MPICH, or libtnbc.so when preloaded)
 *          mpi3      MPI_Ialltoall, MPI_Wait just before the first read (hand-written MPI-3)
 *          mpi3test  the same, with MPI_Test every OVERLAP_TEST_US (default 1000) microseconds
 *                    of the CURC work until the exchange completes (progress by hand, no thread)
 *     PARTS          CRC granularity: each block is read in PARTS equal parts, each part's
 *                    pages read before its share of work (default 1: whole blocks)
 *
 * Prints (rank 0): "result mode=… tcomm_us=… tinit_us=… total_us=… mean_us=… curc_us=… crc_us=…
 * helper_us=… late_us=… tests=…" where total is the median per-iteration time of alltoall + CURC + CRC, mean the
 * mean of the same (every call counts, a warm-up too), tinit the median time spent inside the
 * MPI_Alltoall call (blocking mode) or MPI_Ialltoall (mpi3 mode); each the slowest rank's;
 * helper the CPU time per iteration, mean over ranks, of threads other than the program's own
 * (libtnbc.so's progress thread, MPICH's asynchronous progress thread) over the timed loop,
 * late the largest over ranks of a rank's median lateness: how long after its deadline the last
 * share of work ended (a spinning rank that is off its core when the deadline passes sees it
 * only when it runs again; every configuration pays this on a full node, data or not), tests
 * the MPI_Test calls of mpi3test over the counted calls, summed over the ranks.
 *
 * Environment: OVERLAP_SLEEP=1 makes the work sleep (nanosleep) instead of spinning, which
 * leaves the cores to the progress threads (bench/overlap.py --free-cores).
 * OVERLAP_TIMELINE=1 prints, for the last iteration, when each rank started each block, how
 * long its reads waited and when it ended ("timeline rank=… block=… start_ms=… waited_ms=…",
 * "timeline rank=… end_ms=…", on stderr).
 * OVERLAP_ITER_TIMES=1 prints every timed iteration's total and time in the call, per rank
 * ("iter rank=… i=… total_ms=… init_ms=… late_ms=…", on stderr): where a run's mean comes from.
 * OVERLAP_COUNTS=is makes the collective an MPI_Alltoallv (MPI_Ialltoallv in mpi3 mode) with
 * bench/is's key spread: BLOCK_BYTES is the mean block, and every rank sends rank d the share of
 * its 4-byte keys that NPB IS's distribution (the mean of four uniform numbers) gives d's key
 * range, as tnbc-sim --op alltoallv assumes (tools/sim/alltoall.hpp, is_like_blocks); rank d
 * then reads BLOCK_BYTES' share of TCRC scaled by its block over the mean, as bench/is ranks
 * what it received.
 * OVERLAP_WARMUP=K makes K more calls of the timed loop ahead of the ITERS it counts (same work,
 * same reads; not in the medians, the mean or the helper CPU): every configuration's first calls
 * pay for connections and fresh pages, and the library's learn in them, so medians of ITERS
 * calls after K show the steady state (OVERLAP_ITER_TIMES numbers every call, warm-up first).
 * OVERLAP_SKIP_TCOMM=1 skips the Tcomm loop (ITERS + 2 exchanges read at once, from another
 * call site, before the timed loop; tcomm_us is then 0): the program is then just the timed
 * loop, one call site, as a library that learns from the program's own calls should see it.
 * Work is a spin on the clock that also reads one byte of every page of the part it works on,
 * so a guarded page makes it wait exactly as real code would.  Each share of work ends a fixed
 * time after the previous one ended (or after its data arrived, if the read had to wait), not
 * a fixed time after the spin began: ranks outnumber cores on small machines, and a rank
 * descheduled at the end of every share would otherwise add the scheduler's delays to the
 * total, once per share. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <math.h>
#include <time.h>

#include "refuse.h"
#include "thread_cpu.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

static volatile unsigned char sink;

static int sleep_work;

static void spin_until(double end) {
  if (sleep_work) {
    double left;
    while ((left = end - MPI_Wtime()) > 0) {
      struct timespec ts = {0, (long)(left * 1e9)};
      nanosleep(&ts, NULL);
    }
    return;
  }
  while (MPI_Wtime() < end) {
  }
}

/* mpi3test: the CURC work in slices of `every` seconds with MPI_Test on `req` between them
 * until it completes, as a program that drives MPI's progress by hand does; MPI_Test calls
 * made go to *tests. */
static void spin_testing(double end, double every, MPI_Request *req, long *tests) {
  int done = 0;
  for (double now = MPI_Wtime(); now < end; now = MPI_Wtime()) {
    spin_until(now + every < end ? now + every : end);
    if (!done) MPI_Test(req, &done, MPI_STATUS_IGNORE), ++*tests;
  }
}

/* A read that took longer than this waited for its data (a guarded page); shorter ones did
 * not, whatever the scheduler did meanwhile. */
#define WAITED_S 200e-6

/* The distribution function of the mean of four uniform numbers on [0, 1) (Irwin-Hall of order
 * 4, scaled by 1/4). */
static double mean4_cdf(double x) {
  static const double binom[] = {1, 4, 6, 4, 1};
  double y = 4 * (x < 0 ? 0 : x > 1 ? 1 : x), sum = 0;
  for (int k = 0; k <= 4 && k <= y; k++) sum += (k % 2 ? -1 : 1) * binom[k] * pow(y - k, 4);
  return sum / 24 > 1 ? 1 : sum / 24;
}

/* bench/is's blocks: out[d] = the bytes every rank sends rank d, `mean` on average. */
static void is_blocks(int p, size_t mean, size_t *out) {
  double keys = (double)mean * p / 4, below = 0;
  for (int d = 0; d < p; d++) {
    double upto = round(keys * mean4_cdf((double)(d + 1) / p));
    out[d] = 4 * (size_t)(upto - below);
    below = upto;
  }
}

static void touch(const unsigned char *p, size_t n) {
  unsigned char s = 0;
  for (size_t i = 0; i < n; i += 4096) s ^= p[i];
  if (n) s ^= p[n - 1];
  sink = s;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 6) {
    bench_refuse(rank, "usage: overlap BLOCK_BYTES ITERS blocking|mpi3|mpi3test CURC_US CRC_US [PARTS]");
  }
  size_t block = strtoul(argv[1], NULL, 10);
  int iters = atoi(argv[2]);
  const int testing = strcmp(argv[3], "mpi3test") == 0, mpi3 = testing || strcmp(argv[3], "mpi3") == 0;
  if (!mpi3 && strcmp(argv[3], "blocking") != 0)
    bench_refuse(rank, "overlap: MODE must be blocking, mpi3 or mpi3test, not %s", argv[3]);
  const char *te = getenv("OVERLAP_TEST_US");
  const double test_every = (te != NULL && *te ? atof(te) : 1000.0) * 1e-6;
  if (testing && !(test_every > 0))
    bench_refuse(rank, "overlap: OVERLAP_TEST_US must be a positive number of microseconds");
  long tests = 0;
  double t_curc = atof(argv[4]) * 1e-6, t_crc = atof(argv[5]) * 1e-6;
  int parts = argc > 6 ? atoi(argv[6]) : 1;
  if (parts < 1) parts = 1;
  const char *tl = getenv("OVERLAP_TIMELINE");
  int timeline = tl != NULL && strcmp(tl, "1") == 0;
  const char *it = getenv("OVERLAP_ITER_TIMES");
  int iter_times = it != NULL && strcmp(it, "1") == 0;
  const char *sw = getenv("OVERLAP_SLEEP");
  sleep_work = sw != NULL && strcmp(sw, "1") == 0;
  const char *wu = getenv("OVERLAP_WARMUP");
  int warmup = wu != NULL && *wu ? atoi(wu) : 0;
  if (warmup < 0 || iters < 1) bench_refuse(rank, "overlap: ITERS must be 1 or more and OVERLAP_WARMUP 0 or more");
  const char *co = getenv("OVERLAP_COUNTS");
  int is_counts = co != NULL && strcmp(co, "is") == 0;
  if (co != NULL && *co && !is_counts) bench_refuse(rank, "overlap: OVERLAP_COUNTS=%s: only 'is' is known", co);
  /* Per destination: bytes sent and where they start; received blocks are `mine` bytes each. */
  size_t *blocks = malloc(sizeof(size_t) * size), sent = 0;
  int *scount = malloc(sizeof(int) * size), *sdispl = malloc(sizeof(int) * size);
  int *rcount = malloc(sizeof(int) * size), *rdispl = malloc(sizeof(int) * size);
  if (is_counts) is_blocks(size, block, blocks);
  else for (int d = 0; d < size; d++) blocks[d] = block;
  size_t mine = blocks[rank];
  if (mine * (size_t)size > INT_MAX || (size_t)block * (size_t)size + 4 > INT_MAX)
    bench_refuse(rank, "overlap: BLOCK_BYTES x ranks must stay below 2 GiB (int displacements)");
  for (int d = 0; d < size; d++) {
    scount[d] = (int)blocks[d], sdispl[d] = (int)sent, sent += blocks[d];
    rcount[d] = (int)mine, rdispl[d] = (int)(mine * d);
  }
  /* This rank's TCRC: in proportion to its bytes (TCRC is the mean block's). */
  double t_crc_mine = sent > 0 ? t_crc * (double)mine * size / (double)sent : t_crc;
  size_t rbytes = mine * (size_t)size;
  unsigned char *s = malloc(sent ? sent : 1), *r = malloc(rbytes ? rbytes : 1);
  memset(s, rank + 1, sent);

  /* Tcomm: the exchange alone, no work after it, up to the point where every block has been
   * read (under libtnbc.so the call itself returns early). */
  const char *sk = getenv("OVERLAP_SKIP_TCOMM");
  const int tcomm_iters = sk != NULL && strcmp(sk, "1") == 0 ? 0 : iters + 2;
  double *t = malloc(sizeof(double) * (iters + 2));
  for (int i = 0; i < tcomm_iters; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (is_counts) MPI_Alltoallv(s, scount, sdispl, MPI_BYTE, r, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD);
    else MPI_Alltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    touch(r, rbytes);
    t[i] = MPI_Wtime() - t0;
  }
  double tcomm = tcomm_iters > 0 ? median(t + 2, iters) : 0, tcomm_max;
  MPI_Reduce(&tcomm, &tcomm_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  double *total = malloc(sizeof(double) * iters), *init = malloc(sizeof(double) * iters),
         *lateness = malloc(sizeof(double) * iters);
  double helper0 = 0; /* read when the counted calls begin */
  const int calls = warmup + iters;
  for (int c = 0; c < calls; c++) {
    const int i = c - warmup; /* the counted call's index; negative in the warm-up */
    if (c == warmup) helper0 = helper_cpu_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Request req;
    if (is_counts && mpi3) MPI_Ialltoallv(s, scount, sdispl, MPI_BYTE, r, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD, &req);
    else if (is_counts) MPI_Alltoallv(s, scount, sdispl, MPI_BYTE, r, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD);
    else if (mpi3) MPI_Ialltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD, &req);
    else MPI_Alltoall(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    double deadline = MPI_Wtime();
    const double in_call = deadline - t0;
    deadline += t_curc;
    long tests_before = tests;
    if (testing) spin_testing(deadline, test_every, &req, &tests);
    else spin_until(deadline);
    if (i < 0) tests = tests_before; /* the warm-up's tests are not counted */
    if (mpi3) {
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      double now = MPI_Wtime();
      if (now > deadline) deadline = now;
    }
    for (int b = 0; b < size; b++) {
      double w0 = MPI_Wtime(), waited = 0;
      for (int q = 0; q < parts; q++) {
        size_t lo = mine * q / parts, hi = mine * (q + 1) / parts;
        double p0 = MPI_Wtime();
        touch(r + (size_t)b * mine + lo, hi - lo);
        double p1 = MPI_Wtime();
        if (p1 - p0 > WAITED_S) {
          waited += p1 - p0;
          if (p1 > deadline) deadline = p1;
        }
        deadline += t_crc_mine / size / parts;
        spin_until(deadline);
      }
      if (timeline && i == iters - 1)
        fprintf(stderr, "timeline rank=%d block=%d start_ms=%.1f waited_ms=%.1f\n", rank, b,
                (w0 - t0) * 1e3, waited * 1e3);
    }
    const double end = MPI_Wtime(), took = end - t0;
    /* How long after its deadline the last share of work ended: the thread was off its core
       when the deadline passed (on a full node, another rank's turn), whatever the exchange. */
    const double late = end - deadline;
    if (i >= 0) total[i] = took, init[i] = in_call, lateness[i] = late;
    if (iter_times)
      fprintf(stderr, "iter rank=%d i=%d total_ms=%.2f init_ms=%.2f late_ms=%.2f\n", rank, c, took * 1e3, in_call * 1e3,
              late * 1e3);
    if (timeline && i == iters - 1)
      fprintf(stderr, "timeline rank=%d end_ms=%.1f\n", rank, took * 1e3);
  }
  double helper = (helper_cpu_s() - helper0) / iters, helper_sum;
  MPI_Reduce(&helper, &helper_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  /* The slowest rank decides. */
  double mean = 0, mean_max;
  for (int i = 0; i < iters; i++) mean += total[i] / iters;
  double tot = median(total, iters), tin = median(init, iters), tot_max, tin_max;
  double late = median(lateness, iters), late_max;
  MPI_Reduce(&late, &late_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&mean, &mean_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&tot, &tot_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&tin, &tin_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  long tests_all = 0;
  MPI_Reduce(&tests, &tests_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("result mode=%s block=%zu ranks=%d tcomm_us=%.0f tinit_us=%.0f total_us=%.0f mean_us=%.0f curc_us=%.0f crc_us=%.0f helper_us=%.0f late_us=%.0f tests=%ld\n",
           testing ? "mpi3test" : mpi3 ? "mpi3" : "blocking", block, size, tcomm_max * 1e6, tin_max * 1e6, tot_max * 1e6,
           mean_max * 1e6, t_curc * 1e6, t_crc * 1e6, helper_sum * 1e6 / size, late_max * 1e6, tests_all);
  free(s); free(r); free(t); free(total); free(init); free(lateness);
  free(blocks); free(scount); free(sdispl); free(rcount); free(rdispl);
  MPI_Finalize();
  return 0;
}
