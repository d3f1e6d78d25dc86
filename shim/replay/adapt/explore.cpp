// The exploration budget (explore.hpp).
#include "explore.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tnbc::shim::replay::adapt {

std::uint64_t ExplorationBudget::allowed_ns(std::uint64_t now_ns) const {
  const std::uint64_t ran = now_ns > start_ns_ ? now_ns - start_ns_ : 0;
  if (!bounded()) return ran;
  return static_cast<std::uint64_t>(share_ * static_cast<double>(ran));
}

std::uint64_t ExplorationBudget::spent_ns() const {
  std::uint64_t sum = 0;
  for (const auto& s : spent_) sum += s.load(std::memory_order_relaxed);
  return sum;
}

bool ExplorationBudget::affords(std::uint64_t predicted_ns, std::uint64_t now_ns) const {
  if (!bounded()) return true;
  if (under_way_.load(std::memory_order_relaxed) > 0) return false;
  return spent_ns() + reserved_ns_.load(std::memory_order_relaxed) + predicted_ns <= allowed_ns(now_ns);
}

std::string ExplorationBudget::json(std::uint64_t now_ns) const {
  auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  return fmt::format(
      R"({{"bound":{},"allowed_us":{:.3f},"spent_us":{:.3f},"early_probe_us":{:.3f},"engine_sample_us":{:.3f},)"
      R"("trial_us":{:.3f},"probes_deferred":{}}})",
      bounded() ? fmt::format("{:g}", share_) : std::string("null"), us(allowed_ns(now_ns)), us(spent_ns()),
      us(spent_ns(Explore::early_probe)), us(spent_ns(Explore::engine_sample)), us(spent_ns(Explore::trial)),
      deferrals());
}

std::string ExplorationBudget::summary(std::uint64_t now_ns) const {
  if (spent_ns() == 0 && deferrals() == 0) return {};
  const double ms = static_cast<double>(spent_ns()) / 1e6;
  if (!bounded()) return fmt::format("; exploring cost {:.0f} ms (TNBC_EXPLORE=off: no bound)", ms);
  return fmt::format("; exploring cost {:.0f} ms of the {:g}% ({:.0f} ms) allowed{}", ms, 100 * share_,
                     static_cast<double>(allowed_ns(now_ns)) / 1e6,
                     deferrals() > 0 ? fmt::format(", {} probe{} of the early path deferred", deferrals(),
                                                  deferrals() > 1 ? "s" : "")
                                    : std::string());
}

ExplorationBudget& exploration_budget() {
  static ExplorationBudget budget;
  return budget;
}

double engine_excess_ns(const double (&wall_ns)[2], const int (&calls)[2]) {
  if (calls[0] <= 0 || calls[1] <= 0) return 0;
  return std::max(0.0, wall_ns[1] / calls[1] - wall_ns[0] / calls[0]);
}

std::uint64_t predicted_probe_ns(std::uint64_t calls, double blocking_ns, double loss_share, double floor_ns) {
  const double share = std::isnan(loss_share) ? kEarlyLossPrior : loss_share;
  if (blocking_ns <= 0) return 0;
  const double per_call = std::max(share * blocking_ns, floor_ns);
  if (per_call <= 0) return 0;
  return static_cast<std::uint64_t>(static_cast<double>(calls) * per_call);
}

}  // namespace tnbc::shim::replay::adapt
