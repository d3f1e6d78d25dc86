/* Shared by the application kernels bench/ft.c and bench/is.c: command line and the order in
 * which received blocks are read.  Each kernel prints its own closing machine-readable line,
 * "result kernel=… class=… ranks=… mode=… order=… iters=… … time_s=… comm_s=… checksum=…
 * verified=…", which tools/tnbc-bench parses by field name.
 *
 * Command line of both kernels:
 *   --class S|W|A              problem size (NPB-like classes; see each kernel's table)
 *   --iters N                  timed iterations (default: per class)
 *   --order natural|reverse|stride
 *                              order in which each rank reads the received blocks:
 *                              0,1,…,P-1 (as NPB does), P-1,…,0, or (3i+1) mod P (a fixed
 *                              permutation when gcd(3,P)=1, otherwise reverse)
 *   --mpi3                     hand-written MPI-3 version: MPI_Ialltoall(v) where the blocking
 *                              call was, MPI_Wait just before the received data is first read
 *   --page-aligned             send and receive buffers start on a page (default: malloc, as
 *                              most applications do, so the first and last page are partial) */
#ifndef TNBC_BENCH_KERNEL_UTIL_H
#define TNBC_BENCH_KERNEL_UTIL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refuse.h"

enum read_order { ORDER_NATURAL, ORDER_REVERSE, ORDER_STRIDE };

struct kernel_args {
  char cls;               /* 'S', 'W' or 'A' */
  int iters;              /* 0: the class default */
  enum read_order order;
  int mpi3;
  int page_aligned;
};

static const char *order_name(enum read_order o) {
  return o == ORDER_NATURAL ? "natural" : o == ORDER_REVERSE ? "reverse" : "stride";
}

/* Parses the command line; on a bad argument rank 0 prints usage and every rank exits 2. */
static struct kernel_args parse_kernel_args(int argc, char **argv, const char *kernel) {
  struct kernel_args a = {'S', 0, ORDER_NATURAL, 0, 0};
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--class") && v && strlen(v) == 1 && strchr("SWA", v[0])) {
      a.cls = v[0];
      i++;
    } else if (!strcmp(argv[i], "--iters") && v && atoi(v) > 0) {
      a.iters = atoi(v);
      i++;
    } else if (!strcmp(argv[i], "--order") && v &&
               (!strcmp(v, "natural") || !strcmp(v, "reverse") || !strcmp(v, "stride"))) {
      a.order = !strcmp(v, "natural") ? ORDER_NATURAL : !strcmp(v, "reverse") ? ORDER_REVERSE : ORDER_STRIDE;
      i++;
    } else if (!strcmp(argv[i], "--mpi3")) {
      a.mpi3 = 1;
    } else if (!strcmp(argv[i], "--page-aligned")) {
      a.page_aligned = 1;
    } else {
      bad = 1;
    }
  }
  if (bad) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bench_refuse(rank, "usage: %s [--class S|W|A] [--iters N] [--order natural|reverse|stride] [--mpi3] [--page-aligned]", kernel);
  }
  return a;
}

/* A buffer for MPI: page-aligned (rounded up to whole pages) or plain malloc. */
static void *comm_alloc(const struct kernel_args *a, size_t bytes) {
  if (!a->page_aligned) return malloc(bytes);
  return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

/* The block read in position i (0 <= i < p); the same on every rank, as in SPMD codes. */
static int block_at(enum read_order o, int i, int p) {
  if (o == ORDER_NATURAL) return i;
  if (o == ORDER_STRIDE && p % 3 != 0) return (3 * i + 1) % p;
  return p - 1 - i;
}

/* A reproducible 64-bit mix (splitmix64): data depends only on global index and iteration,
 * never on the rank count or the run. */
static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

#endif
