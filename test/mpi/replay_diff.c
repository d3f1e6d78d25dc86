/* Differential program for replay mode: every scenario does collectives, then uses the received
 * data in some order and way, and prints "<rank> <scenario> <checksum>".  Run plain and under
 * libtnbc.so: the outputs must be identical byte for byte.
 *
 * Usage: replay_diff SCRATCH_DIR [SCENARIO...]   (no scenario: all of them) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, size;
static const char *scratch = "/tmp";

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
#define FNV0 1469598103934665603ull

static void fill(unsigned char *p, size_t n, unsigned seed) {
  uint64_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
}

/* A permutation of 0..n-1 that differs between ranks and runs of a scenario, but not between a
 * plain and a tnbc run. */
static void order(int *o, int n, unsigned seed) {
  for (int i = 0; i < n; i++) o[i] = i;
  uint64_t x = seed * 40503u + 7;
  for (int i = n - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int j = (int)(x % (uint64_t)(i + 1));
    int t = o[i]; o[i] = o[j]; o[j] = t;
  }
}

static void report(const char *name, uint64_t h) { printf("%d %s %016llx\n", rank, name, (unsigned long long)h); }

/* Alltoall of `block` bytes per rank; blocks read in a random order, buffer at an odd offset. */
static void alltoall_sizes(void) {
  static const size_t sizes[] = {1, 100, 4095, 4096, 4097, 65536 + 13, 1 << 20, 8 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t b = sizes[k];
    for (int misalign = 0; misalign < 2; misalign++) {
      unsigned char *sraw = malloc(b * size + 64), *rraw = malloc(b * size + 64);
      unsigned char *s = sraw + (misalign ? 13 : 0), *r = rraw + (misalign ? 7 : 0);
      fill(s, b * size, rank * 31 + (unsigned)k);
      MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
      memset(s, 0xEE, b * size); /* the send buffer may be reused at once */
      int *o = malloc(sizeof(int) * size);
      order(o, size, rank + (unsigned)k * 7);
      uint64_t h = FNV0;
      for (int i = 0; i < size; i++) h = fnv(r + (size_t)o[i] * b, b, h ^ (uint64_t)o[i]);
      char name[64];
      snprintf(name, sizeof name, "alltoall_%zu_%s", b, misalign ? "odd" : "aligned");
      report(name, h);
      free(o); free(sraw); free(rraw);
    }
  }
}

/* Two (and three) collectives in flight before anything is read; read in reverse. */
static void in_flight(void) {
  size_t b = 256 << 10;
  unsigned char *s = malloc(b * size), *r1 = malloc(b * size), *r2 = malloc(b * size);
  unsigned char *bc = malloc(3 << 20);
  fill(s, b * size, rank);
  MPI_Alltoall(s, (int)b, MPI_BYTE, r1, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  fill(s, b * size, rank + 100);
  MPI_Alltoall(s, (int)b, MPI_BYTE, r2, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  if (rank == size - 1) fill(bc, 3 << 20, 77);
  MPI_Bcast(bc, 3 << 20, MPI_BYTE, size - 1, MPI_COMM_WORLD);
  uint64_t h = FNV0;
  h = fnv(bc + (2 << 20), 1 << 20, h);
  for (int i = size - 1; i >= 0; i--) h = fnv(r2 + i * b, b, h);
  for (int i = size - 1; i >= 0; i--) h = fnv(r1 + i * b, b, h);
  h = fnv(bc, 2 << 20, h);
  report("in_flight", h);
  free(s); free(r1); free(r2); free(bc);
}

/* Split and dup'ed communicators, alltoallv with gaps and odd displacements. */
static void comms_and_v(void) {
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm comms[2] = {half, dup};
  const char *names[2] = {"alltoallv_split", "alltoallv_dup"};
  for (int c = 0; c < 2; c++) {
    int n, me;
    MPI_Comm_size(comms[c], &n);
    MPI_Comm_rank(comms[c], &me);
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
    int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
    size_t soff = 0, roff = 0;
    for (int i = 0; i < n; i++) {
      sc[i] = 3000 + 4099 * ((me + 2 * i) % 5); sd[i] = (int)soff; soff += sc[i] + 11;
      rc[i] = 3000 + 4099 * ((i + 2 * me) % 5); rd[i] = (int)roff; roff += rc[i] + 5000; /* gaps */
    }
    unsigned char *s = malloc(soff), *r = malloc(roff);
    fill(s, soff, rank + 5);
    memset(r, 0x5A, roff); /* gap bytes must survive untouched */
    MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, comms[c]);
    int *o = malloc(sizeof(int) * n);
    order(o, n, rank + 3 + c);
    uint64_t h = FNV0;
    for (int i = 0; i < n; i++) h = fnv(r + rd[o[i]], rc[o[i]], h);
    h = fnv(r, roff, h); /* gaps included */
    report(names[c], h);
    free(sc); free(sd); free(rc); free(rd); free(s); free(r); free(o);
  }
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
}

/* Derived datatypes on both sides, and MPI_IN_PLACE. */
static void datatypes(void) {
  const int n = 20000;
  MPI_Datatype vec; /* every other int */
  MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Datatype rvec;
  MPI_Type_create_resized(vec, 0, (MPI_Aint)(2 * n) * sizeof(int), &rvec);
  MPI_Type_commit(&rvec);
  int *s = malloc(sizeof(int) * 2 * n * size), *r = malloc(sizeof(int) * 2 * n * size);
  for (int i = 0; i < 2 * n * size; i++) s[i] = rank * 1000000 + i, r[i] = -1;
  MPI_Alltoall(s, 1, rvec, r, n, MPI_INT, MPI_COMM_WORLD);
  uint64_t h = fnv(r, sizeof(int) * n * size, FNV0);
  MPI_Alltoall(s, n, MPI_INT, r, 1, rvec, MPI_COMM_WORLD);
  h = fnv(r, sizeof(int) * 2 * n * size, h);
  report("datatype_vector", h);
  for (int i = 0; i < 2 * n * size; i++) r[i] = rank * 7 + i;
  MPI_Alltoall(MPI_IN_PLACE, 2 * n, MPI_INT, r, 2 * n, MPI_INT, MPI_COMM_WORLD);
  report("in_place", fnv(r, sizeof(int) * 2 * n * size, FNV0));
  int *b = malloc(sizeof(int) * 2 * n);
  for (int i = 0; i < 2 * n; i++) b[i] = rank == 1 % size ? i * 3 : -1;
  MPI_Bcast(b, 1, vec, 1 % size, MPI_COMM_WORLD);
  report("bcast_vector", fnv(b, sizeof(int) * 2 * n, FNV0));
  MPI_Type_free(&vec); MPI_Type_free(&rvec);
  free(s); free(r); free(b);
}

/* Received data handed to MPI, to write() and to free()/realloc() before being read. */
static void handed_on(void) {
  size_t b = 300000;
  unsigned char *s = malloc(b * size), *r = malloc(b * size);
  fill(s, b * size, rank + 9);
  MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  /* straight into a send to the next rank */
  unsigned char *t = malloc(b * size);
  MPI_Sendrecv(r, (int)(b * size), MPI_BYTE, (rank + 1) % size, 5, t, (int)(b * size), MPI_BYTE,
               (rank + size - 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  report("to_sendrecv", fnv(t, b * size, FNV0));
  /* straight into write(2) */
  MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  char path[512];
  snprintf(path, sizeof path, "%s/replay_diff.%d", scratch, rank);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  ssize_t w = write(fd, r, b * size);
  memset(t, 0, b * size);
  ssize_t rd = pread(fd, t, b * size, 0);
  close(fd);
  unlink(path);
  report("to_write", fnv(t, b * size, (uint64_t)(w == (ssize_t)(b * size)) + 2 * (uint64_t)(rd == w)));
  /* freed and reallocated before read */
  MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  free(r);
  r = malloc(b * size);
  MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  r = realloc(r, 2 * b * size);
  report("realloc", fnv(r, b * size, FNV0));
  free(s); free(r); free(t);
}

/* Several threads read the received data, each its own share, in parallel. */
struct share { unsigned char *p; size_t n; uint64_t h; };
static void *reader(void *arg) {
  struct share *sh = arg;
  sh->h = fnv(sh->p, sh->n, FNV0);
  return NULL;
}
static void threads(void) {
  size_t b = 1 << 20;
  unsigned char *s = malloc(b * size), *r = malloc(b * size);
  fill(s, b * size, rank + 21);
  MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
  enum { T = 4 };
  pthread_t th[T];
  struct share sh[T];
  for (int i = 0; i < T; i++) {
    sh[i].p = r + i * (b * size / T);
    sh[i].n = b * size / T;
    pthread_create(&th[i], NULL, reader, &sh[i]);
  }
  uint64_t h = FNV0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    h = fnv(&sh[i].h, sizeof sh[i].h, h);
  }
  report("threads", h);
  free(s); free(r);
}

/* Bcast of several sizes from several roots, on the stack and in mmap'd memory. */
static void bcasts(void) {
  static const size_t sizes[] = {1, 5000, 65536, 1 << 20, (3 << 20) + 123};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
      size_t n = sizes[k];
      unsigned char *p = mmap(NULL, n + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      unsigned char *b = p + 100;
      if (rank == root) fill(b, n, (unsigned)(k + 1));
      MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
      if (rank == root) memset(b, 0, n); /* the root may reuse its buffer at once */
      char name[64];
      snprintf(name, sizeof name, "bcast_%zu_root%d", n, root);
      report(name, rank == root ? 0 : fnv(b + n / 2, n - n / 2, fnv(b, n / 2, FNV0)));
      munmap(p, n + 8192);
    }
  }
  unsigned char stackbuf[64 << 10];
  if (rank == 0) fill(stackbuf, sizeof stackbuf, 99);
  MPI_Bcast(stackbuf, sizeof stackbuf, MPI_BYTE, 0, MPI_COMM_WORLD);
  report("bcast_stack", fnv(stackbuf, sizeof stackbuf, FNV0));
}

/* One array holds both sides, interleaved: receive block i, then send block i, ... (disjoint
 * bytes, shared pages).  The engine copies the send side after it protects the receive pages,
 * so such a call must not return early: it would fault on its own send bytes. */
static void shared_array(void) {
  const size_t b = 20000 + 4096 * 4; /* not a page multiple: pages hold both sides */
  int *c = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
  for (int i = 0; i < size; i++) c[i] = (int)b, rd[i] = sd[i] = (int)(2 * i * b);
  unsigned char *a = malloc(2 * b * size);
  fill(a, 2 * b * size, rank + 21);
  /* Two base pointers into the array (MPICH refuses sendbuf == recvbuf). */
  MPI_Alltoallv(a + b, c, sd, MPI_BYTE, a, c, rd, MPI_BYTE, MPI_COMM_WORLD);
  report("shared_array", fnv(a, 2 * b * size, FNV0));
  free(c); free(rd); free(sd); free(a);
}

/* The last rank enters late: body chunks to it are synchronous sends that complete only once it
 * has entered, so they hold up what follows them; the others read at once and call MPI
 * functions meanwhile.  Then an Alltoallv in which only rank 0 receives anything (every other
 * rank's receives are empty) with the same late entry. */
static void late_receiver(void) {
  const size_t b = 200000;
  unsigned char *s = malloc(b * size), *r = malloc(b * size);
  for (int it = 0; it < 2; it++) {
    fill(s, b * size, rank + 31 + it);
    if (rank == size - 1) usleep(300000);
    MPI_Alltoall(s, (int)b, MPI_BYTE, r, (int)b, MPI_BYTE, MPI_COMM_WORLD);
    report(it ? "late_receiver_2" : "late_receiver_1", fnv(r, b * size, FNV0));
  }
  int *sc = calloc(size, sizeof(int)), *rc = calloc(size, sizeof(int)), *sd = calloc(size, sizeof(int)),
      *rd = calloc(size, sizeof(int));
  sc[0] = (int)b;
  if (rank == 0)
    for (int i = 0; i < size; i++) rc[i] = (int)b, rd[i] = (int)(i * b);
  fill(s, b, rank + 41);
  memset(r, 0, b * size);
  if (rank == size - 1) usleep(300000);
  MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
  report("late_receiver_v", fnv(r, b * size, FNV0));
  free(sc); free(rc); free(sd); free(rd); free(s); free(r);
}

static const struct { const char *name; void (*fn)(void); } scenarios[] = {
    {"alltoall_sizes", alltoall_sizes}, {"in_flight", in_flight}, {"comms_and_v", comms_and_v},
    {"datatypes", datatypes},           {"handed_on", handed_on}, {"threads", threads},
    {"bcasts", bcasts},                 {"shared_array", shared_array},
    {"late_receiver", late_receiver},
};

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1) scratch = argv[1];
  if (provided < MPI_THREAD_SERIALIZED) printf("%d provided-level-too-low\n", rank);
  for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) {
    int run = argc <= 2;
    for (int a = 2; a < argc; a++) run |= strcmp(argv[a], scenarios[i].name) == 0;
    if (run) scenarios[i].fn();
  }
  MPI_Finalize();
  return 0;
}
