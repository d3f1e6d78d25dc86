/* A program with its own SIGSEGV handler, installed before MPI_Init: under libtnbc_trace.so it
 * must still receive the faults that are its own, while faults on traced buffers are not passed
 * to it.  Prints "own handler: N" (N = faults it saw; 1 expected). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *own_page;
static volatile sig_atomic_t seen = 0;

static void handler(int sig, siginfo_t *info, void *ctx) {
  (void)sig; (void)ctx;
  long ps = sysconf(_SC_PAGESIZE);
  if ((char *)info->si_addr >= own_page && (char *)info->si_addr < own_page + ps) {
    seen++;
    mprotect(own_page, ps, PROT_READ | PROT_WRITE);
    return;
  }
  _exit(42); /* a fault this program did not expect */
}

int main(int argc, char **argv) {
  long ps = sysconf(_SC_PAGESIZE);
  own_page = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);

  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t blk = 64 * 1024;
  char *s = malloc(blk * size), *r = malloc(blk * size);
  memset(s, rank, blk * size);
  MPI_Alltoall(s, (int)blk, MPI_BYTE, r, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
  long sum = 0;
  for (size_t i = 0; i < blk * size; i++) sum += r[i]; /* traced pages: not this handler's */
  mprotect(own_page, ps, PROT_NONE);
  own_page[1] = 1; /* this program's own protected page */
  printf("%d own handler: %d sum %ld\n", rank, (int)seen, sum);
  free(s); free(r);
  MPI_Finalize();
  return 0;
}
