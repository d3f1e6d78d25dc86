// Latency of the node barriers with fork()ed processes (no MPI): for each algorithm, the mean
// time per barrier over many back-to-back barriers after a warm-up, measured on rank 0.
//
// usage: bench_barrier [size] [iterations] [spins] [yields] [algorithm...]
// Not run by `meson test`; docs/barrier.md records its results.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "barrier.hpp"

using namespace tnbc::barrier;

namespace {

double measure(Algorithm a, int size, int iterations, WaitPolicy wait) {
  const std::size_t bytes = kPageBytes + Segment::bytes(size);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) std::exit(2);
  auto* placed = static_cast<std::atomic<int>*>(base);
  auto* result = reinterpret_cast<double*>(static_cast<char*>(base) + 64);
  new (placed) std::atomic<int>(0);
  void* seg_base = static_cast<char*>(base) + kPageBytes;
  std::vector<pid_t> children;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      Participant self{Segment(seg_base, size), r, size, 0, 0, wait};
      if (r == 0) self.segment.place_global();
      self.segment.place_rank(r, 0);
      placed->fetch_add(1);
      while (placed->load() < size) sched_yield();
      for (int i = 0; i < iterations / 10 + 10; ++i) run(a, self);  // warm-up
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) run(a, self);
      auto end = std::chrono::steady_clock::now();
      if (r == 0) *result = std::chrono::duration<double, std::micro>(end - start).count() / iterations;
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  double us = *result;
  munmap(base, bytes);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int size = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 20000;
  WaitPolicy wait;
  if (argc > 3) wait.spins = std::atoi(argv[3]);
  if (argc > 4) wait.yields = std::atoi(argv[4]);
  std::vector<Algorithm> algos;
  for (int i = 5; i < argc; ++i)
    if (auto a = parse_algorithm(argv[i])) algos.push_back(*a);
  if (algos.empty()) algos.assign(std::begin(kAllAlgorithms), std::end(kAllAlgorithms));
  std::printf("# %d processes, %d barriers, spins %d, yields %d: microseconds per barrier\n",
              size, iterations, wait.spins, wait.yields);
  for (Algorithm a : algos) {
    std::string name(to_string(a));
    std::printf("%-22s %8.2f\n", name.c_str(), measure(a, size, iterations, wait));
    std::fflush(stdout);
  }
}
