/* Preloaded after libtnbc.so by the tests to make every PMPI_Test slow: it sleeps
 * TNBCTEST_SLOW_TEST_US microseconds (unset or 0: not at all), then calls MPI's.  The progress
 * thread tests the decision's sums under its lock of them (shim/replay/engine/progress.cpp,
 * test_background), so the lock is then held most of the time while a sum is pending: a fork()
 * in that time hands the child the lock taken, which the child's exit must not wait for.
 *
 * It also makes the first PMPI_Testsome called off the main thread sleep
 * TNBCTEST_STALL_TESTSOME_MS milliseconds (unset or 0: not at all): the progress thread's, which
 * is then held inside one round, as one blocked in an MPI call or a page fault would be.  (Open
 * MPI calls PMPI_Testsome on the main thread too.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

typedef int (*testsome_fn)(int, MPI_Request*, int*, int*, MPI_Status*);

int PMPI_Testsome(int incount, MPI_Request* requests, int* outcount, int* indices, MPI_Status* statuses) {
  static testsome_fn next = NULL;
  static int calls = 0;
  if (next == NULL) next = (testsome_fn)dlsym(RTLD_NEXT, "PMPI_Testsome");
  const char* ms = getenv("TNBCTEST_STALL_TESTSOME_MS");
  const long n = ms != NULL ? strtol(ms, NULL, 10) : 0;
  if (n > 0 && gettid() != getpid() && calls++ == 0) {
    const struct timespec nap = {n / 1000, (n % 1000) * 1000000L};
    nanosleep(&nap, NULL);
  }
  return next(incount, requests, outcount, indices, statuses);
}
