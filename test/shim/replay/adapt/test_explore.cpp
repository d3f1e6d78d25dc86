// The exploration budget (shim/replay/adapt/explore.hpp) and the probe points that ask it
// (policy.hpp, Policy::probe_points), driven with made-up costs and clock values.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "policy_driver.hpp"
#include "shim/replay/adapt/explore.hpp"

using namespace tnbc::shim::replay::adapt::test;
using tnbc::shim::replay::adapt::Explore;
using tnbc::shim::replay::adapt::ExplorationBudget;
using tnbc::shim::replay::adapt::kEarlyLossPrior;
using tnbc::shim::replay::adapt::predicted_probe_ns;

namespace {

Policy with_probe_points(Policy p = Policy{}) {
  p.probe_points = true;
  return p;
}

constexpr double kNever = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_CASE("the budget allows its share of the time run, less what was charged") {
  ExplorationBudget b;
  b.start(0.01, 1'000);
  REQUIRE(b.bounded());
  REQUIRE(b.allowed_ns(1'000) == 0);
  REQUIRE(b.allowed_ns(1'001'000) == 10'000);  // 1% of 1 ms
  REQUIRE(b.affords(10'000, 1'001'000));
  REQUIRE_FALSE(b.affords(10'001, 1'001'000));
  b.charge(Explore::early_probe, 6'000);
  b.charge(Explore::trial, 3'000);
  REQUIRE(b.spent_ns() == 9'000);
  REQUIRE(b.spent_ns(Explore::early_probe) == 6'000);
  REQUIRE(b.affords(1'000, 1'001'000));
  REQUIRE_FALSE(b.affords(1'001, 1'001'000));
  // Later the program has run longer, and the same try fits.
  REQUIRE(b.affords(10'000, 2'001'000));
  // A clock that has not moved past the start allows nothing (no wrap-around).
  REQUIRE(b.allowed_ns(500) == 0);
  REQUIRE_FALSE(b.affords(1, 500));
  REQUIRE(b.json(1'001'000).find(R"("spent_us":9.000)") != std::string::npos);
  REQUIRE(b.summary(1'001'000).find("exploring cost 0 ms of the 1% (0 ms) allowed") != std::string::npos);
}

TEST_CASE("a try under way holds its prediction, and no other try begins until it is released") {
  ExplorationBudget b;
  b.start(0.01, 0);
  const std::uint64_t now = 1'000'000'000;  // 10 ms allowed
  REQUIRE(b.affords(4'000'000, now));
  b.reserve(4'000'000);
  REQUIRE_FALSE(b.affords(0, now));  // one at a time
  b.release(4'000'000);
  b.charge(Explore::early_probe, 9'000'000);  // it cost more than predicted
  REQUIRE(b.affords(1'000'000, now));
  REQUIRE_FALSE(b.affords(1'000'001, now));
  // What it measured predicts the next key's probe.
  REQUIRE(std::isnan(b.last_loss_share()));
  b.measured_loss(2.5);
  REQUIRE(b.last_loss_share() == 2.5);
  // The engine's evidence is kept apart from the early path's: each predicts its own tries.
  REQUIRE(std::isnan(b.last_engine_loss_share()));
  b.measured_engine_loss(-0.2);
  REQUIRE(b.last_engine_loss_share() == -0.2);
  REQUIRE(b.last_loss_share() == 2.5);
  // Six engine calls (2 samples, 4 of the check) of a key with 10 ms intervals: a whole interval
  // each before any evidence, nothing where an engine call last cost less, a share where more.
  REQUIRE(predicted_probe_ns(6, 10e6, std::numeric_limits<double>::quiet_NaN()) == 60'000'000);
  REQUIRE(predicted_probe_ns(6, 10e6, b.last_engine_loss_share()) == 0);
  b.measured_engine_loss(0.25);
  REQUIRE(predicted_probe_ns(6, 10e6, b.last_engine_loss_share()) == 15'000'000);
}

TEST_CASE("no bound: everything is afforded, and zero allows nothing that costs") {
  ExplorationBudget off;
  off.start(-1, 0);
  REQUIRE_FALSE(off.bounded());
  REQUIRE(off.affords(1'000'000'000, 1));
  REQUIRE(off.json(10).find(R"("bound":null)") != std::string::npos);
  ExplorationBudget zero;
  zero.start(0, 0);
  REQUIRE(zero.affords(0, 1'000'000'000));
  REQUIRE_FALSE(zero.affords(1, 1'000'000'000));
}

TEST_CASE("a probe is predicted from the key's last probe, or from the prior before any") {
  REQUIRE(predicted_probe_ns(4, 1e6, kNever) == static_cast<std::uint64_t>(4 * kEarlyLossPrior * 1e6));
  REQUIRE(predicted_probe_ns(4, 1e6, 0.25) == 1'000'000);
  REQUIRE(predicted_probe_ns(4, 1e6, -0.3) == 0);  // early was cheaper: trying it costs nothing
  REQUIRE(predicted_probe_ns(4, 0, 0.25) == 0);    // nothing measured: nothing to scale
}

TEST_CASE("a probe is predicted at least at what the engine's samples took beyond MPI's") {
  // Blocking calls of 0.4 ms, the engine's exchange 13 ms a call in the samples (Open MPI).
  REQUIRE(predicted_probe_ns(4, 0.4e6, kNever, 12.6e6) == static_cast<std::uint64_t>(4 * 12.6e6));
  REQUIRE(predicted_probe_ns(4, 0.4e6, 0.25, 12.6e6) == static_cast<std::uint64_t>(4 * 12.6e6));
  // Where the prior's loss is the larger, the samples change nothing.
  REQUIRE(predicted_probe_ns(4, 100e6, kNever, 12.6e6) == predicted_probe_ns(4, 100e6, kNever));
  REQUIRE(predicted_probe_ns(4, 1e6, -0.3, 0) == 0);
  REQUIRE(predicted_probe_ns(4, 0, kNever, 12.6e6) == 0);  // no blocking interval measured: no probe at all
}

TEST_CASE("the engine's excess per call is its sample mean less MPI's, never below 0") {
  using tnbc::shim::replay::adapt::engine_excess_ns;
  double wall[2] = {0, 0};
  int calls[2] = {0, 0};
  REQUIRE(engine_excess_ns(wall, calls) == 0);
  wall[0] = 2 * 0.4e6, calls[0] = 2;
  REQUIRE(engine_excess_ns(wall, calls) == 0);  // the engine's not sampled yet
  wall[1] = 2 * 13e6, calls[1] = 2;
  REQUIRE(engine_excess_ns(wall, calls) == Approx(12.6e6));
  wall[1] = 2 * 0.2e6;
  REQUIRE(engine_excess_ns(wall, calls) == 0);
}

TEST_CASE("without probe points the early probe follows the warm-up at once, as before") {
  Sim s(Policy{}, 100, 200);
  s.calls(9);
  REQUIRE(s.probe_points == 0);
  REQUIRE(s.count(Path::early, 6, 9) == 3);
}

TEST_CASE("a probe point the budgets afford: one more blocking call, then the early probe") {
  Sim s(with_probe_points(), 100, 200);
  s.calls(6);
  REQUIRE(s.key.probe_point());
  REQUIRE(s.key.decision_due());
  s.calls(4);
  REQUIRE(s.probe_points == 1);
  // (The driver decides at the decision point's own call; decide.cpp at the call after it.)
  REQUIRE(s.count(Path::blocking, 0, 6) == 6);
  REQUIRE(s.count(Path::early, 6, 9) == 3);
  REQUIRE(s.key.probes_deferred() == 0);
  s.calls(1);
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::early);
  // Early saved half of each interval: the probe cost nothing, and its loss share says so.
  REQUIRE(s.key.take_probe_excess_ns() == 0);
  REQUIRE(s.key.early_loss_share() == Approx(-0.5));
}

TEST_CASE("a refused probe point keeps the key blocking, asking again after as many calls again") {
  Sim s(with_probe_points(), 100, 200);
  s.probe_refusals = 1;  // one rank of four cannot afford it
  s.calls(6 + 6);
  REQUIRE(s.probe_points == 1);
  REQUIRE(s.key.probes_deferred() == 1);
  REQUIRE(s.count(Path::early, 0, 12) == 0);
  REQUIRE_FALSE(s.key.probing());  // a run, observed as runs are
  // Refused again at call 12 (then a wait of 12 calls), allowed at call 24.
  s.calls(12);
  REQUIRE(s.probe_points == 2);
  REQUIRE(s.key.probes_deferred() == 2);
  REQUIRE(s.count(Path::early, 0, 24) == 0);
  s.probe_refusals = 0;
  s.calls(3);
  REQUIRE(s.probe_points == 3);
  REQUIRE(s.key.probes_deferred() == 2);
  REQUIRE(s.count(Path::early, 24, 27) == 3);
}

TEST_CASE("an early probe that loses is charged its excess, and the next probe is asked again") {
  Sim s(with_probe_points(narrow()), 260, 200);
  s.calls(10);  // warm-up 0-5, probe point 6 (decided there by the driver), early 6-8, decision at 9
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::blocking);
  // This rank's early mean 260 against blocking 200: 60 per call, over the 3 calls of the
  // probe and the call of its decision point.
  REQUIRE(s.key.take_probe_excess_ns() == 4 * 60);
  REQUIRE_FALSE(s.key.take_probe_excess_ns().has_value());  // taken once
  REQUIRE(s.key.early_loss_share() == Approx(0.3));
  // The run of 32 blocking calls (9 to 40) ends in a probe point, not in the probe.
  s.calls(31);
  REQUIRE(s.key.probe_point());
  REQUIRE(s.count(Path::early, 9, 41) == 0);
  s.calls(1);
  REQUIRE(s.probe_points == 2);
}

TEST_CASE("the room point asks the budgets: afforded, the probe follows it") {
  Sim s(with_probe_points(), 100, 200);
  s.room_voters = 4;
  s.room_ranks = 4;
  s.calls(8);
  REQUIRE(s.room_points == 1);
  REQUIRE(s.probe_points == 0);
  REQUIRE(s.key.short_warmup());
  REQUIRE(s.count(Path::early, 4, 7) == 3);
}

TEST_CASE("the room point asks the budgets: refused, the warm-up runs on to its probe point") {
  Sim s(with_probe_points(), 100, 200);
  s.room_voters = 4;
  s.room_ranks = 4;
  s.probe_refusals = 1;
  s.calls(6);
  REQUIRE(s.room_points == 1);
  REQUIRE(s.key.probes_deferred() == 1);
  REQUIRE_FALSE(s.key.short_warmup());
  REQUIRE_FALSE(s.key.no_room());
  REQUIRE(s.count(Path::early, 0, 6) == 0);
  // The warm-up's end asks again, as any probe point; afforded now, the probe follows.
  REQUIRE(s.key.probe_point());
  s.probe_refusals = 0;
  s.calls(4);
  REQUIRE(s.probe_points == 1);
  REQUIRE(s.key.probes_deferred() == 1);
  REQUIRE(s.count(Path::early, 6, 9) == 3);
}

TEST_CASE("without probe points the room point begins the probe whatever the budgets say") {
  Sim s(Policy{}, 100, 200);
  s.room_voters = 4;
  s.room_ranks = 4;
  s.probe_refusals = 4;  // not asked: the driver passes it only where the key asks
  s.calls(8);
  REQUIRE(s.key.probes_deferred() == 0);
  REQUIRE(s.count(Path::early, 4, 7) == 3);
}

TEST_CASE("a plan's word wins over a probe point") {
  Policy p = with_probe_points();
  KeyState k(p);
  Intervals iv;
  for (int i = 0; i < 6; ++i) {
    iv.add_interval(Path::blocking, 200);
    k.advance(iv);
  }
  REQUIRE(k.probe_point());
  Vote forced;
  forced.force_early = 1;
  forced.probe_refusals = 4;
  REQUIRE(k.decide(forced, iv) == Path::early);
  REQUIRE(k.forced());
  REQUIRE_FALSE(k.probe_point());
}
