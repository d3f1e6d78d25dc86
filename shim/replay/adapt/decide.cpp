// Per-call decisions of replay mode (decide.hpp).
#include "decide.hpp"

#include "algorithm.hpp"
#include "blocking.hpp"
#include "explore.hpp"
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "shim/log.hpp"
#include "shim/node.hpp"
#include "util/hash.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay::adapt {
namespace {

/// A byte count as a person reads it: "1 MiB", "64 KiB", "100 B".
std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

std::string what(const Key& k, std::uint64_t bytes) {
  return k.op == "alltoallv" ? std::string(k.op) : fmt::format("{} of {}", k.op, size_text(bytes));
}

namespace {

bool g_plan_loaded = false;  // the first call of a key asks every rank's plan

/// Every key ever made.  Never shrinks: operations in flight and guard slots point at the
/// costs inside, and a deque keeps its elements where they are when it grows.
std::mutex g_keys_mutex;
std::deque<Key> g_keys;
Policy g_policy;
bool g_adapt = true;      // TNBC_ADAPT is not off
bool g_algorithms = false;  // MPI's algorithms are chosen per key (TNBC_ALGORITHMS, not TNBC_ADAPT=off)
bool g_one_node = true;   // ... and a communicator on one node runs blocking without measuring
config::Blocking g_blocking = config::Blocking::automatic;  // TNBC_BLOCKING
TrialPolicy g_trial;      // the trial of MPI's algorithms (TNBC_ALGORITHMS_AFTER)

/// Per user communicator (an attribute, so a dup or a split starts afresh and a freed
/// communicator's handle, when MPI reuses it, does not inherit its decisions).
struct CommState {
  std::uint64_t id = 0;
  bool one_node = false;
  std::vector<char> peer_on_node;  // per rank of the communicator: shares this rank's node
  std::map<std::uint32_t, Key*> keys;  // (operation << 8 | total class) -> key
};
int g_comm_keyval = MPI_KEYVAL_INVALID;
std::uint64_t g_next_comm_id = 0;

/// Calls that run blocking without measuring: their communicator lies within one node
/// (`one_node`) and TNBC_ADAPT=on (not measure).  Keys and communicators alike.
bool one_node_rule(bool one_node) { return one_node && g_one_node; }

int delete_comm_state(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommState*>(value);
  return MPI_SUCCESS;
}

CommState& comm_state(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, g_comm_keyval, &value, &flag);
  if (flag) return *static_cast<CommState*>(value);
  auto* cs = new CommState;
  // Every rank of `comm` on this rank's node: the same answer on every rank of `comm` (if all
  // of them share one rank's node, they share each other's).  Without the node's members
  // (node.hpp) every communicator counts as spanning nodes, and is measured.
  if (node::known()) {
    cs->peer_on_node = node::peers(comm);
    cs->one_node = std::all_of(cs->peer_on_node.begin(), cs->peer_on_node.end(), [](char c) { return c != 0; });
  }
  {
    std::lock_guard lock(g_keys_mutex);
    cs->id = g_next_comm_id++;
  }
  PMPI_Comm_set_attr(comm, g_comm_keyval, cs);
  return *cs;
}

}  // namespace

bool start_decisions(const config::Config& cfg, bool plan_loaded, AlgorithmValues& mine) {
  g_adapt = cfg.adapt != config::Adapt::off;
  g_policy.warmup_calls = static_cast<std::uint32_t>(cfg.adapt_warmup);
  // The room point asks what the warm-up observed: only where learning observes (the same
  // settings on every rank, so every rank has the same decision points).
  const bool observes = cfg.learn && cfg.adapt != config::Adapt::off;
  g_policy.room_calls = observes ? static_cast<std::uint32_t>(cfg.adapt_warmup_room) : 0;
  g_policy.wide_gain = cfg.adapt_wide > 0 ? cfg.adapt_wide / 100.0 : 1.0;  // 1: no saving is that wide
  g_policy.probe_points = cfg.explore >= 0;
  exploration_budget().start(cfg.explore >= 0 ? cfg.explore / 100.0 : -1.0, util::now_ns());
  g_one_node = cfg.adapt == config::Adapt::on;
  g_blocking = cfg.blocking;
  if (cfg.algorithms_after > 0) {  // set by hand: the first round there, no budget
    g_trial.skip = static_cast<std::uint32_t>(cfg.algorithms_after);
    g_trial.budget = 0.0;
  }
  g_plan_loaded = plan_loaded;
  g_algorithms = cfg.algorithms && g_adapt;
  mine = find_algorithms(g_algorithms);
  return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm_state, &g_comm_keyval, nullptr) == MPI_SUCCESS;
}

const TrialPolicy& trial_policy() { return g_trial; }

void agreed_decisions(const AlgorithmValues& agreed) {
  settle_algorithms(agreed);
  if (g_algorithms && algorithms_unexpected()) log::warn_rank0("{}", algorithms_status());
  else if (g_algorithms && log::rank() <= 0) log::debug("{}", algorithms_status());
}

namespace {

/// This rank's room vote (Vote::room_voters, room_ranks): 1 and 1 if its observed calls of the
/// key leave room to overlap, 1 and 0 if not; nothing where it observed nothing (learn::room).
void room_vote(learn::KeyLearning& learning, double& voter, double& room) {
  if (const auto r = learn::room(learning)) voter = 1, room = *r ? 1 : 0;
}

/// This rank's vote at a probe point (or a room point under probe points): whether its
/// exploration budget affords the early probe, predicted from the key's blocking mean, what its
/// last probe cost, and what its samples measured of the engine's exchange (explore.hpp).
void probe_vote(Key& key, Vote& vote) {
  const KeyState& s = key.path.state;
  ExplorationBudget& budget = exploration_budget();
  // A key that never measured an early call is predicted by the rank's last probe of any key,
  // and at least by what the engine's exchange took beyond MPI's in its samples.
  const bool own = !std::isnan(s.early_loss_share());
  const double loss = own ? s.early_loss_share() : budget.last_loss_share();
  const double floor_ns = own ? 0 : key.algorithm.engine.engine_excess_ns();
  // At a probe point, the blocking run's mean just measured.  At the room point, voted right
  // after the warm-up's fourth call, whose interval has not ended: every blocking interval so
  // far, the first two (connections, first touches) included.
  const double blocking = s.room_point() ? key.path.intervals.mean_ns(Path::blocking) : s.last_blocking_ns();
  const std::uint64_t predicted = predicted_probe_ns(s.early_probe_length() + 1, blocking, loss, floor_ns);
  vote.probe_refusals = 1;
  // Nothing measured predicts nothing: no probe on it.
  if (blocking <= 0 || key.path.reserved_ns || !budget.affords(predicted, util::now_ns())) return;
  vote.probe_refusals = 0;
  budget.reserve(predicted);  // until the ranks decide (settle_vote)
  key.path.reserved_ns = predicted;
}

/// After a decision of the key: what its early probe measured is charged, and the budget it
/// reserved is given back once no probe of it is under way.
void settle_budget(Key& key) {
  ExplorationBudget& budget = exploration_budget();
  const KeyState& s = key.path.state;
  if (const auto excess = key.path.state.take_probe_excess_ns()) {
    budget.charge(Explore::early_probe, *excess);
    budget.measured_loss(s.early_loss_share());
  }
  if (key.path.reserved_ns && !(s.probing() && s.path() == Path::early)) {
    budget.release(*key.path.reserved_ns);
    key.path.reserved_ns.reset();
  }
}

/// The plan's word on a call as a vote: "return blocking" or "return early" (Vote::force_*).
void plan_word(Vote& vote, priority::Return ret) {
  if (ret == priority::Return::blocking) vote.force_blocking = 1;
  if (ret == priority::Return::early) vote.force_early = 1;
}

/// What a probe point decided (KeyState::decide_probe), or a room point whose probe the budgets
/// refused: the early probe, or a deferral (the first of a key said at TNBC_LOG=info).
void say_probe_point(const Key& key, const Vote& summed, std::uint64_t bytes, bool deferred) {
  if (!deferred) {
    log::debug("{} on communicator {}: every rank's exploration budget affords an early probe from call {}", key.op,
               key.comm_id, key.path.state.calls());
    return;
  }
  exploration_budget().deferred();
  const std::string text = fmt::format(
      "decided: {} on communicator {} ({} ranks): blocking from call {}, early not tried yet: on {:.0f} of its ranks "
      "a probe would take exploring past TNBC_EXPLORE's {:g}% of the time run so far (asked again {})",
      what(key, bytes), key.comm_id, key.comm_size, key.path.state.calls(), summed.probe_refusals,
      100 * exploration_budget().share(),
      key.path.state.warming_up() ? "at the warm-up's end" : "after as many calls again");
  if (key.path.state.probes_deferred() == 1) log::info_rank0("{}", text);
  else log::debug("{}", text);
}

/// Decides the key's path from the votes summed over its communicator (every rank at the same
/// call, with the same sums), and says what it decided.
void settle_vote(Key& key, const Vote& summed, std::uint64_t bytes) {
  const bool room_point = key.path.state.room_point();
  const bool probe_point = key.path.state.probe_point();
  const std::uint64_t deferred = key.path.state.probes_deferred();
  const Path p = key.path.state.decide(summed, key.path.intervals);
  settle_budget(key);
  // A probe point decides the probe alone, unless a plan's word decided instead (said below).
  if (probe_point && !key.path.state.forced()) {
    say_probe_point(key, summed, bytes, key.path.state.probes_deferred() > deferred);
    return;
  }
  // A room point that found room but whose probe the budgets refused (the warm-up goes on).
  if (room_point && key.path.state.probes_deferred() > deferred) say_probe_point(key, summed, bytes, true);
  if (!room_point && (!key.path.told || p != key.path.told_path)) {
    key.path.told = true;
    key.path.told_path = p;
    const double n = std::max(summed.ranks_measured, 1.0);
    log::info_rank0("decided: {} on communicator {} ({} ranks): {} from call {}: {}", what(key, bytes), key.comm_id,
                    key.comm_size, p == Path::early ? "returns early" : "blocking", key.path.state.calls(),
                    key.path.state.forced() ? std::string("the plan says so")
                    : summed.ranks_measured > 0
                        ? fmt::format("measured {:.1f} ms per call returning early, {:.1f} ms blocking "
                                      "(means of {:.0f} ranks)",
                                      summed.early_ns / n / 1e6, summed.blocking_ns / n / 1e6, summed.ranks_measured)
                        : std::string("nothing measured yet"));
  }
  if (room_point && key.path.state.no_room()) {  // once per key: its one room point
    log::info_rank0("decided: {} on communicator {} ({} ranks): blocking for its warm-up and the {} calls after it, "
                    "before early is first tried: the reads {:.0f} of the {:.0f} ranks that observed its warm-up "
                    "leave no room to overlap",
                    what(key, bytes), key.comm_id, key.comm_size, g_policy.first_run,
                    summed.room_voters - summed.room_ranks, summed.room_voters);
  }
  key.learning.turns_chosen = key.path.state.turns_decided() && key.path.state.turns_chosen();
  if (room_point)
    log::debug("{} of {} bytes on communicator {}: {:.0f} of the {:.0f} ranks that observed its warm-up found "
               "room to overlap: {}",
               key.op, bytes, key.comm_id, summed.room_ranks, summed.room_voters,
               key.path.state.short_warmup() ? "the warm-up ends here" : "the warm-up goes on");
  else if (!key.path.state.extended())
    log::debug("{} of {} bytes on communicator {}: mean interval after an early call {:.0f} us, "
               "after a blocking call {:.0f} us (sums over {:.0f} ranks): {}",
               key.op, bytes, key.comm_id, summed.early_ns / 1e3, summed.blocking_ns / 1e3, summed.ranks_measured,
               p == Path::early ? "early" : "blocking");
  if (summed.turn_ranks > 0)
    log::debug("{} on communicator {}: mean interval after an early call with per-node turns {:.0f} us, "
               "without {:.0f} us (sums over {:.0f} ranks): {}",
               key.op, key.comm_id, summed.turns_on_ns / 1e3, summed.turns_off_ns / 1e3, summed.turn_ranks,
               key.path.state.extended()        ? "too close to decide, compared once more"
               : key.path.state.turns_chosen() ? "turns on"
                                           : "turns off");
}

/// This rank's vote, due: posted after the call (done) or summed before it (decide_vote).
void take_vote(Key& key, const Vote& vote) {
  double fields[Vote::kFields];
  vote.to_array(fields);
  key.path.vote.set(fields);
  key.path.vote_stage = VoteStage::due;
}

/// Sums the key's vote over `comm`, waiting for it.
void sum_vote(Key& key, MPI_Comm comm) {
  key.path.vote.sum(comm);
  key.path.vote_stage = VoteStage::summed;
}

/// Posts the key's vote over `comm` (a Tally: complete by the key's next call); where MPI
/// refuses, sums it at once.
void post_vote(Key& key, MPI_Comm comm) {
  if (key.path.vote.post(comm, key.path.last_interval_ns)) key.path.vote_stage = VoteStage::posted;
  else sum_vote(key, comm);
}

/// Completes the key's vote, whatever its stage (posted: waits for it; measured but never
/// posted, since done() did not follow its call: sums it now), and decides from the sums.
void decide_vote(Key& key, MPI_Comm comm, std::uint64_t bytes) {
  if (key.path.vote_stage == VoteStage::posted) key.path.vote.complete();
  if (key.path.vote_stage == VoteStage::due) sum_vote(key, comm);
  key.path.vote_stage = VoteStage::none;
  settle_vote(key, Vote::from_array(key.path.vote.sums().data()), bytes);
}

/// What in `entry` decides which messages a call exchanges (0: no entry).
std::uint64_t shape_hash(const priority::PlanEntry* entry) {
  if (entry == nullptr) return 0;
  const std::int64_t fields[] = {static_cast<std::int64_t>(entry->op), entry->segments,
                                 static_cast<std::int64_t>(entry->tree.kind), entry->tree.chains,
                                 entry->per_node ? 1 : 0};
  std::uint64_t h = util::fnv(util::kFnvOffset, fields, sizeof fields);
  // Per-node turns follow the order: it must be the same too.  (Without them the order only
  // says when each rank posts its messages.)
  if (entry->per_node) h = util::fnv(h, entry->order.data(), entry->order.size() * sizeof(entry->order[0]));
  return h | 1;  // never 0, the hash of no entry
}

/// The key's first call with a plan: every rank's entry must shape the messages alike.
void agree_shape(Key& key, MPI_Comm comm, const priority::PlanEntry* entry) {
  const std::uint64_t h = shape_hash(entry);
  std::uint64_t mine[2] = {h, ~h}, most[2] = {0, 0};
  PMPI_Allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, comm);
  key.plan.agreed = true;
  const bool same = most[0] == h && most[1] == ~h;  // max == min on every rank
  key.plan.shape = same ? entry : nullptr;
  key.plan.unused_told = !same;  // said here: no second message about the same shape
  if (!same)
    log::warn_rank0("plan: the ranks' entries for {} on communicator {} differ in segments, tree or "
                    "per-node order (the call is made from different call sites): its calls use "
                    "the default shape",
                    key.op, key.comm_id);
}

}  // namespace

namespace {

/// The key's costs for call site `site` (added on its first call from there, with the order of
/// its plan entry `entry`, if any).
Costs& site_costs(Key& key, std::int64_t site, const priority::PlanEntry* entry) {
  for (SiteCosts& s : key.sites)
    if (s.site == site) return s.costs;
  std::lock_guard lock(g_keys_mutex);  // keys_json may be reading
  SiteCosts& s = key.sites.emplace_back();
  s.site = site;
  if (entry != nullptr) s.plan_order = entry->order;
  return s.costs;
}

}  // namespace

bool measured(MPI_Comm comm) { return g_adapt && !one_node_rule(comm_state(comm).one_node); }

namespace {

/// The key of this call on `cs`, made at its first call: its candidates for the blocking calls
/// (MPI's algorithms, and the engine's exchange) and its learning.
Key& key_of(CommState& cs, MPI_Comm comm, priority::Op op, std::uint64_t bytes) {
  const std::uint32_t cls = static_cast<std::uint32_t>(priority::size_class(bytes));
  Key*& key = cs.keys[static_cast<std::uint32_t>(op) << 8 | cls];
  if (key != nullptr) return *key;
  std::lock_guard lock(g_keys_mutex);
  // With a plan, the first call of a key asks every rank's plan before taking a path.
  key = &g_keys.emplace_back(g_policy, g_plan_loaded);
  key->op = priority::to_string(op);
  key->op_kind = op;
  key->first_bytes = bytes;
  key->total_class = cls;
  key->comm_id = cs.id;
  PMPI_Comm_size(comm, &key->comm_size);
  key->one_node = cs.one_node;
  key->peer_on_node = cs.peer_on_node;
  learn::add_key(key->learning, op, key->comm_size);
  AlgorithmChoice& a = key->algorithm;
  // Alltoall's candidates follow its block size; the key's bytes are the same on every rank.
  const std::uint64_t per_block =
      op == priority::Op::alltoall && key->comm_size > 0 ? bytes / static_cast<std::uint64_t>(key->comm_size) : bytes;
  a.candidates = algorithm_candidates(op, per_block, key->comm_size);
  // The engine's exchange, run blocking, is one more candidate: it can leave the CPU that
  // MPI's polling takes (docs/algorithms.md), on one node as across nodes.
  if (g_blocking == config::Blocking::automatic && g_algorithms && g_adapt && key->comm_size > 1) {
    a.candidates.emplace_back(kEngineCandidate);
    a.weighs_cpu = true;
  }
  // TNBC_BLOCKING=engine: the engine runs every blocking call of the key, nothing to try.
  if (g_blocking == config::Blocking::engine && g_adapt && key->comm_size > 1) a.candidates = {kEngineCandidate};
  a.trial = AlgorithmTrial(a.candidates.size(), g_trial);
  return *key;
}

/// The plan's shape of the key's messages, agreed at its first call (Key::plan).  Alltoallv's
/// ranks find their entries by their own receive sizes, so they may differ: the agreement is
/// what makes its per-node turns safe (every rank of a node takes them or none).
void plan_shape(Key& key, MPI_Comm comm, const priority::PlanEntry* entry) {
  if (g_plan_loaded && !key.plan.agreed) agree_shape(key, comm, entry);
  // A later call from another site whose entry asks for per-node turns gets none if the first
  // call's site had no such entry (no collective can agree again: the ranks cannot tell,
  // together, that the site changed).
  if (entry != nullptr && entry->per_node && !(key.plan.shape != nullptr && key.plan.shape->per_node) &&
      !key.plan.unused_told) {
    key.plan.unused_told = true;
    log::warn_rank0("plan: per-node turns of site {} not taken: {} on communicator {} agreed its plan "
                    "shape at its first call, made from a site without them",
                    entry->site, key.op, key.comm_id);
  }
}

/// The previous call's interval ends at this call's entry: it is what that call's path cost the
/// program.  A trial call of an algorithm other than the choice is not what the blocking path
/// costs.
void end_interval(PathChoice& p, bool last_trial) {
  const std::uint64_t entered = util::now_ns();
  p.last_interval_ns = p.last_entry_ns != 0 ? entered - p.last_entry_ns : 0;
  if (p.last_entry_ns != 0 && !last_trial) {
    p.intervals.add_interval(p.last_path, p.last_interval_ns, p.last_turns);
    if (p.first_interval_ns == 0) p.first_interval_ns = p.last_interval_ns, p.first_interval_path = p.last_path;
  }
  p.last_entry_ns = entered;
}

/// A call on a communicator within one node: blocking, by MPI's algorithm or by the engine's
/// exchange (the trial's choice; its intervals give the CPU weight).
Decision one_node_call(Key& key, const Decision& d, const priority::PlanEntry* entry, std::uint64_t bytes) {
  if (!key.path.told) {
    key.path.told = true;
    log::info_rank0("decided: {} on communicator {} ({} ranks, one node): blocking, since shared memory moves the "
                    "data faster than returning early pays back{}",
                    what(key, bytes), key.comm_id, key.comm_size,
                    entry != nullptr && entry->ret == priority::Return::early
                        ? "; the plan's 'return early' is not taken on one node"
                        : "");
  }
  Decision b{Path::blocking, &key, "one_node", key.plan.shape, d.costs};
  b.engine = key.algorithm.engine_next();
  if (b.engine) b.why = "engine";
  return b;
}

/// The key's path for this call: the vote of its previous call decided, or this call's taken
/// where a decision point is due.
void settle_path(Key& key, MPI_Comm comm, std::uint64_t bytes, const priority::PlanEntry* entry) {
  PathChoice& p = key.path;
  p.plan_return = entry != nullptr ? entry->ret : priority::Return::measure;
  if (p.vote_stage != VoteStage::none) {
    // The vote of the key's previous call (a decision point's, or the room point's): every rank
    // took it at the same call, and decides alike here.
    decide_vote(key, comm, bytes);
  } else if (p.state.decision_due()) {
    Vote vote = p.state.measure(p.intervals);
    plan_word(vote, p.plan_return);
    const bool room_point = p.state.room_point();
    if (room_point) room_vote(key.learning, vote.room_voters, vote.room_ranks);
    if (p.state.asks_budget()) probe_vote(key, vote);
    take_vote(key, vote);
    // A decision point's vote does not hold the program up (PathChoice): posted after this
    // call, which stays on the path of the segment that ends here, and decided at the key's
    // next call.  The first call asks every rank's plan before it takes any path, and a room
    // point whose vote was not posted after the call before votes here: both wait for the sums.
    if (room_point || p.state.calls() == 0) decide_vote(key, comm, bytes);
  }
}

/// What the path decided brings to this call: on entering the early path, the order learned
/// from the blocking calls before (every rank at the same call) and per-node turns; on the
/// blocking path, the algorithm and whether learning observes the call.
void take_path(Key& key, Decision& d, MPI_Comm comm) {
  PathChoice& p = key.path;
  if (d.path == Path::early && p.last_path == Path::blocking) {
    learn::learn_point(key.learning, comm, p.state.calls());
    // A learned turn order (of source ranks, the same on every rank) for an Alltoall or
    // Alltoallv that spans nodes: from now on its early calls compare per-node turns on and off.
    // (A Bcast's learned order is of segments: no turns.)
    if (key.learning.turns != nullptr && !key.one_node && key.op_kind != priority::Op::bcast) p.state.allow_turns();
  }
  p.last_path = d.path;
  p.last_turns = Turns::none;
  if (d.path == Path::early && p.state.turns_allowed()) {
    d.turns = p.state.turns_on();
    d.turn_order = key.learning.turns;
    p.last_turns = p.state.turns_compared();
  }
  if (d.path == Path::blocking) {
    // A probe of the blocking path measures the path with the algorithm chosen: no trial round
    // begins there.
    if (!p.state.warming_up() && p.state.probing()) key.algorithm.trial.hold();
    d.engine = key.algorithm.engine_next();
    d.why = d.engine ? "engine" : p.state.forced() ? "plan" : p.state.probing() ? "adapt_probe" : "adapt";
    // Where the room point found no room, nothing observed before the early probe would be
    // used, and observing costs a fault per page (docs/measurements/adapt-history.md).
    const bool waits = p.state.no_room() && p.state.decisions() <= 1;
    d.observe = !waits && learn::designate(key.learning, p.state.calls(), p.state.probing());
  }
}

}  // namespace

Decision for_call(MPI_Comm comm, priority::Op op, std::uint64_t bytes, const priority::PlanEntry* entry,
                  std::int64_t site) {
  Key& key = key_of(comm_state(comm), comm, op, bytes);
  plan_shape(key, comm, entry);
  Decision d{Path::early, &key, nullptr, key.plan.shape, &site_costs(key, site, entry)};
  ++key.calls_made;
  if (!g_adapt) {
    if (!key.path.told) {
      key.path.told = true;
      log::info_rank0("decided: {} on communicator {} ({} ranks): returns early wherever it can (TNBC_ADAPT=off: "
                      "no measuring, no plan entry changes that)",
                      what(key, bytes), key.comm_id, key.comm_size);
    }
    return d;
  }
  complete_tally(key, comm);  // before this call's path and algorithm: it may change them
  end_interval(key.path, key.algorithm.last_trial);
  if (one_node_rule(key.one_node)) return one_node_call(key, d, entry, bytes);
  settle_path(key, comm, bytes, entry);
  d.path = key.path.state.path();
  take_path(key, d, comm);
  return d;
}

void done(const Decision& d, MPI_Comm comm) {
  Key* key = d.key;
  if (!g_adapt || key == nullptr || one_node_rule(key->one_node)) return;
  key->path.state.advance(key->path.intervals);
  // Votes are posted after a call, never right before one (decide.hpp, done).
  if (key->path.vote_stage == VoteStage::due) {
    // The vote measured at this call's entry (for_call).
    post_vote(*key, comm);
  } else if (d.path == Path::blocking && key->path.state.room_point() && key->path.vote_stage == VoteStage::none) {
    // The room point decides from the room votes alone (KeyState::decide), so they can be taken
    // now, after a blocking call, rather than right before the next one.  The plan's word they
    // carry is this call's.
    Vote vote;
    room_vote(key->learning, vote.room_voters, vote.room_ranks);
    if (key->path.state.asks_budget()) probe_vote(*key, vote);
    plan_word(vote, key->path.plan_return);
    take_vote(*key, vote);
    post_vote(*key, comm);
  }
}

void say_early_path_call(const Decision& d, bool early, const char* why, std::uint64_t ns) {
  if (d.key == nullptr || d.engine) return;
  // The memory bound is a rank's own (its calls in flight): said where it first holds a key back.
  if (!early && why != nullptr && std::strcmp(why, "memory") == 0 && !d.key->memory_told) {
    d.key->memory_told = true;
    log::info("decided: {} on communicator {}: call {} ran to completion before returning, since returning early "
              "would pass TNBC_MAX_MEMORY with the calls still in flight (later calls of it likewise, while "
              "memory stays short; TNBC_LOG=debug says which)",
              d.key->op, d.key->comm_id, d.key->calls_made - 1);
  }
  if (log::level() < config::LogLevel::debug) return;
  log::debug("{} on communicator {}: call {} {} in {:.2f} ms", d.key->op, d.key->comm_id, d.key->calls_made - 1,
             early ? std::string("returned early") : fmt::format("ran on the engine to completion ({})", why ? why : "-"),
             static_cast<double>(ns) / 1e6);
}

std::string measured_saving() {
  std::lock_guard lock(g_keys_mutex);
  double saved_ns = 0;
  int keys = 0;
  for (const Key& k : g_keys) {
    // How many intervals followed a call on path `p`, and their mean, without the key's first
    // interval: it carries the communicator's setup.
    auto without_first = [&k](Path p, std::uint64_t n, std::uint64_t ns) {
      if (k.path.first_interval_ns != 0 && k.path.first_interval_path == p) --n, ns -= k.path.first_interval_ns;
      return std::pair{n, n != 0 ? static_cast<double>(ns) / static_cast<double>(n) : 0.0};
    };
    const Intervals& iv = k.path.intervals;
    const auto [ne, early] = without_first(Path::early, iv.early_intervals.load(), iv.early_interval_ns.load());
    const auto [nb, blocking] =
        without_first(Path::blocking, iv.blocking_intervals.load(), iv.blocking_interval_ns.load());
    if (ne == 0 || nb == 0) continue;
    saved_ns += static_cast<double>(ne) * (blocking - early);
    ++keys;
  }
  if (keys == 0) return {};
  return fmt::format("; by the mean intervals of the {} key{} that ran both paths, the early calls {} about {:.0f} ms",
                     keys, keys > 1 ? "s" : "", saved_ns >= 0 ? "saved" : "cost", std::abs(saved_ns) / 1e6);
}

std::string exploration_summary() { return g_adapt ? exploration_budget().summary(util::now_ns()) : std::string(); }

void finish_tallies() {
  std::lock_guard lock(g_keys_mutex);
  for (Key& k : g_keys) {
    tally_at_end(k);
    // A vote whose next call never came: completed, not decided (no call follows).
    if (k.path.vote_stage == VoteStage::posted) k.path.vote.complete();
    k.path.vote_stage = VoteStage::none;
  }
}

std::string keys_json(const std::function<SiteName(std::int64_t)>& site_name) {
  std::lock_guard lock(g_keys_mutex);
  std::string out =
      fmt::format(R"({{"enabled":{},"explore":{},"sums":{{"posted":{},"woke":{},"ready":{}}},"keys":[)",
                  g_adapt ? "true" : "false", exploration_budget().json(util::now_ns()), Tally::posted(),
                  Tally::woke(), Tally::ready());
  bool first = true;
  for (const Key& k : g_keys) {
    const char* path = g_adapt && one_node_rule(k.one_node) ? "blocking"
                       : !g_adapt || !k.path.state.decided() ? "undecided"
                       : k.path.state.chosen() == Path::early ? "early" : "blocking";
    out += (first ? "" : ",") + key_json(k, path, site_name);
    first = false;
  }
  return out + "]}";
}

}  // namespace tnbc::shim::replay::adapt
