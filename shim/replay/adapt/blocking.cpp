// The blocking path of a key (blocking.hpp): which of MPI's algorithms, or the engine's exchange,
// runs its blocking calls; the trial's calls, the CPU weight and the engine's sample calls.
#include "blocking.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "algorithm.hpp"
#include "explore.hpp"
#include "joint.hpp"
#include "shim/log.hpp"
#include "shim/node.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay::adapt {
namespace {

/// The engine's exchange becomes a key's first choice for its blocking calls (before any trial
/// round) where (1) the CPU weight its ranks measured in their first kEngineAskAt blocking calls is
/// at least kEngineFirstWeight on average (below it MPI's polling costs the node less than the
/// engine's exchange adds), in a job across nodes every rank's exploration budget affords the
/// samples and their check (affords_engine_try; else asked again after twice the blocking calls),
/// and (2) sample calls then run, kEngineSamples of each, the choice's and
/// the engine's alternately, without a barrier, and cost less on the engine: their time plus their
/// CPU by that weight, summed over the calls and the ranks; on a key across nodes, less by more
/// than their spread, the root of the summed squares of the difference between each candidate's two
/// calls on each rank; in a job on one node, not more by more than that spread.  Within one node
/// MPI's call polls against a peer that shares its cores: it usually waits a time slice for it,
/// both of MPI's samples do, and the engine, whose caller sleeps, gains steadily, mostly in the
/// other ranks' time, which the samples do not see (heFFTe on one node, where a spread's margin
/// left keys on MPI's calls and gave up a sixth of the gain; fftMPI's pencils, where asking the
/// engine's samples for a gain split its keys at random and lost both ways: joint_verdict in
/// engine_ledger.hpp).  Across nodes MPI's call waits a time slice only now and then, one
/// such wait among MPI's samples made the engine the first choice at random, and its calls took 2-3
/// times MPI's usual (fftMPI on unshaped links; both: docs/measurements/engine-samples-cost.md).
/// Not each engine sample below each of MPI's: that kept MPI on heFFTe's keys the engine serves
/// (docs/measurements/pair-algorithm.md).  (3) A check follows (EngineCheck): the next blocking
/// calls run MPI's choice and the engine's in blocks, and where the program's own intervals do not
/// show the engine's gain beyond their spread (in a job on one node: where they show its loss
/// beyond it), MPI's choice runs the key's calls again (the samples
/// measure inside the call; what the engine's exchange costs the program after it, they do not
/// see).  Across nodes, and in any job that spans nodes, the check starts at once (schedule_check
/// says why); in a job on one node, where
/// some rank's exploration budget cannot afford it at the verdict, the ranks are asked again after
/// twice as many blocking calls, and again, until it runs or a trial round would begin among its
/// calls: the samples' verdict stands meanwhile.  A trial round's switch to the engine is checked
/// the same way.  The tallies are nonblocking
/// (AlgorithmChoice::tally).  The engine's communicator is started before the samples, and they end
/// before the trial's first round may begin (TrialPolicy::skip): a program of few calls never pays
/// for trying.  (4) In a job on one node the ranks then judge each key again with the rank's other
/// keys (joint.hpp).  The measurements behind the constants: docs/measurements/decision-notes.md.
constexpr std::uint64_t kEngineAskAt = 12;
constexpr double kEngineFirstWeight = 0.2;
constexpr int kEngineSamples = 2;  // of each
static_assert(kEngineSamples == std::size(EngineSamples{}.call_cost[0]));

int (*g_trial_barrier)(MPI_Comm) = PMPI_Barrier;
void (*g_engine_prepare)(MPI_Comm) = nullptr;

}  // namespace

void set_trial_barrier(int (*barrier)(MPI_Comm)) { g_trial_barrier = barrier != nullptr ? barrier : PMPI_Barrier; }
void set_engine_prepare(void (*prepare)(MPI_Comm)) { g_engine_prepare = prepare; }

BlockingRun before_blocking(const Decision& d, MPI_Comm comm) {
  Key* key = d.key;
  if (key == nullptr || !key->algorithm.trial.active()) return {};
  AlgorithmTrial& trial = key->algorithm.trial;
  if (trial.calls() == 0 && key->algorithm.candidates[0] != "auto")
    log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run MPI's '{}' algorithm first (MPI's "
                    "default lost to it in every measurement here), the others are tried from blocking call {} on{}",
                    what(*key, key->first_bytes), key->comm_id, key->comm_size, key->algorithm.candidates[0], trial.round_start(),
                    trial_policy().budget > 0 ? fmt::format(" (a round costs at most {:.0f}% of the calls before it)",
                                                            100 * trial_policy().budget)
                                              : std::string());
  BlockingRun run;
  run.candidate = trial.next();
  const bool measured_apart = trial.trying() || trial.sampling();
  run.wants_cpu = key->algorithm.weighs_cpu && (trial.calls() < kEngineAskAt || measured_apart);
  // A call of the engine's check (EngineCheck) runs one of the key's two blocking candidates: its
  // interval is the blocking path's, which the path's decision may be measuring at the time.
  key->algorithm.last_trial = measured_apart && run.candidate != trial.chosen() &&
                              key->algorithm.engine.stage != EngineStage::checking;
  // A trial call starts on every rank together (trial.hpp): its time is the algorithm's, not
  // the wait for ranks that arrive later.  Every rank makes the same trial calls.  (Not a
  // sample call of the engine's: kEngineAskAt says why.)
  if (trial.trying()) g_trial_barrier(comm);
  run.written = algorithm_set(key->op_kind, key->algorithm.candidates, run.candidate);
  return run;
}

namespace {

/// What a unit of the key's blocking calls' CPU costs the program on this rank (trial.hpp).
double cpu_weight(const Key& key) {
  return adapt::cpu_weight(key.algorithm.polled.calls, key.algorithm.polled.wall_ns, key.algorithm.polled.cpu_ns,
                            key.path.intervals.blocking_intervals.load(std::memory_order_relaxed),
                            key.path.intervals.blocking_interval_ns.load(std::memory_order_relaxed));
}

/// What a blocking call cost for the trial (after_blocking): its time, and its CPU by cpu_weight
/// (where it was measured: BlockingRun::wants_cpu).
std::uint64_t blocking_cost(Key& key, bool engine, std::uint64_t wall_ns, std::uint64_t cpu_ns) {
  if (cpu_ns == kCpuUnmeasured) return wall_ns;
  if (!engine) ++key.algorithm.polled.calls, key.algorithm.polled.wall_ns += wall_ns, key.algorithm.polled.cpu_ns += std::min(cpu_ns, wall_ns);
  return wall_ns + static_cast<std::uint64_t>(cpu_weight(key) * static_cast<double>(cpu_ns));
}

/// Where some rank's budget refused a try of the engine (its samples, its check): the blocking
/// call after which the ranks are asked again, twice the key's blocking calls so far (the budget
/// grows with the time run; a try that waits costs nothing).
std::uint64_t ask_again_at(const Key& key) { return 2 * std::max<std::uint64_t>(key.algorithm.trial.calls(), 1); }

/// Posts the key's tally after this call (Tally::post), which wakes the progress thread by the
/// interval that ended at this call; false where MPI refused it.
bool post_tally(Key& key, MPI_Comm comm) { return key.algorithm.tally.post(comm, key.path.last_interval_ns); }

/// What the engine's samples and the check after them are predicted to cost this rank beyond
/// MPI's calls (explore.hpp): their calls of the engine's exchange (kEngineSamples, and the
/// check's EngineCheck::kCalls / 2) at the share of the key's blocking interval that an engine
/// call last cost more on this rank (any key's samples or check), else a whole interval each, as
/// an early probe's first calls (kEarlyLossPrior).  Their cost is the program's, not the call's:
/// on fftMPI's short calls across unshaped links, 4 engine calls among 12 of each key cost the
/// run about 60 ms, where the calls' own times showed 10-17 (docs/measurements/engine-samples-budget.md).
std::uint64_t predicted_engine_try_ns(const Key& key) {
  return predicted_probe_ns(kEngineSamples + EngineCheck::kCalls / 2, key.path.intervals.mean_ns(Path::blocking),
                            exploration_budget().last_engine_loss_share());
}

/// Whether this rank affords the engine's samples and their check: in a job across nodes, where
/// the budget says so (predicted_engine_try_ns); in a job on one node always (there MPI's call
/// waits a time slice for the peer it polls against and the engine's gain is systematic: heFFTe;
/// the check asks the budget there: schedule_check).
bool affords_engine_try(const Key& key) {
  return !node::job_spans_nodes() || exploration_budget().affords(predicted_engine_try_ns(key), util::now_ns());
}

/// After the key's kEngineAskAt-th blocking call (or the call a refusal set: EngineSamples::ask_at),
/// before any trial round: the ranks start to agree on the key's CPU weight and on whether every
/// rank affords the samples (an MPI_Iallreduce of 3 doubles, a Tally, taken at its next call:
/// complete_tally).
void ask_engine_weight(Key& key, MPI_Comm comm) {
  key.algorithm.engine.stage = EngineStage::decided;
  if (key.algorithm.engine_index() == key.algorithm.candidates.size()) return;
  const double mine[3] = {cpu_weight(key), 1.0, affords_engine_try(key) ? 1.0 : 0.0};
  key.algorithm.tally.set(mine);
  if (post_tally(key, comm))
    key.algorithm.engine.stage = EngineStage::weighing;
}

/// The blocking call after which the ranks agree on the key's CPU weight (ask_engine_weight).
std::uint64_t engine_ask_call(const EngineSamples& e) { return e.ask_at != 0 ? e.ask_at : kEngineAskAt; }

/// After the last sample call: the ranks start to agree on the samples' costs, on whether every
/// rank's exploration budget affords the check that would follow and on the samples' spread (4
/// doubles).
void ask_engine_verdict(Key& key, MPI_Comm comm) {
  EngineSamples& e = key.algorithm.engine;
  e.stage = EngineStage::decided;
  // What the engine's samples cost this rank beyond MPI's (explore.hpp), and what an engine call
  // took beyond MPI's, as a share of the key's blocking interval: the rank's evidence for the
  // next key's samples.
  const double extra = e.cost[1] - e.cost[0];
  if (extra > 0) exploration_budget().charge(Explore::engine_sample, static_cast<std::uint64_t>(extra));
  if (judged_jointly(key)) engine_ledger().add_samples(e.cost[0], e.cost[1], e.spread_squared());
  // Only a loss counts: timed inside the call, a gain may be the program's loss after it (the
  // check, which follows wherever the samples chose the engine, measures that and sets it).
  const double interval = key.path.intervals.mean_ns(Path::blocking), excess = e.engine_excess_ns();
  if (excess > 0 && interval > 0) exploration_budget().measured_engine_loss(excess / interval);
  // The check runs kCalls / 2 calls of MPI's choice: predicted at what each MPI sample cost
  // beyond the engine's.  Nothing is reserved: a reservation would hold every other try of the
  // rank (explore.hpp, affords) until the check's verdict, which a key that makes no more calls
  // never reaches; the check is charged what it measured.
  const double per_call = e.calls[0] > 0 && e.calls[1] > 0 ? e.cost[0] / e.calls[0] - e.cost[1] / e.calls[1] : 0.0;
  e.check.predicted_ns = static_cast<std::uint64_t>(std::max(per_call, 0.0) * EngineCheck::kCalls / 2);
  const bool affords = exploration_budget().affords(e.check.predicted_ns, util::now_ns());
  const double mine[4] = {e.cost[0], e.cost[1], affords ? 1.0 : 0.0, e.spread_squared()};
  key.algorithm.tally.set(mine);
  if (post_tally(key, comm)) e.stage = EngineStage::judging;
}

/// The agreed weight: from kEngineFirstWeight the key's next 2 x kEngineSamples blocking calls
/// are samples, the choice's and the engine's alternately, and the engine's communicator is
/// started now (its first call there would otherwise pay for the dup).
void weight_agreed(Key& key, MPI_Comm comm) {
  EngineSamples& e = key.algorithm.engine;
  e.stage = EngineStage::decided;
  e.weighed = true;
  const std::span<const double> sum = key.algorithm.tally.sums();
  e.weight = sum[0] / std::max(sum[1], 1.0);
  if (e.weight < kEngineFirstWeight) {
    log::debug("{} on communicator {}: CPU weight {:.2f} (mean of {:.0f} ranks): MPI's algorithm stays the first choice",
               key.op, key.comm_id, e.weight, sum[1]);
    return;
  }
  if (sum[2] < sum[1]) {
    // Some rank's budget cannot afford the samples: asked again later, until the first trial
    // round (trial_agreed).
    ++e.refusals;
    e.ask_at = ask_again_at(key);
    e.stage = EngineStage::ask;
    log::debug("{} on communicator {}: CPU weight {:.2f}, but some rank's exploration budget cannot afford the "
               "engine's samples now (blocking call {}): asked again after blocking call {}",
               key.op, key.comm_id, e.weight, key.algorithm.trial.calls(), e.ask_at);
    return;
  }
  const std::size_t engine = key.algorithm.engine_index();
  std::vector<std::size_t> order;
  e.mpi_choice = key.algorithm.trial.chosen();
  for (int i = 0; i < kEngineSamples; ++i) order.push_back(e.mpi_choice), order.push_back(engine);
  if (!key.algorithm.trial.sample(order)) return;
  key.algorithm.engine.stage = EngineStage::sampling;
  if (g_engine_prepare != nullptr) g_engine_prepare(comm);
}

/// The engine's check (EngineCheck), scheduled on the next blocking calls once every rank's
/// budget affords it: its calls are sample calls of the trial (outside the rounds; none where a
/// round would begin among them: then the key is never checked).
void start_check(Key& key) {
  EngineCheck& c = key.algorithm.engine.check;
  const std::size_t engine = key.algorithm.engine_index();
  std::vector<std::size_t> order;
  for (std::size_t block : {c.mpi_choice, engine, engine, c.mpi_choice})
    order.insert(order.end(), EngineCheck::kBlockCalls, block);
  if (!key.algorithm.trial.sample(order)) return;
  key.algorithm.engine.stage = EngineStage::checking;
  c.ask_at = 0;
  c.calls = 0;
  std::fill(std::begin(c.block_ns), std::end(c.block_ns), 0.0);
  c.judged = false;
  ++c.started;
}

/// Some rank's budget refused the check: its ranks are asked again later (ask_again_at).
void defer_check(Key& key) {
  EngineCheck& c = key.algorithm.engine.check;
  ++c.refusals;
  c.ask_at = ask_again_at(key);
}

/// A deferred check's due call (EngineCheck::ask_at) has come: the ranks start to agree on whether
/// every budget affords it now (1 double).  Not while another tally, a sample or a round is under
/// way: it is asked at a later call.
void ask_check(Key& key, MPI_Comm comm) {
  EngineCheck& c = key.algorithm.engine.check;
  const AlgorithmTrial& trial = key.algorithm.trial;
  if (key.algorithm.tally.pending() || key.algorithm.round_pending || trial.sampling() || trial.trying() ||
      trial.choice_due())
    return;
  c.ask_at = 0;
  const double mine[1] = {exploration_budget().affords(c.predicted_ns, util::now_ns()) ? 1.0 : 0.0};
  key.algorithm.tally.set(mine);
  if (post_tally(key, comm)) key.algorithm.engine.stage = EngineStage::asking;
}

/// The agreed answer of the budgets: the check runs, or is asked for again later.
void check_asked(Key& key) {
  key.algorithm.engine.stage = EngineStage::decided;
  if (key.algorithm.tally.sums()[0] >= std::max(key.comm_size, 1)) {
    log::debug("{} on communicator {}: every rank's exploration budget affords the engine's check now (blocking "
               "call {})",
               key.op, key.comm_id, key.algorithm.trial.calls());
    start_check(key);
  } else {
    defer_check(key);
  }
}

/// Whether the engine's check asks the ranks' exploration budgets: `affords`, what they agreed
/// (at the samples' verdict), or not asked yet (a trial round's switch).
enum class CheckBudget : std::uint8_t { affords, refused, unasked };

/// The engine's exchange has just become the key's choice in place of MPI's candidate
/// `mpi_choice` (the samples' verdict or a trial round): its check (EngineCheck) is scheduled,
/// predicted to cost this rank `predicted_ns` (its calls of MPI's choice, at what each cost beyond
/// the engine's in the measurement that chose the engine).  On a key across nodes it starts at
/// once, asked of no budget of its own (after the samples, their asking covered it; after a
/// trial round, the round's schedule did): its calls of MPI's choice run what the key ran before the switch,
/// and the engine's calls that claimed the gain are what it puts to the test (unchecked, a choice
/// on noise ran hundreds of calls: fftMPI on unshaped links, docs/measurements/engine-samples-cost.md).
/// So too on a key within one node of a job that spans nodes: its cores carry the other keys'
/// network traffic, and its samples chose the engine on noise there as well (fftMPI's row
/// transposes, docs/measurements/engine-check-spans.md).  In a job on one node, where the
/// engine's gain is systematic, it runs once every rank's budget affords it (asked at the key's
/// next call where not asked yet; asked again later where refused).
void schedule_check(Key& key, std::size_t mpi_choice, double predicted_ns, CheckBudget budget) {
  EngineCheck& c = key.algorithm.engine.check;
  c.mpi_choice = mpi_choice;
  c.predicted_ns = static_cast<std::uint64_t>(std::max(predicted_ns, 0.0));
  if (!key.one_node || node::job_spans_nodes() || budget == CheckBudget::affords) start_check(key);
  else if (budget == CheckBudget::refused) defer_check(key);
  else c.ask_at = key.algorithm.trial.calls() + 1;
}

/// After each blocking call of the check: the interval that ended at this call's entry is the
/// previous check call's block's; after the interval of the last one, the ranks start to agree on
/// the blocks' sums (4 doubles).  `check_call`: this call is one of the check's.  A key whose calls
/// left the blocking path during the check (an early call between two of them) keeps its choice.
void count_check(Key& key, bool check_call, MPI_Comm comm) {
  EngineCheck& c = key.algorithm.engine.check;
  if (c.calls > 0) {
    if (key.calls_made != c.last_call + 1) {
      log::debug("{} on communicator {}: the engine's check left off (a call between its calls was not blocking)",
                 key.op, key.comm_id);
      key.algorithm.engine.stage = EngineStage::decided;
      key.algorithm.trial.cancel_sample();  // its remaining calls would run MPI's choice for nothing
      return;
    }
    c.block_ns[(c.calls - 1) / EngineCheck::kBlockCalls] += static_cast<double>(key.path.last_interval_ns);
  }
  if (check_call) {
    c.last_call = key.calls_made;
    ++c.calls;
    return;
  }
  if (c.calls < EngineCheck::kCalls) return;
  key.algorithm.engine.stage = EngineStage::decided;
  key.algorithm.tally.set(c.block_ns);
  if (post_tally(key, comm)) key.algorithm.engine.stage = EngineStage::rechecking;
}

/// The agreed check: the engine's exchange stays the choice only where the program's intervals
/// under it were shorter beyond their spread (CheckSums::engine_wins), in a job on one node unless
/// they were longer beyond it (CheckSums::engine_loses); else MPI's choice runs again.
void check_agreed(Key& key) {
  key.algorithm.engine.stage = EngineStage::decided;
  EngineCheck& c = key.algorithm.engine.check;
  const std::span<const double> b = key.algorithm.tally.sums(), m = key.algorithm.tally.mine();
  c.judged = true;
  c.agreed = engine_check_sums(b[0], b[1], b[2], b[3]);
  c.loss_only = judged_jointly(key);
  // What the check's calls of the losing candidate cost this rank beyond the winner's (explore.hpp).
  const CheckSums mine = engine_check_sums(m[0], m[1], m[2], m[3]);
  if (c.loss_only) engine_ledger().add_check(mine.mpi, mine.engine, mine.spread);
  const double loss = c.kept() ? mine.mpi - mine.engine : mine.engine - mine.mpi;
  if (loss > 0) exploration_budget().charge(Explore::engine_sample, static_cast<std::uint64_t>(loss));
  // The rank's evidence for the next key's samples: what an engine call of the check cost the
  // program beyond MPI's, as a share of MPI's intervals.
  if (mine.mpi > 0) exploration_budget().measured_engine_loss((mine.engine - mine.mpi) / mine.mpi);
  const double n = std::max(key.comm_size, 1) * EngineCheck::kCalls / 2.0;
  if (c.kept()) {
    log::debug("{} on communicator {}: the engine's check keeps it: the program's intervals {:.1f} ms under it "
               "against {:.1f} ms under MPI's (means of {} calls on each rank; spread {:.1f} ms)",
               key.op, key.comm_id, c.agreed.engine / n / 1e6, c.agreed.mpi / n / 1e6, EngineCheck::kCalls / 2,
               c.agreed.spread / n / 1e6);
    return;
  }
  key.algorithm.trial.prefer(c.mpi_choice);
  key.algorithm.told = c.mpi_choice;
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run MPI's '{}' algorithm again from "
                  "blocking call {}: the program's intervals took {:.1f} ms under the engine's exchange against "
                  "{:.1f} ms under MPI's (means of {} calls on each rank), {} beyond their spread of {:.1f} ms",
                  what(key, key.first_bytes), key.comm_id, key.comm_size, key.algorithm.candidates[c.mpi_choice],
                  key.algorithm.trial.calls(), c.agreed.engine / n / 1e6, c.agreed.mpi / n / 1e6, EngineCheck::kCalls / 2,
                  c.loss_only ? "longer" : "not shorter", c.agreed.spread / n / 1e6);
}

/// The agreed costs of the samples: the engine's exchange is the first choice where its calls
/// cost less, and is checked (start_check).
void verdict_agreed(Key& key) {
  key.algorithm.engine.stage = EngineStage::decided;
  if (judged_jointly(key)) key.algorithm.engine.joint_at = kJointFirst;
  const double w = key.algorithm.engine.weight, mpi = key.algorithm.tally.sums()[0],
               engine = key.algorithm.tally.sums()[1];
  const double n = std::max(key.comm_size, 1) * kEngineSamples;
  // Every rank's budget affords the check (ask_engine_verdict); else none runs.
  const bool check = key.algorithm.tally.sums()[2] >= std::max(key.comm_size, 1);
  // In a job on one node the engine runs unless its samples cost more beyond their spread (see
  // kEngineAskAt); on a key across nodes only a gain beyond their spread makes it the choice; on a
  // key within one node of a job that spans nodes, the sums alone decide.
  const bool jointly = judged_jointly(key);
  const double spread = jointly || !key.one_node ? std::sqrt(key.algorithm.tally.sums()[3]) : 0.0;
  if (jointly ? engine > mpi + spread : engine + spread >= mpi) {
    log::debug("{} on communicator {}: CPU weight {:.2f}, but the engine's sample calls cost {:.1f} ms against MPI's "
               "{:.1f} ms (time plus CPU by the weight, means of {} calls on each rank), {} beyond their "
               "spread of {:.1f} ms: MPI's algorithm stays the first choice",
               key.op, key.comm_id, w, engine / n / 1e6, mpi / n / 1e6, kEngineSamples, jointly ? "more" : "not less",
               spread / n / 1e6);
    return;
  }
  const std::size_t index = key.algorithm.engine_index(), mpi_choice = key.algorithm.trial.chosen();
  key.algorithm.trial.prefer(index);
  key.algorithm.told = index;
  key.algorithm.engine.preferred = true;
  schedule_check(key, mpi_choice, static_cast<double>(key.algorithm.engine.check.predicted_ns),
                 check ? CheckBudget::affords : CheckBudget::refused);
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run the engine's exchange from blocking "
                  "call {}: MPI's polling takes CPU the node's other processes want (weight {:.2f}; its sample calls "
                  "cost {:.1f} ms against MPI's {:.1f} ms, time plus CPU by the weight, means of "
                  "{} calls on each rank; docs/algorithms.md){}; MPI's algorithms are tried against it from "
                  "blocking call {}",
                  what(key, key.first_bytes), key.comm_id, key.comm_size, key.algorithm.trial.calls(), w, engine / n / 1e6,
                  mpi / n / 1e6, kEngineSamples,
                  key.algorithm.engine.stage == EngineStage::checking
                      ? fmt::format(", checked against MPI's by the program's time over the next {} calls",
                                    EngineCheck::kCalls)
                  : key.algorithm.engine.check.ask_at != 0
                      ? fmt::format(", checked against MPI's by the program's time once every rank's exploration "
                                    "budget affords it (asked again after blocking call {})",
                                    key.algorithm.engine.check.ask_at)
                      : std::string(", not checked (a trial round begins before the check would end)"),
                  key.algorithm.trial.round_start());
}

/// The agreed trial round: the choice, said where it changes.
void trial_agreed(Key& key) {
  key.algorithm.round_pending = false;
  AlgorithmTrial& trial = key.algorithm.trial;
  // Samples refused until now are not asked for again: the rounds try the engine from here on, and
  // a round's switch to it is checked (below), which needs the stage decided.
  if (key.algorithm.engine.stage == EngineStage::ask) key.algorithm.engine.stage = EngineStage::decided;
  // What the round's candidates cost this rank beyond the choice before it, by their best
  // calls (explore.hpp; the barriers before them are not counted).
  const std::span<const double> mine = key.algorithm.tally.mine();
  const std::size_t k = mine.size() / 2;
  const double choice = key.algorithm.before < k ? mine[key.algorithm.before] : 0.0;
  for (std::size_t i = 0; i < k && choice > 0; ++i)
    if (mine[i] > choice) exploration_budget().charge(Explore::trial, static_cast<std::uint64_t>(mine[i] - choice));
  choose_algorithm(trial, key.algorithm.tally.sums(), key.comm_size);
  if (trial.chosen() == key.algorithm.told) return;
  key.algorithm.told = trial.chosen();
  // The round's calls are timed inside the call, after a barrier: what the engine's exchange costs
  // the program after its calls, they do not see either.  A switch to it is checked as the
  // samples' is; a switch away leaves nothing to check.
  EngineCheck& c = key.algorithm.engine.check;
  c.ask_at = 0;
  if (trial.chosen() == key.algorithm.engine_index() && key.algorithm.before < k &&
      key.algorithm.engine.stage == EngineStage::decided)
    schedule_check(key, key.algorithm.before,
                   (mine[key.algorithm.before] - mine[trial.chosen()]) * EngineCheck::kCalls / 2, CheckBudget::unasked);
  auto name = [&](std::size_t i) {
    return key.algorithm.candidates[i] == kEngineCandidate ? std::string("the engine's exchange")
                                                 : fmt::format("MPI's '{}' algorithm", key.algorithm.candidates[i]);
  };
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run {} after {} blocking calls "
                  "(this rank's best call {:.1f} ms, against {:.1f} ms with {}; time and the CPU taken from "
                  "the node){}",
                  what(key, key.first_bytes), key.comm_id, key.comm_size, name(trial.chosen()), trial.calls(),
                  key.algorithm.tally.mine()[trial.chosen()] / 1e6, key.algorithm.tally.mine()[key.algorithm.before] / 1e6,
                  name(key.algorithm.before),
                  key.algorithm.engine.stage == EngineStage::checking
                      ? fmt::format(", checked against it by the program's time over the next {} calls", EngineCheck::kCalls)
                  : c.ask_at != 0 ? std::string(", checked against it once every rank's exploration budget affords it")
                                  : std::string());
}

}  // namespace

bool before_rounds_idle(const Key& key) {
  const AlgorithmTrial& trial = key.algorithm.trial;
  return trial.rounds() == 0 && !trial.trying() && !trial.choice_due() && !key.algorithm.tally.pending();
}

void complete_tally(Key& key, MPI_Comm comm) {
  if (!key.algorithm.tally.pending()) return;
  key.algorithm.tally.complete();
  if (key.algorithm.round_pending) trial_agreed(key);
  else if (key.algorithm.engine.stage == EngineStage::weighing) weight_agreed(key, comm);
  else if (key.algorithm.engine.stage == EngineStage::judging) verdict_agreed(key);
  else if (key.algorithm.engine.stage == EngineStage::asking) check_asked(key);
  else if (key.algorithm.engine.stage == EngineStage::rechecking) check_agreed(key);
  else if (key.algorithm.engine.stage == EngineStage::joining) joint_agreed(key);
}

void tally_at_end(Key& key) {
  if (!key.algorithm.tally.pending()) return;
  key.algorithm.tally.complete();
  if (key.algorithm.round_pending) trial_agreed(key);  // the statistics show the round (no MPI call follows)
}

void after_blocking(const Decision& d, const BlockingRun& run, std::uint64_t wall_ns, std::uint64_t cpu_ns,
                    MPI_Comm comm) {
  Key* key = d.key;
  if (key == nullptr) return;
  AlgorithmTrial& trial = key->algorithm.trial;
  if (log::level() >= config::LogLevel::debug)
    log::debug("{} on communicator {}: blocking call {} ran {}{} in {:.2f} ms{}; {:.2f} ms since the key's call before",
               key->op, key->comm_id, key->algorithm.blocking_runs,
               d.engine ? std::string("the engine's exchange")
               : run.candidate < key->algorithm.candidates.size() ? fmt::format("MPI's '{}'", key->algorithm.candidates[run.candidate])
                                                        : std::string("MPI's default"),
               trial.sampling() ? " (sample)" : trial.trying() ? " (trial)" : "", static_cast<double>(wall_ns) / 1e6,
               cpu_ns == kCpuUnmeasured ? std::string() : fmt::format(", CPU {:.2f} ms", static_cast<double>(cpu_ns) / 1e6),
               static_cast<double>(key->path.last_interval_ns) / 1e6);
  ++key->algorithm.blocking_runs;
  if (!trial.active()) return;
  if (run.written) algorithm_restore(key->op_kind);
  if (key->algorithm.engine.stage == EngineStage::checking) count_check(*key, trial.sampling(), comm);
  if (key->algorithm.engine.stage == EngineStage::sampling && trial.sampling() && cpu_ns != kCpuUnmeasured) {
    EngineSamples& e = key->algorithm.engine;
    const int c = d.engine ? 1 : 0;
    const double cost = static_cast<double>(wall_ns) + e.weight * static_cast<double>(cpu_ns);
    if (e.calls[c] < kEngineSamples) e.call_cost[c][e.calls[c]] = cost;
    e.cost[c] += cost;
    e.wall_ns[c] += static_cast<double>(wall_ns);
    ++e.calls[c];
  }
  trial.record(blocking_cost(*key, d.engine, wall_ns, cpu_ns));
  if (key->algorithm.engine.stage == EngineStage::ask && trial.calls() >= engine_ask_call(key->algorithm.engine) &&
      before_rounds_idle(*key))
    ask_engine_weight(*key, comm);
  else if (key->algorithm.engine.stage == EngineStage::sampling && !trial.sampling())
    ask_engine_verdict(*key, comm);
  else if (key->algorithm.engine.stage == EngineStage::decided && key->algorithm.engine.check.ask_at != 0 &&
           trial.calls() >= key->algorithm.engine.check.ask_at)
    ask_check(*key, comm);
  else if (joint_due(*key))
    ask_joint(*key, comm);
  // The round's last call: the ranks start to agree now, after its data is complete (done() says
  // why), and the choice is made at the key's next call, as the engine's (AlgorithmChoice::tally).
  if (!trial.choice_due()) return;
  complete_tally(*key, comm);  // one tally in flight at a time
  key->algorithm.tally.set(algorithm_votes(trial));
  key->algorithm.before = trial.chosen();
  if (post_tally(*key, comm))
    key->algorithm.round_pending = true;
  else
    trial.choose({});  // ends the round, nothing chosen
}

/// The "algorithm" object of a key in the statistics (docs/config.md): MPI's algorithm its
/// blocking calls run, and what the trial measured on this rank.
std::string algorithm_json(const Key& k) {
  const AlgorithmTrial& t = k.algorithm.trial;
  const std::vector<double> means = t.means(), bests = t.bests();
  std::string mean, best;
  for (std::size_t i = 0; i < k.algorithm.candidates.size(); ++i) {
    mean += fmt::format(R"({}"{}":{:.3f})", i ? "," : "", k.algorithm.candidates[i], i < means.size() ? means[i] / 1e3 : 0.0);
    best += fmt::format(R"({}"{}":{:.3f})", i ? "," : "", k.algorithm.candidates[i], i < bests.size() ? bests[i] / 1e3 : 0.0);
  }
  const EngineCheck& c = k.algorithm.engine.check;
  const EngineSamples& e = k.algorithm.engine;
  auto sample_us = [&](int i) { return e.calls[i] > 0 ? e.cost[i] / e.calls[i] / 1e3 : 0.0; };
  auto calls_us = [&](int i) {
    return fmt::format("{:.3f},{:.3f}", e.call_cost[i][0] / 1e3, e.call_cost[i][1] / 1e3);
  };
  return fmt::format(R"({{"chosen":"{}","rounds":{},"switches":{},"mean_us":{{{}}},"best_us":{{{}}},"cpu_weight":{:.3f},)"
                     R"("engine_sample":{{"asked":{},"weight":{:.3f},"mpi_calls":{},"engine_calls":{},"mpi_us":{:.3f},)"
                     R"("engine_us":{:.3f},"mpi_calls_us":[{}],"engine_calls_us":[{}],"engine_first":{},"refusals":{},)"
                     R"("joint":{{"verdicts":{},"switches":{},"last":"{}"}},)"
                     R"("check":{{"started":{},"calls":{},"judged":{},"kept":{},"refusals":{},"mpi_ms":{:.3f},"engine_ms":{:.3f},"spread_ms":{:.3f}}}}}}})",
                     k.algorithm.candidates.empty() ? "auto" : k.algorithm.candidates[t.chosen()], t.rounds(), t.switches(), mean, best,
                     cpu_weight(k), e.weighed, e.weight, e.calls[0], e.calls[1], sample_us(0), sample_us(1), calls_us(0),
                     calls_us(1), e.preferred, e.refusals, e.joint_verdicts, e.joint_switches, name(e.joint_last), c.started, c.calls, c.judged, c.kept(), c.refusals, c.agreed.mpi / 1e6, c.agreed.engine / 1e6,
                     c.agreed.spread / 1e6);
}

}  // namespace tnbc::shim::replay::adapt
