/* is: an NPB IS-like kernel, integer bucket sort with MPI_Alltoall + MPI_Alltoallv per iteration.
 *
 * Algorithm:
 *   Idea: N keys in [0, MAXKEY), spread like NPB's (the mean of four uniform numbers, so middle
 *   ranks receive more); rank r owns the keys k with k·P/MAXKEY = r.
 *   Phases of each iteration:
 *     1. count the rank's keys per destination rank
 *     2. MPI_Alltoall of the counts (--mpi3: MPI_Ialltoall, overlapped with phase 3)
 *     3. pack the keys by destination (a counting-sort pass)
 *     4. MPI_Alltoallv of the keys (--mpi3: MPI_Ialltoallv)
 *     5. communication-unrelated computation: generate the next iteration's keys
 *     6. (--mpi3: MPI_Wait) ranking: read the received buckets one after another, in the order
 *        --order gives, into a histogram of the rank's key range — the communication-related part
 *     7. prefix sums give each key's rank; write the sorted keys, check they are sorted and add
 *        key · (global position + 1) to the checksum (global position from MPI_Exscan)
 *   Edge cases: a rank may receive no key; counts vary per iteration.
 *   Cost per iteration: 2·(P-1)·α + (P-1)/P · 4·N/P · β, O(N/P + MAXKEY/P) computation.
 *   Verification: local order, order across rank boundaries, every key accounted for, and an
 *   integer checksum (mod 2^64) that must be identical in plain, libtnbc.so and --mpi3 runs.
 *
 * Classes: S 2^20 keys (about 256 KiB per block on 4 ranks), W 2^22 (1 MiB), A 2^23 (2 MiB);
 * MAXKEY = 2^20. */
#include "kernel_util.h"

enum { kMaxKey = 1 << 20 };

static int key_value(uint64_t gidx, int iter) {
  uint64_t h = mix64(gidx * 2654435761ULL + (uint64_t)iter * 0x100000001b3ULL);
  /* four 16-bit uniforms, each scaled to [0, MAXKEY/4) */
  uint64_t sum = 0;
  for (int k = 0; k < 4; k++) sum += ((h >> (16 * k)) & 0xffff) * (kMaxKey / 4) >> 16;
  return (int)sum;
}

static void generate(int *keys, size_t n, uint64_t first, int iter) {
  for (size_t i = 0; i < n; i++) keys[i] = key_value(first + i, iter);
}

static int owner(int key, int p) { return (int)((int64_t)key * p / kMaxKey); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  struct kernel_args a = parse_kernel_args(argc, argv, "is");
  int log_n = a.cls == 'A' ? 23 : a.cls == 'W' ? 22 : 20;
  int iters = a.iters ? a.iters : 5;
  size_t total = (size_t)1 << log_n;
  size_t n = total / p;                 /* keys per rank (the remainder is dropped) */
  /* The rank's key range [lo, hi): the smallest keys with owner r and r+1. */
  int lo = (int)(((int64_t)rank * kMaxKey + p - 1) / p), hi = (int)(((int64_t)(rank + 1) * kMaxKey + p - 1) / p);

  int *keys = malloc(sizeof(int) * n);
  int *sendbuf = comm_alloc(&a, sizeof(int) * n);
  int *recvbuf = comm_alloc(&a, sizeof(int) * total);  /* a rank may receive up to every key */
  int *sorted = malloc(sizeof(int) * total);
  int *hist = malloc(sizeof(int) * (size_t)(hi - lo + 1));
  int *scount = calloc(p, sizeof(int)), *rcount = calloc(p, sizeof(int));
  int *sdispl = calloc(p, sizeof(int)), *rdispl = calloc(p, sizeof(int)), *fill = calloc(p, sizeof(int));

  uint64_t checksum = 0;
  long long keys_seen = 0;
  int ok = 1;
  double comm = 0;
  generate(keys, n, (uint64_t)rank * n, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++) {
    memset(scount, 0, sizeof(int) * p);                                   /* 1 */
    for (size_t i = 0; i < n; i++) scount[owner(keys[i], p)]++;
    double c0 = MPI_Wtime();                                              /* 2 */
    MPI_Request req = MPI_REQUEST_NULL;
    if (a.mpi3)
      MPI_Ialltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD, &req);
    else
      MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
    comm += MPI_Wtime() - c0;
    for (int d = 0; d < p; d++) sdispl[d] = d ? sdispl[d - 1] + scount[d - 1] : 0;  /* 3 */
    memcpy(fill, sdispl, sizeof(int) * p);
    for (size_t i = 0; i < n; i++) sendbuf[fill[owner(keys[i], p)]++] = keys[i];
    c0 = MPI_Wtime();                                                     /* 4 */
    if (a.mpi3) MPI_Wait(&req, MPI_STATUS_IGNORE);
    size_t received = 0;
    for (int s = 0; s < p; s++) rdispl[s] = (int)received, received += rcount[s];
    if (a.mpi3)
      MPI_Ialltoallv(sendbuf, scount, sdispl, MPI_INT, recvbuf, rcount, rdispl, MPI_INT, MPI_COMM_WORLD, &req);
    else
      MPI_Alltoallv(sendbuf, scount, sdispl, MPI_INT, recvbuf, rcount, rdispl, MPI_INT, MPI_COMM_WORLD);
    comm += MPI_Wtime() - c0;
    if (it + 1 < iters) generate(keys, n, (uint64_t)rank * n, it + 1);   /* 5 */
    if (a.mpi3) {                                                         /* 6 */
      double w0 = MPI_Wtime();
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      comm += MPI_Wtime() - w0;
    }
    memset(hist, 0, sizeof(int) * (size_t)(hi - lo + 1));
    for (int i = 0; i < p; i++) {
      int s = block_at(a.order, i, p);
      const int *b = recvbuf + rdispl[s];
      for (int j = 0; j < rcount[s]; j++) {
        int k = b[j];
        if (k < lo || k >= hi) ok = 0; else hist[k - lo]++;
      }
    }
    long long mine = (long long)received, offset = 0;                     /* 7 */
    MPI_Exscan(&mine, &offset, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) offset = 0;
    size_t pos = 0;
    for (int k = lo; k < hi; k++)
      for (int c = hist[k - lo]; c > 0; c--) sorted[pos++] = k;
    if (pos != received) ok = 0;
    for (size_t i = 0; i < pos; i++) {
      if (i && sorted[i - 1] > sorted[i]) ok = 0;
      checksum += (uint64_t)sorted[i] * (uint64_t)(offset + (long long)i + 1);
    }
    keys_seen += (long long)received;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double elapsed = MPI_Wtime() - t0;

  /* Keys are in disjoint, increasing ranges per rank (checked in phase 6), so local order is
   * global order; here: nothing lost, nothing invented, and the checksums summed. */
  uint64_t sum = 0;
  long long seen = 0;
  int all_ok = 0;
  MPI_Reduce(&checksum, &sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&keys_seen, &seen, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    int verified = all_ok && seen == (long long)n * p * iters;
    printf("result kernel=is class=%c ranks=%d mode=%s order=%s iters=%d keys=%zu "
           "buffers=%s time_s=%.6f comm_s=%.6f checksum=%016llx verified=%s\n",
           a.cls, p, a.mpi3 ? "mpi3" : "blocking", order_name(a.order), iters, n * p, a.page_aligned ? "page" : "malloc", elapsed, comm,
           (unsigned long long)sum, verified ? "yes" : "no");
  }
  free(keys), free(sendbuf), free(recvbuf), free(sorted), free(hist);
  free(scount), free(rcount), free(sdispl), free(rdispl), free(fill);
  MPI_Finalize();
  return 0;
}
