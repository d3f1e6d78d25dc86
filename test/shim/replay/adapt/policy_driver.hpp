// What the policy's tests share (test_policy.cpp, test_policy_turns.cpp): a key driven through
// its calls with made-up costs, and the policies they use.
#pragma once

#include <optional>
#include <vector>

#include "shim/replay/adapt/policy.hpp"

namespace tnbc::shim::replay::adapt::test {

using tnbc::shim::replay::adapt::Intervals;
using tnbc::shim::replay::adapt::KeyState;
using tnbc::shim::replay::adapt::Path;
using tnbc::shim::replay::adapt::Policy;
using tnbc::shim::replay::adapt::Turns;
using tnbc::shim::replay::adapt::Vote;

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
  /// At a probe point (Policy::probe_points): how many ranks' budgets refuse the early probe.
  int probe_refusals = 0;
  int probe_points = 0;  // probe points met
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
      if (key.probe_point()) ++probe_points;
      if (key.asks_budget()) sum.probe_refusals = probe_refusals;
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
inline Policy narrow(Policy p = Policy{}) {
  p.wide_gain = 1.0;
  return p;
}

/// Runs `n` calls of `s` whose first 2 calls cost what the Sim was made with (connections,
/// first touches) and whose later blocking calls cost 200.  (A call's interval is recorded at
/// the next call's entry: the cost changes after the third call begins.)
inline void slow_start(Sim& s, int n) {
  s.calls(3);
  s.blocking_ns = 200;
  s.calls(n - 3);
}

inline Policy small() {
  Policy p;
  p.warmup_calls = 2;
  p.probe_calls = 2;
  p.first_run = 4;
  p.max_run = 16;
  p.enter_gain = 0.05;
  p.keep_gain = 0.0;
  return narrow(p);
}

}  // namespace tnbc::shim::replay::adapt::test
