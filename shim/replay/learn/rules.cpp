// Online learning's rules without MPI (rules.hpp).
#include "rules.hpp"

namespace tnbc::shim::replay::learn {
namespace {

std::vector<std::uint32_t> as_u32(const std::vector<std::size_t>& order) { return {order.begin(), order.end()}; }

/// Adopts `order` as the site's current order (a new entry: the old one stays valid).
void adopt(const KeyLearning& k, LearnedOrder& s, const priority::Consensus& c, std::uint64_t call) {
  priority::PlanEntry& e = s.entries.emplace_back();
  e.op = k.op;
  e.comm_size = k.comm_size;
  e.order = as_u32(c.order);
  s.current = &e;
  s.current_ordered = c.ordered;
  s.learned_at_call = call;
  s.candidate.clear();
}

}  // namespace

void update(const KeyLearning& k, LearnedOrder& s, const priority::Consensus& c, std::uint64_t call) {
  const std::size_t n = c.order.size();
  if (s.current == nullptr) return adopt(k, s, c, call);
  std::vector<std::size_t> current(s.current->order.begin(), s.current->order.end());
  if (priority::concordance(c.order, n - c.ordered, current, n - s.current_ordered) >= kKeepConcordance) {
    s.candidate.clear();
    return;
  }
  if (!s.candidate.empty() &&
      priority::concordance(c.order, n - c.ordered, s.candidate, n - s.candidate_ordered) >= kKeepConcordance) {
    ++s.changes;
    return adopt(k, s, c, call);
  }
  s.candidate = c.order;
  s.candidate_ordered = c.ordered;
}

bool designated(std::uint64_t call, bool probing) { return probing || call % kBlockingRunEvery == 0; }

}  // namespace tnbc::shim::replay::learn
