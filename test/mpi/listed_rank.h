/* For the tests' failure interposers (fail_shm_open.c, fail_threads.c): whether this process's
 * world rank (PMI_RANK under MPICH's launcher, OMPI_COMM_WORLD_RANK under Open MPI's) is in the
 * comma-separated list in the variable `var`.  Before MPI_Init, from the launcher's environment. */
#pragma once
#include <stdlib.h>

static inline int rank_listed(const char* var) {
  const char* ranks = getenv(var);
  const char* me = getenv("PMI_RANK");
  if (me == NULL) me = getenv("OMPI_COMM_WORLD_RANK");
  if (ranks == NULL || me == NULL) return 0;
  const long mine = strtol(me, NULL, 10);
  for (const char* p = ranks; *p != '\0';) {
    char* end = NULL;
    const long r = strtol(p, &end, 10);
    if (end == p) return 0;
    if (r == mine) return 1;
    p = *end == ',' ? end + 1 : end;
  }
  return 0;
}
