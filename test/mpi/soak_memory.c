/* The soak's receive buffers (soak.h): memory of every kind a program receives into. */
#define _GNU_SOURCE
#include "soak.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static unsigned char g_static[2][SLOT_BYTES] __attribute__((aligned(PAGE)));
static int g_slot_busy[2];

static size_t round_up(size_t n) { return (n + PAGE - 1) & ~(size_t)(PAGE - 1); }

void acquire(struct buffer* b, enum mem mem, size_t n, unsigned char* stack) {
  b->mem = mem;
  b->n = n;
  size_t offset = local(2) ? 0 : local(PAGE);
  b->alloc = round_up(n + offset + 1);
  switch (mem) {
    case M_HEAP:
      b->base = malloc(n + offset + 1);
      if (!b->base) die("malloc");
      break;
    case M_ALIGNED:
      if (posix_memalign((void**)&b->base, PAGE, b->alloc)) die("posix_memalign");
      break;
    case M_STATIC:
      b->slot = g_slot_busy[0] ? 1 : 0;
      g_slot_busy[b->slot] = 1;
      b->base = g_static[b->slot];
      break;
    case M_STACK:
      b->base = stack;
      break;
    case M_MMAP:
    case M_SHARED_ANON:
      b->base = mmap(NULL, b->alloc, PROT_READ | PROT_WRITE,
                     (mem == M_MMAP ? MAP_PRIVATE : MAP_SHARED) | MAP_ANONYMOUS, -1, 0);
      if (b->base == MAP_FAILED) die("mmap");
      break;
    case M_SHARED_FILE: { /* a file of its own: a deferred buffer may still be mapped */
      char path[4096];
      snprintf(path, sizeof path, "%s/soak.%d.map", tmpdir, rank);
      int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || unlink(path) != 0 || ftruncate(fd, (off_t)b->alloc) != 0) die("mapped file");
      b->base = mmap(NULL, b->alloc, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (b->base == MAP_FAILED) die("mmap");
      close(fd);
      break;
    }
  }
  b->p = b->base + offset;
}

void release(struct buffer* b) {
  switch (b->mem) {
    case M_HEAP:
    case M_ALIGNED: free(b->base); break;
    case M_STATIC: g_slot_busy[b->slot] = 0; break;
    case M_STACK: break;
    case M_MMAP:
    case M_SHARED_ANON:
    case M_SHARED_FILE:
      if (munmap(b->base, b->alloc) != 0) die("munmap");
      break;
  }
  b->base = NULL;
}

enum mem pick_mem(size_t n, int stack_ok) {
  for (;;) {
    uint64_t r = local(100);
    enum mem m = r < 30 ? M_HEAP : r < 45 ? M_ALIGNED : r < 60 ? M_STATIC : r < 72 ? M_STACK
               : r < 92 ? M_MMAP : r < 96 ? M_SHARED_ANON : M_SHARED_FILE;
    if (m == M_STATIC && (n + PAGE + 1 > SLOT_BYTES || (g_slot_busy[0] && g_slot_busy[1]))) continue;
    if (m == M_STACK && (!stack_ok || n + PAGE + 1 > MAX_STACK_SPAN)) continue;
    return m;
  }
}
