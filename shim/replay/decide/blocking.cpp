// The blocking path of a key (blocking.hpp): which of MPI's algorithms, or the engine's exchange,
// runs its blocking calls; the trial's calls, the CPU weight and the engine's sample calls.
#include "blocking.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "algorithm.hpp"
#include "shim/log.hpp"

namespace tnbc::shim::replay::decide {
namespace {

/// The engine's exchange becomes a key's first choice for its blocking calls (before any trial
/// round) where (1) the CPU weight its ranks measured in their first kEngineAskAt blocking calls is
/// at least kEngineFirstWeight on average, and (2) sample calls then run, kEngineSamples of each,
/// the choice's and the engine's alternately, and cost less on the engine: their time plus their
/// CPU by that weight, summed over the calls and the ranks.  Both agreements are nonblocking
/// (Key::agreeing).
///   The break-even of (1), measured on 2 emulated nodes (docs/algorithms.md): MPI's polling
/// takes about half a call's time in CPU on a full node, the engine's exchange about a sixth and
/// up to 5% more time; so it pays from a weight of about 0.05 / (0.5 - 0.17), 0.15.
///   (2) keeps MPI where the engine's exchange costs more (NPB IS A on one node: its large blocks
/// 7-43 ms a call on the engine, 8-10 by MPI's shared memory).  Sample calls start without a
/// barrier (a trial call starts after one): on a full node MPI's call usually waits a time slice
/// for the rank it polls against (heFFTe's 2-rank transposes on one node: 8 ms, but 0.2 ms where
/// a barrier had just aligned the two), which the engine's, sleeping, does not.  The engine's
/// communicator is started before them: its first call there would pay for an MPI_Comm_dup (25
/// of heFFTe's first 27 ms).
///   The samples end before the trial's first round may begin (TrialPolicy::skip, 16), for the
/// trial's reason: a program of few calls never pays for trying.  Two sample calls of the engine
/// at calls 4-7 made NPB IS A (11 calls) on one node 8% slower (0.575 s against 0.530, medians
/// of 12 alternating runs): the intervals after them grew from about 50 ms to 70-90.
constexpr std::uint64_t kEngineAskAt = 12;
constexpr double kEngineFirstWeight = 0.2;
constexpr int kEngineSamples = 2;  // of each

int (*g_trial_barrier)(MPI_Comm) = PMPI_Barrier;
void (*g_engine_prepare)(MPI_Comm) = nullptr;

}  // namespace

void set_trial_barrier(int (*barrier)(MPI_Comm)) { g_trial_barrier = barrier != nullptr ? barrier : PMPI_Barrier; }
void set_engine_prepare(void (*prepare)(MPI_Comm)) { g_engine_prepare = prepare; }

BlockingRun before_blocking(const Decision& d, MPI_Comm comm) {
  Key* key = d.key;
  if (key == nullptr || !key->trial.active()) return {};
  AlgorithmTrial& trial = key->trial;
  if (trial.calls() == 0 && key->algorithms[0] != "auto")
    log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run MPI's '{}' algorithm first (MPI's "
                    "default lost to it in every measurement here), the others are tried from blocking call {} on{}",
                    what(*key, key->first_bytes), key->comm_id, key->comm_size, key->algorithms[0], trial.round_start(),
                    trial_policy().budget > 0 ? fmt::format(" (a round costs at most {:.0f}% of the calls before it)",
                                                            100 * trial_policy().budget)
                                              : std::string());
  BlockingRun run;
  run.candidate = trial.next();
  const bool measured_apart = trial.trying() || trial.sampling();
  run.wants_cpu = key->weighs_cpu && (trial.calls() < kEngineAskAt || measured_apart);
  key->last_trial = measured_apart && run.candidate != trial.chosen();
  // A trial call starts on every rank together (trial.hpp): its time is the algorithm's, not
  // the wait for ranks that arrive later.  Every rank makes the same trial calls.  (Not a
  // sample call of the engine's: kEngineAskAt says why.)
  if (trial.trying()) g_trial_barrier(comm);
  run.written = algorithm_set(key->op_kind, key->algorithms, run.candidate);
  return run;
}

namespace {

/// What a unit of the key's blocking calls' CPU costs the program on this rank (trial.hpp).
double cpu_weight(const Key& key) {
  return decide::cpu_weight(key.polled_calls, key.polled_wall_ns, key.polled_cpu_ns,
                            key.intervals.blocking_intervals.load(std::memory_order_relaxed),
                            key.intervals.blocking_interval_ns.load(std::memory_order_relaxed));
}

/// What a blocking call cost for the trial (after_blocking): its time, and its CPU by cpu_weight
/// (where it was measured: BlockingRun::wants_cpu).
std::uint64_t blocking_cost(Key& key, bool engine, std::uint64_t wall_ns, std::uint64_t cpu_ns) {
  if (cpu_ns == kCpuUnmeasured) return wall_ns;
  if (!engine) ++key.polled_calls, key.polled_wall_ns += wall_ns, key.polled_cpu_ns += std::min(cpu_ns, wall_ns);
  return wall_ns + static_cast<std::uint64_t>(cpu_weight(key) * static_cast<double>(cpu_ns));
}

/// After the key's kEngineAskAt-th blocking call, before any trial round: the ranks start to
/// agree on the key's CPU weight (an MPI_Iallreduce of 2 doubles, completed at its next call:
/// complete_agreement).
void ask_engine_weight(Key& key, MPI_Comm comm) {
  key.engine_stage = Key::EngineStage::decided;
  if (key.engine_index() == key.algorithms.size()) return;
  key.agree_mine[0] = cpu_weight(key), key.agree_mine[1] = 1.0;
  if (PMPI_Iallreduce(key.agree_mine, key.agree_sum, 2, MPI_DOUBLE, MPI_SUM, comm, &key.agreeing) == MPI_SUCCESS)
    key.engine_stage = Key::EngineStage::weighing;
}

/// After the last sample call: the ranks start to agree on the samples' costs (2 doubles).
void ask_engine_verdict(Key& key, MPI_Comm comm) {
  key.engine_stage = Key::EngineStage::decided;
  if (PMPI_Iallreduce(key.sample_cost, key.agree_sum, 2, MPI_DOUBLE, MPI_SUM, comm, &key.agreeing) == MPI_SUCCESS)
    key.engine_stage = Key::EngineStage::judging;
}

/// The agreed weight: from kEngineFirstWeight the key's next 2 x kEngineSamples blocking calls
/// are samples, the choice's and the engine's alternately, and the engine's communicator is
/// started now (its first call there would otherwise pay for the dup).
void weight_agreed(Key& key, MPI_Comm comm) {
  key.engine_stage = Key::EngineStage::decided;
  key.engine_weighed = true;
  key.engine_weight = key.agree_sum[0] / std::max(key.agree_sum[1], 1.0);
  if (key.engine_weight < kEngineFirstWeight) {
    log::debug("{} on communicator {}: CPU weight {:.2f} (mean of {:.0f} ranks): MPI's algorithm stays the first choice",
               key.op, key.comm_id, key.engine_weight, key.agree_sum[1]);
    return;
  }
  const std::size_t engine = key.engine_index();
  std::vector<std::size_t> order;
  for (int i = 0; i < kEngineSamples; ++i) order.push_back(key.trial.chosen()), order.push_back(engine);
  if (!key.trial.sample(order)) return;
  key.engine_stage = Key::EngineStage::sampling;
  if (g_engine_prepare != nullptr) g_engine_prepare(comm);
}

/// The agreed costs of the samples: the engine's exchange is the first choice where its calls
/// cost less.
void verdict_agreed(Key& key) {
  key.engine_stage = Key::EngineStage::decided;
  const double w = key.engine_weight, mpi = key.agree_sum[0], engine = key.agree_sum[1];
  const double n = std::max(key.comm_size, 1) * kEngineSamples;
  if (engine >= mpi) {
    log::debug("{} on communicator {}: CPU weight {:.2f}, but the engine's sample calls cost {:.1f} ms against MPI's "
               "{:.1f} ms (time plus CPU by the weight, means of {} calls on each rank): "
               "MPI's algorithm stays the first choice",
               key.op, key.comm_id, w, engine / n / 1e6, mpi / n / 1e6, kEngineSamples);
    return;
  }
  const std::size_t index = key.engine_index();
  key.trial.prefer(index);
  key.told_algorithm = index;
  key.engine_preferred = true;
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run the engine's exchange from blocking "
                  "call {}: MPI's polling takes CPU the node's other processes want (weight {:.2f}; its sample calls "
                  "cost {:.1f} ms against MPI's {:.1f} ms, time plus CPU by the weight, means of "
                  "{} calls on each rank; docs/algorithms.md); MPI's algorithms are tried against it from blocking "
                  "call {}",
                  what(key, key.first_bytes), key.comm_id, key.comm_size, key.trial.calls(), w, engine / n / 1e6,
                  mpi / n / 1e6, kEngineSamples, key.trial.round_start());
}

/// The agreed trial round: the choice, said where it changes.
void trial_agreed(Key& key) {
  key.trial_agreeing = false;
  AlgorithmTrial& trial = key.trial;
  choose_algorithm(trial, key.trial_sums, key.comm_size);
  if (trial.chosen() == key.told_algorithm) return;
  key.told_algorithm = trial.chosen();
  auto name = [&](std::size_t i) {
    return key.algorithms[i] == kEngineCandidate ? std::string("the engine's exchange")
                                                 : fmt::format("MPI's '{}' algorithm", key.algorithms[i]);
  };
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run {} after {} blocking calls "
                  "(this rank's best call {:.1f} ms, against {:.1f} ms with {}; time and the CPU taken from "
                  "the node)",
                  what(key, key.first_bytes), key.comm_id, key.comm_size, name(trial.chosen()), trial.calls(),
                  key.trial_votes[trial.chosen()] / 1e6, key.trial_votes[key.trial_before] / 1e6,
                  name(key.trial_before));
}

}  // namespace

void complete_agreement(Key& key, MPI_Comm comm) {
  if (key.agreeing == MPI_REQUEST_NULL) return;
  PMPI_Wait(&key.agreeing, MPI_STATUS_IGNORE);
  if (key.trial_agreeing) trial_agreed(key);
  else if (key.engine_stage == Key::EngineStage::weighing) weight_agreed(key, comm);
  else if (key.engine_stage == Key::EngineStage::judging) verdict_agreed(key);
}

void agreement_at_end(Key& key) {
  if (key.agreeing == MPI_REQUEST_NULL) return;
  PMPI_Wait(&key.agreeing, MPI_STATUS_IGNORE);
  if (key.trial_agreeing) trial_agreed(key);  // the statistics show the round (no MPI call follows)
}

void after_blocking(const Decision& d, const BlockingRun& run, std::uint64_t wall_ns, std::uint64_t cpu_ns,
                    MPI_Comm comm) {
  Key* key = d.key;
  if (key == nullptr) return;
  AlgorithmTrial& trial = key->trial;
  if (log::level() >= config::LogLevel::debug)
    log::debug("{} on communicator {}: blocking call {} ran {}{} in {:.2f} ms{}; {:.2f} ms since the key's call before",
               key->op, key->comm_id, key->blocking_runs,
               d.engine ? std::string("the engine's exchange")
               : run.candidate < key->algorithms.size() ? fmt::format("MPI's '{}'", key->algorithms[run.candidate])
                                                        : std::string("MPI's default"),
               trial.sampling() ? " (sample)" : trial.trying() ? " (trial)" : "", static_cast<double>(wall_ns) / 1e6,
               cpu_ns == kCpuUnmeasured ? std::string() : fmt::format(", CPU {:.2f} ms", static_cast<double>(cpu_ns) / 1e6),
               static_cast<double>(key->last_interval_ns) / 1e6);
  ++key->blocking_runs;
  if (!trial.active()) return;
  if (run.written) algorithm_restore(key->op_kind);
  if (trial.sampling() && cpu_ns != kCpuUnmeasured) {
    key->sample_cost[d.engine ? 1 : 0] += static_cast<double>(wall_ns) + key->engine_weight * static_cast<double>(cpu_ns);
    ++key->sample_calls[d.engine ? 1 : 0];
  }
  trial.record(blocking_cost(*key, d.engine, wall_ns, cpu_ns));
  if (key->engine_stage == Key::EngineStage::ask && trial.calls() == kEngineAskAt && trial.rounds() == 0 &&
      !trial.trying())
    ask_engine_weight(*key, comm);
  else if (key->engine_stage == Key::EngineStage::sampling && !trial.sampling())
    ask_engine_verdict(*key, comm);
  // The round's last call: the ranks start to agree now, after its data is complete (done() says
  // why), and the choice is made at the key's next call, as the engine's (Key::agreeing).
  if (!trial.choice_due()) return;
  complete_agreement(*key, comm);  // one agreement in flight at a time
  key->trial_votes = algorithm_votes(trial);
  key->trial_sums.assign(key->trial_votes.size(), 0.0);
  key->trial_before = trial.chosen();
  if (PMPI_Iallreduce(key->trial_votes.data(), key->trial_sums.data(), static_cast<int>(key->trial_votes.size()),
                      MPI_DOUBLE, MPI_SUM, comm, &key->agreeing) == MPI_SUCCESS)
    key->trial_agreeing = true;
  else
    trial.choose({});  // ends the round, nothing chosen
}

/// The "algorithm" object of a key in the statistics (docs/config.md): MPI's algorithm its
/// blocking calls run, and what the trial measured on this rank.
std::string algorithm_json(const Key& k) {
  const AlgorithmTrial& t = k.trial;
  const std::vector<double> means = t.means(), bests = t.bests();
  std::string mean, best;
  for (std::size_t i = 0; i < k.algorithms.size(); ++i) {
    mean += fmt::format(R"({}"{}":{:.3f})", i ? "," : "", k.algorithms[i], i < means.size() ? means[i] / 1e3 : 0.0);
    best += fmt::format(R"({}"{}":{:.3f})", i ? "," : "", k.algorithms[i], i < bests.size() ? bests[i] / 1e3 : 0.0);
  }
  auto sample_us = [&](int i) { return k.sample_calls[i] > 0 ? k.sample_cost[i] / k.sample_calls[i] / 1e3 : 0.0; };
  return fmt::format(R"({{"chosen":"{}","rounds":{},"switches":{},"mean_us":{{{}}},"best_us":{{{}}},"cpu_weight":{:.3f},)"
                     R"("engine_sample":{{"asked":{},"weight":{:.3f},"mpi_calls":{},"engine_calls":{},"mpi_us":{:.3f},)"
                     R"("engine_us":{:.3f},"engine_first":{}}}}})",
                     k.algorithms.empty() ? "auto" : k.algorithms[t.chosen()], t.rounds(), t.switches(), mean, best,
                     cpu_weight(k), k.engine_weighed, k.engine_weight, k.sample_calls[0], k.sample_calls[1], sample_us(0),
                     sample_us(1), k.engine_preferred);
}

}  // namespace tnbc::shim::replay::decide
