/* What a communicator made, used once and freed costs: a program that duplicates communicators
 * (libraries that take a private communicator per object, pencil FFTs per transform) pays any
 * per-communicator setup of the library on every one.
 *
 *   comm_churn ROUNDS [BYTES]
 *
 * Each round: MPI_Comm_dup of MPI_COMM_WORLD, one MPI_Alltoall of BYTES per rank pair (default
 * 4096), one MPI_Bcast of BYTES from rank 0, one MPI_Barrier, MPI_Comm_free.  Every rank checks
 * what it received.  A barrier on MPI_COMM_WORLD starts and ends the timed rounds.
 *
 * Prints (rank 0): "result rounds=… ranks=… bytes=… total_s=… per_round_ms=… checksum=…".
 * Exit 1 when a rank received a wrong byte. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

static unsigned char pattern(int from, int to, int round, long i) {
  return (unsigned char)(from * 31 + to * 7 + round * 3 + i * 13 + 1);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rounds = argc > 1 ? atoi(argv[1]) : 0;
  const long bytes = argc > 2 ? atol(argv[2]) : 4096;
  if (rounds < 1 || bytes < 1 || bytes > (1L << 24)) {
    if (rank == 0) fprintf(stderr, "usage: comm_churn ROUNDS [BYTES]  (ROUNDS >= 1, BYTES 1..16777216)\n");
    MPI_Finalize();
    return 2;
  }
  unsigned char *send = malloc((size_t)bytes * (size_t)size), *recv = malloc((size_t)bytes * (size_t)size);
  unsigned char *buf = malloc((size_t)bytes);
  if (send == NULL || recv == NULL || buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  int bad = 0;
  unsigned long long checksum = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int r = 0; r < rounds; ++r) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int to = 0; to < size; ++to)
      for (long i = 0; i < bytes; ++i) send[(long)to * bytes + i] = pattern(rank, to, r, i);
    MPI_Alltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm);
    for (int from = 0; from < size; ++from)
      for (long i = 0; i < bytes; ++i) {
        const unsigned char got = recv[(long)from * bytes + i];
        bad |= got != pattern(from, rank, r, i);
        checksum += got;
      }
    if (rank == 0)
      for (long i = 0; i < bytes; ++i) buf[i] = pattern(0, 0, r + 1, i);
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, comm);
    for (long i = 0; i < bytes; ++i) bad |= buf[i] != pattern(0, 0, r + 1, i);
    MPI_Barrier(comm);
    MPI_Comm_free(&comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double total = MPI_Wtime() - t0;
  int any_bad = 0;
  MPI_Reduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  unsigned long long sum = 0;
  MPI_Reduce(&checksum, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("result rounds=%d ranks=%d bytes=%ld total_s=%.3f per_round_ms=%.3f checksum=%llu\n", rounds, size, bytes,
           total, 1e3 * total / rounds, sum);
    if (any_bad) fprintf(stderr, "comm_churn: a rank received a wrong byte\n");
  }
  free(send), free(recv), free(buf);
  MPI_Finalize();
  return rank == 0 && any_bad ? 1 : 0;
}
