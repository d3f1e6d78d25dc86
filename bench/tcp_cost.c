// What the kernel's TCP costs per byte between two hosts (on the emulated cluster: two nodes'
// namespaces), without MPI or tnbc: each side sends and receives BYTES per exchange, REPS
// exchanges, with blocking sockets (a sending thread and the receiving main thread, both asleep
// in the kernel while they wait), and prints the time and the process's CPU (user + system) per
// exchange.  docs/publishing.md compares it with the progress thread's CPU per early call.
//
//   ip netns exec NODE1 build/bench/tcp_cost server ADDR1 PORT BYTES [REPS] &
//   ip netns exec NODE0 build/bench/tcp_cost client ADDR1 PORT BYTES [REPS]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t g_bytes;
static int g_reps, g_fd;
static char *g_send;

static void *sender(void *unused) {
  (void)unused;
  for (int r = 0; r < g_reps; ++r)
    for (size_t off = 0; off < g_bytes;) {
      ssize_t n = send(g_fd, g_send + off, g_bytes - off, 0);
      if (n <= 0) {
        perror("tcp_cost: send");
        exit(1);
      }
      off += (size_t)n;
    }
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/// The process's CPU in seconds: user + system (sys != 0) or system only.
static double cpu_s(int system_only) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  double sys = (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
  return system_only ? sys : sys + (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
  if (argc < 5 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
    fprintf(stderr, "usage: tcp_cost server|client ADDR PORT BYTES [REPS]  (the server listens on ADDR)\n");
    return 2;
  }
  g_bytes = strtoull(argv[4], NULL, 0);
  g_reps = argc > 5 ? atoi(argv[5]) : 20;
  char *recv_buf = malloc(g_bytes);
  g_send = malloc(g_bytes);
  if (g_bytes == 0 || g_reps < 1 || recv_buf == NULL || g_send == NULL) {
    fprintf(stderr, "tcp_cost: BYTES and REPS must be positive\n");
    return 2;
  }
  memset(g_send, 1, g_bytes);
  memset(recv_buf, 0, g_bytes);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
  if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) {
    fprintf(stderr, "tcp_cost: %s: not an IPv4 address\n", argv[2]);
    return 2;
  }
  int one = 1;
  if (strcmp(argv[1], "server") == 0) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0) {
      perror("tcp_cost: bind/listen");
      return 1;
    }
    g_fd = accept(listener, NULL, NULL);
  } else {
    for (int tries = 0;; ++tries) {  // the server may still be starting
      g_fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(g_fd, (struct sockaddr *)&addr, sizeof addr) == 0) break;
      close(g_fd);
      if (tries == 100) {
        perror("tcp_cost: connect");
        return 1;
      }
      usleep(50000);
    }
  }
  if (g_fd < 0) {
    perror("tcp_cost: accept");
    return 1;
  }
  setsockopt(g_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const double cpu0 = cpu_s(0), sys0 = cpu_s(1), t0 = now_s();
  pthread_t thread;
  pthread_create(&thread, NULL, sender, NULL);
  for (int r = 0; r < g_reps; ++r)
    for (size_t off = 0; off < g_bytes;) {
      ssize_t n = recv(g_fd, recv_buf + off, g_bytes - off, 0);
      if (n <= 0) {
        perror("tcp_cost: recv");
        return 1;
      }
      off += (size_t)n;
    }
  pthread_join(thread, NULL);
  const double t = now_s() - t0, cpu = cpu_s(0) - cpu0, sys = cpu_s(1) - sys0;
  printf("%s: %zu bytes each way x %d: %.2f ms per exchange, CPU %.2f ms per exchange (system %.2f)\n", argv[1],
         g_bytes, g_reps, t / g_reps * 1e3, cpu / g_reps * 1e3, sys / g_reps * 1e3);
  close(g_fd);
  return 0;
}
