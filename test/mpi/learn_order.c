/* Known read orders for replay mode's online learning (shim/learn.hpp), for
 * test/replay/test_learn.py.
 *
 *   learn_order [ITERS [PHASE_AT]]
 *
 * Per iteration, two Alltoalls of 64 KiB blocks on MPI_COMM_WORLD from two call sites (one
 * key of the per-call decision, two sites to learn):
 *   site_fixed  reads the sources p-1 .. 0 (reverse), always
 *   site_phase  reads the sources 0 .. p-1 before iteration PHASE_AT (default ITERS / 2), then
 *               p-1 .. 0: the program's phase changes halfway
 * Between two blocks a rank waits ~300 us, so first touches are well apart.  Every rank prints
 * one checksum line per call; the test compares them with plain MPICH's. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int rank, size;
static const size_t blk = 64 * 1024;

static uint64_t read_block(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void fill(char *p, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (char)(rank * 131 + salt * 7 + i * 13);
}

static uint64_t read_in(const char *recv, int reverse) {
  uint64_t h = 0;
  for (int k = 0; k < size; k++) {
    int s = reverse ? size - 1 - k : k;
    h ^= read_block(recv + s * blk, blk) + (uint64_t)s;
    pause_us(300);
  }
  return h;
}

__attribute__((noinline)) uint64_t site_fixed(char *send, char *recv, int iter) {
  fill(send, blk * size, iter);
  MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  return read_in(recv, 1);
}

__attribute__((noinline)) uint64_t site_phase(char *send, char *recv, int iter, int later) {
  fill(send, blk * size, 1000 + iter);
  MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  return read_in(recv, later);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 40;
  int phase_at = argc > 2 ? atoi(argv[2]) : iters / 2;
  char *send = malloc(blk * size), *recv = malloc(blk * size), *recv2 = malloc(blk * size);
  if (!send || !recv || !recv2) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int iter = 0; iter < iters; iter++) {
    printf("%d fixed %d %016llx\n", rank, iter, (unsigned long long)site_fixed(send, recv, iter));
    printf("%d phase %d %016llx\n", rank, iter,
           (unsigned long long)site_phase(send, recv2, iter, iter >= phase_at));
  }
  free(send); free(recv); free(recv2);
  MPI_Finalize();
  return 0;
}
