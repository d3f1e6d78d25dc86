/* The soak of the long test mode (test/shim/replay/test_soak.py): a long pseudo-random sequence of
 * collectives whose every received byte each rank checks itself, with what real programs do to a
 * receive buffer right after the call returns (while a replaying library may still have it in
 * flight).
 *
 *   soak <seed> <calls> <tmpdir>
 *
 * Choices every rank must agree on come from one generator seeded with <seed>: the collective
 * (Alltoall, Alltoallv, Bcast, Barrier), the communicator (world, a dup, two splits, a fresh dup
 * freed after the call), the byte counts, the root, MPI_IN_PLACE.  Choices of one rank alone come
 * from a generator seeded with <seed> and the rank: the memory the buffers live in (heap, aligned
 * heap, static arrays, the stack, private mmap, shared anonymous or file mappings), the offset in
 * it, the Alltoallv displacements (with gaps, sometimes in reverse order), and what the program
 * does with the receive buffer next (enum action).
 *
 * Every byte is a function of (call, sender, receiver, position), so every rank knows what it must
 * receive.  Each rank prints one line,
 *   soak rank R calls C checked_calls K checked_bytes B mismatches M checksum H
 * where H is a checksum over every byte checked, in a fixed order: a run under plain MPICH and one
 * under a library must print the same lines.  The first mismatches are described on stderr; exit 1
 * when there was any. */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "soak.h"

static const char* const op_names[] = {"alltoall", "alltoallv", "bcast", "barrier"};
static const char* const mem_names[] = {"heap", "aligned", "static", "stack", "mmap", "shared_anon", "shared_file"};
static const char* const action_names[] = {"forward", "backward", "pages", "scribble", "defer", "write", "pwritev",
                                           "free", "realloc", "mprotect", "fork", "signal", "thread"};

int rank, size;
const char* tmpdir;
static uint64_t g_shared_rng, g_local_rng;

/* splitmix64 */
static uint64_t next(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t shared(uint64_t n) { return next(&g_shared_rng) % n; }
uint64_t local(uint64_t n) { return next(&g_local_rng) % n; }

void die(const char* what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, strerror(errno));
  MPI_Abort(MPI_COMM_WORLD, 3);
  exit(3);
}

/* The byte `to` receives from `from` at position k of call `call` (to = -1: a Bcast). */
static unsigned char pattern(uint64_t call, int from, int to, size_t k) {
  uint64_t x = call * 0x9e3779b97f4a7c15ull + (uint64_t)(from + 1) * 0x100000001b3ull + (uint64_t)(to + 2) * 131;
  return (unsigned char)((x >> 29) ^ (x >> 11) ^ k * 13 ^ (k >> 9) ^ (k >> 17));
}
/* The bytes of a receive buffer no message writes (Alltoallv gaps), set before the call. */
static unsigned char gap_byte(uint64_t call, size_t i) { return (unsigned char)(i * 7 ^ call ^ 0xa5); }

static uint64_t fnv(const unsigned char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Compares buf with exp; the mismatches, and the first bad position in *first (or n). */
static uint64_t compare(const unsigned char* buf, const unsigned char* exp, size_t n, int backward, size_t* first) {
  uint64_t bad = 0;
  *first = n;
  for (size_t j = 0; j < n; ++j) {
    size_t i = backward ? n - 1 - j : j;
    if (buf[i] != exp[i]) {
      ++bad;
      if (*first == n || i < *first) *first = i;
    }
  }
  return bad;
}

/* ---- communicators ---- */

struct comm {
  MPI_Comm comm;
  int size, rank;
  int world[MAX_RANKS]; /* world rank of each member */
};
static struct comm g_comms[C_KINDS];

static void describe(struct comm* c) {
  MPI_Comm_size(c->comm, &c->size);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Group g, wg;
  MPI_Comm_group(c->comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int members[MAX_RANKS];
  for (int i = 0; i < c->size; ++i) members[i] = i;
  MPI_Group_translate_ranks(g, c->size, members, wg, c->world);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
}

static void make_comms(void) {
  g_comms[C_WORLD].comm = MPI_COMM_WORLD;
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comms[C_DUP].comm);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &g_comms[C_SPLIT_PARITY].comm);
  MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, -rank, &g_comms[C_SPLIT_HALVES_REVERSED].comm);
  for (int k = C_WORLD; k < C_FRESH_DUP; ++k) describe(&g_comms[k]);
}

/* ---- one call's bookkeeping ---- */

struct call {
  uint64_t index;
  enum op op;
  enum comm_kind ck;
  enum action action;
  struct buffer recv;
  unsigned char* exp; /* what recv.p must hold, recv.n bytes */
};

static uint64_t g_calls, g_checked_calls, g_checked_bytes, g_mismatches, g_checksum = 0xcbf29ce484222325ull;
static int g_reported;

static void report_mismatch(const struct call* c, const char* where, uint64_t bad, size_t first, int got) {
  g_mismatches += bad;
  if (g_reported++ >= 8) return;
  fprintf(stderr,
          "rank %d: call %llu %s comm %d %s buffer %p+%zu (%zu bytes) action %s (%s): %llu bad bytes, first at %zu "
          "(got %d, want %d)\n",
          rank, (unsigned long long)c->index, op_names[c->op], (int)c->ck, mem_names[c->recv.mem],
          (void*)c->recv.base, (size_t)(c->recv.p - c->recv.base), c->recv.n, action_names[c->action], where,
          (unsigned long long)bad, first, got, first < c->recv.n ? c->exp[first] : -1);
}

/* Counts a checked buffer: its bytes, mismatches and checksum. */
static void account(const struct call* c, const char* where, const unsigned char* buf, size_t n, uint64_t bad,
                    size_t first, uint64_t sum) {
  ++g_checked_calls;
  g_checked_bytes += n;
  if (bad) report_mismatch(c, where, bad, first, first < n ? buf[first] : -1);
  uint64_t rec[2] = {c->index, sum};
  g_checksum = fnv((const unsigned char*)rec, sizeof rec, g_checksum);
}

static void check_now(const struct call* c, const char* where, const unsigned char* buf, size_t n, int backward) {
  size_t first;
  uint64_t bad = compare(buf, c->exp, n, backward, &first);
  account(c, where, buf, n, bad, first, fnv(buf, n, 0xcbf29ce484222325ull));
}

/* A check run by a signal handler or another thread. */
struct remote_check {
  const unsigned char* buf;
  const unsigned char* exp;
  size_t n;
  uint64_t bad, sum;
  size_t first;
};
static struct remote_check g_signal_check;

static void remote(struct remote_check* r) {
  r->bad = compare(r->buf, r->exp, r->n, 0, &r->first);
  r->sum = fnv(r->buf, r->n, 0xcbf29ce484222325ull);
}
static void on_usr1(int sig) {
  (void)sig;
  remote(&g_signal_check);
}
static void* thread_main(void* arg) {
  remote(arg);
  return NULL;
}

static void write_fully(int fd, const unsigned char* p, size_t n) {
  if (ftruncate(fd, 0) != 0) die("ftruncate");
  size_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(fd, p + done, n - done, (off_t)done);
    if (w <= 0) die("pwrite");
    done += (size_t)w;
  }
}

static void read_fully(int fd, unsigned char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, out + got, n - got, (off_t)got);
    if (r <= 0) die("pread");
    got += (size_t)r;
  }
}

static int g_file_fd = -1;

/* Does what c->action says with the receive buffer, checks it, and gives the memory back unless
 * the check is deferred (returns 1 then). */
static int touch(struct call* c) {
  struct buffer* b = &c->recv;
  const size_t n = b->n;
  switch (c->action) {
    case A_FORWARD:
    case A_BACKWARD:
      check_now(c, "read", b->p, n, c->action == A_BACKWARD);
      break;
    case A_PAGES: {
      volatile unsigned char sink = 0;
      for (int k = 0; k < 8 && n; ++k) sink ^= b->p[local(n)];
      (void)sink;
      check_now(c, "read", b->p, n, 0);
      break;
    }
    case A_SCRIBBLE:
      for (int k = 0; k < 8 && n; ++k) {
        size_t i = local(n);
        c->exp[i] ^= 0x5a;
        b->p[i] = c->exp[i];
      }
      check_now(c, "after own writes", b->p, n, 0);
      break;
    case A_DEFER:
      return 1;
    case A_WRITE:
    case A_PWRITEV: {
      if (c->action == A_WRITE) {
        write_fully(g_file_fd, b->p, n);
      } else {
        if (ftruncate(g_file_fd, 0) != 0) die("ftruncate");
        size_t a = n / 3, m = n / 3;
        struct iovec iov[3] = {{b->p, a}, {b->p + a, m}, {b->p + a + m, n - a - m}};
        ssize_t w = pwritev(g_file_fd, iov, 3, 0);
        if (w < 0) die("pwritev");
        if ((size_t)w < n) write_fully(g_file_fd, b->p, n); /* a short write: all of it again */
      }
      unsigned char* copy = malloc(n + 1);
      if (!copy) die("malloc");
      read_fully(g_file_fd, copy, n);
      check_now(c, "file", copy, n, 0);
      free(copy);
      break;
    }
    case A_FREE:
      break;
    case A_REALLOC: {
      size_t offset = (size_t)(b->p - b->base), grown = b->alloc + (1u << 20);
      if (b->mem == M_MMAP) {
        void* q = mremap(b->base, b->alloc, grown, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) die("mremap");
        b->base = q;
      } else {
        unsigned char* q = realloc(b->base, grown);
        if (!q) die("realloc");
        b->base = q;
      }
      b->alloc = grown;
      b->p = b->base + offset;
      check_now(c, "moved", b->p, n, 0);
      break;
    }
    case A_MPROTECT:
      if (mprotect(b->base, b->alloc, PROT_READ) != 0) die("mprotect");
      check_now(c, "read-only", b->p, n, 0);
      if (mprotect(b->base, b->alloc, PROT_READ | PROT_WRITE) != 0) die("mprotect");
      break;
    case A_FORK: {
      int fds[2];
      if (pipe(fds) != 0) die("pipe");
      pid_t child = fork();
      if (child < 0) die("fork");
      if (child == 0) {
        struct remote_check r = {b->p, c->exp, n, 0, 0, 0};
        remote(&r);
        ssize_t w = write(fds[1], &r, sizeof r);
        exit(w == (ssize_t)sizeof r ? 0 : 1); /* exit: the libraries' exit handlers run too */
      }
      close(fds[1]);
      struct remote_check r;
      ssize_t got = read(fds[0], &r, sizeof r);
      close(fds[0]);
      int status = 0;
      waitpid(child, &status, 0);
      if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rank %d: call %llu: the forked child failed (status %d)\n", rank,
                (unsigned long long)c->index, status);
        ++g_mismatches;
        r.bad = 0, r.first = n, r.sum = 0;
      }
      account(c, "forked child", b->p, n, r.bad, r.first, r.sum);
      size_t first;
      uint64_t bad = compare(b->p, c->exp, n, 0, &first);
      if (bad) report_mismatch(c, "parent after fork", bad, first, b->p[first]);
      break;
    }
    case A_SIGNAL:
      g_signal_check = (struct remote_check){b->p, c->exp, n, 0, 0, 0};
      raise(SIGUSR1);
      account(c, "signal handler", b->p, n, g_signal_check.bad, g_signal_check.first, g_signal_check.sum);
      break;
    case A_THREAD: {
      struct remote_check r = {b->p, c->exp, n, 0, 0, 0};
      pthread_t t;
      if (pthread_create(&t, NULL, thread_main, &r) != 0) die("pthread_create");
      pthread_join(t, NULL);
      account(c, "other thread", b->p, n, r.bad, r.first, r.sum);
      break;
    }
  }
  release(b);
  free(c->exp);
  return 0;
}

/* An action the buffer's memory allows (the stack cannot wait for the next call; realloc and
 * mprotect need memory the buffer owns whole); A_DEFER only when `defer_ok`. */
static enum action pick_action(enum mem m, int defer_ok) {
  for (;;) {
    uint64_t r = local(100);
    enum action a = r < 16 ? A_FORWARD : r < 26 ? A_BACKWARD : r < 36 ? A_PAGES : r < 44 ? A_SCRIBBLE
                  : r < 56 ? A_DEFER : r < 62 ? A_WRITE : r < 68 ? A_PWRITEV : r < 74 ? A_FREE
                  : r < 80 ? A_REALLOC : r < 86 ? A_MPROTECT : r < 89 ? A_FORK : r < 94 ? A_SIGNAL : A_THREAD;
    if (a == A_DEFER && !defer_ok) continue;
    if (m == M_STACK && (a == A_DEFER || a == A_FREE || a == A_REALLOC || a == A_MPROTECT)) continue;
    if (a == A_REALLOC && m != M_HEAP && m != M_ALIGNED && m != M_MMAP) continue;
    if (a == A_MPROTECT && m == M_HEAP) continue;
    return a;
  }
}

/* Bytes one rank sends another: shared choice. */
static size_t pick_count(void) {
  uint64_t r = shared(100);
  if (r < 8) return 0;
  if (r < 30) return 1 + shared(PAGE - 1);
  if (r < 60) return PAGE + shared(60 * 1024);
  if (r < 88) return 64 * 1024 + shared(192 * 1024);
  return PAGE * (1 + shared(64));
}

/* The receive buffer of n bytes, what it must hold afterwards (filled by the caller), and what
 * the program will do with it. */
static void prepare(struct call* c, size_t n, unsigned char* stack) {
  acquire(&c->recv, pick_mem(n, stack != NULL), n, stack);
  c->exp = malloc(n + 1);
  if (!c->exp) die("malloc");
  c->action = pick_action(c->recv.mem, 1);
}

static unsigned char* send_buffer(size_t n) {
  unsigned char* s = malloc(n + 1);
  if (!s) die("malloc");
  return s;
}

/* One collective, from the shared choices to the touch; returns 1 when c's check is deferred. */
static int one_call(struct call* c, unsigned char* stack) {
  struct comm fresh;
  struct comm* cm;
  if (c->ck == C_FRESH_DUP) {
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh.comm);
    describe(&fresh);
    cm = &fresh;
  } else {
    cm = &g_comms[c->ck];
  }
  const int p = cm->size, me = cm->rank;
  int deferred = 0;
  c->recv.base = NULL;
  c->exp = NULL;
  if (c->op == OP_BARRIER) {
    MPI_Barrier(cm->comm);
  } else if (c->op == OP_ALLTOALL) {
    size_t block = pick_count();
    if (block * (size_t)p + PAGE + 1 > MAX_SPAN) block = (MAX_SPAN - PAGE - 1) / (size_t)p;
    int in_place = shared(100) < 5;
    const size_t n = block * (size_t)p;
    prepare(c, n, stack);
    for (int s = 0; s < p; ++s)
      for (size_t k = 0; k < block; ++k) c->exp[(size_t)s * block + k] = pattern(c->index, cm->world[s], rank, k);
    unsigned char* send = in_place ? c->recv.p : send_buffer(n);
    for (int t = 0; t < p; ++t)
      for (size_t k = 0; k < block; ++k) send[(size_t)t * block + k] = pattern(c->index, rank, cm->world[t], k);
    if (in_place)
      MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->recv.p, (int)block, MPI_BYTE, cm->comm);
    else
      MPI_Alltoall(send, (int)block, MPI_BYTE, c->recv.p, (int)block, MPI_BYTE, cm->comm);
    if (!in_place) {
      memset(send, 0xee, n); /* the program may reuse its send buffer at once */
      free(send);
    }
  } else if (c->op == OP_ALLTOALLV) {
    size_t counts[MAX_RANKS][MAX_RANKS];
    for (int s = 0; s < p; ++s)
      for (int t = 0; t < p; ++t) counts[s][t] = pick_count() / (size_t)p;
    int scounts[MAX_RANKS], sdispls[MAX_RANKS], rcounts[MAX_RANKS], rdispls[MAX_RANKS];
    /* This rank's displacements: gaps of up to 3 pages, blocks in reverse order half the time. */
    int reverse = (int)local(2);
    size_t at = 0, sent = 0;
    for (int j = 0; j < p; ++j) {
      int s = reverse ? p - 1 - j : j;
      at += local(4) ? 0 : local(3 * PAGE);
      rcounts[s] = (int)counts[s][me];
      rdispls[s] = (int)at;
      at += counts[s][me];
      scounts[j] = (int)counts[me][j];
      sdispls[j] = (int)sent;
      sent += counts[me][j];
    }
    const size_t n = at;
    prepare(c, n, stack);
    for (size_t i = 0; i < n; ++i) c->exp[i] = c->recv.p[i] = gap_byte(c->index, i);
    for (int s = 0; s < p; ++s)
      for (size_t k = 0; k < (size_t)rcounts[s]; ++k) c->exp[rdispls[s] + k] = pattern(c->index, cm->world[s], rank, k);
    unsigned char* send = send_buffer(sent);
    for (int t = 0; t < p; ++t)
      for (size_t k = 0; k < (size_t)scounts[t]; ++k) send[sdispls[t] + k] = pattern(c->index, rank, cm->world[t], k);
    MPI_Alltoallv(send, scounts, sdispls, MPI_BYTE, c->recv.p, rcounts, rdispls, MPI_BYTE, cm->comm);
    memset(send, 0xee, sent);
    free(send);
  } else {
    size_t n = pick_count() * (size_t)(1 + shared(4));
    const int root = (int)shared((uint64_t)p);
    prepare(c, n, stack);
    for (size_t k = 0; k < n; ++k) c->exp[k] = pattern(c->index, cm->world[root], -1, k);
    if (me == root) memcpy(c->recv.p, c->exp, n);
    MPI_Bcast(c->recv.p, (int)n, MPI_BYTE, root, cm->comm);
    if (me == root) {
      memset(c->recv.p, 0xee, n); /* the root's buffer was the send side: reused at once */
      c->action = A_FREE;
    }
  }
  if (c->recv.base) deferred = touch(c);
  if (c->ck == C_FRESH_DUP) MPI_Comm_free(&fresh.comm);
  return deferred;
}

/* A call whose buffer may live on the stack: this frame holds it until the touch is done. */
static int one_call_on_stack(struct call* c) {
  unsigned char stack[MAX_STACK_SPAN];
  return one_call(c, stack);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: soak <seed> <calls> <tmpdir>\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > MAX_RANKS) {
    if (rank == 0) fprintf(stderr, "at most %d ranks\n", MAX_RANKS);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const uint64_t seed = strtoull(argv[1], NULL, 10), calls = strtoull(argv[2], NULL, 10);
  tmpdir = argv[3];
  g_shared_rng = seed;
  g_local_rng = seed * 1000003 + (uint64_t)rank + 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/soak.%d.file", tmpdir, rank);
  g_file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (g_file_fd < 0) die("open");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction");
  make_comms();

  struct call pending = {0};
  int have_pending = 0;
  for (uint64_t i = 0; i < calls; ++i) {
    struct call c = {0};
    c.index = i;
    uint64_t r = shared(100);
    c.op = r < 35 ? OP_ALLTOALL : r < 65 ? OP_ALLTOALLV : r < 92 ? OP_BCAST : OP_BARRIER;
    c.ck = (enum comm_kind)shared(C_KINDS);
    int on_stack = local(100) < 12;
    int deferred = on_stack ? one_call_on_stack(&c) : one_call(&c, NULL);
    ++g_calls;
    if (have_pending) {
      have_pending = 0;
      touch(&pending);
    }
    if (deferred) {
      pending = c;
      pending.action = pick_action(c.recv.mem, 0);
      have_pending = 1;
    }
  }
  if (have_pending) touch(&pending);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("soak rank %d calls %llu checked_calls %llu checked_bytes %llu mismatches %llu checksum %016llx\n", rank,
         (unsigned long long)g_calls, (unsigned long long)g_checked_calls, (unsigned long long)g_checked_bytes,
         (unsigned long long)g_mismatches, (unsigned long long)g_checksum);
  fflush(stdout);
  for (int k = C_DUP; k < C_FRESH_DUP; ++k) MPI_Comm_free(&g_comms[k].comm);
  close(g_file_fd);
  MPI_Finalize();
  return g_mismatches ? 1 : 0;
}
