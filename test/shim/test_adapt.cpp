// The per-call decision's policy (shim/adapt.hpp), driven with made-up costs: which path each
// call takes, when decisions fall, hysteresis, and the growing runs between probes.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "adapt.hpp"

using tnbc::shim::adapt::Intervals;
using tnbc::shim::adapt::KeyState;
using tnbc::shim::adapt::Path;
using tnbc::shim::adapt::Policy;
using tnbc::shim::adapt::Turns;
using tnbc::shim::adapt::Vote;

namespace {

/// One rank running calls of one key whose early calls cost `early_ns` and blocking calls
/// `blocking_ns`; every decision sums the votes of `ranks` identical ranks.
struct Sim {
  Policy policy;
  KeyState key;
  Intervals iv;
  double early_ns, blocking_ns;
  int ranks = 4;
  /// At a room point: how many ranks observed the warm-up, and how many of them found room.
  int room_voters = 0, room_ranks = 0;
  int room_points = 0;  // room points met
  std::vector<Path> paths;

  Sim(Policy p, double early, double blocking) : policy(p), key(p), early_ns(early), blocking_ns(blocking) {}

  std::optional<Path> pending;  // the path of the last call, whose interval ends at the next entry

  void call() {
    if (pending) iv.add_interval(*pending, static_cast<std::uint64_t>(*pending == Path::early ? early_ns : blocking_ns));
    if (key.decision_due()) {
      Vote v = key.measure(iv);
      Vote sum{v.ranks_measured * ranks, v.blocking_ns * ranks, v.early_ns * ranks};
      if (key.room_point()) {
        ++room_points;
        sum.room_voters = room_voters;
        sum.room_ranks = room_ranks;
      }
      key.decide(sum, iv);
    }
    const Path p = key.path();
    paths.push_back(p);
    // The interval after this call ends at the next call's entry: record it then.
    pending = p;
    key.advance(iv);
  }
  void calls(int n) {
    for (int i = 0; i < n; ++i) call();
  }
  int count(Path p, std::size_t from, std::size_t to) const {
    int n = 0;
    for (std::size_t i = from; i < to && i < paths.size(); ++i) n += paths[i] == p;
    return n;
  }
};

/// No decision is wide (Policy::wide_gain): every confirmation doubles the run.
Policy narrow(Policy p = Policy{}) {
  p.wide_gain = 1.0;
  return p;
}

/// Runs `n` calls of `s` whose first 2 calls cost what the Sim was made with (connections,
/// first touches) and whose later blocking calls cost 200.  (A call's interval is recorded at
/// the next call's entry: the cost changes after the third call begins.)
void slow_start(Sim& s, int n) {
  s.calls(3);
  s.blocking_ns = 200;
  s.calls(n - 3);
}

Policy small() {
  Policy p;
  p.warmup_calls = 2;
  p.probe_calls = 2;
  p.first_run = 4;
  p.max_run = 16;
  p.enter_gain = 0.05;
  p.keep_gain = 0.0;
  return narrow(p);
}

}  // namespace

TEST_CASE("a key probes blocking, then early, then decides at the same call on every rank") {
  Sim s(small(), 100, 200);
  s.calls(5);
  // The early probe is 1 + probe_calls long: its first call pays for the change of path.
  REQUIRE(s.paths == std::vector<Path>{Path::blocking, Path::blocking, Path::early, Path::early, Path::early});
  REQUIRE(s.key.decision_due());
  REQUIRE(s.key.decisions() == 0);
  s.call();
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::early);
  REQUIRE(s.paths.back() == Path::early);
}

TEST_CASE("defaults: the first 6 calls of a key run blocking; early is tried at calls 6 to 8") {
  Sim s(Policy{}, 100, 200);
  s.calls(9);
  REQUIRE(s.count(Path::blocking, 0, 6) == 6);
  REQUIRE(s.count(Path::early, 6, 9) == 3);
  REQUIRE(s.key.decisions() == 0);
  REQUIRE(s.key.decision_due());
  s.call();
  REQUIRE(s.key.decisions() == 1);
  REQUIRE(s.key.chosen() == Path::early);
  // A program that makes a key's call fewer times than the warm-up never returns early.
  Sim short_run(Policy{}, 10, 200);
  short_run.calls(6);
  REQUIRE(short_run.count(Path::early, 0, 6) == 0);
  // Where early loses, the first decision (call 9) keeps blocking for a run of 32 calls.
  Sim losing(Policy{}, 212, 200);
  losing.calls(9 + 32);
  REQUIRE(losing.key.chosen() == Path::blocking);
  REQUIRE(losing.count(Path::early, 9, 9 + 32) == 0);
}

TEST_CASE("the warm-up is judged by its last calls: slow first calls do not make early look good") {
  Policy p = small();
  p.warmup_calls = 20;
  // The first 5 calls pay for connections (10x); after that early costs 5% more than blocking.
  Sim s(p, 210, 2000);
  s.calls(5);
  s.blocking_ns = 200;
  s.calls(40);
  REQUIRE(s.key.decisions() >= 1);
  REQUIRE(s.key.chosen() == Path::blocking);
  REQUIRE(s.key.switches() == 0);
}

TEST_CASE("a short warm-up leaves out its first 2 calls too") {
  // The first 2 calls pay for connections (10x); after that early costs 2% less than blocking,
  // under enter_gain: blocking must win.  Counting the first 2 calls, early would look 5x cheaper.
  for (std::uint32_t warmup : {3u, 4u, 6u}) {
    CAPTURE(warmup);
    Policy p;
    p.warmup_calls = warmup;
    Sim s(p, 196, 2000);
    slow_start(s, static_cast<int>(warmup) + 3 + 1);  // the warm-up, the probe, the decision
    REQUIRE(s.count(Path::blocking, 0, warmup) == static_cast<int>(warmup));
    REQUIRE(s.key.decisions() == 1);
    REQUIRE(s.key.chosen() == Path::blocking);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
  // A warm-up of 1 or 2 calls measures its last call.
  for (std::uint32_t warmup : {1u, 2u}) {
    CAPTURE(warmup);
    Policy p;
    p.warmup_calls = warmup;
    p.probe_calls = 1;
    Sim s(p, 100, 300);
    s.calls(static_cast<int>(warmup));
    s.blocking_ns = 200;
    s.calls(2 + 1);  // the probe, the decision
    REQUIRE(s.key.decisions() == 1);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
}

TEST_CASE("the room point: where most ranks found room, the warm-up ends after 3 calls") {
  // The first 2 calls pay for connections (10x): the short warm-up measures its third call only.
  auto run = [](Sim& s, int voters, int room, int n) {
    s.room_voters = voters;
    s.room_ranks = room;
    slow_start(s, n);
  };
  SECTION("3 of 4 ranks found room: the early probe follows at once, then the first decision") {
    Sim s(Policy{}, 150, 2000);
    run(s, 4, 3, 7);
    REQUIRE(s.room_points == 1);
    REQUIRE(s.key.short_warmup());
    REQUIRE(s.paths == std::vector<Path>{Path::blocking, Path::blocking, Path::blocking, Path::early, Path::early,
                                         Path::early, Path::early});
    // The room point decided nothing else; the probe's end (call 6) is the first decision.
    REQUIRE(s.key.decisions() == 1);
    REQUIRE(s.key.chosen() == Path::early);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
  SECTION("half the ranks, or none of them, or nobody observed: the whole warm-up") {
    for (auto [voters, room] : {std::pair{4, 2}, std::pair{4, 0}, std::pair{0, 0}}) {
      CAPTURE(voters, room);
      Sim s(Policy{}, 150, 2000);
      run(s, voters, room, 10);
      REQUIRE(s.room_points == 1);
      REQUIRE_FALSE(s.key.short_warmup());
      REQUIRE(s.count(Path::blocking, 0, 6) == 6);
      REQUIRE(s.count(Path::early, 6, 9) == 3);
      REQUIRE(s.key.decisions() == 1);
      REQUIRE(s.key.last_blocking_ns() == 200);
    }
  }
  SECTION("room_calls 0, or not shorter than the warm-up: no room point") {
    for (std::uint32_t room_calls : {0u, 6u, 9u}) {
      CAPTURE(room_calls);
      Policy p;
      p.room_calls = room_calls;
      Sim s(p, 150, 2000);
      run(s, 4, 4, 10);
      REQUIRE(s.room_points == 0);
      REQUIRE(s.count(Path::blocking, 0, 6) == 6);
    }
  }
  SECTION("a room point sooner than the third call comes at the third: the first 2 are not measured") {
    Policy p;
    p.room_calls = 1;
    Sim s(p, 150, 2000);
    run(s, 4, 4, 7);
    REQUIRE(s.room_points == 1);
    REQUIRE(s.count(Path::blocking, 0, 3) == 3);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
  SECTION("a later room point: the warm-up is measured from its third call to the room point") {
    Policy p;
    p.warmup_calls = 20;
    p.room_calls = 5;
    Sim s(p, 150, 2000);
    run(s, 4, 4, 9);
    REQUIRE(s.key.short_warmup());
    REQUIRE(s.count(Path::blocking, 0, 5) == 5);
    REQUIRE(s.key.decisions() == 1);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
}

TEST_CASE("early that saves time is kept; the runs between probes double up to the limit") {
  Sim s(small(), 100, 200);
  s.calls(200);
  REQUIRE(s.key.chosen() == Path::early);
  REQUIRE(s.key.switches() == 0);
  // After the first decision (call 5) blocking only runs in probes of 2 calls: the runs of
  // early are 4, 8, 16, 16, ... calls long.
  REQUIRE(s.count(Path::blocking, 5, 200) < 2 * 16);
  REQUIRE(s.count(Path::early, 5, 200) > 150);
  // The probes of blocking sit right after each run: call 5+4 = 9 and 10 are blocking.
  REQUIRE(s.paths[9] == Path::blocking);
  REQUIRE(s.paths[10] == Path::blocking);
  REQUIRE(s.paths[11] == Path::early);
}

TEST_CASE("early that costs more than blocking loses, and is only probed now and then") {
  Sim s(small(), 300, 200);
  s.calls(200);
  REQUIRE(s.key.chosen() == Path::blocking);
  // Early probes of 3 calls after blocking runs of 4, 8, 16, 16, ...: 12 probes at most.
  REQUIRE(s.count(Path::early, 5, 200) <= 3 * 12);
}

TEST_CASE("hysteresis: early must save enter_gain to win, and keeps winning above keep_gain") {
  SECTION("a 2% gain does not switch to early") {
    Sim s(small(), 196, 200);
    s.calls(100);
    REQUIRE(s.key.chosen() == Path::blocking);
  }
  SECTION("a 10% gain does") {
    Sim s(small(), 180, 200);
    s.calls(100);
    REQUIRE(s.key.chosen() == Path::early);
  }
  SECTION("once early, a 2% gain keeps it") {
    Sim s(small(), 180, 200);
    s.calls(10);
    REQUIRE(s.key.chosen() == Path::early);
    s.early_ns = 196;
    s.calls(100);
    REQUIRE(s.key.chosen() == Path::early);
    REQUIRE(s.key.switches() == 0);
  }
}

TEST_CASE("a change of phase is followed: the path switches and the runs start short again") {
  Sim s(small(), 100, 200);
  s.calls(60);
  REQUIRE(s.key.chosen() == Path::early);
  s.early_ns = 400;  // the program now reads the data at once
  s.calls(60);
  REQUIRE(s.key.chosen() == Path::blocking);
  REQUIRE(s.key.switches() == 1);
  // Found within two runs and their probes (a run's mean mixes the two phases).
  std::size_t switched = 0;
  {
    Sim t(small(), 100, 200);
    t.calls(60);
    t.early_ns = 400;
    while (t.key.chosen() == Path::early) t.call();
    switched = t.paths.size() - 60;
  }
  REQUIRE(switched <= 2 * (16 + 2));
  // After the switch, early is only probed: at most one probe in the last 10 calls.
  REQUIRE(s.count(Path::early, s.paths.size() - 10, s.paths.size()) <= 2);
}

TEST_CASE("ranks that measured nothing abstain; nobody measured means blocking") {
  KeyState k(small());
  Intervals c;
  for (int i = 0; i < 5; ++i) k.advance(c);  // calls counted, no costs recorded
  REQUIRE(k.decision_due());
  Vote v = k.measure(c);
  REQUIRE(v.ranks_measured == 0);
  REQUIRE(k.decide(v, c) == Path::blocking);
}

TEST_CASE("the vote travels as doubles and back") {
  Vote v{1, 2.5, 3.5, 0, 1, 1, 4.5, 5.5};
  double a[Vote::kFields];
  v.to_array(a);
  Vote w = Vote::from_array(a);
  REQUIRE(w.ranks_measured == 1);
  REQUIRE(w.blocking_ns == 2.5);
  REQUIRE(w.early_ns == 3.5);
  REQUIRE(w.force_blocking == 0);
  REQUIRE(w.force_early == 1);
  REQUIRE(w.turn_ranks == 1);
  REQUIRE(w.turns_on_ns == 4.5);
  REQUIRE(w.turns_off_ns == 5.5);
}

TEST_CASE("size classes: equal byte counts, equal classes; a doubling, the next class") {
  using tnbc::shim::adapt::size_class;
  REQUIRE(size_class(0) == 0);
  REQUIRE(size_class(1 << 20) == size_class((1 << 20) + 5));
  REQUIRE(size_class(1 << 21) == size_class(1 << 20) + 1);
}

TEST_CASE("with a plan the first call is a decision point; a forced path runs without probes") {
  Policy p = small();
  SECTION("no plan vote at the first call: the probes begin") {
    KeyState k(p, true);
    Intervals c;
    REQUIRE(k.decision_due());
    REQUIRE(k.decide(Vote{}, c) == Path::blocking);
    REQUIRE(k.probing());
    REQUIRE(k.decisions() == 0);
    REQUIRE_FALSE(k.decision_due());
  }
  SECTION("one rank's 'blocking' wins over measurements and over other ranks' 'early'") {
    KeyState k(p, true);
    Intervals c;
    Vote v;
    v.force_blocking = 1;
    v.force_early = 3;
    REQUIRE(k.decide(v, c) == Path::blocking);
    REQUIRE(k.forced());
    for (std::uint32_t i = 0; i < p.max_run; ++i) {
      REQUIRE(k.path() == Path::blocking);
      REQUIRE_FALSE(k.decision_due());
      k.advance(c);
    }
    // After max_run calls the plan is asked again, even with measurements saying early.
    REQUIRE(k.decision_due());
    Vote e;
    e.force_early = 4;
    e.ranks_measured = 4;
    e.blocking_ns = 100;
    e.early_ns = 400;
    REQUIRE(k.decide(e, c) == Path::early);
    REQUIRE(k.switches() == 1);
    // Without the plan's vote the measurements decide again: blocking is cheaper here.
    for (std::uint32_t i = 0; i < p.max_run; ++i) k.advance(c);
    REQUIRE(k.decision_due());
    REQUIRE(k.decide(Vote{4, 400, 800}, c) == Path::blocking);
    REQUIRE_FALSE(k.forced());
  }
}

TEST_CASE("a run is judged by its last calls: a phase change late in a run is seen at once") {
  Policy p = small();
  p.first_run = 8;
  p.max_run = 8;  // runs [5,13), [15,23), ... with blocking probes after each
  Sim s(p, 100, 300);
  s.calls(20);  // decisions at calls 5 and 15 chose early; calls 15..18 of the run cost 100
  REQUIRE(s.key.chosen() == Path::early);
  s.early_ns = 400;  // from call 19 on (its interval ends at call 20)
  s.calls(6);        // calls 20..25; the decision falls at call 25
  // The whole run [15,23) averages 250 (< 300: early would stay); its last 4 calls cost 400.
  REQUIRE(s.key.decisions() == 3);
  REQUIRE(s.key.chosen() == Path::blocking);
}

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
    pending = {p, p == Path::early ? key.turns_sample() : Turns::none};
    pending_ns = (p == Path::blocking ? blocking_ns : on ? on_ns : early_ns) + (since_decision == 1 ? settle_ns : 0);
    key.advance(iv);
  }
  void calls(int n) {
    for (int i = 0; i < n; ++i) call();
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
