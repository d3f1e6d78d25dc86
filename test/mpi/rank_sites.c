/* One MPI_Bcast called from a different place on the root than on the other ranks, as programs
 * do ("if (rank == root) { prepare; MPI_Bcast } else { MPI_Bcast; use }"): traced, the two call
 * sites get plan entries of their own, which a replaying library must not let shape the
 * messages differently on different ranks.  test/shim/replay/test_promises.py drives it.
 *
 *   rank_sites            1 MiB from rank 0, eight rounds; every rank prints a checksum and ok/BAD */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BYTES (1 << 20)
#define ROUNDS 8

static unsigned char value(int round, size_t k) { return (unsigned char)(round * 37 + k * 11 + (k >> 12)); }

__attribute__((noinline)) static void root_side(unsigned char* buf, int round) {
  for (size_t k = 0; k < BYTES; ++k) buf[k] = value(round, k);
  MPI_Bcast(buf, BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
}

__attribute__((noinline)) static void leaf_side(unsigned char* buf) {
  MPI_Bcast(buf, BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  unsigned char* buf = malloc(BYTES);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int round = 0; round < ROUNDS; ++round) {
    if (rank == 0) root_side(buf, round);
    else leaf_side(buf);
    uint64_t h = 1469598103934665603ull;
    int ok = 1;
    for (size_t k = 0; k < BYTES; ++k) {  /* read at once, front to back */
      h = (h ^ buf[k]) * 1099511628211ull;
      ok &= buf[k] == value(round, k);
    }
    printf("%d rank_sites %d %016llx %s\n", rank, round, (unsigned long long)h, ok ? "ok" : "BAD");
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
