// Per-call decision of libtnbc.so: the early path (return at once, the engine finishing the
// exchange) or the blocking call.
//
// Returning early costs something (the send copy, mirror pages, protection, chunked messages,
// a progress thread that takes CPU) and gains only where the program leaves room: computation
// after the call that does not read the data.  Where nothing can overlap, or where shared memory
// moves the data faster than the machinery pays back, the blocking call is faster.  So each
// *key* -- (communicator, operation, total class), the same on every rank for the same call --
// measures both paths and keeps the cheaper one (docs/replay.md, "Deciding per call"):
//
//   calls of a key:  [blocking W, or Wr] [early probe 1+P] D [chosen path R] [other path P] D ...
//
//   W: the warm-up: the first W calls of a key run blocking; its first 2 are not measured (they
//      pay for connections and first touches), of the others the last 2P are (at least one).  A
//      probe of the early path costs up to ~6% of a call, so the probes come after 6 calls: a
//      program that makes a key's call only a few times never pays for one, and a plan (`return
//      early`) makes it return early from the first call.
//   Wr: the room point (call 4), a decision point that decides only whether the warm-up ends:
//      the ranks vote on what the warm-up's observed calls show (learn.hpp, room()).  Where most
//      ranks' reads leave room to overlap (and, under probe points, every budget affords the
//      probe: Policy::probe_points), the early probe follows at once, since each warm-up call
//      costs what early saves.  Where most leave none (the data read at once), the warm-up runs its
//      W calls and a blocking run of `first_run` calls follows before the first probe: a short
//      program never pays for a probe its reads say it cannot win back.  Where the vote is
//      split, or nobody observed, the probe follows the warm-up.
//   An early probe is 1 + P calls, measured from its second call: the first pays for the change
//      of path (the engine's buffers, a learn point, turn counters set up the first time), a
//      cost of probing, not of the path.
//   A run R (the warm-up included) is measured over its last 2P calls only, next to the probe
//   that follows it, so that a program whose phase changed during a long run is compared as it
//   is now.
//
//   D: a decision point.  Every rank reaches it at the same call of the key (collectives on a
//      communicator are called in the same order everywhere), sums its measurements over the
//      communicator (Vote) and applies the same rule to the same sums, so all ranks take the
//      same path: the engine's messages only match the engine's.  The sum does not hold the
//      program up: posted after the call, completed in between by the progress thread (tally.hpp),
//      decided at the key's next call (decide.hpp, PathChoice), so the segment that ends there
//      runs one call more, unmeasured.
//   cost of a call: the time from its entry to the entry of the key's next call, on the rank's
//      clock.  The program's work between calls is the same on either path, so the interval
//      holds what the path costs it: time inside, waits for guarded pages and fences, CPU the
//      progress thread and the network stack take from its computation on a full node, cache
//      and TLB effects.  The parts the library sees are kept beside it for the statistics.
//
// Early is chosen when it saves at least `enter_gain` of the blocking time (summed over the
// ranks) and kept while it saves more than `keep_gain`: hysteresis, so noise does not flip the
// path.  Each confirmation doubles the run before the next probe (up to `max_run`), so a stable
// program pays for probing the losing path less and less often; a change of decision starts
// again from `first_run`.  A wide decision (the winner saves `wide_gain` or more) counts as two
// confirmations: where one path is far cheaper, probing the other is what costs.
//
// Per-node turns (docs/replay.md, "Per-node priority") are decided the same way for a key that
// has an agreed turn order (learned: learn.hpp) and spans nodes: its early calls compare turns
// on and off and keep the cheaper (see KeyState::allow_turns).
//
// The measurements behind these figures: docs/measurements/adapt-history.md.  This file holds
// the policy only (no MPI): decide.cpp owns the keys and the reduction.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "shim/replay/engine/costs.hpp"

namespace tnbc::shim::replay::adapt {

enum class Path : std::uint8_t { blocking, early };

/// Which per-node turns an early call's interval measures: none (not compared: the key has no
/// turn order, or the call is the first of its run), on or off.
enum class Turns : std::uint8_t { none, on, off };

/// What the decision compares, per key: the time from a call's entry to the next call's entry
/// of the same key, by the path of the first of the two.  Written by the calling thread.
struct Intervals {
  std::atomic<std::uint64_t> early_intervals{0}, early_interval_ns{0};
  std::atomic<std::uint64_t> blocking_intervals{0}, blocking_interval_ns{0};
  /// The early intervals again, by the per-node turns their call took (Turns::none: neither).
  std::atomic<std::uint64_t> turns_on_intervals{0}, turns_on_ns{0};
  std::atomic<std::uint64_t> turns_off_intervals{0}, turns_off_ns{0};

  /// Records the interval that ended now, from a call made on `p` with per-node turns `turns`.
  void add_interval(Path p, std::uint64_t ns, Turns turns = Turns::none) {
    auto& n = p == Path::early ? early_intervals : blocking_intervals;
    auto& t = p == Path::early ? early_interval_ns : blocking_interval_ns;
    t.fetch_add(ns, std::memory_order_relaxed);
    n.fetch_add(1, std::memory_order_relaxed);
    if (p != Path::early || turns == Turns::none) return;
    (turns == Turns::on ? turns_on_ns : turns_off_ns).fetch_add(ns, std::memory_order_relaxed);
    (turns == Turns::on ? turns_on_intervals : turns_off_intervals).fetch_add(1, std::memory_order_relaxed);
  }
  /// The mean of every interval after a call on `p` so far (ns; 0 before any).
  double mean_ns(Path p) const {
    const std::uint64_t n = (p == Path::early ? early_intervals : blocking_intervals).load(std::memory_order_relaxed);
    const std::uint64_t ns = (p == Path::early ? early_interval_ns : blocking_interval_ns).load(std::memory_order_relaxed);
    return n ? static_cast<double>(ns) / static_cast<double>(n) : 0.0;
  }
};

/// What a key's calls cost, by path (the engine fills in the early side).
using Costs = engine::Costs;

struct Policy {
  std::uint32_t warmup_calls = 6;   ///< blocking calls of a key before early is first tried
  /// The room point: the warm-up ends after this many calls where most ranks that observed its
  /// calls found room to overlap (Vote::room_ranks).  At least 3 (the warm-up measures from its
  /// third call); 0, or warmup_calls or more: no room point.  4: the ranks vote at the end of
  /// the fourth call (decide.cpp, done()), on the reads of the three before it.
  std::uint32_t room_calls = 4;
  std::uint32_t probe_calls = 2;    ///< calls per probe of a path
  /// Calls on the chosen path before the first re-probe: probing the other path after runs of
  /// 32 costs well under 3% of the calls (docs/measurements/adapt-history.md).
  std::uint32_t first_run = 32;
  std::uint32_t max_run = 1024;     ///< longest run between probes
  double enter_gain = 0.05;         ///< early must save this share of the blocking time to win
  double keep_gain = 0.0;           ///< early keeps winning while it saves more than this share
  /// A decision is *wide* when its winner saves at least this share of the loser's cost (the
  /// mean intervals summed over the ranks), and counts as two: a key's first decision starts a
  /// run of 2 x first_run, a wide confirmation quadruples the run (a narrow one doubles it); for
  /// the turns it quadruples the runs between comparisons, makes a first decision's gap 2 runs,
  /// and settles their first comparison in one round of four calls, not two.  Noise does not flip
  /// a difference this wide (enter_gain is half as much), and each call of a probe of the loser
  /// costs that difference: probing it less often is where the saving is.  A switch still
  /// starts again from first_run.
  double wide_gain = 0.10;
  /// Early calls at the end of a run that compare per-node turns on and off once they are
  /// decided (on, off, off, on: a drift over the four cancels out), next to the probe that
  /// follows; every early call compares them before.  The same enter_gain and keep_gain decide
  /// turns against no turns.
  std::uint32_t turn_trial_calls = 4;
  /// Runs between two that compare turns, at most: 1 after a change of the turns (2 after a wide
  /// first decision), doubled by each confirmation, so the losing choice costs ever fewer calls.
  std::uint32_t max_trial_gap = 8;
  /// Probe points (TNBC_EXPLORE not off): a blocking run that would be followed by a probe of
  /// the early path ends in a decision point instead, where the ranks vote whether their
  /// exploration budgets afford the probe (explore.hpp; Vote::probe_refusals).  Refused, the
  /// key runs blocking for as many calls again as it has made (at least probe_calls, at most
  /// max_run) and asks again: the budget grows with the time the program runs.  The room point
  /// asks too: where most ranks found room but some budget refuses the probe, the warm-up runs
  /// to its end and its probe point asks again.  A plan's word is not asked.
  bool probe_points = false;
};

/// One rank's contribution to a decision, summed over the communicator.  Plain doubles so that
/// the sum is one MPI_Iallreduce of kFields doubles (a Tally).
struct Vote {
  static constexpr int kFields = 11;
  double ranks_measured = 0;  ///< 1 if this rank measured both paths
  double blocking_ns = 0;     ///< mean interval after a blocking call on this rank
  double early_ns = 0;        ///< mean interval after an early call on this rank
  double force_blocking = 0;  ///< 1 if this rank's plan says "return blocking" for the call
  double force_early = 0;     ///< 1 if it says "return early"
  double turn_ranks = 0;      ///< 1 if this rank measured early calls with turns on and off
  double turns_on_ns = 0;     ///< mean interval after an early call with per-node turns
  double turns_off_ns = 0;    ///< ... and without them
  /// At a room point (KeyState::room_point): 1 if this rank observed calls of the key, and 1 if
  /// they leave room to overlap.
  double room_voters = 0;
  double room_ranks = 0;
  /// At a probe point (KeyState::probe_point): 1 if this rank's exploration budget cannot
  /// afford the early probe.
  double probe_refusals = 0;

  void to_array(double out[kFields]) const;
  static Vote from_array(const double in[kFields]);
};

/// The decision state of one key.  Every rank holds one per key and drives it with the same
/// calls and the same summed votes, so every rank's path() is the same.
class KeyState {
 public:
  /// `decide_first`: the first call is a decision point (a plan may force the path: every rank
  /// must hear it before the first call takes a path).
  explicit KeyState(const Policy& policy, bool decide_first = false);

  /// The path of the next call of this key.
  Path path() const { return segment_.path; }
  /// True when the next call is a decision point: measure() locally, sum the votes over the
  /// communicator, decide(), then use path().
  bool decision_due() const { return calls_ == segment_.end || room_point(); }
  /// True when the next call is a probe point (Policy::probe_points): a decision point whose
  /// vote carries probe_refusals, and which decides only whether the early probe begins.
  bool probe_point() const { return probe_.point; }
  /// True when the next call's vote carries probe_refusals: at a probe point, and at the room
  /// point under probe points (room is only a prediction from the reads, and a wrong one can cost
  /// a short program much: the budgets must afford the probe too; docs/measurements/adapt-history.md).
  bool asks_budget() const { return probe_.point || (policy_.probe_points && room_point()); }
  /// What this rank's last early probe cost beyond the blocking calls it was compared with (ns:
  /// its mean early interval less its mean blocking one, times its calls; 0 where it cost
  /// less), returned once, after the decision that followed the probe; nothing otherwise.
  std::optional<std::uint64_t> take_probe_excess_ns() { return std::exchange(probe_.excess_ns, std::nullopt); }
  /// The share of a blocking interval by which this rank's last early probe's calls cost more
  /// (below 0: less); NaN before any probe was measured.
  double early_loss_share() const { return probe_.loss_share; }
  /// Probes of the early path deferred at probe points.
  std::uint64_t probes_deferred() const { return probe_.deferred; }
  /// The calls of an early probe that begins now.
  std::uint64_t early_probe_length() const;
  /// True when the next call is the warm-up's room point (Policy::room_calls): a decision point
  /// whose vote carries room_voters and room_ranks, and which decides only whether the
  /// warm-up ends here.
  bool room_point() const { return warmup_.on && warmup_.room_at != 0 && calls_ == warmup_.room_at; }
  /// The key is in its warm-up (its first blocking calls).
  bool warming_up() const { return warmup_.on; }
  /// The warm-up ended at its room point.
  bool short_warmup() const { return warmup_.short_end; }
  /// Most ranks that observed the warm-up found no room to overlap (the room point): the
  /// warm-up is followed by a blocking run of first_run calls, not by the early probe.
  bool no_room() const { return warmup_.no_room; }
  /// This rank's vote: the mean interval of each path since its latest segment began.
  Vote measure(const Intervals& intervals);
  /// Applies the summed votes; returns the path from now on.  A plan's vote wins over the
  /// measurements ("blocking" over "early"): that path runs max_run calls, without probes,
  /// then the next decision asks again.  With no vote at all at the first decision point, the
  /// probes begin.
  Path decide(const Vote& summed, const Intervals& intervals);
  /// Counts one call made on path().
  void advance(const Intervals& intervals);

  /// The key has an agreed per-node turn order from now on (called at the same call on every
  /// rank, the first of an early segment).  Its early calls then compare turns on and off:
  /// until turns are decided, and in every early probe, each call after the first of the
  /// segment alternates on, off, off, on (an early probe is lengthened to hold one round of four
  /// such calls; before the first decision of the turns, a comparison that is not wide adds a
  /// second round, extended(), unless early with the cheaper turns loses widely to blocking,
  /// which no choice of turns wins back), and the first goes with turns while undecided;
  /// once decided, the last turn_trial_calls of a run do, in one run of every trial gap
  /// (Policy::max_trial_gap), and the rest use the decision, uncompared (only calls next to
  /// each other are compared, so that a phase change within a run does not count for one
  /// choice).  A decision point decides turns from the summed means when every measuring rank
  /// compared both (the first such decision has no incumbent: the cheaper wins; after it, turns
  /// are turned on by enter_gain and kept by keep_gain, as the paths are); when the turns
  /// change, or a probe or a trial run compared them, it judges the early path by the compared
  /// mean of the turns it will use.
  void allow_turns();
  bool turns_allowed() const { return turns_.allowed; }
  /// Whether the next call (on the early path) takes per-node turns, and what its interval
  /// measures (Turns::none: not compared).
  bool turns_on() const;
  Turns turns_compared() const;
  bool turns_decided() const { return turns_.decisions > 0; }
  bool turns_chosen() const { return turns_.chosen; }
  std::uint64_t turn_decisions() const { return turns_.decisions; }
  std::uint64_t turn_switches() const { return turns_.switches; }

  /// Statistics and tests.
  std::uint64_t calls() const { return calls_; }
  bool decided() const { return decisions_ > 0; }
  Path chosen() const { return chosen_; }
  std::uint64_t decisions() const { return decisions_; }
  std::uint64_t switches() const { return switches_; }
  bool probing() const { return probing_; }
  /// The current path comes from a plan's "return", not from measurements.
  bool forced() const { return forced_; }
  /// The last decide() did not decide: the first comparison of the turns was narrow, and the
  /// early probe goes on for another round of them (every rank does the same with the same sums).
  bool extended() const { return extended_; }
  /// The last mean costs this rank measured (ns per call; 0: none yet).
  double last_blocking_ns() const { return base_.mean_blocking; }
  double last_early_ns() const { return base_.mean_early; }

 private:
  // The parts of decide(): a plan's word; the room point; the per-node turns (false: too close,
  // compared once more); the path.
  Path decide_forced(Path forced, const Intervals& intervals);
  Path decide_probe(const Vote& summed, const Intervals& intervals);
  void begin_early_probe(const Intervals& intervals);
  void decide_room(const Vote& summed, const Intervals& intervals);
  bool decide_turns(const Vote& summed, double& early_ns);
  Path decide_path(const Vote& summed, double early_ns, const Intervals& intervals);
  void begin_warmup(const Intervals* intervals);
  void begin_segment(Path p, std::uint64_t length, bool decide_at_end, const Intervals* intervals);
  void rebase(Path p, const Intervals& intervals);
  void rebase_turns(const Intervals& intervals);
  /// The turns of the call `j` calls into the current (early) segment, and whether it counts.
  std::pair<bool, bool> turn_plan(std::uint64_t j) const;

  Policy policy_;
  /// The current segment: its path, its calls [start, end) of the key, whether it ends in a
  /// decision point.
  struct Segment {
    Path path = Path::early;
    std::uint64_t start = 0, end = 0;
    bool decide_at_end = false;
  };
  /// The warm-up: whether the current segment is it, whether it ended at its room point
  /// (short_end), whether most ranks found no room there (a blocking run follows it), and its
  /// room point (0: none).
  struct Warmup {
    bool on = false, short_end = false, no_room = false;
    std::uint64_t room_at = 0;
  };
  /// Interval counters when the latest segment of each path began (a path's mean runs from
  /// there to the decision point: the last call's interval ends at the decision point's entry),
  /// and the means compared.
  struct Base {
    std::uint64_t early_n = 0, early_ns = 0, blocking_n = 0, blocking_ns = 0;
    double mean_blocking = 0, mean_early = 0;
  };
  /// Per-node turns: allowed once the key has a turn order; chosen after a decision; whether
  /// the current early run compares them, and how often runs do; the counters of both kinds of
  /// early intervals at the last decision point.
  struct TurnState {
    bool allowed = false, chosen = false, trial_run = false;
    std::uint32_t trial_gap = 1, runs_since_trial = 0;
    std::uint64_t decisions = 0, switches = 0;
    std::uint64_t base_on_n = 0, base_on_ns = 0, base_off_n = 0, base_off_ns = 0;
  };
  /// Probe points: whether the next decision point is one, what the last early probe cost
  /// this rank (kept until taken), its loss share, and the probes deferred.
  struct ProbeState {
    bool point = false;
    std::optional<std::uint64_t> excess_ns;
    std::uint64_t deferred = 0;
    double loss_share = std::numeric_limits<double>::quiet_NaN();
  };
  Segment segment_;
  ProbeState probe_;
  Path chosen_ = Path::early;
  bool probing_ = true;
  bool forced_ = false;
  bool extended_ = false;
  Warmup warmup_;
  std::uint64_t calls_ = 0;
  std::uint64_t run_ = 0;  // length of the next run on the chosen path
  Base base_;
  std::uint64_t decisions_ = 0, switches_ = 0;
  TurnState turns_;
};

}  // namespace tnbc::shim::replay::adapt
