// The joint verdict of a job on one node (joint.hpp).
#include "joint.hpp"

#include <array>
#include <span>
#include <string>

#include <fmt/format.h>

#include "blocking.hpp"
#include "engine_ledger.hpp"
#include "shim/log.hpp"
#include "shim/node.hpp"

namespace tnbc::shim::replay::adapt {

bool judged_jointly(const Key& key) { return key.one_node && !node::job_spans_nodes(); }

bool joint_due(const Key& key) {
  const EngineSamples& e = key.algorithm.engine;
  return e.joint_at != 0 && e.stage == EngineStage::decided && key.algorithm.trial.calls() >= e.joint_at &&
         !key.algorithm.trial.sampling() && before_rounds_idle(key);
}

void ask_joint(Key& key, MPI_Comm comm) {
  EngineSamples& e = key.algorithm.engine;
  e.joint_at = 2 * key.algorithm.trial.calls();
  const std::array<double, LedgerPart::kFields> mine = engine_ledger().part();
  key.algorithm.tally.set(mine);
  if (key.algorithm.tally.post(comm, key.path.last_interval_ns)) e.stage = EngineStage::joining;
}

void joint_agreed(Key& key) {
  EngineSamples& e = key.algorithm.engine;
  e.stage = EngineStage::decided;
  const std::span<const double> sums = key.algorithm.tally.sums();
  e.joint_last = joint_verdict(sums, key.comm_size);
  ++e.joint_verdicts;
  if (e.joint_last == JointVerdict::own) return;
  const std::size_t engine = key.algorithm.engine_index();
  const bool on_engine = key.algorithm.trial.chosen() == engine;
  if (on_engine == (e.joint_last == JointVerdict::engine)) return;
  const std::size_t to = on_engine ? e.mpi_choice : engine;
  key.algorithm.trial.prefer(to);
  key.algorithm.told = to;
  e.check.ask_at = 0;
  ++e.joint_switches;
  auto ms = [&](LedgerPart::Field f) { return sums[f] / 1e6; };
  log::info_rank0("decided: {} on communicator {} ({} ranks): blocking calls run {} from blocking call {}, judged with "
                  "the other keys of its ranks (a job on one node runs them one way): the engine's samples of {:.0f} "
                  "key-ranks cost {:.1f} ms in all against MPI's {:.1f} ms (spread {:.1f} ms); {:.0f} checks' "
                  "intervals {:.1f} ms against {:.1f} ms",
                  what(key, key.first_bytes), key.comm_id, key.comm_size,
                  on_engine ? fmt::format("MPI's '{}' algorithm", key.algorithm.candidates[to])
                            : std::string("the engine's exchange"),
                  key.algorithm.trial.calls(), sums[LedgerPart::sampled], ms(LedgerPart::samples_engine),
                  ms(LedgerPart::samples_mpi), samples_spread(sums) / 1e6,
                  sums[LedgerPart::checked], ms(LedgerPart::checks_engine),
                  ms(LedgerPart::checks_mpi));
}

}  // namespace tnbc::shim::replay::adapt
