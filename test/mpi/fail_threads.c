/* Preloaded beside libtnbc.so by the tests to make the library's thread starts fail on chosen
 * ranks: the paths where the system refuses the engine's progress thread (at MPI_Init, where the
 * ranks agree that the engine does not run, and at a later start, after the thread ended idle)
 * under real MPI processes.
 *
 *   TNBCTEST_FAIL_THREAD_RANKS  comma-separated world ranks that fail (PMI_RANK under MPICH's
 *                               launcher, OMPI_COMM_WORLD_RANK under Open MPI's)
 *   TNBCTEST_FAIL_THREAD_FROM   the first of the library's thread starts that fails, counted
 *                               from 1 (default 1: all)
 *
 * Only starts made from libtnbc*.so or from libstdc++ (std::thread, which the library uses) count
 * and fail, with EAGAIN, as under a process or thread limit; MPI's own threads start as usual. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "listed_rank.h"

/* Whether `caller` lies in the library or in libstdc++. */
static int from_library(const void* caller) {
  Dl_info info;
  if (dladdr(caller, &info) == 0 || info.dli_fname == NULL) return 0;
  const char* base = strrchr(info.dli_fname, '/');
  base = base != NULL ? base + 1 : info.dli_fname;
  return strncmp(base, "libtnbc", 7) == 0 || strncmp(base, "libstdc++", 9) == 0;
}

static int counted;  /* the library's starts so far (the library starts its threads one at a time) */

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  if (from_library(__builtin_return_address(0)) && rank_listed("TNBCTEST_FAIL_THREAD_RANKS")) {
    const char* from = getenv("TNBCTEST_FAIL_THREAD_FROM");
    const long first = from != NULL ? strtol(from, NULL, 10) : 1;
    if (++counted >= first) return EAGAIN;
  }
  int (*real)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) =
      (int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*))dlsym(RTLD_NEXT, "pthread_create");
  if (real == NULL) return ENOSYS;
  return real(thread, attr, start, arg);
}
