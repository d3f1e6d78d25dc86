/* Legal MPI programs at the edges of what the library must pass through unchanged
 * (test/shim/replay/test_legal_edges.py): every scenario prints lines that must equal plain
 * MPICH's, and must not hang.
 *
 *   legal_edges bad_args       MPI_ERRORS_RETURN, then collectives MPI refuses (negative counts,
 *                              MPI_DATATYPE_NULL, roots out of range, MPI_COMM_NULL): the error
 *                              classes, then a correct call
 *   legal_edges init_single    MPI_Init, then MPI_Query_thread and MPI_Is_thread_main
 *   legal_edges init_funneled  MPI_Init_thread(FUNNELED), the same
 *   legal_edges barrier_ssend  a rank waits in MPI_Barrier while a peer's MPI_Ssend to it needs
 *                              its MPI to match the receive it posted before
 *   legal_edges barrier_rma    a rank waits in MPI_Barrier while a peer locks, puts into and
 *                              unlocks its window (passive target)
 *   legal_edges blocked_signals
 *                              the received data read with every signal blocked: by a thread
 *                              made so, and by this thread inside sigprocmask
 *   legal_edges syscalls_after DIR
 *                              mlock, fwrite and mremap of a receive buffer right after the call
 *   legal_edges local_calls    MPI functions that never wait (MPI_Comm_set_name, MPI_Type_indexed,
 *                              MPI_Group_incl, MPI_Get_processor_name) fed from, or writing into,
 *                              a receive buffer right after the call
 *   legal_edges file_names     right after each MPI_Alltoall, the file names it received are
 *                              opened, stat'ed (into the receive buffer), checked and fopen'ed
 *   legal_edges pending_gaps   a receive, a large non-contiguous send and a persistent receive
 *                              posted before an MPI_Alltoallv on the gaps of its receive buffer
 *                              (bytes it does not write, on pages it does), completed after it
 *   legal_edges kernel_writes DIR
 *                              right after each MPI_Alltoallv the kernel writes small results
 *                              (pipe, clock_nanosleep, fstat, statx, uname, getrusage, getcwd,
 *                              readlink) into a gap of its receive pages, and takes file names
 *                              from them (realpath, statfs, symlink, mkfifo, chmod, utime...)
 *   legal_edges rodata_bcast   24 MPI_Bcasts of 1 MiB whose root buffer is a const table (read-only
 *                              memory): enough calls for the library to try MPI's algorithms
 *   legal_edges chained_send   an MPI_Alltoall's receive buffer, untouched, as the send buffer of
 *                              the MPI_Alltoallv right after it, in which rank 0 receives nothing
 *   legal_edges untouched_gaps right after each MPI_Alltoallv, whole pages between its blocks that
 *                              nothing ever touched (zeros) are read while rank 0's block is still
 *                              on the way (it comes a second late): the read must not wait for it */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <utime.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void bad_args(void) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int buf[64] = {0}, rbuf[64] = {0}, counts[16], displs[16];
  for (int i = 0; i < 16; ++i) counts[i] = 1, displs[i] = i;
  int cls, rc;
#define TRY(label, call)                                   \
  rc = (call);                                             \
  MPI_Error_class(rc, &cls);                               \
  printf("%d %s class %d\n", rank, label, rc == MPI_SUCCESS ? 0 : cls);
  TRY("alltoall negative count", MPI_Alltoall(buf, -1, MPI_INT, rbuf, -1, MPI_INT, MPI_COMM_WORLD));
  TRY("alltoall null type", MPI_Alltoall(buf, 1, MPI_DATATYPE_NULL, rbuf, 1, MPI_DATATYPE_NULL, MPI_COMM_WORLD));
  TRY("alltoall null comm", MPI_Alltoall(buf, 1, MPI_INT, rbuf, 1, MPI_INT, MPI_COMM_NULL));
  TRY("alltoallv null type", MPI_Alltoallv(buf, counts, displs, MPI_DATATYPE_NULL, rbuf, counts, displs, MPI_INT, MPI_COMM_WORLD));
  TRY("alltoallv null comm", MPI_Alltoallv(buf, counts, displs, MPI_INT, rbuf, counts, displs, MPI_INT, MPI_COMM_NULL));
  TRY("bcast negative count", MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD));
  TRY("bcast null type", MPI_Bcast(buf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
  TRY("bcast root out of range", MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD));
  TRY("bcast negative root", MPI_Bcast(buf, 1, MPI_INT, -5, MPI_COMM_WORLD));
  TRY("bcast null comm", MPI_Bcast(buf, 1, MPI_INT, 0, MPI_COMM_NULL));
  TRY("barrier null comm", MPI_Barrier(MPI_COMM_NULL));
  TRY("alltoall after the errors", MPI_Alltoall(buf, 1, MPI_INT, rbuf, 1, MPI_INT, MPI_COMM_WORLD));
}

/* Rank 0 posts a receive, then waits in MPI_Barrier; rank 1 sends synchronously to it first:
 * its MPI_Ssend completes only once rank 0's MPI matches it, while rank 0 is in the barrier. */
static void barrier_ssend(void) {
  enum { N = 1 << 18 };
  int* data = calloc(N, sizeof(int));
  for (int i = 0; i < N; ++i) data[i] = i * 7 + 1;
  if (rank == 0) {
    MPI_Request rq;
    MPI_Irecv(data, N, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  } else {
    if (rank == 1) MPI_Ssend(data, N, MPI_INT, 0, 5, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  long sum = 0;
  for (int i = 0; i < N; ++i) sum += data[i];
  printf("%d ssend before the barrier: sum %ld\n", rank, sum);
  free(data);
}

/* Rank 1 locks rank 0's window, puts into it and unlocks before the barrier, while rank 0
 * waits in the barrier (passive target: rank 0's MPI may have to act for the unlock). */
static void barrier_rma(void) {
  enum { N = 1 << 16 };
  int* base;
  MPI_Win win;
  MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  for (int i = 0; i < N; ++i) base[i] = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    int* src = malloc(N * sizeof(int));
    for (int i = 0; i < N; ++i) src[i] = i + 3;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Put(src, N, MPI_INT, 0, 0, N, MPI_INT, win);
    MPI_Win_unlock(0, win);
    free(src);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
  long sum = 0;
  for (int i = 0; i < N; ++i) sum += base[i];
  MPI_Win_unlock(rank, win);
  printf("%d put before the barrier: sum %ld\n", rank, sum);
  MPI_Win_free(&win);
}

/* Right after each MPI_Alltoall, before any read of its data: mlock, fwrite and mremap of the
 * receive buffer (all legal; the kernel or the C library reads the pages, or moves them). */
static void syscalls_after(const char* tmpdir) {
  const size_t block = 1 << 16, n = block * (size_t)size;
  unsigned char* send = malloc(n);
  for (size_t i = 0; i < n; ++i) send[i] = (unsigned char)(rank * 31 + i * 7);
  for (int round = 0; round < 8; ++round) {
    unsigned char* recv = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    const int locked = mlock(recv, n) == 0;
    if (locked) munlock(recv, n);
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    char path[4096];
    snprintf(path, sizeof path, "%s/edges.%d", tmpdir, rank);
    FILE* f = fopen(path, "w");
    const size_t written = f ? fwrite(recv, 1, n, f) : 0;
    if (f) fclose(f);
    unlink(path);
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    unsigned char* moved = mremap(recv, n, 2 * n, MREMAP_MAYMOVE);
    unsigned long sum = 0;
    if (moved != MAP_FAILED)
      for (size_t i = 0; i < n; ++i) sum += moved[i] * (i % 251 + 1);
    printf("%d round %d mlock %d fwrite %zu mremap %s sum %lu\n", rank, round, locked, written,
           moved == MAP_FAILED ? "failed" : "ok", sum);
    munmap(moved == MAP_FAILED ? recv : moved, moved == MAP_FAILED ? n : 2 * n);
  }
  free(send);
}

struct reader {
  const unsigned char* p;
  size_t n;
  unsigned long sum;
};

static void* read_all(void* arg) {
  struct reader* r = arg;
  for (size_t i = 0; i < r->n; ++i) r->sum += r->p[i] * (i % 251 + 1);
  return NULL;
}

/* Right after each MPI_Alltoall the data is read with every signal blocked: by a thread made
 * while every signal was blocked (pthread_sigmask around pthread_create, a common idiom), then
 * by this thread inside sigprocmask(SIG_BLOCK, all). */
static void blocked_signals(void) {
  const size_t block = 1 << 16, n = block * (size_t)size;
  unsigned char* send = malloc(n);
  unsigned char* recv = malloc(n);
  for (size_t i = 0; i < n; ++i) send[i] = (unsigned char)(rank * 29 + i * 3);
  sigset_t all, before;
  sigfillset(&all);
  for (int round = 0; round < 6; ++round) {
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    struct reader r = {recv, n, 0};
    pthread_t t;
    pthread_sigmask(SIG_BLOCK, &all, &before);
    pthread_create(&t, NULL, read_all, &r);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    pthread_join(t, NULL);
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    struct reader own = {recv, n, 0};
    sigprocmask(SIG_BLOCK, &all, &before);
    read_all(&own);
    sigprocmask(SIG_SETMASK, &before, NULL);
    printf("%d round %d thread sum %lu own sum %lu\n", rank, round, r.sum, own.sum);
  }
  free(send);
  free(recv);
}

/* Right after each MPI_Alltoall, "local" MPI functions (no message, never waiting) read the
 * received blocks: a communicator name, the lengths and displacements of an indexed type, the
 * ranks of a group; and one writes into a received block.  MPI takes its own lock inside them,
 * so a received page still in flight must be there before MPI does, not while it waits. */
static void local_calls(void) {
  const int ints = 1 << 14; /* 64 KiB blocks of int */
  int* send = malloc(sizeof(int) * (size_t)ints * (size_t)size);
  int* recv = malloc(sizeof(int) * (size_t)ints * (size_t)size);
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  for (int round = 0; round < 4; ++round) {
    for (int p = 0; p < size; ++p) {
      int* b = send + (size_t)p * (size_t)ints;
      for (int i = 0; i < ints; ++i) b[i] = (rank * 7 + p + i + round) % size; /* ranks, lengths */
      snprintf((char*)(b + 64), 64, "from-%d-to-%d-round-%d", rank, p, round);
      b[ints - 1] = 3 + round + rank; /* the count of the indexed type */
    }
    /* The group's ranks must differ: a block opens with a permutation of 0..size-1. */
    for (int p = 0; p < size; ++p)
      for (int i = 0; i < size; ++i) send[(size_t)p * (size_t)ints + (size_t)i] = (i + rank + round) % size;
    MPI_Alltoall(send, ints, MPI_INT, recv, ints, MPI_INT, MPI_COMM_WORLD);
    const int from = (rank + 1) % size;
    int* b = recv + (size_t)from * (size_t)ints;
    MPI_Comm_set_name(dup, (char*)(b + 64));
    MPI_Datatype t;
    MPI_Type_indexed(b[ints - 1], b + 200, b + 300, MPI_INT, &t);
    MPI_Type_commit(&t);
    int tsize = 0;
    MPI_Type_size(t, &tsize);
    MPI_Type_free(&t);
    MPI_Group g;
    MPI_Group_incl(world, size, b, &g);
    int grank = -1;
    MPI_Group_rank(g, &grank);
    MPI_Group_free(&g);
    int* w = recv + (size_t)((rank + 2) % size) * (size_t)ints;
    int len = 0;
    MPI_Get_processor_name((char*)(w + 128), &len);
    char name[MPI_MAX_OBJECT_NAME];
    int nlen = 0;
    MPI_Comm_get_name(dup, name, &nlen);
    unsigned long sum = 0;
    for (size_t i = 0; i < (size_t)ints * (size_t)size; ++i) sum += (unsigned long)recv[i] * (i % 97 + 1);
    printf("%d round %d name %s type %d group rank %d processor name %s sum %lu\n", rank, round, name, tsize, grank,
           len > 0 ? "written" : "empty", sum - (unsigned long)0);
  }
  MPI_Comm_free(&dup);
  MPI_Group_free(&world);
  free(send);
  free(recv);
}

/* Right after each MPI_Alltoall the names of files it delivered are handed to the kernel (open,
 * stat with its result written into the receive buffer, access, fopen): the kernel reads the
 * name and writes the result itself, with no fault to wait in. */
static void file_names(void) {
  const size_t block = 1 << 16, n = block * (size_t)size;
  char* send = calloc(n, 1);
  char* recv = malloc(n);
  for (int p = 0; p < size; ++p) snprintf(send + (size_t)p * block + 100, 64, "%s", p % 2 ? "/etc/hostname" : "/nonexistent-tnbc");
  for (int round = 0; round < 16; ++round) {
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    const char* name = recv + (size_t)((rank + 1 + round) % size) * block + 100;
    struct stat* st = (struct stat*)(recv + (size_t)((rank + 2) % size) * block + 4096);
    const int fd = open(name, O_RDONLY);
    const int s = stat(name, st);
    const int a = access(name, R_OK);
    FILE* f = fopen(name, "r");
    printf("%d round %d %s open %d stat %d regular %d access %d fopen %d\n", rank, round, name, fd >= 0, s,
           s == 0 && S_ISREG(st->st_mode), a, f != NULL);
    if (fd >= 0) close(fd);
    if (f) fclose(f);
  }
  free(send);
  free(recv);
}

/* Requests posted before an MPI_Alltoallv that touch the gaps of its receive buffer (bytes it
 * does not write, on pages it does) while it runs: a receive into a gap, a large non-contiguous
 * send from the gaps, and a persistent receive into a gap, all completed after the call.  Odd
 * rounds have nothing pending. */
static void pending_gaps(void) {
  enum { BLOCK = 3 * 4096 + 1000, GAP = 70 * 1024 + 600, STRIDE = BLOCK + GAP, ROUNDS = 8, SMALL = 256 };
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  unsigned char* send = malloc((size_t)STRIDE * size);
  unsigned char* recv = malloc((size_t)STRIDE * size);
  unsigned char* other = malloc((size_t)GAP * size);
  int counts[64], displs[64];
  for (int p = 0; p < size; ++p) counts[p] = BLOCK, displs[p] = p * STRIDE;
  /* The gaps from byte 2 * SMALL on: a vector over every peer's gap, sent in one message. */
  MPI_Datatype gaps;
  MPI_Type_vector(size, GAP - 2 * SMALL, STRIDE, MPI_BYTE, &gaps);
  MPI_Type_commit(&gaps);
  unsigned char note[2][SMALL];
  MPI_Request persistent;
  MPI_Recv_init(recv + BLOCK + SMALL, SMALL, MPI_BYTE, left, 9, MPI_COMM_WORLD, &persistent);
  for (int round = 0; round < ROUNDS; ++round) {
    for (size_t i = 0; i < (size_t)STRIDE * size; ++i) {
      send[i] = (unsigned char)(i * 13 + rank * 7 + round);
      recv[i] = (unsigned char)(i * 5 + rank + round * 3);
    }
    for (int k = 0; k < 2; ++k) memset(note[k], rank * 16 + round + k, SMALL);
    MPI_Request rq[3];
    MPI_Status st[3];
    const int pending = round % 2 == 0;
    if (pending) {
      MPI_Irecv(recv + BLOCK, SMALL, MPI_BYTE, left, 7, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(other, (GAP - 2 * SMALL) * size, MPI_BYTE, left, 8, MPI_COMM_WORLD, &rq[1]);
      MPI_Isend(recv + BLOCK + 2 * SMALL, 1, gaps, right, 8, MPI_COMM_WORLD, &rq[2]);
      MPI_Start(&persistent);
    }
    MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    if (pending) {
      MPI_Send(note[0], SMALL, MPI_BYTE, right, 7, MPI_COMM_WORLD);
      MPI_Send(note[1], SMALL, MPI_BYTE, right, 9, MPI_COMM_WORLD);
      MPI_Waitall(3, rq, st);
      MPI_Wait(&persistent, MPI_STATUS_IGNORE);
    }
    unsigned long sum = 0, osum = 0;
    for (size_t i = 0; i < (size_t)STRIDE * size; ++i) sum += recv[i] * (i % 11 + 1);
    for (size_t i = 0; pending && i < (size_t)(GAP - 2 * SMALL) * size; ++i) osum += other[i] * (i % 3 + 1);
    printf("%d round %d received %lu from the gaps %lu\n", rank, round, sum, osum);
  }
  MPI_Request_free(&persistent);
  MPI_Type_free(&gaps);
  free(send);
  free(recv);
  free(other);
}

/* Right after each MPI_Alltoallv, before any read of its data: the kernel writes small results
 * into the gap after the first block (bytes the call does not write, on a page it does) -- a
 * pipe's descriptors, a sleep's remainder, fstat, statx, uname, getrusage, getcwd, readlink --
 * and takes file names from the received blocks (realpath, statx, statfs, pathconf, getxattr,
 * symlink, readlink, mkfifo, chmod, utime, unlink). */
static void kernel_writes(const char* tmpdir) {
  enum { BLOCK = 3 * 4096 + 1000, GAP = 8192, STRIDE = BLOCK + GAP, NAME = 100 };
  char* send = calloc((size_t)STRIDE, size);
  char* recv = malloc((size_t)STRIDE * size);
  int counts[64], displs[64];
  for (int p = 0; p < size; ++p) counts[p] = BLOCK, displs[p] = p * STRIDE;
  char cwd[512];
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "?");
  for (int round = 0; round < 8; ++round) {
    /* Block p carries a name for rank p: a file everyone can read, and a fresh one of its own. */
    for (int p = 0; p < size; ++p) {
      char* b = send + (size_t)p * BLOCK;
      snprintf(b + NAME, 64, "%s", round % 2 ? "/etc/hostname" : "/etc/../etc/passwd");
      snprintf(b + NAME + 64, 200, "%s/k%d_from%d_%d", tmpdir, p, rank, round);
    }
    memset(recv, 0x5a, (size_t)STRIDE * size);
    MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    char* gap = recv + BLOCK; /* shares its page with the end of block 0 */
    const char* from = recv + (size_t)((rank + 1 + round) % size) * STRIDE;
    const char* name = from + NAME;
    const char* fresh = from + NAME + 64;
    int* fds = (int*)gap;
    const int piped = pipe(fds) == 0 && write(fds[1], "x", 1) == 1;
    if (piped) close(fds[0]), close(fds[1]);
    struct timespec nap = {0, 1000}, *rem = (struct timespec*)(gap + 16);
    const int slept = clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, rem);
    struct stat* st = (struct stat*)(gap + 64);
    const int fd = open(name, O_RDONLY);
    const int fs = fd >= 0 ? fstat(fd, st) : -1;
    const int regular = fs == 0 && S_ISREG(st->st_mode);
    if (fd >= 0) close(fd);
    struct statx* sx = (struct statx*)(gap + 256);
    const int sxr = statx(AT_FDCWD, name, 0, STATX_TYPE, sx);
    const int sx_regular = sxr == 0 && S_ISREG(sx->stx_mode);
    struct utsname* u = (struct utsname*)(gap + 1024);
    const int un = uname(u) == 0 && strcmp(u->sysname, "Linux") == 0;
    struct rusage* ru = (struct rusage*)(gap + 1536);
    const int rus = getrusage(RUSAGE_SELF, ru) == 0 && ru->ru_maxrss > 0;
    char* wd = gap + 1792;
    const int wd_ok = getcwd(wd, 512) != NULL && strcmp(wd, cwd) == 0;
    char real[PATH_MAX];
    const int rp = realpath(name, real) != NULL;
    struct statfs sfs;
    const int sf = statfs(name, &sfs);
    const long pc = pathconf(name, _PC_NAME_MAX);
    char attr[64];
    const int xa = getxattr(name, "user.tnbc", attr, sizeof attr) < 0;
    const int sl = symlink(name, fresh);
    char* target = gap + 2400;
    const ssize_t rl = readlink(fresh, target, 256);
    const int same_target = rl > 0 && (size_t)rl == strlen(name) && memcmp(target, name, (size_t)rl) == 0;
    const int ul = unlink(fresh);
    const int ff = mkfifo(fresh, 0600);
    const int cm = chmod(fresh, 0640);
    const int ut = utime(fresh, NULL);
    const int ul2 = unlink(fresh);
    printf("%d round %d %s pipe %d slept %d fstat %d statx %d uname %d rusage %d cwd %d realpath %d %s statfs %d pathconf %d "
           "xattr-missing %d symlink %d readlink %d unlink %d mkfifo %d chmod %d utime %d unlink %d\n",
           rank, round, name, piped, slept, regular, sx_regular, un, rus, wd_ok, rp, rp ? real : "-", sf, pc > 0, xa, sl,
           same_target, ul, ff, cm, ut, ul2);
  }
  free(send);
  free(recv);
}

/* A root buffer in read-only memory: legal with MPICH's default algorithm, which only reads it
 * at the root.  The library's algorithm trial must not pick one that writes it. */
#define RODATA_BYTES (1 << 20)
static const unsigned char rodata_table[RODATA_BYTES] = {3, 1, 4, 1, 5, 9, 2, 6};
static void rodata_bcast(void) {
  unsigned char* buf = rank == 0 ? (unsigned char*)rodata_table : malloc(RODATA_BYTES);
  for (int round = 0; round < 24; ++round) {
    MPI_Bcast(buf, RODATA_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    unsigned long sum = 0;
    for (size_t i = 0; i < RODATA_BYTES; ++i) sum += (unsigned long)buf[i] * (i % 7 + 1);
    if (round % 8 == 7) printf("%d round %d sum %lu\n", rank, round, sum);
  }
  if (rank != 0) free(buf);
}

/* The receive buffer of an MPI_Alltoall passed at once, untouched, as the send buffer of an
 * MPI_Alltoallv in which rank 0 receives nothing: a replaying library returns rank 0 early from
 * the first call (rank 1 comes to it 200 ms late, so its block is still on the way) but runs
 * the second to completion, its sends read from that buffer while the first call still fills it. */
static void chained_send(void) {
  enum { BLOCK = 256 * 1024 };
  unsigned char* send = malloc((size_t)BLOCK * size);
  unsigned char* mid = malloc((size_t)BLOCK * size);
  unsigned char* recv = malloc((size_t)BLOCK * size);
  int sc[64], sd[64], rc[64], rd[64];
  for (int p = 0; p < size; ++p) {
    sc[p] = p == 0 ? 0 : BLOCK, sd[p] = p * BLOCK;
    rc[p] = rank == 0 ? 0 : BLOCK, rd[p] = p * BLOCK;
  }
  for (int round = 0; round < 4; ++round) {
    for (size_t k = 0; k < (size_t)BLOCK * size; ++k) send[k] = (unsigned char)(rank * 7 + round * 3 + k * 13);
    if (rank == 1) usleep(200000);
    MPI_Alltoall(send, BLOCK, MPI_BYTE, mid, BLOCK, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Alltoallv(mid, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    unsigned long sum = 0;
    for (int p = 0; p < size; ++p)
      for (int k = 0; k < rc[p]; ++k) sum = sum * 31 + recv[(size_t)p * BLOCK + k];
    printf("%d round %d sum %lu\n", rank, round, sum);
  }
  free(send);
  free(mid);
  free(recv);
}

/* Fresh pages each round, blocks of 64 KiB and a bit with two whole pages and more between them
 * that neither the call nor the program has touched.  Rank 0 comes a second late and receives
 * nothing from the others (only its own block), so they may return before it comes, its block
 * still on the way (the first of the buffer: the call's last partial page, which the caller
 * copies before it returns, holds an earlier rank's block).  A whole page between two blocks
 * must then read as zeros at once, as under MPI once the call has returned (with pages moved,
 * 1 s each round before the progress thread filled such a page's fault). */
static void untouched_gaps(void) {
  enum { ROUNDS = 4 };
  const int late = 0;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t block = 64 * 1024 + 100, gap = 3 * page + 200, stride = block + gap, bytes = stride * (size_t)size;
  unsigned char* send = malloc(bytes);
  unsigned char* recv[ROUNDS];
  int sc[64], rc[64], displs[64];
  for (int p = 0; p < size; ++p) {
    sc[p] = p == late && rank != late ? 0 : (int)block;
    rc[p] = rank == late && p != late ? 0 : (int)block;
    displs[p] = (int)((size_t)p * stride);
  }
  for (int round = 0; round < ROUNDS; ++round) {
    recv[round] = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t k = 0; k < bytes; ++k) send[k] = (unsigned char)(rank * 11 + round * 5 + k * 7);
    if (rank == late) usleep(1000000);
    MPI_Alltoallv(send, sc, displs, MPI_BYTE, recv[round], rc, displs, MPI_BYTE, MPI_COMM_WORLD);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int zeros = 1;
    for (int p = 0; p + 1 < size; ++p) {  /* the first whole page of each gap */
      const uintptr_t at = (uintptr_t)recv[round] + (size_t)p * stride + block;
      zeros &= ((volatile unsigned char*)recv[round])[((at + page - 1) / page * page) - (uintptr_t)recv[round]] == 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    unsigned long sum = 0;
    for (int p = 0; p < size; ++p)
      for (int k = 0; k < rc[p]; ++k) sum = sum * 31 + recv[round][(size_t)p * stride + (size_t)k];
    printf("%d round %d gaps zero %d read at once %d sum %lu\n", rank, round, zeros, waited < 0.5, sum);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int round = 0; round < ROUNDS; ++round) munmap(recv[round], bytes);
  free(send);
}

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "bad_args";
  if (strcmp(what, "init_single") == 0 || strcmp(what, "init_funneled") == 0) {
    int provided = -1;
    if (strcmp(what, "init_single") == 0) MPI_Init(&argc, &argv);
    else MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int q = -1, main_thread = -1;
    MPI_Query_thread(&q);
    MPI_Is_thread_main(&main_thread);
    printf("%d provided %d query %d main %d\n", rank, provided, q, main_thread);
    MPI_Finalize();
    return 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (strcmp(what, "bad_args") == 0) bad_args();
  if (strcmp(what, "barrier_ssend") == 0) barrier_ssend();
  if (strcmp(what, "barrier_rma") == 0) barrier_rma();
  if (strcmp(what, "blocked_signals") == 0) blocked_signals();
  if (strcmp(what, "local_calls") == 0) local_calls();
  if (strcmp(what, "rodata_bcast") == 0) rodata_bcast();
  if (strcmp(what, "file_names") == 0) file_names();
  if (strcmp(what, "pending_gaps") == 0) pending_gaps();
  if (strcmp(what, "kernel_writes") == 0) kernel_writes(argc > 2 ? argv[2] : "/tmp");
  if (strcmp(what, "chained_send") == 0) chained_send();
  if (strcmp(what, "untouched_gaps") == 0) untouched_gaps();
  if (strcmp(what, "syscalls_after") == 0) syscalls_after(argc > 2 ? argv[2] : "/tmp");
  MPI_Finalize();
  return 0;
}
