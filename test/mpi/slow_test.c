/* Preloaded after libtnbc.so by the tests to make every PMPI_Test slow: it sleeps
 * TNBCTEST_SLOW_TEST_US microseconds (unset or 0: not at all), then calls MPI's.  The progress
 * thread tests the decision's sums under its lock of them (shim/replay/engine/progress.cpp,
 * test_background), so the lock is then held most of the time while a sum is pending: a fork()
 * in that time hands the child the lock taken, which the child's exit must not wait for. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

typedef int (*test_fn)(MPI_Request*, int*, MPI_Status*);

int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  static test_fn next = NULL;
  if (next == NULL) next = (test_fn)dlsym(RTLD_NEXT, "PMPI_Test");
  const char* us = getenv("TNBCTEST_SLOW_TEST_US");
  const long n = us != NULL ? strtol(us, NULL, 10) : 0;
  if (n > 0) {
    const struct timespec nap = {n / 1000000, (n % 1000000) * 1000L};
    nanosleep(&nap, NULL);
  }
  return next(request, flag, status);
}
