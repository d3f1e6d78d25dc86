/* CPU time of the calling process, for the benchmarks that count what a library or MPI's own
 * progress thread costs beside the program's work (bench/curc.c, bench/overlap.c). */
#ifndef TNBC_BENCH_THREAD_CPU_H
#define TNBC_BENCH_THREAD_CPU_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* CPU time of this process, every thread, in seconds. */
static inline double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* CPU time of this process's threads other than the main one (a library's or MPI's progress
 * thread), in seconds, from /proc/self/task/TID/schedstat. */
static inline double helper_cpu_s(void) {
  DIR *d = opendir("/proc/self/task");
  double sum = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || atol(e->d_name) == (long)getpid()) continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f) {
      if (fscanf(f, "%llu", &ns) != 1) ns = 0;
      fclose(f);
    }
    sum += ns * 1e-9;
  }
  closedir(d);
  return sum;
}

#endif
