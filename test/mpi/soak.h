/* What the soak's files share (soak.c, soak_memory.c): its limits, its choices, the receive
 * buffers' memory and the helpers both use. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define PAGE 4096
#define MAX_RANKS 16
/* Largest receive span of one call (buffer offset included), and the size of each static slot. */
#define MAX_SPAN (2u << 20)
#define SLOT_BYTES (MAX_SPAN + PAGE)
#define MAX_STACK_SPAN (1u << 20)

enum op { OP_ALLTOALL, OP_ALLTOALLV, OP_BCAST, OP_BARRIER };

enum comm_kind { C_WORLD, C_DUP, C_SPLIT_PARITY, C_SPLIT_HALVES_REVERSED, C_FRESH_DUP, C_KINDS };

enum mem { M_HEAP, M_ALIGNED, M_STATIC, M_STACK, M_MMAP, M_SHARED_ANON, M_SHARED_FILE };

/* What the program does with the receive buffer after the call returns. */
enum action {
  A_FORWARD,   /* reads it front to back */
  A_BACKWARD,  /* back to front */
  A_PAGES,     /* one byte of random pages first, then all of it */
  A_SCRIBBLE,  /* writes bytes of its own into random pages, then reads all */
  A_DEFER,     /* does not touch it before the next collective returns */
  A_WRITE,     /* write() to a file, read back into another buffer */
  A_PWRITEV,   /* pwritev() of three pieces, read back */
  A_FREE,      /* frees (unmaps) it unread */
  A_REALLOC,   /* realloc() (heap) or mremap() (mmap) to a larger size, reads the moved bytes */
  A_MPROTECT,  /* makes its pages read-only, reads, makes them writable again */
  A_FORK,      /* fork(): the child reads it and reports; then the parent */
  A_SIGNAL,    /* raise(SIGUSR1): the handler reads it */
  A_THREAD     /* another thread reads it */
};

extern int rank, size;
extern const char* tmpdir;
/* A number below n from this rank's own generator. */
uint64_t local(uint64_t n);
/* Says what failed (with errno) and aborts the job. */
void die(const char* what) __attribute__((noreturn));

struct buffer {
  enum mem mem;
  unsigned char* base; /* the allocation */
  size_t alloc;
  unsigned char* p;    /* the buffer: base + offset */
  size_t n;
  int slot;            /* M_STATIC */
};

/* Memory for n bytes at a random offset (the stack's memory is the caller's). */
void acquire(struct buffer* b, enum mem mem, size_t n, unsigned char* stack);
void release(struct buffer* b);
/* A kind of memory for a receive span of n bytes; the stack and static slots only when free. */
enum mem pick_mem(size_t n, int stack_ok);
