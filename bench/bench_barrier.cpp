// Latency of the node barriers with fork()ed processes (no MPI): for each algorithm, the mean
// time per barrier over many back-to-back barriers after a warm-up, measured on rank 0.
//
// usage: bench_barrier [size] [iterations] [spins] [yields] [algorithm...]
//        (spins given: a fixed spin budget; otherwise the adaptive default)
//        bench_barrier model     NUMA cost model on the seed paper's machines (numa_model.hpp)
// Not run by `meson test`; docs/measurements/barrier.md records its results.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "barrier/arena.hpp"
#include "barrier/barrier.hpp"
#include "barrier/machines.hpp"
#include "barrier/min_numa_dist.hpp"
#include "barrier/numa_model.hpp"

using namespace tnbc::barrier;

namespace {

/// What the processes share besides the segment.
struct Shared {
  std::atomic<int> placed{0};
  double result = 0;  // microseconds per barrier on rank 0
};

double measure(Algorithm a, int size, int iterations, WaitPolicy wait) {
  SharedArena<Shared> arena(size);
  Shared& shared = arena.header();
  std::vector<pid_t> children;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      Participant self{Segment(arena.segment_base(), size), r, size, 0, 0, wait};
      if (r == 0) self.segment.place_global();
      self.segment.place_rank(r, 0);
      shared.placed.fetch_add(1);
      while (shared.placed.load() < size) sched_yield();
      for (int i = 0; i < iterations / 10 + 10; ++i) run(a, self);  // warm-up
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) run(a, self);
      auto end = std::chrono::steady_clock::now();
      if (r == 0) shared.result = std::chrono::duration<double, std::micro>(end - start).count() / iterations;
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return shared.result;
}

struct Machine {
  const char* name;
  std::vector<std::vector<int>> distances;
  std::vector<int> nodes;
};

int model_main() {
  const auto& epyc = machines::kEpyc;
  const auto& intel = machines::kIntel2;
  const Machine machines[] = {
      {"Intel 2 sockets, 8 ranks, linear 4+4 (symmetric)", intel, {0, 0, 0, 0, 1, 1, 1, 1}},
      {"Intel 2 sockets, 8 ranks, rank 0 isolated (paper fig. 7b/8)", intel,
       {0, 1, 1, 1, 1, 1, 1, 1}},
      {"Intel 2 sockets, 12 ranks, 3 + 9", intel, {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {"AMD EPYC 8 nodes, 8 ranks, 0,0 | 5,5 | 6,6,6,6 (paper section 3)", epyc,
       {0, 0, 5, 5, 6, 6, 6, 6}},
      {"AMD EPYC 8 nodes, 16 ranks, rank 0 on node 0, 15 on nodes 4-7", epyc,
       {0, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7}},
  };
  for (const Machine& m : machines) {
    MatrixTopology topo(m.distances, m.nodes);
    int best = min_numa_dist(topo, m.nodes);
    std::printf("\n%s: MinNumaDist root %d\n", m.name, best);
    std::printf("%-22s %12s %12s %8s %14s\n", "algorithm", "root 0", "MinNumaDist", "change",
                "remote 0 -> M");
    for (Algorithm a : kAllAlgorithms) {
      ModelCost c0 = model_cost(a, topo, m.nodes, 0);
      ModelCost cm = model_cost(a, topo, m.nodes, best);
      std::string name(to_string(a));
      std::printf("%-22s %12.1f %12.1f %+7.1f%% %6.1f -> %5.1f\n", name.c_str(), c0.weighted,
                  cm.weighted, 100.0 * (cm.weighted - c0.weighted) / c0.weighted, c0.remote,
                  cm.remote);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "model") return model_main();
  int size = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 20000;
  WaitPolicy wait;
  if (argc > 3) wait.spins = wait.min_spins = wait.max_spins = std::atoi(argv[3]);
  if (argc > 4) wait.yields = std::atoi(argv[4]);
  std::vector<Algorithm> algos;
  for (int i = 5; i < argc; ++i)
    if (auto a = parse_algorithm(argv[i])) algos.push_back(*a);
  if (algos.empty()) algos.assign(std::begin(kAllAlgorithms), std::end(kAllAlgorithms));
  std::printf("# %d processes, %d barriers, spins %d..%d, yields %d: microseconds per barrier\n",
              size, iterations, wait.min_spins, wait.max_spins, wait.yields);
  for (Algorithm a : algos) {
    std::string name(to_string(a));
    std::printf("%-22s %8.2f\n", name.c_str(), measure(a, size, iterations, wait));
    std::fflush(stdout);
  }
}
