#include "barrier.hpp"

namespace tnbc::barrier {

Algorithm choose_auto(int local_size) {
  return local_size <= kAutoCentralCounterMax ? Algorithm::central_counter : Algorithm::mcs;
}

BarrierFn function_of(Algorithm a) {
  switch (a) {
    case Algorithm::central_counter: return central_counter;
    case Algorithm::flat_tree: return flat_tree;
    case Algorithm::gather_release: return gather_release;
    case Algorithm::combining_tree: return combining_tree;
    case Algorithm::combining_tree_atomic: return combining_tree_atomic;
    case Algorithm::mcs: return mcs;
    case Algorithm::tournament: return tournament;
    case Algorithm::dissemination: return dissemination;
  }
  return central_counter;  // not reached: every enumerator is listed
}

std::vector<int> absent(const Participant& self, std::uint32_t episode) {
  std::vector<int> out;
  for (int r = 0; r < self.size; ++r)
    if (!reached(self.segment.rank(r).entered.value.load(std::memory_order_acquire), episode)) out.push_back(r);
  return out;
}

}  // namespace tnbc::barrier
