// The multi-node composition without MPI: two or three "nodes" (segments), one thread per rank,
// leaders synchronised by a std::barrier standing in for the leaders' MPI barrier.
#include <catch2/catch.hpp>

#include <barrier>
#include <memory>

#include "harness.hpp"

using namespace tnbc::barrier;
using namespace tnbc::barrier::test;

namespace {
void leaders_sync(void* context) { static_cast<std::barrier<>*>(context)->arrive_and_wait(); }
}  // namespace

TEST_CASE("hierarchical: nobody on any node leaves before every rank of every node arrived",
          "[barrier][hierarchical]") {
  Algorithm a = GENERATE(from_range(std::begin(kAllAlgorithms), std::end(kAllAlgorithms)));
  std::vector<int> node_sizes = GENERATE(std::vector<int>{2, 3}, std::vector<int>{1, 2, 1});
  CAPTURE(to_string(a), node_sizes);
  const int nodes = static_cast<int>(node_sizes.size());
  int total = 0;
  for (int s : node_sizes) total += s;
  constexpr int kIterations = 2000;

  std::vector<std::unique_ptr<BoardArena>> arenas;
  for (int s : node_sizes) arenas.push_back(std::make_unique<BoardArena>(s));
  BoardArena global_board(1);  // phases of all ranks, across nodes
  Board& board = global_board.header();
  std::barrier<> leaders(nodes);
  std::latch placed(total);

  std::vector<std::thread> threads;
  int global_rank = 0;
  for (int n = 0; n < nodes; ++n) {
    for (int r = 0; r < node_sizes[n]; ++r, ++global_rank) {
      threads.emplace_back([&, n, r, me = global_rank] {
        const int size = node_sizes[n];
        const int root = size - 1;  // not rank 0, to exercise the root mapping
        Participant self{Segment(arenas[n]->segment_base(), size), r, size, root, 0, {}};
        if (r == root) self.segment.place_global();
        self.segment.place_rank(r, root);
        placed.arrive_and_wait();
        std::mt19937 rng(static_cast<unsigned>(me));
        long bad = 0;
        for (int k = 1; k <= kIterations; ++k) {
          if (rng() % 32 == 0) sched_yield();
          board.phases[me].phase.store(static_cast<std::uint32_t>(k));
          hierarchical(a, self, leaders_sync, &leaders);
          bad += phase_violations(board, total, k);
        }
        board.violations.fetch_add(bad);
      });
    }
  }
  for (auto& t : threads) t.join();
  CHECK(board.violations.load() == 0);
}
