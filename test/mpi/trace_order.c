/* Known access orders after traced collectives, for test/trace/test_mpi_trace.py.
 *
 * The collectives run in a fixed sequence (the call index in the trace), each followed by reads in
 * an order the test knows.  Every rank prints one checksum line per call, so a traced run can be
 * compared with a plain one.  Usage: trace_order <scratch-file-prefix>
 *
 *   call 0  Alltoall, heap, 64 KiB blocks       read sources p-1 .. 0
 *   call 1  Alltoall, other call site            read sources (rank + k) % p
 *   call 2  Alltoallv, blocks of 1-3 x 16 KiB laid out in reverse source order, read 0 .. p-1
 *   call 3  Bcast 1 MiB from rank 1 (16 units)   read units (5k) % 16
 *   call 4  Alltoall into a stack buffer that shares its first and last page with live data,
 *           8 KiB blocks, read p-1 .. 0
 *   call 5  Alltoall into X, call 6 Bcast into Y, then Y units 0..15, then X sources 0..p-1
 *   call 7  Alltoall, then write() of the whole buffer to a file (must not fail with EFAULT)
 *   call 8  Alltoall, then two threads: thread t reads the sources s with s % 2 == t
 *   call 9  Alltoall with a non-contiguous receive type: recorded, not traced ("datatype")
 *   call 10 Alltoall of 1 MiB blocks handed unread to MPI_Sendrecv (UCX may read it from the
 *           peer process with process_vm_readv): the data arrive, the blocks are unobserved
 *   call 11 Alltoall into a heap buffer freed unread; the memory is allocated again and written
 *           (the blocks are released, nothing is recorded as a touch)
 *   call 12 Alltoall into an mmap'd buffer unmapped unread; new memory is mapped and written
 *   call 13 Alltoall with MPI_IN_PLACE, read sources p-1 .. 0
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

static int rank, size;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Reads a block from its first byte to its last (the first touch is at its first byte). */
static uint64_t read_block(const char *p, size_t n) {
  return fnv(1469598103934665603ull, p, n);
}

static void fill(char *p, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (char)(rank * 131 + salt * 7 + i * 13 + i / 4096);
}

static void report(int call, uint64_t h) { printf("%d call %d %016llx\n", rank, call, (unsigned long long)h); }

struct thread_arg { const char *buf; size_t block; int parity; uint64_t h; };
static void *reader(void *v) {
  struct thread_arg *a = v;
  a->h = 1469598103934665603ull;
  for (int s = a->parity; s < size; s += 2) a->h ^= read_block(a->buf + s * a->block, a->block);
  return NULL;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *prefix = argc > 1 ? argv[1] : "trace_order";
  const size_t big = 64 * 1024;
  char *send = malloc(big * size), *recv = malloc(big * size), *recv2 = malloc(big * size);
  uint64_t h;

  /* call 0 */
  fill(send, big * size, 0);
  MPI_Alltoall(send, (int)big, MPI_BYTE, recv, (int)big, MPI_BYTE, MPI_COMM_WORLD);
  h = 0;
  for (int s = size - 1; s >= 0; s--) h ^= read_block(recv + s * big, big) + s;
  report(0, h);

  /* call 1: same operation, another call site */
  fill(send, big * size, 1);
  MPI_Alltoall(send, (int)big / 8, MPI_DOUBLE, recv2, (int)big / 8, MPI_DOUBLE, MPI_COMM_WORLD);
  h = 0;
  for (int k = 0; k < size; k++) {
    int s = (rank + k) % size;
    h ^= read_block(recv2 + s * big, big) + s;
  }
  report(1, h);

  /* call 2: Alltoallv, counts 1-3 units of 16 KiB, blocks stored in reverse source order */
  {
    const int unit = 16 * 1024;
    int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
    int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);
    int off = 0;
    for (int p = 0; p < size; p++) { sc[p] = unit * (1 + (rank + p) % 3); sd[p] = off; off += sc[p]; }
    char *vs = malloc(off);
    fill(vs, off, 2);
    int roff = 0;
    for (int p = size - 1; p >= 0; p--) { rc[p] = unit * (1 + (p + rank) % 3); rd[p] = roff; roff += rc[p]; }
    char *vr = malloc(roff);
    MPI_Alltoallv(vs, sc, sd, MPI_BYTE, vr, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    h = 0;
    for (int s = 0; s < size; s++) h ^= read_block(vr + rd[s], rc[s]) + s;
    report(2, h);
    free(vs); free(vr); free(sc); free(sd); free(rc); free(rd);
  }

  /* call 3: Bcast of 1 MiB from rank 1, 16 units of 64 KiB read in the order (5k) % 16 */
  {
    const size_t n = 1024 * 1024, u = n / 16;
    char *b = malloc(n);
    if (rank == 1 % size) fill(b, n, 3);
    MPI_Bcast(b, (int)n, MPI_BYTE, 1 % size, MPI_COMM_WORLD);
    h = 0;
    for (int k = 0; k < 16; k++) h ^= read_block(b + ((5 * k) % 16) * u, u) + k;
    report(3, h);
    free(b);
  }

  /* call 4: a stack buffer sharing its edge pages with live data */
  {
    struct { long before[8]; char buf[64 * 8192]; long after[8]; } frame;
    const size_t blk = 8192;
    for (int i = 0; i < 8; i++) frame.before[i] = frame.after[i] = 1000 + i;
    fill(send, blk * size, 4);
    MPI_Alltoall(send, (int)blk, MPI_BYTE, frame.buf, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    /* The live data next to the buffer is used at once: its pages must not be protected. */
    long live = 0;
    for (int i = 0; i < 8; i++) { frame.before[i] += 1; frame.after[i] += 2; live += frame.before[i] + frame.after[i]; }
    h = (uint64_t)live;
    for (int s = size - 1; s >= 0; s--) h ^= read_block(frame.buf + s * blk, blk) + s;
    report(4, h);
  }

  /* calls 5 and 6: two collectives before any touch */
  {
    const size_t n = 1024 * 1024, u = n / 16;
    char *y = malloc(n);
    fill(send, big * size, 5);
    MPI_Alltoall(send, (int)big, MPI_BYTE, recv, (int)big, MPI_BYTE, MPI_COMM_WORLD);
    if (rank == 0) fill(y, n, 6);
    MPI_Bcast(y, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    h = 0;
    for (int k = 0; k < 16; k++) h ^= read_block(y + k * u, u) + k;
    for (int s = 0; s < size; s++) h ^= read_block(recv + s * big, big) + s;
    report(5, h);
    free(y);
  }

  /* call 7: write() of a received buffer */
  {
    fill(send, big * size, 7);
    MPI_Alltoall(send, (int)big, MPI_BYTE, recv, (int)big, MPI_BYTE, MPI_COMM_WORLD);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", prefix, rank);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    ssize_t w = write(fd, recv, big * size);
    if (w != (ssize_t)(big * size)) { perror("write of a received buffer"); MPI_Abort(MPI_COMM_WORLD, 2); }
    char *back = malloc(big * size);
    if (pread(fd, back, big * size, 0) != (ssize_t)(big * size) || memcmp(back, recv, big * size) != 0) {
      fprintf(stderr, "file content differs from the received buffer\n");
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    close(fd);
    unlink(path);
    report(7, read_block(back, big * size));
    free(back);
  }

  /* call 8: two threads read the received data */
  {
    fill(send, big * size, 8);
    MPI_Alltoall(send, (int)big, MPI_BYTE, recv2, (int)big, MPI_BYTE, MPI_COMM_WORLD);
    pthread_t th[2];
    struct thread_arg a[2] = {{recv2, big, 0, 0}, {recv2, big, 1, 0}};
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, reader, &a[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    report(8, a[0].h ^ (a[1].h * 3));
  }

  /* call 9: every other int of each block */
  {
    MPI_Datatype strided;
    MPI_Type_vector(1024, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    int *si = malloc(sizeof(int) * 2048 * size), *ri = malloc(sizeof(int) * 2048 * size);
    for (int i = 0; i < 2048 * size; i++) { si[i] = rank * 100000 + i; ri[i] = -1; }
    MPI_Alltoall(si, 1, strided, ri, 1, strided, MPI_COMM_WORLD);
    report(9, read_block((const char *)ri, sizeof(int) * 2048 * size));
    MPI_Type_free(&strided);
    free(si); free(ri);
  }

  /* call 10 */
  {
    const size_t mb = 1024 * 1024;
    char *s3 = malloc(mb * size), *r3 = malloc(mb * size), *fwd = malloc(mb * size);
    fill(s3, mb * size, 10);
    MPI_Alltoall(s3, (int)mb, MPI_BYTE, r3, (int)mb, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Sendrecv(r3, (int)(mb * size), MPI_BYTE, (rank + 1) % size, 10, fwd, (int)(mb * size), MPI_BYTE,
                 (rank + size - 1) % size, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    report(10, read_block(fwd, mb * size) ^ read_block(r3, mb * size));
    free(s3); free(r3); free(fwd);
  }

  /* call 11 */
  {
    const size_t blk = 16 * 1024; /* small enough for the heap, not mmap */
    char *s4 = malloc(blk * size), *r4 = malloc(blk * size);
    fill(s4, blk * size, 11);
    MPI_Alltoall(s4, (int)blk, MPI_BYTE, r4, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    free(r4);
    char *again = malloc(blk * size);
    memset(again, 0x5a, blk * size);
    report(11, read_block(again, blk * size));
    free(again); free(s4);
  }

  /* call 12 */
  {
    const size_t blk = 4 * 4096, n = blk * size;
    char *s5 = malloc(n);
    char *r5 = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fill(s5, n, 12);
    MPI_Alltoall(s5, (int)blk, MPI_BYTE, r5, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
    munmap(r5, n);
    char *again = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(again, 0x3c, n);
    report(12, read_block(again, n));
    munmap(again, n);
    free(s5);
  }

  /* call 13 */
  fill(recv, big * size, 13);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)big, MPI_BYTE, MPI_COMM_WORLD);
  h = 0;
  for (int s = size - 1; s >= 0; s--) h ^= read_block(recv + s * big, big) + s;
  report(13, h);

  free(send); free(recv); free(recv2);
  MPI_Finalize();
  return 0;
}
