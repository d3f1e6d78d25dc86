#include "policy.hpp"

#include <algorithm>

namespace tnbc::shim::replay::adapt {
namespace {

std::uint64_t load(const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

void Vote::to_array(double out[kFields]) const {
  out[0] = ranks_measured;
  out[1] = blocking_ns;
  out[2] = early_ns;
  out[3] = force_blocking;
  out[4] = force_early;
  out[5] = turn_ranks;
  out[6] = turns_on_ns;
  out[7] = turns_off_ns;
  out[8] = room_voters;
  out[9] = room_ranks;
  out[10] = probe_refusals;
}

Vote Vote::from_array(const double in[kFields]) {
  Vote v;
  v.ranks_measured = in[0];
  v.blocking_ns = in[1];
  v.early_ns = in[2];
  v.force_blocking = in[3];
  v.force_early = in[4];
  v.turn_ranks = in[5];
  v.turns_on_ns = in[6];
  v.turns_off_ns = in[7];
  v.room_voters = in[8];
  v.room_ranks = in[9];
  v.probe_refusals = in[10];
  return v;
}

KeyState::KeyState(const Policy& policy, bool decide_first) : policy_(policy) {
  policy_.probe_calls = std::max<std::uint32_t>(policy_.probe_calls, 1);
  policy_.first_run = std::max<std::uint32_t>(policy_.first_run, 1);
  policy_.max_run = std::max(policy_.max_run, policy_.first_run);
  run_ = policy_.first_run;
  begin_warmup(nullptr);
  if (decide_first) {
    // The first call asks the plan (decide()); the warm-up, if any, starts there.
    warmup_.on = false;
    segment_.end = 0;
    segment_.decide_at_end = true;
  }
}

void KeyState::rebase(Path p, const Intervals& iv) {
  if (p == Path::early) {
    base_.early_n = load(iv.early_intervals);
    base_.early_ns = load(iv.early_interval_ns);
  } else {
    base_.blocking_n = load(iv.blocking_intervals);
    base_.blocking_ns = load(iv.blocking_interval_ns);
  }
}

void KeyState::rebase_turns(const Intervals& iv) {
  turns_.base_on_n = load(iv.turns_on_intervals);
  turns_.base_on_ns = load(iv.turns_on_ns);
  turns_.base_off_n = load(iv.turns_off_intervals);
  turns_.base_off_ns = load(iv.turns_off_ns);
}

namespace {

/// Four calls that compare turns on and off: on, off, off, on (a drift over them cancels out).
constexpr std::uint64_t kCompare = 4;
bool compare_on(std::uint64_t i) { return i % kCompare == 0 || i % kCompare == kCompare - 1; }
/// Rounds of kCompare calls before the first decision of the turns, when the first round's
/// comparison is not wide (Policy::wide_gain): one round alone too often tells turns on from off
/// wrongly (docs/measurements/adapt-history.md); later comparisons take one round.
constexpr std::uint64_t kFirstCompareRounds = 2;
/// The first calls of a key's warm-up, not measured: they pay for connections and first
/// touches (docs/measurements/adapt-history.md).
constexpr std::uint64_t kWarmupUnmeasured = 2;

/// The share of the loser's cost that the cheaper of two means saves (0 when one is missing).
double saving(double winner, double loser) { return winner > 0 && loser > 0 ? 1.0 - winner / loser : 0.0; }

}  // namespace

std::uint64_t KeyState::early_probe_length() const {
  // The first call of an early probe pays for the change of path (the drain of the blocking
  // calls' pace, a learn point, the engine's buffers and a turn window set up the first time):
  // it is not measured (advance), so the probe has probe_calls after it.
  const std::uint64_t p = 1 + static_cast<std::uint64_t>(policy_.probe_calls);
  if (!turns_.allowed) return p;
  // With turns: the first call and a round of the comparison (decide() adds a second before
  // the first decision of the turns when the first is not wide).  Every early probe compares
  // them, decided or not: a probe comes after a blocking run, and early may only win with the
  // other turns (a first comparison that chose wrong is mended there).
  return std::max(p, 1 + kCompare);
}

void KeyState::allow_turns() {
  if (turns_.allowed) return;
  turns_.allowed = true;
  // Allowed at the first call of an early probe: lengthen it to compare turns at once.
  if (segment_.path == Path::early && segment_.decide_at_end && calls_ == segment_.start)
    segment_.end = std::max(segment_.end, segment_.start + early_probe_length());
}

std::pair<bool, bool> KeyState::turn_plan(std::uint64_t j) const {
  if (!turns_.allowed || segment_.path != Path::early) return {false, false};
  // The first call of a segment pays for the change of path (and a learn point): not compared.
  // Undecided, it takes turns, so that a communicator's turn window is set up there.
  if (j == 0) return {turns_decided() ? turns_.chosen : true, false};
  if (!turns_decided() || segment_.decide_at_end) return {compare_on(j - 1), true};  // undecided, or a probe
  // A run: its last turn_trial_calls compare, in a trial run long enough to hold them, next to
  // the probe that follows, as the paths are judged by a run's last calls.  Not its first calls:
  // right after a decision point the calls run behind for a few calls, and a trial there can turn
  // the turns off wrongly for a whole run (docs/measurements/adapt-history.md).
  const std::uint64_t trial = policy_.turn_trial_calls, length = segment_.end - segment_.start;
  if (turns_.trial_run && length > trial + 1 && j >= length - trial) return {compare_on(j - (length - trial)), true};
  // Only calls next to each other are compared: a run's other calls may see another phase.
  return {turns_.chosen, false};
}

bool KeyState::turns_on() const { return turn_plan(calls_ - segment_.start).first; }

Turns KeyState::turns_compared() const {
  const auto [on, counted] = turn_plan(calls_ - segment_.start);
  if (!counted) return Turns::none;
  return on ? Turns::on : Turns::off;
}

void KeyState::begin_warmup(const Intervals* iv) {
  // Blocking first, for warmup_calls: a program that makes a key's call only a few times never
  // pays for a probe of the early path (adapt/policy.hpp).
  const std::uint64_t length = std::max(policy_.warmup_calls, policy_.probe_calls);
  begin_segment(Path::blocking, length, false, iv);
  probing_ = true;
  warmup_.on = true;
  // The room point comes after the first measured call (kWarmupUnmeasured), before the end.
  const std::uint64_t room = std::max<std::uint64_t>(policy_.room_calls, kWarmupUnmeasured + 1);
  warmup_.room_at = policy_.room_calls > 0 && room < length ? segment_.start + room : 0;
}

void KeyState::begin_segment(Path p, std::uint64_t length, bool decide_at_end, const Intervals* iv) {
  segment_.path = p;
  warmup_.on = false;
  segment_.start = calls_;
  segment_.end = calls_ + std::max<std::uint64_t>(length, 1);
  segment_.decide_at_end = decide_at_end;
  if (iv) rebase(p, *iv);  // no intervals: a new key, whose counters start at 0
}

void KeyState::advance(const Intervals& iv) {
  ++calls_;
  // A run (and the warm-up) is measured over its last calls only, next to the probe that
  // follows it: a program whose phase changed during a long run is compared as it is now, and
  // the first calls of a key (connections, first touches) are not compared at all.  (Intervals are recorded
  // at the next call's entry, so the counters now hold those of the calls before this one.)
  const std::uint64_t length = segment_.end - segment_.start;
  const std::uint64_t window = 2 * static_cast<std::uint64_t>(policy_.probe_calls);
  if (warmup_.on) {
    // The warm-up is measured from its call kWarmupUnmeasured (or its last, when shorter), and
    // over its last `window` calls when it is longer than that.  The first rebase comes before
    // any room point (the third call at the soonest): a warm-up that ends there is measured
    // from kWarmupUnmeasured to the room point.
    const std::uint64_t from = std::min(kWarmupUnmeasured, length - 1);
    if (calls_ == segment_.start + from + 1 || (length > from + window && calls_ == segment_.end - window + 1))
      rebase(segment_.path, iv);
  } else if (!segment_.decide_at_end && length > window && calls_ == segment_.end - window + 1) {
    rebase(segment_.path, iv);
  }
  // An early probe is measured from its second call on (early_probe_length): the counters hold
  // the first call's interval once the second call is done.
  if (segment_.decide_at_end && segment_.path == Path::early && calls_ == segment_.start + 2) rebase(segment_.path, iv);
  if (calls_ != segment_.end || segment_.decide_at_end) return;
  if (warmup_.on && warmup_.no_room) {
    // Most ranks' observed reads leave nothing to overlap: an early probe would cost what it
    // cannot win back in a short program.  Blocking is decided for a run; the probe follows it.
    ++decisions_;
    chosen_ = Path::blocking;
    probing_ = false;
    begin_segment(Path::blocking, run_, false, &iv);
    return;
  }
  // End of the first probe or of a run on the chosen path: probe the other path, then decide.
  if (segment_.path == Path::early) {
    begin_segment(Path::blocking, policy_.probe_calls, true, &iv);
    probing_ = true;
  } else if (policy_.probe_points) {
    // The ranks first vote whether their budgets afford the early probe (decide_probe): the
    // next call is that decision point, still on the blocking path, measured with this run.
    warmup_.on = false;
    segment_.decide_at_end = true;
    probe_.point = true;
  } else {
    begin_early_probe(iv);
  }
}

void KeyState::begin_early_probe(const Intervals& iv) {
  begin_segment(Path::early, early_probe_length(), true, &iv);
  probing_ = true;
}

Vote KeyState::measure(const Intervals& iv) {
  const std::uint64_t ec = load(iv.early_intervals) - base_.early_n;
  const std::uint64_t bc = load(iv.blocking_intervals) - base_.blocking_n;
  if (ec > 0) base_.mean_early = static_cast<double>(load(iv.early_interval_ns) - base_.early_ns) / static_cast<double>(ec);
  if (bc > 0)
    base_.mean_blocking = static_cast<double>(load(iv.blocking_interval_ns) - base_.blocking_ns) / static_cast<double>(bc);
  Vote v;
  // A rank that has not measured both paths (it cannot happen on the schedule above, but a
  // measurement may be empty) abstains rather than vote with a zero.
  if (ec > 0 && bc > 0) {
    v.ranks_measured = 1;
    v.blocking_ns = base_.mean_blocking;
    v.early_ns = base_.mean_early;
  }
  const std::uint64_t on = load(iv.turns_on_intervals) - turns_.base_on_n;
  const std::uint64_t off = load(iv.turns_off_intervals) - turns_.base_off_n;
  if (v.ranks_measured > 0 && on > 0 && off > 0) {
    v.turn_ranks = 1;
    v.turns_on_ns = static_cast<double>(load(iv.turns_on_ns) - turns_.base_on_ns) / static_cast<double>(on);
    v.turns_off_ns = static_cast<double>(load(iv.turns_off_ns) - turns_.base_off_ns) / static_cast<double>(off);
  }
  return v;
}

Path KeyState::decide(const Vote& summed, const Intervals& iv) {
  extended_ = false;
  const bool probe_point = std::exchange(probe_.point, false);
  if (summed.force_blocking > 0 || summed.force_early > 0)
    return decide_forced(summed.force_blocking > 0 ? Path::blocking : Path::early, iv);
  forced_ = false;
  if (probe_point) return decide_probe(summed, iv);
  if (room_point()) {
    decide_room(summed, iv);
    return segment_.path;
  }
  if (calls_ == 0 && summed.ranks_measured <= 0) {
    // The first call asked the plan, which has nothing to say here: measure.
    begin_warmup(&iv);
    return segment_.path;
  }
  // Turns first, when every rank that measured the paths compared them (the sums then run over
  // the same ranks): early is then judged by the mean of the turns it will use.
  double early_ns = summed.early_ns;
  if (turns_.allowed && summed.turn_ranks > 0 && summed.turn_ranks >= summed.ranks_measured &&
      !decide_turns(summed, early_ns))
    return segment_.path;
  rebase_turns(iv);  // each comparison stands alone
  return decide_path(summed, early_ns, iv);
}

Path KeyState::decide_forced(Path forced, const Intervals& iv) {
  if (decisions_ > 0 && forced != chosen_) ++switches_;
  ++decisions_;
  chosen_ = forced;
  probing_ = false;
  forced_ = true;
  begin_segment(forced, policy_.max_run, true, &iv);
  rebase_turns(iv);
  return forced;
}

Path KeyState::decide_probe(const Vote& summed, const Intervals& iv) {
  if (summed.probe_refusals <= 0) {
    begin_early_probe(iv);
    return Path::early;
  }
  // Some rank's budget cannot afford the probe yet: blocking for as many calls again as the
  // key has made (the program's time, and so the budget, about doubles), then ask again.
  // A run, not a probe: its calls are observed as a run's are (learn.hpp).
  ++probe_.deferred;
  const std::uint64_t wait = std::clamp<std::uint64_t>(calls_, policy_.probe_calls, policy_.max_run);
  begin_segment(Path::blocking, wait, false, &iv);
  probing_ = false;
  return Path::blocking;
}

void KeyState::decide_room(const Vote& summed, const Intervals& iv) {
  // The warm-up's room point decides only whether the warm-up ends here: when most ranks
  // that observed its calls found room to overlap, the early probe follows at once.
  warmup_.room_at = 0;
  if (summed.room_voters > 0 && 2 * summed.room_ranks > summed.room_voters) {
    // Room is a prediction: the budgets must afford the probe it begins (Policy::probe_points).
    // Refused, the warm-up goes on to its end, a probe point.
    if (policy_.probe_points && summed.probe_refusals > 0) {
      ++probe_.deferred;
      return;
    }
    warmup_.short_end = true;
    begin_early_probe(iv);
  } else if (summed.room_voters > 0 && 2 * summed.room_ranks < summed.room_voters) {
    warmup_.no_room = true;  // advance() ends the warm-up with a blocking run, not the early probe
  }
}

bool KeyState::decide_turns(const Vote& summed, double& early_ns) {
  // The segment that ends here was an early probe: its early mean mixes both turns.
  const bool after_probe = segment_.path == Path::early && segment_.decide_at_end;
  // The first decision has no incumbent: the cheaper wins (keep_gain, the smaller margin).
  // From then on turns must save enter_gain to be turned on, and are kept above keep_gain.
  const double need = !turns_decided() || turns_.chosen ? policy_.keep_gain : policy_.enter_gain;
  const bool on = summed.turns_on_ns < (1.0 - need) * summed.turns_off_ns;
  const bool wide = on ? saving(summed.turns_on_ns, summed.turns_off_ns) >= policy_.wide_gain
                       : saving(summed.turns_off_ns, summed.turns_on_ns) >= policy_.wide_gain;
  // The first comparison, in an early probe of one round: if it is not wide, the probe goes
  // on for another round and nothing is decided yet (the means then run over both rounds:
  // nothing is rebased).
  // Not where early, with the cheaper of the turns, loses widely to blocking: no choice of
  // the turns can win that back, and every call of the round would cost the difference.
  const double cheaper = std::min(summed.turns_on_ns, summed.turns_off_ns);
  const bool hopeless = summed.ranks_measured > 0 && saving(summed.blocking_ns, cheaper) >= policy_.wide_gain;
  if (!turns_decided() && after_probe && !wide && !hopeless &&
      segment_.end - segment_.start < 1 + kCompare * kFirstCompareRounds) {
    segment_.end += kCompare;
    extended_ = true;
    return false;
  }
  const bool same = turns_decided() && on == turns_.chosen;
  if (turns_decided() && !same) ++turns_.switches;
  // A confirmation doubles the runs until the next comparison (a wide one quadruples them);
  // a change compares at once.  The first decision of the turns, when wide, counts as a
  // decision and a confirmation (as the paths' first decision does): the first run keeps its
  // turns uncompared and the second compares them.
  const std::uint32_t max_gap = std::max(policy_.max_trial_gap, 1u);
  if (same)
    turns_.trial_gap = std::min(turns_.trial_gap * (wide ? 4 : 2), max_gap);
  else
    turns_.trial_gap = !turns_decided() && wide ? std::min(2u, max_gap) : 1;
  // New turns, or a probe or trial run that compared both (a trial is a run's last calls,
  // the ones its early mean is taken from): what early costs with the turns it will use is
  // their compared mean (the early mean measured other turns, or a mix of both).
  if (!same || after_probe || turns_.trial_run) early_ns = on ? summed.turns_on_ns : summed.turns_off_ns;
  ++turns_.decisions;
  turns_.chosen = on;
  return true;
}

Path KeyState::decide_path(const Vote& summed, double early_ns, const Intervals& iv) {
  if (probing_ && segment_.path == Path::early && base_.mean_blocking > 0 && base_.mean_early > 0) {
    // What the early probe cost this rank (explore.hpp): its calls, and the call of this
    // decision point's vote, which stayed on it.
    const double extra = base_.mean_early - base_.mean_blocking;
    probe_.loss_share = extra / base_.mean_blocking;
    const auto calls = static_cast<double>(segment_.end - segment_.start + 1);
    probe_.excess_ns = extra > 0 ? static_cast<std::uint64_t>(extra * calls) : std::uint64_t{0};
  }
  Path next = Path::blocking;  // nobody measured: the path that cannot lose
  bool wide = false;
  if (summed.ranks_measured > 0) {
    const double need = (decisions_ > 0 && chosen_ == Path::early) ? policy_.keep_gain : policy_.enter_gain;
    if (early_ns < (1.0 - need) * summed.blocking_ns) next = Path::early;
    wide = (next == Path::early ? saving(early_ns, summed.blocking_ns) : saving(summed.blocking_ns, early_ns)) >=
           policy_.wide_gain;
  }
  // A wide decision counts as two confirmations (Policy::wide_gain); a switch starts again.
  if (decisions_ == 0) {
    run_ = std::min<std::uint64_t>(std::uint64_t{policy_.first_run} * (wide ? 2 : 1), policy_.max_run);
  } else if (next == chosen_) {
    run_ = std::min<std::uint64_t>(run_ * (wide ? 4 : 2), policy_.max_run);
  } else {
    run_ = policy_.first_run;
    ++switches_;
  }
  ++decisions_;
  chosen_ = next;
  probing_ = false;
  begin_segment(next, run_, false, &iv);
  if (next == Path::early && turns_decided()) {
    turns_.trial_run = ++turns_.runs_since_trial >= turns_.trial_gap;
    if (turns_.trial_run) turns_.runs_since_trial = 0;
  }
  return next;
}


}  // namespace tnbc::shim::replay::adapt
