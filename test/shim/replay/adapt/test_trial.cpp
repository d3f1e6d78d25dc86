// The trial of MPI's own algorithms (shim/replay/adapt/trial.hpp), driven with made-up call
// times: which candidate each blocking call runs, when the ranks agree, and the hysteresis.
#include <catch2/catch.hpp>

#include <vector>

#include "shim/replay/adapt/trial.hpp"

using tnbc::shim::replay::adapt::AlgorithmTrial;
using tnbc::shim::replay::adapt::TrialPolicy;
using tnbc::shim::replay::adapt::cpu_weight;
using tnbc::shim::replay::adapt::engine_check_sums;

namespace {

/// Runs `n` blocking calls of one rank whose candidate i takes cost[i] ns; the choice is
/// agreed from this rank's bests alone (as if every rank measured the same).  Returns the
/// candidate of each call.
std::vector<std::size_t> run(AlgorithmTrial& t, const std::vector<std::uint64_t>& cost, int n) {
  std::vector<std::size_t> ran;
  for (int i = 0; i < n; ++i) {
    if (t.choice_due()) t.choose(t.bests());
    ran.push_back(t.next());
    t.record(cost[ran.back()]);
  }
  return ran;
}

}  // namespace

TEST_CASE("one candidate: nothing is tried, every call runs MPI's default") {
  AlgorithmTrial t(1, TrialPolicy{});
  REQUIRE_FALSE(t.active());
  AlgorithmTrial none;
  REQUIRE_FALSE(none.active());
  REQUIRE(run(t, {100}, 10) == std::vector<std::size_t>(10, 0));
  REQUIRE(t.rounds() == 0);
}

/// Tries from the second call on, at the fixed schedule (TNBC_ALGORITHMS_AFTER=1).
TrialPolicy early() {
  TrialPolicy p;
  p.skip = 1;
  p.budget = 0.0;
  return p;
}

std::vector<std::size_t> slice(const std::vector<std::size_t>& v, std::size_t from, std::size_t to) {
  return std::vector<std::size_t>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                  v.begin() + static_cast<std::ptrdiff_t>(to));
}

TEST_CASE("defaults: a round waits until the key's calls so far pay for it (3% of them)") {
  // 3 candidates, a round costing about 3 calls each: 9 calls, 3% of 300.
  AlgorithmTrial t(3, TrialPolicy{});
  REQUIRE(t.round_start() == 300);
  const auto ran = run(t, {300, 180, 200}, 604);
  REQUIRE(slice(ran, 0, 300) == std::vector<std::size_t>(300, 0));
  REQUIRE(slice(ran, 300, 304) == std::vector<std::size_t>{0, 1, 2, 0});
  // Round 1 waits for call 600 (two rounds, 3% of 600), not for the schedule's 30 calls; it
  // confirms candidate 1, and round 2 waits for call 900.
  REQUIRE(slice(ran, 304, 600) == std::vector<std::size_t>(296, 0));
  REQUIRE(slice(ran, 600, 604) == std::vector<std::size_t>{1, 2, 0, 1});
  REQUIRE(t.chosen() == 1);
  REQUIRE(t.round_start() == 900);
  // More candidates, longer waits: 4 of them, 400 calls.
  REQUIRE(AlgorithmTrial(4, TrialPolicy{}).round_start() == 400);
  // Once the schedule's gaps are longer than the budget's, the schedule decides.
  TrialPolicy wide;
  wide.first_gap = 1000;
  AlgorithmTrial u(3, wide);
  run(u, {300, 180, 200}, 304);
  REQUIRE(u.round_start() == 1303);
}

TEST_CASE("a fixed schedule (TNBC_ALGORITHMS_AFTER=16): 16 calls untried, round 1 30 calls after round 0") {
  TrialPolicy p;
  p.budget = 0.0;
  AlgorithmTrial t(3, p);
  const auto ran = run(t, {300, 180, 200}, 53);
  REQUIRE(slice(ran, 0, 16) == std::vector<std::size_t>(16, 0));
  // Round 0 at calls 16-18; its winner waits for round 1, 30 calls after the choice, rotated.
  REQUIRE(slice(ran, 16, 21) == std::vector<std::size_t>{0, 1, 2, 0, 0});
  REQUIRE(slice(ran, 49, 53) == std::vector<std::size_t>{1, 2, 0, 1});
  REQUIRE(t.chosen() == 1);
}

/// Tries from the second call on, the second round 2 calls after the first.
TrialPolicy quick() {
  TrialPolicy p = early();
  p.first_gap = 2;
  return p;
}

TEST_CASE("the first call runs the first choice; a round tries each candidate once; the fastest is kept "
          "once it wins a second round") {
  AlgorithmTrial t(3, quick());
  const auto ran = run(t, {300, 180, 200}, 11);
  // Call 0: the default, unmeasured.  Calls 1-3: round 0 (candidate 1 wins, not yet taken).
  // Calls 6-8: round 1, rotated (candidate 1 wins again).  Call 9 on: the choice.
  REQUIRE(ran == std::vector<std::size_t>{0, 0, 1, 2, 0, 0, 1, 2, 0, 1, 1});
  REQUIRE(t.chosen() == 1);
  REQUIRE(t.rounds() == 2);
  REQUIRE(t.switches() == 1);
}

TEST_CASE("a candidate that wins one round only is not taken") {
  AlgorithmTrial t(3, quick());
  run(t, {300, 180, 200}, 4);  // round 0: candidate 1
  run(t, {300, 250, 100}, 5);  // round 1: candidate 2 (the faster of its samples, 100 and 200)
  REQUIRE(t.rounds() == 1);
  REQUIRE(t.choice_due());
  run(t, {300, 250, 100}, 1);
  REQUIRE(t.rounds() == 2);
  REQUIRE(t.chosen() == 0);
  run(t, {300, 250, 100}, 11);  // round 2 (calls 17-19) confirms candidate 2
  REQUIRE(t.rounds() == 3);
  REQUIRE(t.chosen() == 2);
  REQUIRE(t.switches() == 1);
}

TEST_CASE("a candidate less than switch_gain faster does not replace the default") {
  AlgorithmTrial t(3, quick());
  run(t, {1000, 960, 990}, 10);  // 4% faster in both rounds: noise
  REQUIRE(t.rounds() == 2);
  REQUIRE(t.chosen() == 0);
  AlgorithmTrial u(3, quick());
  run(u, {1000, 940, 990}, 10);  // 6% faster
  REQUIRE(u.chosen() == 1);
}

TEST_CASE("rounds come ever rarer, rotated, and a phase change is followed") {
  TrialPolicy p = early();
  p.first_gap = 4;
  AlgorithmTrial t(2, p);
  std::vector<std::uint64_t> cost = {100, 200};
  auto ran = run(t, cost, 4);  // 0; round 0: 0 1; then the choice (0)
  REQUIRE(ran == std::vector<std::size_t>{0, 0, 1, 0});
  REQUIRE(t.rounds() == 1);
  // Round 1 begins 4 calls after the choice, its order rotated: candidate 1 first.
  ran = run(t, cost, 5);
  REQUIRE(ran == std::vector<std::size_t>{0, 0, 0, 1, 0});
  REQUIRE(t.choice_due());
  REQUIRE(t.rounds() == 1);
  // Candidate 1 becomes much faster: the faster of its last two samples follows at once.
  cost = {100, 40};
  run(t, cost, 1);
  REQUIRE(t.rounds() == 2);
  REQUIRE(t.chosen() == 0);  // candidate 1's last two: 200 and 200
  run(t, cost, 16 + 2 + 1);  // round 2 at calls 25-26: 200 and 40, the first win
  REQUIRE(t.rounds() == 3);
  REQUIRE(t.chosen() == 0);
  REQUIRE(t.means()[1] == 120);
  REQUIRE(t.bests()[1] == 40);
  run(t, cost, 64 + 2);  // round 3 at calls 91-92 confirms it
  REQUIRE(t.rounds() == 4);
  REQUIRE(t.chosen() == 1);
  REQUIRE(t.means()[1] == 40);
}

TEST_CASE("a probe holds a round back: the round begins at the next call that allows it") {
  AlgorithmTrial t(2, early());
  t.record(100);  // call 0
  REQUIRE(t.trying());
  t.hold();  // call 1 is a probe
  REQUIRE_FALSE(t.trying());
  REQUIRE(t.next() == 0);
  t.record(100);
  REQUIRE(t.trying());
  REQUIRE(t.next() == 0);
  t.record(100);
  t.hold();  // a round under way is not held
  REQUIRE(t.next() == 1);
}

TEST_CASE("a candidate some rank did not measure (0 in the sums) is never chosen") {
  AlgorithmTrial t(3, early());
  run(t, {300, 100, 200}, 4);
  REQUIRE(t.choice_due());
  REQUIRE_FALSE(t.choose({300, 0, 200}));  // the first win
  REQUIRE(t.choose({300, 0, 200}));
  REQUIRE(t.chosen() == 2);
}

TEST_CASE("a preferred first choice runs until a round, which judges it as any choice") {
  AlgorithmTrial t(3, early());
  t.prefer(2);  // the engine's exchange, say
  REQUIRE(t.chosen() == 2);
  REQUIRE(t.switches() == 0);
  t.prefer(7);  // no such candidate: nothing changes
  REQUIRE(t.chosen() == 2);
  run(t, {100, 300, 200}, 4);
  REQUIRE_FALSE(t.choose({100, 300, 200}));  // candidate 0 wins once: not yet
  REQUIRE(t.chosen() == 2);
}

TEST_CASE("sample calls run their candidates outside the rounds, unrecorded, and never inside a round") {
  TrialPolicy p;
  p.skip = 8;
  p.budget = 0.0;
  AlgorithmTrial t(3, p);
  run(t, {100, 300, 200}, 4);
  REQUIRE(t.sample({0, 2, 0, 2}));
  REQUIRE(t.sampling());
  REQUIRE_FALSE(t.trying());
  // Calls 4-7 run the samples; then round 0 from call 8.
  REQUIRE(run(t, {100, 300, 200}, 5) == std::vector<std::size_t>{0, 2, 0, 2, 0});
  REQUIRE_FALSE(t.sampling());
  REQUIRE(t.bests() == std::vector<double>{100, 0, 0});  // round 0's first call only
  REQUIRE(t.chosen() == 0);
  // Samples that would reach into a round are refused.
  AlgorithmTrial u(3, p);
  run(u, {100, 300, 200}, 5);
  REQUIRE_FALSE(u.sample({0, 2, 0, 2}));
  REQUIRE_FALSE(u.sampling());
  REQUIRE(u.next() == 0);
  REQUIRE_FALSE(AlgorithmTrial(3, p).sample({0, 3}));  // no such candidate
  // Cancelled after two of its calls: the choice runs again at once.
  AlgorithmTrial c(3, p);
  c.prefer(1);
  REQUIRE(c.sample({0, 2, 0, 2}));
  REQUIRE(run(c, {100, 300, 200}, 2) == std::vector<std::size_t>{0, 2});
  c.cancel_sample();
  REQUIRE_FALSE(c.sampling());
  REQUIRE(c.next() == 1);
}

TEST_CASE("the CPU weight: a busy core, and time outside the call, make a blocking call's CPU cost") {
  constexpr std::uint64_t ms = 1000000;
  // 10 calls of 100 ms with 50 ms of CPU each (the core ran something else half the time), in
  // intervals of 400 ms (a quarter inside the call): 0.5 x 0.75.
  REQUIRE(cpu_weight(10, 1000 * ms, 500 * ms, 10, 4000 * ms) == Approx(0.375));
  // A core of its own: polling takes nothing from anybody.
  REQUIRE(cpu_weight(10, 1000 * ms, 1000 * ms, 10, 4000 * ms) == 0.0);
  // The program does nothing but exchange: the others poll too (NPB IS: 86% inside).
  REQUIRE(cpu_weight(10, 1000 * ms, 500 * ms, 10, 1000 * ms) == 0.0);
  REQUIRE(cpu_weight(10, 860 * ms, 430 * ms, 10, 1000 * ms) == Approx(0.07));
  // Nothing measured yet, or CPU above the wall time (clock granularity): 0, never negative.
  REQUIRE(cpu_weight(0, 0, 0, 0, 0) == 0.0);
  REQUIRE(cpu_weight(10, 1000 * ms, 500 * ms, 0, 0) == 0.0);
  REQUIRE(cpu_weight(10, 1000 * ms, 1200 * ms, 10, 4000 * ms) == 0.0);
}

TEST_CASE("the engine's check keeps it only where the program's intervals show its gain beyond their spread") {
  auto keeps = [](double m1, double e1, double e2, double m2) {
    return engine_check_sums(m1, e1, e2, m2).engine_wins();
  };
  const auto sums = engine_check_sums(97, 92, 98, 103);
  REQUIRE(sums.mpi == 200);
  REQUIRE(sums.engine == 190);
  REQUIRE(sums.spread == 12);
  // Blocks in the check's order: MPI's, the engine's, the engine's, MPI's (sums over the ranks).
  // A clear gain: 80 against 100 per block, the blocks of each within 2.
  REQUIRE(keeps(100, 80, 82, 101));
  // No gain, or a loss: MPI's choice runs again (2DECOMP&FFT's 2-rank transposes on one node:
  // the samples inside the call favoured the engine, the program's time did not).
  REQUIRE_FALSE(keeps(100, 100, 100, 100));
  REQUIRE_FALSE(keeps(100, 110, 108, 99));
  // A gain smaller than the spread: 10 less in all, but the blocks of each differ by 6 and 6.
  REQUIRE_FALSE(keeps(97, 92, 98, 103));
  // A steady drift of 5 per block cancels in the difference (MPI 100, 115; engine 85, 90: 40
  // less) and widens the spread to 20: kept.
  REQUIRE(keeps(100, 85, 90, 115));
  // Nothing measured: MPI's choice.
  REQUIRE_FALSE(keeps(0, 0, 0, 0));
}

TEST_CASE("in a job on one node the engine's check drops it only where its blocks took longer beyond their spread") {
  auto drops = [](double m1, double e1, double e2, double m2) {
    return engine_check_sums(m1, e1, e2, m2).engine_loses();
  };
  // No difference, a gain, or a loss within the spread: the engine stays.
  REQUIRE_FALSE(drops(100, 100, 100, 100));
  REQUIRE_FALSE(drops(100, 80, 82, 101));
  REQUIRE_FALSE(drops(100, 104, 96, 94));  // 6 more in all, the blocks of each differ by 8 and 6
  // A loss beyond it: MPI's choice runs again.
  REQUIRE(drops(100, 110, 108, 99));
  REQUIRE(drops(100, 160, 150, 105));
}
