/* Checks the barrier property of MPI_Barrier across processes: before barrier k every rank
 * stores k in its slot of a shared-memory window (MPI_Win_allocate_shared, direct load/store),
 * after it every rank must see every slot >= k (all entered) and <= k+1 (none ran two ahead).
 * Runs on MPI_COMM_WORLD, on the two halves of MPI_COMM_WORLD split by rank parity (in
 * reversed order), and barriers on an inter-communicator between the halves (pass-through).
 *
 * usage: barrier_check <iterations> [nobarrier]
 *   nobarrier: skip the barrier (the check must then fail: proves the test can fail).
 * Prints "barrier_check ok <comm> <size> <iterations>" per communicator; exit 1 on violation. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_comm(MPI_Comm comm, const char *label, int iterations, int skip) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size;
  MPI_Comm_size(node, &node_size);
  if (node_size != size) { /* the check needs one node; multi-node runs skip it */
    MPI_Comm_free(&node);
    return 0;
  }
  MPI_Win win;
  int *mine;
  MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, node, &mine, &win);
  int **slot = malloc(sizeof(int *) * size);
  for (int r = 0; r < size; r++) {
    MPI_Aint bytes;
    int unit;
    MPI_Win_shared_query(win, r, &bytes, &unit, &slot[r]);
  }
  __atomic_store_n(mine, 0, __ATOMIC_SEQ_CST);
  MPI_Barrier(comm);
  unsigned seed = 12345u + (unsigned)rank;
  long bad = 0;
  for (int k = 1; k <= iterations; k++) {
    if (rand_r(&seed) % 50 == 0) usleep(50 * (unsigned)(rank + 1));
    __atomic_store_n(mine, k, __ATOMIC_SEQ_CST);
    if (!skip) MPI_Barrier(comm);
    for (int r = 0; r < size; r++) {
      int seen = __atomic_load_n(slot[r], __ATOMIC_SEQ_CST);
      if (seen < k || seen > k + 1) {
        if (bad < 3)
          fprintf(stderr, "rank %d (%s): after barrier %d rank %d is at %d\n", rank, label, k, r,
                  seen);
        bad++;
      }
    }
  }
  /* Leave the window only when everybody finished reading it. */
  PMPI_Barrier(comm);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  free(slot);
  long total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, comm);
  if (total) return 1;
  if (rank == 0) printf("barrier_check ok %s %d %d\n", label, size, iterations);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int iterations = argc > 1 ? atoi(argv[1]) : 1000;
  int skip = argc > 2 && strcmp(argv[2], "nobarrier") == 0;
  int rank, size, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  failed |= check_comm(MPI_COMM_WORLD, "world", iterations, skip);

  /* Sub-communicator: two halves by rank parity, reversed order so local rank 0 is not world
   * rank 0. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
  failed |= check_comm(half, rank % 2 ? "odd" : "even", iterations, skip);

  /* Inter-communicator between the halves: MPI_Barrier passes through to MPICH. */
  if (size >= 2) {
    MPI_Comm inter;
    /* Each half's leader (local rank 0) is its highest world rank (key size - rank). */
    int other = 1 - rank % 2, remote_leader = other;
    while (remote_leader + 2 < size) remote_leader += 2;
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, remote_leader, 7, &inter);
    for (int i = 0; i < 10; i++) MPI_Barrier(inter);
    MPI_Comm_free(&inter);
    if (rank == 0) printf("barrier_check ok inter\n");
  }
  MPI_Comm_free(&half);

  /* A communicator freed and created again: the cached barrier goes with it. */
  for (int i = 0; i < 3; i++) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Barrier(dup);
    MPI_Barrier(dup);
    MPI_Comm_free(&dup);
  }
  MPI_Finalize();
  return failed;
}
