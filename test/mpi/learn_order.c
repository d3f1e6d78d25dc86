/* Known read orders for replay mode's online learning (shim/replay/learn/learn.hpp), for
 * test/shim/replay/test_learn.py.
 *
 *   learn_order [ITERS [PHASE_AT]]
 *
 * Per iteration, two Alltoalls of 64 KiB blocks on MPI_COMM_WORLD from two call sites (one
 * key of the per-call decision, two sites to learn):
 *   site_fixed  reads the sources p-1 .. 0 (reverse), always
 *   site_phase  reads the sources 0 .. p-1 before iteration PHASE_AT (default ITERS / 2), then
 *               p-1 .. 0: the program's phase changes halfway
 * Between two blocks a rank waits ~300 us (LEARN_ORDER_PAUSE_US), so first touches are well
 * apart; with 10000 its reads leave room to overlap on the emulated cluster, with 0 it reads
 * its blocks at once (no pause at all).  LEARN_ORDER_FIRST_US pauses once more, that long,
 * between the call and the first read (default 0): with 30000 the data is read well after the
 * exchange (tnbc-order's verdict CURC).  Every rank prints
 * one checksum line per call; the test compares them with plain MPICH's.
 * LEARN_ORDER_ALLTOALLV=1 makes both calls MPI_Alltoallv, rank s sending rank r
 * (1 + (s + r) % 3) x 32 KiB: blocks of 32, 64 and 96 KiB, every rank receiving its own mix.
 * LEARN_ORDER_SENDRECV=N: after the iterations, N MPI_Sendrecv of 8 bytes around a ring (MPI
 * calls that a fence precedes), then one line per rank with their sum. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int rank, size;
static const size_t blk = 64 * 1024;
static int use_v;  /* LEARN_ORDER_ALLTOALLV=1 */
static long pause_between = 300;  /* LEARN_ORDER_PAUSE_US */
static long pause_first = 0;      /* LEARN_ORDER_FIRST_US */
static int *scount, *sdispl, *rcount, *rdispl;

static uint64_t read_block(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static void pause_us(long us) {
  if (us <= 0) return;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void fill(char *p, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (char)(rank * 131 + salt * 7 + i * 13);
}

static uint64_t read_in(const char *recv, int reverse) {
  uint64_t h = 0;
  pause_us(pause_first);
  for (int k = 0; k < size; k++) {
    int s = reverse ? size - 1 - k : k;
    h ^= read_block(recv + rdispl[s], (size_t)rcount[s]) + (uint64_t)s;
    pause_us(pause_between);
  }
  return h;
}

static void exchange(char *send, char *recv) {
  if (use_v) MPI_Alltoallv(send, scount, sdispl, MPI_BYTE, recv, rcount, rdispl, MPI_BYTE, MPI_COMM_WORLD);
  else MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
}

__attribute__((noinline)) uint64_t site_fixed(char *send, char *recv, int iter) {
  fill(send, blk * 2 * size, iter);
  exchange(send, recv);
  return read_in(recv, 1);
}

__attribute__((noinline)) uint64_t site_phase(char *send, char *recv, int iter, int later) {
  fill(send, blk * 2 * size, 1000 + iter);
  exchange(send, recv);
  return read_in(recv, later);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 40;
  int phase_at = argc > 2 ? atoi(argv[2]) : iters / 2;
  const char *v = getenv("LEARN_ORDER_ALLTOALLV");
  use_v = v != NULL && v[0] == '1';
  const char *pause = getenv("LEARN_ORDER_PAUSE_US");
  if (pause != NULL && pause[0] != '\0' && atol(pause) >= 0) pause_between = atol(pause);
  const char *first = getenv("LEARN_ORDER_FIRST_US");
  if (first != NULL && first[0] != '\0' && atol(first) >= 0) pause_first = atol(first);
  scount = malloc(sizeof(int) * size), sdispl = malloc(sizeof(int) * size);
  rcount = malloc(sizeof(int) * size), rdispl = malloc(sizeof(int) * size);
  for (int p = 0, so = 0, ro = 0; p < size; p++) {
    scount[p] = use_v ? (int)(blk / 2) * (1 + (rank + p) % 3) : (int)blk;
    rcount[p] = use_v ? (int)(blk / 2) * (1 + (p + rank) % 3) : (int)blk;
    sdispl[p] = so, so += scount[p];
    rdispl[p] = ro, ro += rcount[p];
  }
  /* At most 96 KiB per block: twice the Alltoall's 64 KiB is room enough. */
  char *send = malloc(blk * 2 * size), *recv = malloc(blk * 2 * size), *recv2 = malloc(blk * 2 * size);
  if (!send || !recv || !recv2) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int iter = 0; iter < iters; iter++) {
    printf("%d fixed %d %016llx\n", rank, iter, (unsigned long long)site_fixed(send, recv, iter));
    printf("%d phase %d %016llx\n", rank, iter,
           (unsigned long long)site_phase(send, recv2, iter, iter >= phase_at));
  }
  const char *sr = getenv("LEARN_ORDER_SENDRECV");
  const long ring = sr != NULL ? atol(sr) : 0;
  if (ring > 0) {
    uint64_t out = (uint64_t)rank, in = 0, sum = 0;
    for (long j = 0; j < ring; j++) {
      MPI_Sendrecv(&out, 1, MPI_UINT64_T, (rank + 1) % size, 7, &in, 1, MPI_UINT64_T, (rank + size - 1) % size, 7,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      sum += in;
      out = in + 1;
    }
    printf("%d ring %ld %016llx\n", rank, ring, (unsigned long long)sum);
  }
  free(send); free(recv); free(recv2);
  free(scount); free(sdispl); free(rcount); free(rdispl);
  MPI_Finalize();
  return 0;
}
