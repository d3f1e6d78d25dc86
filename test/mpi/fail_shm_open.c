/* Preloaded beside libtnbc.so by the tests to make shm_open fail on chosen ranks, for segment
 * names with a chosen prefix: the failure paths of the engine's per-node turn counters
 * (shim/replay/engine/shadow.cpp, prepare_node) under real MPI processes.
 *
 *   TNBCTEST_FAIL_SHM_PREFIX  names that fail, e.g. "/tnbc-turns-" (unset: nothing fails)
 *   TNBCTEST_FAIL_SHM_RANKS   comma-separated world ranks that fail (PMI_RANK under MPICH's
 *                             launcher, OMPI_COMM_WORLD_RANK under Open MPI's)
 *
 * The failing call returns -1 with errno EACCES, as a /dev/shm without write permission would;
 * every other call goes to the C library's shm_open. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "listed_rank.h"

int shm_open(const char* name, int oflag, mode_t mode) {
  const char* prefix = getenv("TNBCTEST_FAIL_SHM_PREFIX");
  if (prefix != NULL && *prefix != '\0' && strncmp(name, prefix, strlen(prefix)) == 0 &&
      rank_listed("TNBCTEST_FAIL_SHM_RANKS")) {
    errno = EACCES;
    return -1;
  }
  int (*real)(const char*, int, mode_t) = (int (*)(const char*, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real(name, oflag, mode);
}
