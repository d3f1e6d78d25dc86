// The trial of a key's blocking algorithms (trial.hpp).
#include "trial.hpp"

#include <algorithm>
#include <cmath>

namespace tnbc::shim::replay::adapt {

double cpu_weight(std::uint64_t calls, std::uint64_t wall_ns, std::uint64_t cpu_ns, std::uint64_t intervals,
                  std::uint64_t interval_ns) {
  if (calls == 0 || wall_ns == 0 || intervals == 0 || interval_ns == 0) return 0.0;
  const double busy = 1.0 - static_cast<double>(cpu_ns) / static_cast<double>(wall_ns);
  const double inside = static_cast<double>(wall_ns) / static_cast<double>(calls) /
                        (static_cast<double>(interval_ns) / static_cast<double>(intervals));
  return std::clamp(busy, 0.0, 1.0) * std::clamp(1.0 - inside, 0.0, 1.0);
}

CheckSums engine_check_sums(double mpi_first, double engine_first, double engine_second, double mpi_second) {
  return {mpi_first + mpi_second, engine_first + engine_second,
          std::abs(mpi_first - mpi_second) + std::abs(engine_first - engine_second)};
}

AlgorithmTrial::AlgorithmTrial(std::size_t candidates, const TrialPolicy& policy)
    : policy_(policy), last_(candidates, {0, 0}), counts_(candidates, 0) {
  round_start_ = std::max<std::uint64_t>(policy_.skip, budget_start(0));
  gap_ = policy_.first_gap;
}

std::uint64_t AlgorithmTrial::budget_start(std::uint64_t r) const {
  if (policy_.budget <= 0.0) return 0;
  const double calls = static_cast<double>(r + 1) * static_cast<double>(counts_.size()) * policy_.trial_call_cost /
                       policy_.budget;
  return static_cast<std::uint64_t>(std::ceil(calls - 1e-9));
}

std::size_t AlgorithmTrial::next() const {
  if (sampling()) return sample_[calls_ - sample_from_];
  if (!trying()) return chosen_;
  // Round r tries the candidates starting from r mod k.
  const std::size_t k = counts_.size();
  return static_cast<std::size_t>((calls_ - round_start_ + rounds_) % k);
}

std::vector<double> AlgorithmTrial::means() const {
  std::vector<double> m(counts_.size(), 0.0);
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    const std::uint64_t n = std::min<std::uint64_t>(counts_[i], 2);
    if (n > 0) m[i] = static_cast<double>(last_[i][0] + (n > 1 ? last_[i][1] : 0)) / static_cast<double>(n);
  }
  return m;
}

std::vector<double> AlgorithmTrial::bests() const {
  std::vector<double> b(counts_.size(), 0.0);
  for (std::size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i] > 0)
      b[i] = static_cast<double>(counts_[i] > 1 ? std::min(last_[i][0], last_[i][1]) : last_[i][0]);
  return b;
}

bool AlgorithmTrial::choose(const std::vector<double>& summed) {
  round_done_ = false;
  round_start_ = std::max(calls_ + gap_, budget_start(rounds_ + 1));
  gap_ = std::min<std::uint64_t>(gap_ * 4, policy_.max_gap);
  ++rounds_;
  if (summed.size() != counts_.size()) return false;
  // A candidate not measured (0) does not count.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t best = summed[chosen_] > 0 ? chosen_ : kNone;
  for (std::size_t i = 0; i < summed.size(); ++i)
    if (summed[i] > 0 && (best == kNone || summed[i] < summed[best])) best = i;
  const bool wins = best != kNone && best != chosen_ &&
                    !(summed[chosen_] > 0 && summed[best] >= summed[chosen_] * (1.0 - policy_.switch_gain));
  if (!wins) {
    pending_ = kNone;
    return false;
  }
  if (pending_ != best) {  // its first win: the next round must confirm it
    pending_ = best;
    return false;
  }
  pending_ = kNone;
  chosen_ = best;
  ++switches_;
  return true;
}

void AlgorithmTrial::record(std::uint64_t ns) {
  if (!active()) return;
  if (trying()) {
    const std::size_t c = next();
    last_[c][1] = last_[c][0];
    last_[c][0] = ns;
    ++counts_[c];
    if (calls_ + 1 == round_start_ + counts_.size()) round_done_ = true;
  }
  ++calls_;
}

}  // namespace tnbc::shim::replay::adapt
