/* Many calls of the same collectives, so that libtnbc.so's per-call decision (shim/replay/adapt/policy.hpp)
 * switches between returning early and the blocking call mid-run, and back: every probe of a
 * path is a switch.  Prints one line per call with a checksum of what the rank received; the
 * test compares the lines with plain MPICH's.
 *
 *   adapt_switch [ITERS]
 *
 * Per iteration: an Alltoall on MPI_COMM_WORLD, reached through a call chain that differs
 * between even and odd ranks (the decision must not depend on call sites); the same on a dup
 * and on a split of MPI_COMM_WORLD (their own decisions); an Alltoallv with sizes that differ
 * by rank; a Bcast.  Every other iteration reads the data at once, the others compute first,
 * so the two paths cost differently over time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long sum(const unsigned char *p, size_t n) {
  unsigned long s = 0;
  for (size_t i = 0; i < n; i++) s = s * 31 + p[i];
  return s;
}

static volatile double sink;
static void compute(int rounds) {
  double x = 1.0;
  for (int i = 0; i < rounds * 100000; i++) x = x * 1.0000001 + 1e-9;
  sink = x;
}

static void fill(unsigned char *p, size_t n, int rank, int iter, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(rank * 7 + iter * 13 + salt + i * 3);
}

/* Two distinct call sites for the same collective. */
__attribute__((noinline)) static void a2a_even(void *s, void *r, int n, MPI_Comm c) {
  MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, c);
}
__attribute__((noinline)) static void a2a_odd(void *s, void *r, int n, MPI_Comm c) {
  MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, c);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iters = argc > 1 ? atoi(argv[1]) : 60;
  const int block = 64 * 1024;
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int hsize;
  MPI_Comm_size(half, &hsize);

  unsigned char *s = malloc((size_t)block * size), *r = malloc((size_t)block * size);
  unsigned char *b = malloc((size_t)block * 4);
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  /* Alltoallv: rank i sends (i + j + 1) * 16 KiB to rank j. */
  int stot = 0, rtot = 0;
  for (int j = 0; j < size; j++) {
    sc[j] = (rank + j + 1) * 16384, sd[j] = stot, stot += sc[j];
    rc[j] = (j + rank + 1) * 16384, rd[j] = rtot, rtot += rc[j];
  }
  unsigned char *vs = malloc(stot), *vr = malloc(rtot);

  for (int it = 0; it < iters; it++) {
    const int late = it % 2;
    fill(s, (size_t)block * size, rank, it, 1);
    if (rank % 2) a2a_odd(s, r, block, MPI_COMM_WORLD);
    else a2a_even(s, r, block, MPI_COMM_WORLD);
    if (late) compute(3);
    printf("%d world it=%d rank=%d sum=%lu\n", 0, it, rank, sum(r, (size_t)block * size));

    fill(s, (size_t)block * size, rank, it, 2);
    MPI_Alltoall(s, block, MPI_BYTE, r, block, MPI_BYTE, dup);
    if (!late) compute(2);
    printf("%d dup it=%d rank=%d sum=%lu\n", 1, it, rank, sum(r, (size_t)block * size));

    fill(s, (size_t)block * hsize, rank, it, 3);
    MPI_Alltoall(s, block, MPI_BYTE, r, block, MPI_BYTE, half);
    printf("%d half it=%d rank=%d sum=%lu\n", 2, it, rank, sum(r, (size_t)block * hsize));

    fill(vs, (size_t)stot, rank, it, 4);
    MPI_Alltoallv(vs, sc, sd, MPI_BYTE, vr, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    if (late) compute(2);
    printf("%d v it=%d rank=%d sum=%lu\n", 3, it, rank, sum(vr, (size_t)rtot));

    if (rank == it % size) fill(b, (size_t)block * 4, rank, it, 5);
    MPI_Bcast(b, block * 4, MPI_BYTE, it % size, MPI_COMM_WORLD);
    if (!late) compute(1);
    printf("%d bcast it=%d rank=%d sum=%lu\n", 4, it, rank, sum(b, (size_t)block * 4));
  }
  MPI_Comm_free(&dup);
  MPI_Comm_free(&half);
  free(s); free(r); free(b); free(vs); free(vr); free(sc); free(sd); free(rc); free(rd);
  MPI_Finalize();
  return 0;
}
