/* An MPI_Alltoallv with one block over 2 GiB, for test/shim/replay/test_mpi_replay.py.
 *
 *   large_block
 *
 * Rank 0 sends rank 1 a block of 2 GiB + 4 KiB (as doubles, so that the count fits an int);
 * every other pair exchanges 1 KiB.  Only ranks 0 and 1 have the large block: a library that
 * sent it through the blocking call on those two ranks alone, and through its own messages on
 * the others, would hang.  Every rank prints one checksum of what it received. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int big = (int)((((size_t)1 << 31) + 4096) / sizeof(double)), small = 128;
  int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
  size_t st = 0, rt = 0;
  for (int p = 0; p < size; p++) {
    sc[p] = rank == 0 && p == 1 ? big : small;
    rc[p] = p == 0 && rank == 1 ? big : small;
    st += (size_t)sc[p], rt += (size_t)rc[p];
  }
  /* Displacements in elements must fit an int too: the large block goes last. */
  size_t off = 0;
  for (int p = 0; p < size; p++)
    if (sc[p] != big) sd[p] = (int)off, off += (size_t)sc[p];
  for (int p = 0; p < size; p++)
    if (sc[p] == big) sd[p] = (int)off, off += (size_t)sc[p];
  off = 0;
  for (int p = 0; p < size; p++)
    if (rc[p] != big) rd[p] = (int)off, off += (size_t)rc[p];
  for (int p = 0; p < size; p++)
    if (rc[p] == big) rd[p] = (int)off, off += (size_t)rc[p];
  double *s = malloc(sizeof(double) * st), *r = malloc(sizeof(double) * rt);
  if (!s || !r || !sc || !sd || !rc || !rd) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < st; i++) s[i] = (double)(rank * 1000003 + (int64_t)(i % 999983));
  MPI_Alltoallv(s, sc, sd, MPI_DOUBLE, r, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
  uint64_t h = 0;
  for (size_t i = 0; i < rt; i++) h = h * 31 + (uint64_t)(int64_t)r[i] + i;
  printf("%d %zu %016llx\n", rank, rt, (unsigned long long)h);
  free(s); free(r); free(sc); free(sd); free(rc); free(rd);
  MPI_Finalize();
  return 0;
}
