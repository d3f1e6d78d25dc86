/* Known read orders at four call sites, each called three times, for
 * test/tools/test_tnbc_order_e2e.py (tnbc-order on real traces).
 *
 *   site_reverse   Alltoall, 64 KiB blocks, read sources p-1 .. 0
 *   site_odd_first Alltoall, 32 KiB blocks, read the odd sources ascending, then the even ones
 *   site_units     Bcast of 1 MiB from rank 0 (16 units by default), read units (5k) % 16
 *   site_rotated   Alltoall, 32 KiB blocks, rank r reads sources (r + k) % p: the ranks disagree
 *
 * Each site is its own non-inlined function, so the innermost frame of its call site names it.
 * Every rank prints one checksum line per call.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;

static uint64_t read_block(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static void fill(char *p, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (char)(rank * 131 + salt * 7 + i * 13);
}

__attribute__((noinline)) uint64_t site_reverse(char *send, char *recv, int iter) {
  const size_t blk = 64 * 1024;
  fill(send, blk * size, iter);
  MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  uint64_t h = 0;
  for (int s = size - 1; s >= 0; s--) h ^= read_block(recv + s * blk, blk) + s;
  return h;
}

__attribute__((noinline)) uint64_t site_odd_first(char *send, char *recv, int iter) {
  const size_t blk = 32 * 1024;
  fill(send, blk * size, 10 + iter);
  MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  uint64_t h = 0;
  for (int s = 1; s < size; s += 2) h ^= read_block(recv + s * blk, blk) + s;
  for (int s = 0; s < size; s += 2) h ^= read_block(recv + s * blk, blk) + s;
  return h;
}

__attribute__((noinline)) uint64_t site_units(char *buf, int iter) {
  const size_t n = 1024 * 1024, u = n / 16;
  if (rank == 0) fill(buf, n, 20 + iter);
  MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
  uint64_t h = 0;
  for (int k = 0; k < 16; k++) h ^= read_block(buf + ((5 * k) % 16) * u, u) + k;
  return h;
}

__attribute__((noinline)) uint64_t site_rotated(char *send, char *recv, int iter) {
  const size_t blk = 32 * 1024;
  fill(send, blk * size, 30 + iter);
  MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  uint64_t h = 0;
  for (int k = 0; k < size; k++) {
    int s = (rank + k) % size;
    h ^= read_block(recv + s * blk, blk) + s;
  }
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t big = 64 * 1024;
  char *send = malloc(big * size), *recv = malloc(big * size), *recv2 = malloc(big * size);
  char *buf = malloc(1024 * 1024);
  for (int iter = 0; iter < 3; iter++) {
    printf("%d reverse %d %016llx\n", rank, iter, (unsigned long long)site_reverse(send, recv, iter));
    printf("%d odd %d %016llx\n", rank, iter, (unsigned long long)site_odd_first(send, recv2, iter));
    printf("%d units %d %016llx\n", rank, iter, (unsigned long long)site_units(buf, iter));
    printf("%d rotated %d %016llx\n", rank, iter, (unsigned long long)site_rotated(send, recv2, iter));
  }
  free(send); free(recv); free(recv2); free(buf);
  MPI_Finalize();
  return 0;
}
