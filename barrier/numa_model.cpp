#include "numa_model.hpp"

#include <cstdlib>
#include <latch>
#include <thread>
#include <vector>

namespace tnbc::barrier {
namespace {

class Recorder final : public AccessRecorder {
 public:
  Recorder(const std::byte* base, const Topology& topo, std::span<const int> nodes, int root,
           int self)
      : base_(base), topo_(topo), nodes_(nodes), root_(root), self_(self) {}

  void record(const Line& line, Access) override {
    if (!counting) return;
    auto page = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(&line) - base_) /
                kPageBytes;
    int home = page == 0 ? nodes_[root_] : nodes_[page - 1];
    int mine = nodes_[self_];
    cost.weighted += topo_.distance(mine, home);
    cost.accesses += 1;
    if (home != mine) cost.remote += 1;
  }

  bool counting = false;
  ModelCost cost;

 private:
  const std::byte* base_;
  const Topology& topo_;
  std::span<const int> nodes_;
  int root_, self_;
};

}  // namespace

ModelCost model_cost(Algorithm a, const Topology& topology, std::span<const int> nodes, int root,
                     int episodes) {
  const int size = static_cast<int>(nodes.size());
  const std::size_t bytes = Segment::bytes(size);
  void* base = std::aligned_alloc(kPageBytes, bytes);
  Segment segment(base, size);
  segment.place_global();
  for (int r = 0; r < size; ++r) segment.place_rank(r, root);
  std::vector<ModelCost> costs(static_cast<std::size_t>(size));
  std::latch warm(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Recorder recorder(static_cast<const std::byte*>(base), topology, nodes, root, r);
      t_access_recorder = &recorder;
      Participant self{segment, r, size, root, 0, WaitPolicy{}};
      run(a, self);
      warm.arrive_and_wait();  // counting starts with every rank past the warm-up
      recorder.counting = true;
      for (int e = 0; e < episodes; ++e) run(a, self);
      t_access_recorder = nullptr;
      costs[static_cast<std::size_t>(r)] = recorder.cost;
    });
  }
  for (auto& t : threads) t.join();
  std::free(base);
  ModelCost total;
  for (const ModelCost& c : costs) {
    total.weighted += c.weighted / episodes;
    total.accesses += c.accesses / episodes;
    total.remote += c.remote / episodes;
  }
  return total;
}

}  // namespace tnbc::barrier
