/* Refusing a bad command line or setting in the MPI micro-benchmarks.
 *
 * bench_refuse(): rank 0 prints the message on stderr, then every rank leaves MPI and exits 2.
 * Call it on every rank (the arguments and settings are the same on all of them).  MPI_Abort
 * would be wrong here: it ends the job as soon as any rank reaches it, and the launcher may kill
 * rank 0 before it has forwarded rank 0's line -- the run then fails with no word of why (an
 * MPI_Barrier before the abort does not help: it orders the calls, not the forwarding). */
#ifndef TNBC_BENCH_REFUSE_H
#define TNBC_BENCH_REFUSE_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((format(printf, 2, 3), noreturn)) static void bench_refuse(int rank, const char *fmt, ...) {
  if (rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
  }
  MPI_Finalize();
  exit(2);
}

#endif
