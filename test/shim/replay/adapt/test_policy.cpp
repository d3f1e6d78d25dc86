// The per-call decision's policy (shim/replay/adapt/policy.hpp), driven with made-up costs: which path each
// call takes, when decisions fall, hysteresis, and the growing runs between probes.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "policy_driver.hpp"

using namespace tnbc::shim::replay::adapt::test;

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
  Policy three;  // the library votes after its fourth call (TNBC_ADAPT_WARMUP_ROOM); the rule is the same
  three.room_calls = 3;
  // The first 2 calls pay for connections (10x): the short warm-up measures its third call only.
  auto run = [](Sim& s, int voters, int room, int n) {
    s.room_voters = voters;
    s.room_ranks = room;
    slow_start(s, n);
  };
  SECTION("3 of 4 ranks found room: the early probe follows at once, then the first decision") {
    Sim s(three, 150, 2000);
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
  SECTION("most ranks found no room: the whole warm-up, then a blocking run before any probe") {
    for (auto [voters, room] : {std::pair{4, 1}, std::pair{4, 0}, std::pair{3, 1}}) {
      CAPTURE(voters, room);
      Sim s(three, 150, 2000);
      run(s, voters, room, 6 + 32 + 3);
      REQUIRE(s.room_points == 1);
      REQUIRE(s.key.no_room());
      REQUIRE(s.count(Path::blocking, 0, 6 + 32) == 6 + 32);
      REQUIRE(s.key.decisions() == 1);  // blocking, by the vote
      REQUIRE(s.key.chosen() == Path::blocking);
      // After the run, the early probe as after any run; early is cheaper here, and wins.
      REQUIRE(s.count(Path::early, 6 + 32, 6 + 32 + 3) == 3);
      s.call();
      REQUIRE(s.key.decisions() == 2);
      REQUIRE(s.key.chosen() == Path::early);
    }
  }
  SECTION("half the ranks, or nobody observed: the whole warm-up, then the early probe") {
    for (auto [voters, room] : {std::pair{4, 2}, std::pair{0, 0}}) {
      CAPTURE(voters, room);
      Sim s(three, 150, 2000);
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
      Policy p = three;
      p.room_calls = room_calls;
      Sim s(p, 150, 2000);
      run(s, 4, 4, 10);
      REQUIRE(s.room_points == 0);
      REQUIRE(s.count(Path::blocking, 0, 6) == 6);
    }
  }
  SECTION("a room point sooner than the third call comes at the third: the first 2 are not measured") {
    Policy p = three;
    p.room_calls = 1;
    Sim s(p, 150, 2000);
    run(s, 4, 4, 7);
    REQUIRE(s.room_points == 1);
    REQUIRE(s.count(Path::blocking, 0, 3) == 3);
    REQUIRE(s.key.last_blocking_ns() == 200);
  }
  SECTION("a later room point: the warm-up is measured from its third call to the room point") {
    Policy p = three;
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
  Vote v{1, 2.5, 3.5, 0, 1, 1, 4.5, 5.5, 2, 1, 3};
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
  REQUIRE(w.room_voters == 2);
  REQUIRE(w.room_ranks == 1);
  REQUIRE(w.probe_refusals == 3);
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
