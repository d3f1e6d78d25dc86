// Drives a node barrier with threads or fork()ed processes and checks the barrier property:
// after barrier k returns on a rank, every rank has entered barrier k (its phase is >= k) and
// none is past barrier k+1.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <latch>
#include <random>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "barrier/arena.hpp"
#include "barrier/barrier.hpp"

namespace tnbc::barrier::test {

/// What every rank sees; lives in MAP_SHARED memory so fork()ed children share it too.
struct alignas(kLineBytes) PhaseLine {
  std::atomic<std::uint32_t> phase{0};
};
struct Board {
  std::atomic<int> placed{0};        // ranks that placed their block (the "mapping barrier")
  std::atomic<long> violations{0};   // barrier property broken
  PhaseLine phases[64];
};

/// After barrier episode `k`, every one of the `count` ranks must have reached phase k (it
/// arrived) and none may be past k + 1 (it cannot have left the next episode): the barrier
/// property.  Returns the ranks that break it.
inline long phase_violations(const Board& board, int count, int k) {
  long bad = 0;
  for (int u = 0; u < count; ++u) {
    std::uint32_t seen = board.phases[u].phase.load();
    if (seen < static_cast<std::uint32_t>(k) || seen > static_cast<std::uint32_t>(k) + 1) ++bad;
  }
  return bad;
}

/// The Board, then the segment (barrier/arena.hpp).
using BoardArena = tnbc::barrier::SharedArena<Board>;

struct RunOptions {
  int size = 4;
  int root = 0;
  int iterations = 1000;
  bool delays = true;   // random short delays before arriving
  WaitPolicy wait{};
};

/// One rank's life: place, wait until all placed, then `iterations` checked barriers.
inline void rank_main(BarrierFn fn, const RunOptions& o, BoardArena& arena, int rank) {
  Board& board = arena.header();
  Participant self{Segment(arena.segment_base(), o.size), rank, o.size, o.root, 0, o.wait};
  if (rank == o.root) self.segment.place_global();
  self.segment.place_rank(rank, o.root);
  board.placed.fetch_add(1);
  while (board.placed.load() < o.size) sched_yield();

  std::mt19937 rng(static_cast<unsigned>(rank * 7919 + 17));
  long bad = 0;
  for (int k = 1; k <= o.iterations; ++k) {
    if (o.delays) {
      unsigned r = rng() % 64;
      if (r == 0) usleep(20);
      else if (r < 4) sched_yield();
      else if (r < 8) for (int spin = 0; spin < 2000; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    board.phases[rank].phase.store(static_cast<std::uint32_t>(k));
    fn(self);
    bad += phase_violations(board, o.size, k);
  }
  if (bad) board.violations.fetch_add(bad);
}

/// Runs the ranks as threads; returns the number of violations seen.
inline long run_threads(BarrierFn fn, const RunOptions& o) {
  BoardArena arena(o.size);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.size; ++r)
    threads.emplace_back([&, r] { rank_main(fn, o, arena, r); });
  for (auto& t : threads) t.join();
  return arena.header().violations.load();
}

/// Runs the ranks as fork()ed processes; returns the violations, or -1 if a child failed.
inline long run_processes(BarrierFn fn, const RunOptions& o) {
  BoardArena arena(o.size);
  std::vector<pid_t> children;
  for (int r = 0; r < o.size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      rank_main(fn, o, arena, r);
      _exit(0);
    }
    children.push_back(pid);
  }
  bool failed = false;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = true;
  }
  return failed ? -1 : arena.header().violations.load();
}

}  // namespace tnbc::barrier::test
