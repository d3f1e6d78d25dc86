/* A known read order of an MPI_Bcast buffer, for replay mode's online learning of Bcast
 * segment orders (shim/replay/learn/learn.hpp), for test/shim/replay/test_learn.py.
 *
 *   learn_bcast [ITERS [BYTES [split]]]
 *
 * Per iteration, one MPI_Bcast of BYTES (default 1 MiB) from rank 0 on MPI_COMM_WORLD; every
 * other rank reads the buffer in 16 equal parts from the last to the first, waiting ~300 us
 * between two parts, so the first touches of the units trace mode and learning cut the buffer
 * into (TNBC_TRACE_BCAST_UNITS, 16) come in reverse, well apart.  The root fills the buffer anew
 * each iteration.  All ranks call MPI_Bcast from one call site (bcast_site); with `split` the
 * root calls it from a site of its own (root_site), as a compiler that duplicates the call into
 * the root's branch would make it.  Every rank prints one checksum line per call; the test
 * compares them with plain MPICH's. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PARTS = 16 };

static uint64_t read_part(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

__attribute__((noinline)) void bcast_site(unsigned char *buf, size_t bytes) {
  MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

__attribute__((noinline)) void root_site(unsigned char *buf, size_t bytes) {
  MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  __asm__ volatile("" ::: "memory");  /* not folded into bcast_site */
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 40;
  size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : (size_t)1 << 20;
  int split = argc > 3 && strcmp(argv[3], "split") == 0;
  if (iters < 1 || bytes < PARTS || bytes > (size_t)1 << 30) {
    if (rank == 0) fprintf(stderr, "usage: learn_bcast [ITERS [BYTES [split]]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  unsigned char *buf = malloc(bytes);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int iter = 0; iter < iters; iter++) {
    if (rank == 0)
      for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)(iter * 31 + i * 7 + (i >> 12));
    if (split && rank == 0) root_site(buf, bytes);
    else bcast_site(buf, bytes);
    uint64_t h = 0;
    if (rank != 0)
      for (int k = PARTS - 1; k >= 0; k--) {
        size_t lo = bytes * (size_t)k / PARTS, hi = bytes * (size_t)(k + 1) / PARTS;
        h ^= read_part(buf + lo, hi - lo) + (uint64_t)k;
        pause_us(300);
      }
    else
      h = read_part(buf, bytes);
    printf("%d bcast %d %016llx\n", rank, iter, (unsigned long long)h);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
