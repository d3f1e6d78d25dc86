// The per-call decision's per-node turns (shim/replay/adapt/policy.hpp, KeyState::allow_turns),
// driven with made-up costs: which turns each early call takes, and when they are compared.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "policy_driver.hpp"

using namespace tnbc::shim::replay::adapt::test;

namespace {

/// Sim with per-node turns: a key whose turn order is learned at its first early call (as
/// decide.cpp allows turns after the learn point); early calls cost `on_ns` with turns and
/// `early_ns` without.
struct TurnSim {
  Policy policy;
  KeyState key;
  Intervals iv;
  double early_ns, blocking_ns, on_ns;
  bool learns = true;
  int ranks = 4;
  std::vector<Path> paths;
  std::vector<bool> turns;  // per call: took turns
  std::optional<std::pair<Path, Turns>> pending;
  double pending_ns = 0;
  Path last = Path::blocking;
  /// Extra cost of the second call after a decision point (calls there run behind; the first
  /// is not compared anyway).
  double settle_ns = 0;
  int since_decision = 0;

  TurnSim(Policy p, double early, double blocking, double on)
      : policy(p), key(p), early_ns(early), blocking_ns(blocking), on_ns(on) {}

  void call() {
    if (pending) iv.add_interval(pending->first, static_cast<std::uint64_t>(pending_ns), pending->second);
    ++since_decision;
    if (key.decision_due()) {
      Vote v = key.measure(iv);
      Vote sum{v.ranks_measured * ranks, v.blocking_ns * ranks, v.early_ns * ranks, 0, 0,
               v.turn_ranks * ranks, v.turns_on_ns * ranks, v.turns_off_ns * ranks};
      key.decide(sum, iv);
      since_decision = 0;
    }
    const Path p = key.path();
    if (p == Path::early && last == Path::blocking && learns) key.allow_turns();
    last = p;
    const bool on = p == Path::early && key.turns_on();
    paths.push_back(p);
    turns.push_back(on);
    pending = {p, p == Path::early ? key.turns_compared() : Turns::none};
    pending_ns = (p == Path::blocking ? blocking_ns : on ? on_ns : early_ns) + (since_decision == 1 ? settle_ns : 0);
    key.advance(iv);
  }
  void calls(int n) {
    for (int i = 0; i < n; ++i) call();
  }
  int count(Path path, std::size_t from, std::size_t to) const {
    int n = 0;
    for (std::size_t i = from; i < to && i < paths.size(); ++i) n += paths[i] == path;
    return n;
  }
  int count_turns(std::size_t from, std::size_t to) const {
    int n = 0;
    for (std::size_t i = from; i < to && i < turns.size(); ++i) n += turns[i];
    return n;
  }
};

}  // namespace

TEST_CASE("turns: the first early probe compares turns on and off and keeps the cheaper (narrow)") {
  // Early without turns saves nothing (200 against 200); with turns it saves a quarter.
  TurnSim s(narrow(), 200, 200, 150);
  s.calls(11);
  // Warm-up 0..5 blocking; the probe is lengthened to 5 calls: on (not compared), then a round
  // of on, off, off, on.  Narrow (every comparison is), it is extended by a second round.
  REQUIRE(s.key.decision_due());
  s.call();
  REQUIRE(s.key.extended());
  REQUIRE_FALSE(s.key.turns_decided());
  REQUIRE(s.key.decisions() == 0);
  s.calls(3);
  REQUIRE(s.paths[5] == Path::blocking);
  for (int i = 6; i < 15; ++i) REQUIRE(s.paths[static_cast<std::size_t>(i)] == Path::early);
  REQUIRE(s.turns == std::vector<bool>{false, false, false, false, false, false, true, true, false, false, true,
                                       true, false, false, true});
  REQUIRE(s.key.decision_due());
  s.call();
  REQUIRE(s.key.turns_decided());
  REQUIRE(s.key.turns_chosen());
  // Early is judged with the turns it will use: it wins.
  REQUIRE(s.key.chosen() == Path::early);
  // Without a turn order, the same costs keep blocking.
  TurnSim no(narrow(), 200, 200, 150);
  no.learns = false;
  no.calls(40);
  REQUIRE(no.key.chosen() == Path::blocking);
  REQUIRE(no.count_turns(0, 40) == 0);
}

TEST_CASE("turns that cost more are turned off; runs compare them ever less often (narrow)") {
  TurnSim s(narrow(), 150, 200, 250);
  s.calls(16);
  REQUIRE(s.key.turns_decided());
  REQUIRE(!s.key.turns_chosen());
  REQUIRE(s.key.chosen() == Path::early);
  // The run of 32 after the decision (calls 15..46) is off but for its last 4 calls, which
  // compare: on, off, off, on: 2 with turns.
  s.calls(32);
  REQUIRE(s.count_turns(15, 47) == 2);
  REQUIRE((s.turns[43] && !s.turns[44] && !s.turns[45] && s.turns[46]));
  // That run confirmed the choice: the next run (64 calls after a blocking probe of 2) does not
  // compare, the one after does.
  s.calls(2 + 64);
  REQUIRE(s.count_turns(47, 47 + 2 + 64) == 0);
  s.calls(2 + 128);
  REQUIRE(s.count_turns(47 + 2 + 64, 47 + 2 + 64 + 2 + 128) == 2);
  s.calls(2000);
  REQUIRE(!s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 0);
  // Runs of up to 1024 calls, compared in 1 run of 8 at most: a few calls with turns in 2000.
  REQUIRE(s.count_turns(0, s.turns.size()) <= 2 * 6);
}

TEST_CASE("turns follow a change of phase, with the hysteresis of the path (narrow)") {
  TurnSim s(narrow(), 200, 300, 150);
  s.calls(100);
  REQUIRE(s.key.turns_chosen());
  REQUIRE(s.key.chosen() == Path::early);
  // Turns now cost 10% more than none: turned off at a later decision point.
  s.on_ns = 220;
  s.calls(300);
  REQUIRE(!s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 1);
  // Within enter_gain (3% cheaper) turns are not turned on again.
  s.on_ns = 194;
  s.calls(300);
  REQUIRE(!s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 1);
  REQUIRE(s.key.chosen() == Path::early);
}

TEST_CASE("turns: a first comparison that chose wrong is mended at the next early probe") {
  // Early without turns saves nothing (300 against 300); with turns a third.  But while the
  // first probe runs, turns happen to cost more (a noisy start): turns off, blocking kept.
  TurnSim s(Policy{}, 300, 300, 350);
  s.calls(16);
  REQUIRE(s.key.turns_decided());
  REQUIRE(!s.key.turns_chosen());
  REQUIRE(s.key.chosen() == Path::blocking);
  // The next early probe (after a blocking run of 32) compares turns again: on, and early.
  s.on_ns = 200;
  s.calls(32 + 5 + 1);
  REQUIRE(s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 1);
  REQUIRE(s.key.chosen() == Path::early);
  REQUIRE(s.paths.back() == Path::early);
}

TEST_CASE("the first call of an early probe is not measured: it pays for the change of path") {
  // Blocking costs 200, early 150, but the first early call 600 (engine buffers, a learn point,
  // a turn window): counted, the probe's mean (600 + 150 + 150) / 3 = 300 would keep blocking.
  Sim s(small(), 600, 200);
  s.calls(4);  // warm-up 0, 1; the probe's first call 2 (its interval, 600, ends at call 3)
  s.early_ns = 150;
  s.calls(2);  // calls 4 and 5; the decision falls at call 5
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::early);
  REQUIRE(s.key.last_early_ns() == 150);
  // A probe that costs more in its later calls too still loses.
  Sim t(small(), 600, 200);
  t.calls(6);
  REQUIRE(t.key.chosen() == Path::blocking);
}

TEST_CASE("turns: the first decision has no incumbent; later ones keep hysteresis") {
  // Turns save 3%, less than enter_gain: the first comparison still turns them on ...
  TurnSim s(Policy{}, 200, 300, 194);
  s.calls(16);
  REQUIRE(s.key.turns_decided());
  REQUIRE(s.key.turns_chosen());
  // ... and turns that cost 3% more turn them off at the first decision.
  TurnSim t(Policy{}, 194, 300, 200);
  t.calls(16);
  REQUIRE(t.key.turns_decided());
  REQUIRE(!t.key.turns_chosen());
  // Once off, a 3% saving does not turn them on again (enter_gain).
  t.on_ns = 188;
  t.calls(600);
  REQUIRE(!t.key.turns_chosen());
  REQUIRE(t.key.turn_switches() == 0);
}

TEST_CASE("a wide decision counts as two: a first run of 2 x first_run, confirmations quadruple the runs") {
  // Early saves half (wide: at least wide_gain, 10%).  Warm-up 0..5, early probe 6..8, the
  // first decision at call 9 starts a run of 64 (not 32); blocking probes follow it at 73, 74.
  Sim s(Policy{}, 100, 200);
  s.calls(9 + 64 + 2 + 256 + 2 + 1);
  REQUIRE(s.key.switches() == 0);
  REQUIRE(s.count(Path::early, 9, 73) == 64);
  REQUIRE((s.paths[73] == Path::blocking && s.paths[74] == Path::blocking));
  // Confirmed (wide): a run of 4 x 64 = 256, then the next probe at 331, 332.
  REQUIRE(s.count(Path::early, 75, 331) == 256);
  REQUIRE((s.paths[331] == Path::blocking && s.paths[332] == Path::blocking));
  REQUIRE(s.paths[333] == Path::early);
  // Early that saves 8% (narrow): the first run is 32, the next probe at calls 41, 42.
  Sim n(Policy{}, 184, 200);
  n.calls(45);
  REQUIRE(n.key.chosen() == Path::early);
  REQUIRE(n.count(Path::early, 9, 41) == 32);
  REQUIRE((n.paths[41] == Path::blocking && n.paths[42] == Path::blocking));
  // Blocking that saves a third of early's cost (wide): early is probed after 64 calls, not 32.
  Sim b(Policy{}, 300, 200);
  b.calls(9 + 64 + 3);
  REQUIRE(b.key.chosen() == Path::blocking);
  REQUIRE(b.count(Path::blocking, 9, 73) == 64);
  REQUIRE(b.count(Path::early, 73, 76) == 3);
}

TEST_CASE("a switch starts again from first_run, however wide") {
  Sim s(Policy{}, 100, 200);
  s.calls(400);  // runs of 64 and 256: early, confirmed twice
  REQUIRE(s.key.chosen() == Path::early);
  s.early_ns = 400;  // the program now reads the data at once: blocking saves half
  while (s.key.switches() == 0) s.call();
  REQUIRE(s.key.chosen() == Path::blocking);
  // The switch fell at the call just made: a run of 32 blocking calls, then an early probe.
  const std::size_t at = s.paths.size() - 1;
  s.calls(32 + 1);
  REQUIRE(s.count(Path::blocking, at, at + 32) == 32);
  REQUIRE(s.paths[at + 32] == Path::early);
}

TEST_CASE("turns: a wide first comparison decides after one round; a narrow one takes two") {
  SECTION("wide: turns save a quarter") {
    TurnSim s(Policy{}, 200, 200, 150);
    s.calls(11);
    // Warm-up 0..5; the probe 6..10: on (not compared), then on, off, off, on.
    REQUIRE(s.turns == std::vector<bool>{false, false, false, false, false, false, true, true, false, false, true});
    REQUIRE(s.key.decision_due());
    s.call();
    REQUIRE_FALSE(s.key.extended());
    REQUIRE(s.key.turns_decided());
    REQUIRE(s.key.turns_chosen());
    REQUIRE(s.key.chosen() == Path::early);
    // Early with turns saves a quarter against blocking (wide): the run is 64 calls.  The
    // first decision of the turns was wide too: it counts as a confirmation, so this run takes
    // turns in every call, uncompared, and the next run compares them in its last 4 calls.
    s.calls(64 + 1);
    REQUIRE(s.count_turns(11, 11 + 64) == 64);
    REQUIRE(s.paths[11 + 64] == Path::blocking);
    s.calls(1 + 1 + 256);  // the blocking probe's second call, the decision, a run of 4 x 64
    REQUIRE(s.paths[77] == Path::early);
    REQUIRE(s.count_turns(77, 77 + 252) == 252);
    REQUIRE((s.turns[329] && !s.turns[330] && !s.turns[331] && s.turns[332]));
  }
  SECTION("narrow: turns save 5%") {
    TurnSim s(Policy{}, 200, 300, 190);
    s.calls(12);
    REQUIRE(s.key.extended());
    REQUIRE_FALSE(s.key.turns_decided());
    REQUIRE(s.paths[11] == Path::early);
    s.calls(3);
    REQUIRE(s.key.decision_due());
    s.call();
    REQUIRE_FALSE(s.key.extended());
    REQUIRE(s.key.turns_decided());
    REQUIRE(s.key.turns_chosen());
    // Both rounds count: 4 calls with turns and 4 without since the probe's second call.
    REQUIRE(s.count_turns(7, 15) == 4);
  }
  SECTION("wide the wrong way: turns cost a quarter more, off after one round") {
    TurnSim s(Policy{}, 200, 300, 250);
    s.calls(12);
    REQUIRE(s.key.turns_decided());
    REQUIRE_FALSE(s.key.turns_chosen());
    REQUIRE(s.key.chosen() == Path::early);
  }
}

TEST_CASE("turns: a run compares them in its last calls, not in the calls that run behind after a decision") {
  // Turns save a quarter of early's cost (150 against 200), early saves a third of blocking's;
  // but the second call after each decision point costs 150 more, whatever its turns (measured
  // in overlap scenario b: the calls right after a decision point run behind).  A trial at the
  // start of the first run would take that call with turns, find them 12% dearer (225 against
  // 200) and turn them off; at the end of the run it finds them cheaper and keeps them.
  TurnSim s(Policy{}, 200, 300, 150);
  s.settle_ns = 150;
  s.calls(12);
  REQUIRE(s.key.turns_decided());
  REQUIRE(s.key.turns_chosen());
  REQUIRE(s.key.chosen() == Path::early);
  // The first run (calls 11..74, wide: 64) takes turns uncompared (the wide first decision of
  // the turns counts as a confirmation); the second (77..332, 4 x 64) takes turns but for its
  // last 4, which compare.
  s.calls(64 + 2 + 1);
  REQUIRE(s.count_turns(11, 75) == 64);
  REQUIRE((s.paths[75] == Path::blocking && s.paths[76] == Path::blocking));
  s.calls(256);
  REQUIRE(s.count_turns(77, 329) == 252);
  REQUIRE((s.turns[329] && !s.turns[330] && !s.turns[331] && s.turns[332]));
  REQUIRE(s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 0);
  s.calls(1000);
  REQUIRE(s.key.turns_chosen());
  REQUIRE(s.key.turn_switches() == 0);
  REQUIRE(s.key.switches() == 0);
}

TEST_CASE("turns: a probe that loses widely with either turns is not extended for a second round") {
  // Early costs twice blocking with turns or without, and the turns differ by 5% (narrow):
  // a second round could not make early win, so the probe ends after one and blocking is kept.
  TurnSim s(Policy{}, 400, 200, 380);
  s.calls(12);
  REQUIRE_FALSE(s.key.extended());
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::blocking);
  REQUIRE(s.count(Path::early, 0, 12) == 5);
  // Where early loses by less than wide_gain with the cheaper turns, the second round is run.
  TurnSim close(Policy{}, 220, 200, 209);
  close.calls(12);
  REQUIRE(close.key.extended());
  REQUIRE(close.key.decisions() == 0);
}
