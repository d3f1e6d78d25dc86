// The exploration budget of one rank: what trying anything other than MPI's default blocking
// call has cost the program so far, held to a share of the time the program has run
// (TNBC_EXPLORE, 1% by default; docs/replay.md, "Deciding per call").  No MPI here: the ranks
// agree through the path votes (policy.hpp, Vote::probe_refusals), each rank asking its own
// budget.
//
// What is charged, each at what it cost beyond the call it replaced, as measured on this rank:
//   early_probe   an early probe's calls: its mean interval less the blocking mean it was
//                 compared with, times its calls (policy.hpp, KeyState::take_probe_excess_ns);
//   engine_sample the engine's sample calls less MPI's, and its check's calls of the loser less
//                 the winner's (blocking.cpp);
//   trial         a trial round's candidates less the choice (blocking.cpp).
// The early probe, the engine's check and, in a job across nodes, the engine's samples ask the
// budget before they run (the trial has its own schedule by call counts: trial.hpp); all count
// against it, so the statistics show what exploring cost against the bound.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

namespace tnbc::shim::replay::adapt {

enum class Explore : std::uint8_t { early_probe, engine_sample, trial };
inline constexpr std::size_t kExploreKinds = 3;

class ExplorationBudget {
 public:
  /// `share`: the share of the time since `start_ns` that exploring may cost (0.01: 1%);
  /// negative: no bound (every probe runs at its call).
  void start(double share, std::uint64_t start_ns) {
    share_ = share;
    start_ns_ = start_ns;
  }
  bool bounded() const { return share_ >= 0; }
  double share() const { return share_; }
  /// What exploring may have cost by `now_ns` (ns; unbounded: the whole time).
  std::uint64_t allowed_ns(std::uint64_t now_ns) const;
  /// Whether a try predicted to cost `predicted_ns` stays within the bound at `now_ns`, with
  /// what was charged so far and what tries under way reserved, and no other try under way (one
  /// at a time: keys that try together measure each other's cost).  Not charged here: the try
  /// is charged what it is measured to cost.
  bool affords(std::uint64_t predicted_ns, std::uint64_t now_ns) const;
  /// A try under way (a key's early probe, from its probe point's vote to the decision after
  /// it) holds its prediction until release(), when it is charged what it measured.
  void reserve(std::uint64_t ns) {
    reserved_ns_.fetch_add(ns, std::memory_order_relaxed);
    under_way_.fetch_add(1, std::memory_order_relaxed);
  }
  void release(std::uint64_t ns) {
    reserved_ns_.fetch_sub(ns, std::memory_order_relaxed);
    under_way_.fetch_sub(1, std::memory_order_relaxed);
  }
  /// What an early call cost beyond a blocking one, as a share of the blocking interval, in the
  /// last early probe this rank measured (any key); NaN before any.  A key that has not
  /// measured its own is predicted by it.
  void measured_loss(double share) { last_loss_share_.store(share, std::memory_order_relaxed); }
  double last_loss_share() const { return last_loss_share_.load(std::memory_order_relaxed); }
  /// What a call of the engine's exchange cost beyond MPI's blocking call, as a share of the
  /// key's blocking interval, in the last samples or check of the engine this rank measured (any
  /// key; below 0: it cost less); NaN before any.  A key of a job across nodes predicts its
  /// samples by it (blocking.cpp, predicted_engine_try_ns).
  void measured_engine_loss(double share) { last_engine_loss_share_.store(share, std::memory_order_relaxed); }
  double last_engine_loss_share() const { return last_engine_loss_share_.load(std::memory_order_relaxed); }
  void charge(Explore kind, std::uint64_t ns) {
    spent_[static_cast<std::size_t>(kind)].fetch_add(ns, std::memory_order_relaxed);
  }
  /// A probe of the early path deferred because some rank's budget could not afford it (the
  /// same count on every rank of the key's communicator).
  void deferred() { deferrals_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t spent_ns(Explore kind) const {
    return spent_[static_cast<std::size_t>(kind)].load(std::memory_order_relaxed);
  }
  std::uint64_t spent_ns() const;
  std::uint64_t deferrals() const { return deferrals_.load(std::memory_order_relaxed); }
  /// The statistics' "explore" object (docs/config.md) at `now_ns`.
  std::string json(std::uint64_t now_ns) const;
  /// For the closing summary: "; exploring cost 12 ms of the 1% (48 ms) allowed" (empty where
  /// nothing was charged and no probe deferred).
  std::string summary(std::uint64_t now_ns) const;

 private:
  double share_ = -1;
  std::uint64_t start_ns_ = 0;
  std::array<std::atomic<std::uint64_t>, kExploreKinds> spent_{};
  std::atomic<std::uint64_t> deferrals_{0};
  std::atomic<std::uint64_t> reserved_ns_{0}, under_way_{0};
  std::atomic<double> last_loss_share_{std::numeric_limits<double>::quiet_NaN()};
  std::atomic<double> last_engine_loss_share_{std::numeric_limits<double>::quiet_NaN()};
};

/// This rank's budget (decide.cpp starts it).
ExplorationBudget& exploration_budget();

/// What an early probe of `calls` calls is predicted to cost beyond the blocking calls it
/// replaces: `loss_share` (the share of a blocking interval an early call cost more, as last
/// measured for the key; below 0: it cost less; NaN: never measured, kEarlyLossPrior) times
/// `blocking_ns` (the key's mean blocking interval) per call, and at least `floor_ns` per call
/// where the key has not measured its own early calls: what its samples measured the engine's
/// exchange, which moves an early call's data, to take beyond MPI's blocking call (0: unmeasured):
/// a share of a short blocking call can predict far too little (docs/measurements/adapt-history.md).
std::uint64_t predicted_probe_ns(std::uint64_t calls, double blocking_ns, double loss_share, double floor_ns = 0);

/// What a call of the engine's exchange took beyond MPI's blocking call in a key's samples:
/// `wall_ns` and `calls` summed, [0] MPI's, [1] the engine's.  0 before both ran, or where the
/// engine's was the faster.
double engine_excess_ns(const double (&wall_ns)[2], const int (&calls)[2]);

/// The share of a blocking interval an early call is assumed to cost more before any was
/// measured on the rank: a whole interval.  Where the program reads its data right after each
/// call, an early call costs from a tenth of a call to several calls, and a smaller prior lets
/// keys probe at once far past the budget (docs/measurements/adapt-history.md).  With a whole
/// interval a key that has no room to show is first probed once the program has run 400 of its
/// intervals.
inline constexpr double kEarlyLossPrior = 1.0;

}  // namespace tnbc::shim::replay::adapt
