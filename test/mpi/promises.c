/* What a program may do with a receive buffer right after a blocking collective returns, one
 * scenario per run (test/shim/replay/test_promises.py runs each with and without libtnbc.so and
 * compares): keep it in shared memory, re-protect it, hand it to the kernel through fortified,
 * vectored, message and raw system calls, fork, install its own SIGSEGV handler, set up an
 * io_uring, move the mapping with mremap, let the kernel write into bytes of a receive page the
 * call leaves alone (kernel_gap).
 *
 *   promises <scenario> <tmpdir>
 *
 * Every rank prints "<rank> <scenario> <round> <what> <checksum>" lines; a line ending in BAD
 * means the bytes differ from what MPI_Alltoall must deliver.  Alltoall of 64 KiB blocks, four
 * rounds, the buffer touched at once after the call (while a replaying library still has it in
 * flight). */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (64 * 1024)
#define MAX_RANKS 8
#define ROUNDS 4

static int rank, size;
static const char* tmpdir;
/* A global buffer: its size is known to the compiler, so under _FORTIFY_SOURCE read() into it
 * becomes __read_chk. */
static unsigned char g_recv[MAX_RANKS * BLOCK] __attribute__((aligned(4096)));

/* Never 0, so that the received bytes also read as one long string (printf scenario). */
static unsigned char pattern(int from, int to, int round, size_t k) {
  return (unsigned char)(1 + (from * 131 + to * 31 + round * 7 + k * 13 + (k >> 9)) % 255);
}

static void fill_send(unsigned char* send, int round) {
  for (int to = 0; to < size; ++to)
    for (size_t k = 0; k < BLOCK; ++k) send[(size_t)to * BLOCK + k] = pattern(rank, to, round, k);
}

/* True when buf holds what every peer sent this rank in `round`. */
static int correct(const unsigned char* buf, int round) {
  for (int from = 0; from < size; ++from)
    for (size_t k = 0; k < BLOCK; ++k)
      if (buf[(size_t)from * BLOCK + k] != pattern(from, rank, round, k)) return 0;
  return 1;
}

static uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void report(const char* scenario, int round, const char* what, const unsigned char* p, size_t n, int ok) {
  printf("%d %s %d %s %016llx %s\n", rank, scenario, round, what, (unsigned long long)checksum(p, n), ok ? "ok" : "BAD");
  fflush(stdout);
}

static void die(const char* what) __attribute__((noreturn));
static void die(const char* what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, strerror(errno));
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

static void alltoall(unsigned char* send, void* recv, int round) {
  fill_send(send, round);
  MPI_Alltoall(send, BLOCK, MPI_BYTE, recv, BLOCK, MPI_BYTE, MPI_COMM_WORLD);
}

static char* path_of(const char* name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", tmpdir, name, rank);
  return path;
}

/* A file of n bytes, opened read-write. */
static int scratch_file(const char* name, size_t n) {
  int fd = open(path_of(name), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)n) != 0) die("scratch file");
  return fd;
}

/* The whole of file `fd`, n bytes, read back into `out`. */
static void read_back(int fd, unsigned char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, out + got, n - got, (off_t)got);
    if (r <= 0) die("read back");
    got += (size_t)r;
  }
}

static void shared_file(unsigned char* send, unsigned char* check) {
  const size_t n = (size_t)size * BLOCK;
  for (int round = 0; round < ROUNDS; ++round) {
    int fd = scratch_file("shared", n);
    unsigned char* m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) die("mmap");
    alltoall(send, m, round);
    report("shared_file", round, "mapping", m, n, correct(m, round));
    if (msync(m, n, MS_SYNC) != 0) die("msync");
    munmap(m, n);
    read_back(fd, check, n);
    close(fd);
    report("shared_file", round, "file", check, n, correct(check, round));
  }
}

static void shm_twice(unsigned char* send) {
  const size_t n = (size_t)size * BLOCK;
  char name[64];
  snprintf(name, sizeof name, "/tnbc-promises-%d-%d", (int)getpid(), rank);
  for (int round = 0; round < ROUNDS; ++round) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) die("shm_open");
    shm_unlink(name);
    unsigned char* a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char* b = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) die("mmap");
    close(fd);
    alltoall(send, a, round);
    (void)a[0];  /* the program reads its own mapping first */
    report("shm_twice", round, "second_mapping", b, n, correct(b, round));
    munmap(a, n);
    munmap(b, n);
  }
}

static void win_shared(unsigned char* send) {
  const size_t n = (size_t)size * BLOCK;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int nrank, nsize;
  MPI_Comm_rank(node, &nrank);
  MPI_Comm_size(node, &nsize);
  unsigned char* mine;
  MPI_Win win;
  MPI_Win_allocate_shared((MPI_Aint)n, 1, MPI_INFO_NULL, node, &mine, &win);
  for (int round = 0; round < ROUNDS; ++round) {
    MPI_Win_fence(0, win);
    alltoall(send, mine, round);
    MPI_Win_fence(0, win);
    MPI_Barrier(node);
    int peer = (nrank + 1) % nsize;
    MPI_Aint peer_size;
    int disp;
    unsigned char* theirs;
    MPI_Win_shared_query(win, peer, &peer_size, &disp, &theirs);
    /* The neighbour's data: what every rank sent to the neighbour's world rank. */
    int peer_world;
    MPI_Group g, wg;
    MPI_Comm_group(node, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, 1, &peer, wg, &peer_world);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    int ok = 1;
    for (int from = 0; from < size && ok; ++from)
      for (size_t k = 0; k < BLOCK; ++k)
        if (theirs[(size_t)from * BLOCK + k] != pattern(from, peer_world, round, k)) {
          ok = 0;
          break;
        }
    report("win_shared", round, "neighbour", theirs, n, ok);
    MPI_Barrier(node);
  }
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
}

static void reprotect(unsigned char* send, unsigned char* recv) {
  const size_t n = (size_t)size * BLOCK;
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, recv, round);
    if (mprotect(recv, n, PROT_READ) != 0) die("mprotect");
    report("mprotect", round, "read_only", recv, n, correct(recv, round));
    if (mprotect(recv, n, PROT_READ | PROT_WRITE) != 0) die("mprotect");
  }
}

/* read() (fortified: __read_chk) over part of the buffer: blocking MPI then the file's bytes. */
static void read_chk(unsigned char* send) {
  const size_t n = (size_t)size * BLOCK;
  unsigned char file_bytes[BLOCK];
  for (size_t k = 0; k < BLOCK; ++k) file_bytes[k] = (unsigned char)(k * 7 + 3);
  int fd = scratch_file("read_chk", 0);
  if (pwrite(fd, file_bytes, BLOCK, 0) != BLOCK) die("pwrite");
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, g_recv, round);
    if (lseek(fd, 0, SEEK_SET) != 0) die("lseek");
    /* A length known only at run time: the fortified read checks it (__read_chk). */
    volatile size_t len = BLOCK;
    ssize_t got = read(fd, g_recv + BLOCK / 2, len);
    int ok = got == BLOCK && memcmp(g_recv + BLOCK / 2, file_bytes, BLOCK) == 0;
    /* Outside the overwritten part, the received bytes. */
    for (size_t k = 0; k < BLOCK / 2 && ok; ++k) ok = g_recv[k] == pattern(0, rank, round, k);
    for (size_t k = BLOCK / 2 + BLOCK; k < n && ok; ++k)
      ok = g_recv[k] == pattern((int)(k / BLOCK), rank, round, k % BLOCK);
    report("read_chk", round, "buffer", g_recv, n, ok);
  }
  close(fd);
}

/* The buffer written out by pwritev (two vectors) and by syscall(SYS_write), read back. */
static void write_paths(unsigned char* send, unsigned char* recv, unsigned char* check) {
  const size_t n = (size_t)size * BLOCK;
  for (int round = 0; round < ROUNDS; ++round) {
    int fd = scratch_file("pwritev", n);
    alltoall(send, recv, round);
    struct iovec iov[2] = {{recv, n / 2}, {recv + n / 2, n - n / 2}};
    ssize_t w = pwritev(fd, iov, 2, 0);
    read_back(fd, check, n);
    report("pwritev", round, "file", check, n, w == (ssize_t)n && correct(check, round));
    close(fd);

    fd = scratch_file("syscall", n);
    alltoall(send, recv, round);
    long s = syscall(SYS_write, fd, recv, n);
    read_back(fd, check, n);
    report("syscall_write", round, "file", check, n, s == (long)n && correct(check, round));
    close(fd);
  }
}

/* The buffer sent as datagrams by sendmmsg, and through a pipe by vmsplice. */
static void message_paths(unsigned char* send, unsigned char* recv, unsigned char* check) {
  const size_t n = (size_t)size * BLOCK, part = 4096;
  for (int round = 0; round < ROUNDS; ++round) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) die("socketpair");
    alltoall(send, recv, round);
    /* Two datagrams from the start of two peers' blocks. */
    struct iovec iov[2] = {{recv, part}, {recv + BLOCK, part}};
    struct mmsghdr msgs[2];
    memset(msgs, 0, sizeof msgs);
    msgs[0].msg_hdr.msg_iov = &iov[0];
    msgs[0].msg_hdr.msg_iovlen = 1;
    msgs[1].msg_hdr.msg_iov = &iov[1];
    msgs[1].msg_hdr.msg_iovlen = 1;
    int sent = sendmmsg(sv[0], msgs, 2, 0);
    ssize_t a = read(sv[1], check, part), b = read(sv[1], check + part, part);
    int ok = sent == 2 && a == (ssize_t)part && b == (ssize_t)part;
    for (size_t k = 0; k < part && ok; ++k)
      ok = check[k] == pattern(0, rank, round, k) && check[part + k] == pattern(1, rank, round, k);
    report("sendmmsg", round, "datagrams", check, 2 * part, ok);
    close(sv[0]);
    close(sv[1]);

    int p[2];
    if (pipe(p) != 0) die("pipe");
    alltoall(send, recv, round);
    struct iovec v = {recv + BLOCK / 2, 16 * 1024};
    ssize_t moved = vmsplice(p[1], &v, 1, 0);
    ssize_t got = moved > 0 ? read(p[0], check, (size_t)moved) : -1;
    ok = moved == 16 * 1024 && got == moved && memcmp(check, recv + BLOCK / 2, (size_t)got) == 0;
    for (size_t k = 0; k < (size_t)(got > 0 ? got : 0) && ok; ++k) ok = check[k] == pattern(0, rank, round, BLOCK / 2 + k);
    report("vmsplice", round, "pipe", check, 16 * 1024, ok);
    close(p[0]);
    close(p[1]);
    (void)n;
  }
}

/* The buffer printed as one long string right after the call (more than the stream's buffer:
 * the C library writes it from the caller's memory by its own internal write). */
static void print_string(unsigned char* send, unsigned char* recv, unsigned char* check) {
  const size_t n = (size_t)size * BLOCK;
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, recv, round);
    FILE* f = fopen(path_of("printf"), "w+");
    if (f == NULL) die("fopen");
    int printed = fprintf(f, "%.*s", (int)n, (const char*)recv);
    fflush(f);
    read_back(fileno(f), check, n);
    fclose(f);
    report("printf", round, "file", check, n, printed == (int)n && correct(check, round));
  }
}

/* fork() right after the call: parent and child both read the buffer. */
static void fork_after(unsigned char* send, unsigned char* recv) {
  const size_t n = (size_t)size * BLOCK;
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, recv, round);
    int p[2];
    if (pipe(p) != 0) die("pipe");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
      uint64_t h = checksum(recv, n);
      int ok = correct(recv, round);
      unsigned char msg[9];
      memcpy(msg, &h, 8);
      msg[8] = (unsigned char)ok;
      if (write(p[1], msg, 9) != 9) _exit(2);
      exit(0);  /* exit, not _exit: the child runs the libraries' exit handlers too */
    }
    close(p[1]);
    unsigned char msg[9] = {0};
    ssize_t got = read(p[0], msg, 9);
    close(p[0]);
    int status = 0;
    waitpid(child, &status, 0);
    uint64_t h;
    memcpy(&h, msg, 8);
    printf("%d fork %d child %016llx %s\n", rank, round, (unsigned long long)h,
           got == 9 && msg[8] && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "BAD");
    report("fork", round, "parent", recv, n, correct(recv, round));
  }
}

/* A SIGSEGV handler the program installs after MPI_Init, for its own guard page. */
static unsigned char* g_trap;
static volatile sig_atomic_t g_trapped;
static void on_own_fault(int sig, siginfo_t* info, void* ctx) {
  (void)sig, (void)ctx;
  unsigned char* a = (unsigned char*)info->si_addr;
  if (a >= g_trap && a < g_trap + 4096) {
    ++g_trapped;
    mprotect(g_trap, 4096, PROT_READ | PROT_WRITE);
    return;
  }
  signal(SIGSEGV, SIG_DFL);  /* not ours: crash as the program would */
}

static void own_handler(unsigned char* send, unsigned char* recv) {
  const size_t n = (size_t)size * BLOCK;
  g_trap = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_trap == MAP_FAILED) die("mmap");
  struct sigaction sa, seen;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_own_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, NULL) != 0) die("sigaction");
  sigaction(SIGSEGV, NULL, &seen);
  printf("%d own_handler - reported %s\n", rank,
         (seen.sa_flags & SA_SIGINFO) && seen.sa_sigaction == on_own_fault ? "ok" : "BAD");
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, recv, round);
    report("own_handler", round, "buffer", recv, n, correct(recv, round));
    if (round == 0) {
      g_trap[0] = 1;  /* the program's own fault: its handler must see it */
      printf("%d own_handler - trapped %s\n", rank, g_trapped == 1 && g_trap[0] == 1 ? "ok" : "BAD");
    }
  }
}

/* A private mapping that does not start the receive buffer on a page boundary, grown with
 * mremap(MREMAP_MAYMOVE) right after the call: the moved bytes are the received ones. */
static void grow_mapping(unsigned char* send) {
  const size_t n = (size_t)size * BLOCK, alloc = n + 4096;
  for (int round = 0; round < ROUNDS; ++round) {
    unsigned char* base = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) die("mmap");
    alltoall(send, base + 100, round);
    unsigned char* moved = mremap(base, alloc, 2 * alloc, MREMAP_MAYMOVE);
    if (moved == MAP_FAILED) die("mremap");
    report("mremap", round, "moved", moved + 100, n, correct(moved + 100, round));
    munmap(moved, 2 * alloc);
  }
}

/* The kernel writes into a receive page right after the call: an MPI_Alltoallv leaves a gap of
 * 4.5 KiB after each block, and stat() (glibc's, which enters the kernel without any function a
 * library can interpose) fills a struct stat in the gap, on the page the next block starts on.
 * Blocking MPI has that page in place: the kernel writes it.  The struct's size and mode are
 * reported (stable between runs), the blocks checked, the rest of the gap must keep its 0x5a. */
static void kernel_gap(unsigned char* send) {
  const size_t gap = 4096 + 512, stride = BLOCK + gap, n = (size_t)size * stride;
  unsigned char* recv;
  if (posix_memalign((void**)&recv, 4096, n)) die("posix_memalign");
  int counts[MAX_RANKS], sdispls[MAX_RANKS], rdispls[MAX_RANKS];
  for (int r = 0; r < size; ++r) counts[r] = BLOCK, sdispls[r] = r * BLOCK, rdispls[r] = (int)(r * stride);
  char* path = path_of("kernel_gap");
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0640);
  if (fd < 0 || write(fd, "1234567", 7) != 7) die("kernel_gap file");
  close(fd);
  for (int round = 0; round < ROUNDS; ++round) {
    fill_send(send, round);
    memset(recv, 0x5a, n);
    MPI_Alltoallv(send, counts, sdispls, MPI_BYTE, recv, counts, rdispls, MPI_BYTE, MPI_COMM_WORLD);
    struct stat* st = (struct stat*)(recv + BLOCK + 4096 + 64);
    const int rc = stat(path, st);
    int ok = rc == 0 && st->st_size == 7 && (st->st_mode & 0777) == 0640;
    unsigned char summary[2] = {(unsigned char)(rc == 0 ? st->st_size : 0xff), (unsigned char)(st->st_mode & 0777)};
    memset(st, 0x5a, sizeof *st);
    for (int from = 0; from < size; ++from)
      for (size_t k = 0; k < stride; ++k) {
        const unsigned char want = k < BLOCK ? pattern(from, rank, round, k) : 0x5a;
        if (recv[(size_t)from * stride + k] != want) ok = 0;
      }
    report("kernel_gap", round, rc == 0 ? "stat" : "stat_failed", summary, sizeof summary, ok);
  }
  unlink(path);
  free(recv);
}

/* An io_uring set up (by the raw system call, as liburing does in effect): the kernel may then
 * use buffers no interposer sees, so the library must receive in place from then on. */
static void io_uring(unsigned char* send, unsigned char* recv) {
  const size_t n = (size_t)size * BLOCK;
  long params[16] = {0};  /* struct io_uring_params: 120 bytes, zeroed */
  long fd = syscall(SYS_io_uring_setup, 4, params);
  for (int round = 0; round < ROUNDS; ++round) {
    alltoall(send, recv, round);
    report("io_uring", round, "buffer", recv, n, correct(recv, round));
  }
  if (fd >= 0) close((int)fd);
}

/* Large blocks (argv[3] MiB per peer), read right after each call; then the process's peak
 * virtual size (what `ulimit -v` limits). */
static void big(const char* mib_text) {
  const size_t block = (size_t)atol(mib_text) << 20, n = (size_t)size * block;
  unsigned char* send = malloc(n);
  unsigned char* recv = malloc(n);
  if (send == NULL || recv == NULL) die("malloc");
  for (int round = 0; round < ROUNDS; ++round) {
    for (int to = 0; to < size; ++to)
      for (size_t k = 0; k < block; k += 4096) send[(size_t)to * block + k] = pattern(rank, to, round, k);
    MPI_Alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    int ok = 1;
    for (int from = 0; from < size && ok; ++from)
      for (size_t k = 0; k < block && ok; k += 4096) ok = recv[(size_t)from * block + k] == pattern(from, rank, round, k);
    printf("%d big %d blocks %s\n", rank, round, ok ? "ok" : "BAD");
  }
  free(send);
  free(recv);
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmPeak:", 7) == 0) fprintf(stderr, "rank %d %s", rank, line);
  if (f) fclose(f);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: promises <shared_file|shm_twice|win_shared|mprotect|read_chk|write_paths|"
                    "message_paths|fork|own_handler|io_uring|mremap|printf|kernel_gap|big> <tmpdir> [MiB per peer, for big]\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > MAX_RANKS) {
    if (rank == 0) fprintf(stderr, "at most %d ranks\n", MAX_RANKS);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  tmpdir = argv[2];
  const size_t n = (size_t)size * BLOCK;
  unsigned char *send, *recv, *check;
  if (posix_memalign((void**)&send, 4096, n) || posix_memalign((void**)&recv, 4096, n) ||
      posix_memalign((void**)&check, 4096, n))
    die("posix_memalign");
  const char* s = argv[1];
  if (!strcmp(s, "shared_file")) shared_file(send, check);
  else if (!strcmp(s, "shm_twice")) shm_twice(send);
  else if (!strcmp(s, "win_shared")) win_shared(send);
  else if (!strcmp(s, "mprotect")) reprotect(send, recv);
  else if (!strcmp(s, "read_chk")) read_chk(send);
  else if (!strcmp(s, "write_paths")) write_paths(send, recv, check);
  else if (!strcmp(s, "message_paths")) message_paths(send, recv, check);
  else if (!strcmp(s, "fork")) fork_after(send, recv);
  else if (!strcmp(s, "own_handler")) own_handler(send, recv);
  else if (!strcmp(s, "big") && argc > 3) big(argv[3]);
  else if (!strcmp(s, "io_uring")) io_uring(send, recv);
  else if (!strcmp(s, "mremap")) grow_mapping(send);
  else if (!strcmp(s, "printf")) print_string(send, recv, check);
  else if (!strcmp(s, "kernel_gap")) kernel_gap(send);
  else {
    if (rank == 0) fprintf(stderr, "unknown scenario %s\n", s);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  free(send);
  free(recv);
  free(check);
  MPI_Finalize();
  return 0;
}
