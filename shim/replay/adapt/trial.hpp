// Which of MPI's own algorithms a key's blocking calls use (algorithm.hpp writes it): a trial
// of the candidates among the key's blocking calls, and the agreed choice.  No MPI here.
//
// MPICH runs a blocking MPI_Alltoall with one of several algorithms (pairwise, scattered,
// brucks, ...) and picks one by message size; on links slower than its tuning assumed, another
// one can be a third faster.  So each key starts with a first choice (candidate 0, algorithm.cpp's
// prior) and later tries all candidates, interleaved, and keeps the fastest:
//
//   blocking calls of a key:  c c ... c [t0 t1 .. tk-1] C C ... C [t t .. t] C C ...  (C: the choice)
//
//   The first calls (`skip`, or more where the budget below asks) run the first choice,
//   unmeasured: a program that makes few calls never pays for trying an algorithm that loses (a
//   trial call of a losing one can cost a third of a call).  Then a round tries every candidate
//   once, in an order rotated by one each round (a drift over the round does not always favour
//   the same one).  Each trial call starts after a barrier on the communicator (blocking.cpp).
//   After a round's last call, the ranks sum each candidate's best time (algorithm.cpp builds the
//   values, blocking.cpp sums them in a Tally; a rank's best is the faster of its last two trial
//   times) and every rank applies choose() to the same sums.  The rounds come ever rarer: the gap
//   after round r is first_gap x 4^r calls, at most max_gap, and no round begins before the
//   key's calls so far pay for it (TrialPolicy::budget: a program of a few hundred calls never
//   pays for a round).  A candidate
//   replaces the current choice only when its agreed time is below the current one's by
//   switch_gain in two rounds in a row: a trial's times are noisy, and a switch on noise costs.
//
// The time of a blocking call is its time inside the call on this rank: what follows a blocking
// call is the same whichever algorithm ran it, since the data is complete when it returns.  But
// a rank that arrives early also waits inside for the others, and a rank that arrives last may
// find its data there already: neither says anything about the algorithm, and on that noise
// neither the sum nor the minimum over the ranks picks the faster one.  Hence the barrier before a
// trial call: all ranks start it together.  The measurements behind these rules:
// docs/measurements/adapt-history.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tnbc::shim::replay::adapt {

struct TrialPolicy {
  std::uint32_t skip = 16;       ///< blocking calls before the first round, at least
  std::uint32_t first_gap = 30;  ///< blocking calls between round 0 and round 1, at least
  std::uint32_t max_gap = 2048;  ///< longest gap between rounds the schedule makes
  double switch_gain = 0.05;     ///< a candidate must save this share of the current choice's time
  /// The share of a key's blocking calls its rounds may cost (0: no bound; TNBC_ALGORITHMS_AFTER
  /// set by hand).  A round of k candidates costs about k x trial_call_cost calls of the choice, so
  /// round r (from 0) begins no earlier than the key's blocking call (r + 1) x k x
  /// trial_call_cost / budget: the rounds made so far never cost more than this share of the
  /// key's calls.  With 4 candidates: rounds at calls 400, 800, 1200, 1684, ...
  double budget = 0.03;
  /// What a trial call costs beyond a call of the choice, in calls of the choice: its barrier and
  /// a losing algorithm (measured on a full node: docs/measurements/adapt-history.md).
  double trial_call_cost = 3.0;
};

/// What a unit of a blocking call's CPU costs the program, in units of its time (0..1; the
/// trial's cost of a call is its time plus its CPU times this).  `calls`, `wall_ns`, `cpu_ns`: a
/// key's blocking calls that MPI ran on this rank, their time and the CPU inside them;
/// `intervals`, `interval_ns`: the key's blocking intervals (from a call to the next).  The
/// share of those calls' time in which the rank's core ran something else (`busy`, 1 -
/// cpu/wall: other processes wanted the CPU the call's polling took), times the share of the
/// intervals spent outside the call (they want it for work only while they are not inside a
/// collective themselves: where a program spends most of its time in its exchanges, the ranks mostly
/// take CPU from each other's polling, which this factor discounts).  0 on a
/// core of its own, where the program does little but exchange data, and before anything is measured.
double cpu_weight(std::uint64_t calls, std::uint64_t wall_ns, std::uint64_t cpu_ns, std::uint64_t intervals,
                  std::uint64_t interval_ns);

/// What the engine's check measured (blocking.cpp, EngineCheck), from the intervals of its four
/// blocks in their order, MPI's, the engine's, the engine's, MPI's: each candidate's two blocks,
/// and the spread, the difference between the two blocks of each (noise; a steady drift of the
/// program cancels in the difference of the sums, not in the spread).
struct CheckSums {
  double mpi = 0, engine = 0, spread = 0;
  /// Across nodes the engine's exchange stays the choice only where its blocks took less than
  /// MPI's by more than the spread: until the program's own time says otherwise, MPI runs its calls.
  bool engine_wins() const { return engine < mpi - spread; }
  /// In a job on one node it stays unless its blocks took longer than MPI's by more than the
  /// spread (blocking.cpp, kEngineAskAt, says why).
  bool engine_loses() const { return engine > mpi + spread; }
};
CheckSums engine_check_sums(double mpi_first, double engine_first, double engine_second, double mpi_second);

class AlgorithmTrial {
 public:
  AlgorithmTrial() = default;
  /// `candidates`: how many (index 0 is the first choice).  With fewer than 2 there is
  /// nothing to try: every call runs candidate 0.
  AlgorithmTrial(std::size_t candidates, const TrialPolicy& policy);

  /// Whether the candidates are tried at all.
  bool active() const { return counts_.size() > 1; }
  /// The candidate the next blocking call runs.
  std::size_t next() const;
  /// True when a round just ended: the ranks must agree the choice (sum bests() over the ranks
  /// and choose()), which after_blocking does right after the round's last call.
  bool choice_due() const { return active() && round_done_; }
  /// This rank's mean time per call of each candidate over its last two rounds (ns; 0: none):
  /// a phase change of the program is followed within two rounds.
  std::vector<double> means() const;
  /// This rank's faster of the last two trial times of each candidate (ns; 0: none).
  std::vector<double> bests() const;
  /// Applies the agreed times (sums over the ranks, the same on every rank; 0: a candidate not
  /// every rank measured): keeps the current choice unless the same candidate is faster by
  /// switch_gain in this round and the one before.  Returns true if the choice changed.
  bool choose(const std::vector<double>& agreed);
  /// Counts the blocking call just made on next(), which took `ns` inside the call.
  void record(std::uint64_t ns);
  /// Makes candidate `index` the choice before any round (a first choice agreed from what the
  /// calls so far showed: decide.cpp, the engine's exchange); not counted as a switch.
  void prefer(std::size_t index) {
    if (index < counts_.size()) chosen_ = index;
  }
  /// Runs the candidates `order` on the next blocking calls, one each, outside the rounds and
  /// not recorded as trial samples: calls the caller measures and compares itself (blocking.cpp:
  /// the engine's exchange against the choice, before it may become the first choice).  False,
  /// and nothing scheduled, where a round would begin or run among them.
  bool sample(const std::vector<std::size_t>& order) {
    if (!active() || round_done_ || calls_ + order.size() > round_start_) return false;
    for (std::size_t c : order)
      if (c >= counts_.size()) return false;
    sample_ = order;
    sample_from_ = calls_;
    return true;
  }
  /// The sample calls not run yet are not run: the next call runs the choice.
  void cancel_sample() {
    sample_.clear();
    sample_from_ = ~std::uint64_t{0};
  }
  /// Whether the next call is one of the sample calls.
  bool sampling() const { return calls_ >= sample_from_ && calls_ - sample_from_ < sample_.size(); }
  /// The next blocking call may not begin a round (it is a probe of the blocking path, whose
  /// few calls the path's decision measures): a round due now waits for the next call.
  void hold() {
    if (active() && !round_done_ && calls_ == round_start_) ++round_start_;
  }

  std::size_t chosen() const { return chosen_; }
  /// The blocking call (counted from 0) at which the next round begins.
  std::uint64_t round_start() const { return round_start_; }
  std::uint64_t calls() const { return calls_; }
  std::uint64_t rounds() const { return rounds_; }
  std::uint64_t switches() const { return switches_; }
  /// Whether the next call is measured for the trial (one of a round's calls).
  bool trying() const { return active() && !round_done_ && calls_ >= round_start_ && calls_ < round_start_ + counts_.size(); }

 private:
  TrialPolicy policy_;
  /// Per candidate: its last two trial times ([0] the latest) and how many it has (at most 2).
  std::vector<std::array<std::uint64_t, 2>> last_;
  std::vector<std::uint64_t> counts_;
  std::size_t chosen_ = 0;
  std::uint64_t calls_ = 0;
  std::uint64_t round_start_ = 0, gap_ = 0;
  std::uint64_t rounds_ = 0, switches_ = 0;
  bool round_done_ = false;
  /// The first call at which round `r` may begin under the policy's budget (0: no budget).
  std::uint64_t budget_start(std::uint64_t r) const;
  std::size_t pending_ = static_cast<std::size_t>(-1);  ///< the winner of the last round, to be confirmed
  std::vector<std::size_t> sample_;               ///< the sample calls' candidates
  std::uint64_t sample_from_ = ~std::uint64_t{0};  ///< the first sample call (none)
};

}  // namespace tnbc::shim::replay::adapt
