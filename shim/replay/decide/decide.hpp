// The per-call decision of replay mode (decide/policy.hpp applied per communicator): one key per
// (communicator, operation, size class) with its decision state and what its calls cost, the
// agreed decision points (one MPI_Iallreduce of a vote, decided at the key's next call), and
// the rule that a communicator within one node runs blocking.  replay.cpp asks decide() before
// each call and done() after it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithm.hpp"
#include "policy.hpp"
#include "trial.hpp"
#include "shim/config.hpp"
#include "shim/replay/learn/learn.hpp"
#include "priority/plan.hpp"

namespace tnbc::shim::replay::decide {

/// What the calls of one key made from one call site cost (the statistics' breakdown).
struct SiteCosts {
  std::int64_t site = -1;  ///< index in replay.cpp's call-site table; -1: not captured
  Costs costs;
  /// The plan entry's order for the site (sub-messages or segments, first to complete first;
  /// empty: no entry, or one without an order), for the statistics.
  std::vector<std::uint32_t> plan_order;
};

/// The candidate name of the engine's exchange run blocking among MPI's algorithms (Key::algorithms).
inline constexpr const char* kEngineCandidate = "engine";

/// One (communicator, operation, size class): its decision state and what its calls cost.
struct Key {
  Key(const Policy& p, bool decide_first) : state(p, decide_first) {}
  KeyState state;
  Intervals intervals;  ///< what the decision compares
  learn::KeyLearning learning;  ///< the read orders learned for its call sites (learn.hpp)
  /// Costs per call site (one entry, site -1, when call sites are not captured).  A deque:
  /// operations in flight point into it while it grows.  Only the thread calling the key's
  /// collective adds to it (MPI forbids concurrent collectives on one communicator).
  std::deque<SiteCosts> sites;
  /// Per rank of the communicator: 1 if it shares this rank's node.
  std::vector<char> peer_on_node;
  std::string_view op;
  priority::Op op_kind = priority::Op::alltoall;
  std::uint64_t first_bytes = 0;  // the key's bytes at its first call (names it in messages)
  /// MPI's own algorithms its blocking calls choose from (algorithm.hpp; MPI's default first),
  /// and their trial.
  std::vector<std::string> algorithms;
  AlgorithmTrial trial;
  /// The key's blocking calls that MPI ran: how many, their time and this rank's CPU inside
  /// them (after_blocking: what a call's CPU costs the node).
  std::uint64_t polled_calls = 0, polled_wall_ns = 0, polled_cpu_ns = 0;
  /// Where the engine's first choice stands (blocking.cpp, kEngineAskAt): not asked yet; the CPU
  /// weight being agreed; its sample calls running; their costs being agreed; decided.
  enum class EngineStage : std::uint8_t { ask, weighing, sampling, judging, decided };
  EngineStage engine_stage = EngineStage::ask;
  /// The agreement in flight: an MPI_Iallreduce posted after a blocking call and completed at
  /// the key's next call, when every rank has long posted it (two blocking MPI_Allreduce after
  /// calls and an MPI_Comm_dup made NPB IS A about 5% slower on a full node: synchronisations
  /// the program does not have, a few time slices each on 4 ranks sharing 2 cores).
  MPI_Request agreeing = MPI_REQUEST_NULL;
  double agree_mine[2] = {0, 0}, agree_sum[2] = {0, 0};
  /// The trial's agreement after a round (likewise nonblocking): this rank's votes (its bests
  /// first: algorithm.hpp, algorithm_votes) and their sums, and the choice before it.
  bool trial_agreeing = false;
  std::vector<double> trial_votes, trial_sums;
  std::size_t trial_before = 0;
  double engine_weight = 0;     // the CPU weight agreed (mean over the ranks)
  bool engine_weighed = false;  // ... agreed
  /// The sample calls on this rank (blocking.cpp): their cost, time plus CPU by engine_weight,
  /// summed, and how many; [0] MPI's, [1] the engine's.  Whether they made the engine the first choice.
  double sample_cost[2] = {0, 0};
  int sample_calls[2] = {0, 0};
  bool engine_preferred = false;
  bool weighs_cpu = false;    // its candidates include the engine's exchange: their CPU counts
  /// The key's next blocking call runs on the engine's exchange (its trial's candidate or choice).
  bool engine_next() const { return algorithms[trial.next()] == kEngineCandidate; }
  /// The engine's exchange among the candidates: its index, or algorithms.size() where it is none.
  std::size_t engine_index() const {
    return static_cast<std::size_t>(std::find(algorithms.begin(), algorithms.end(), kEngineCandidate) - algorithms.begin());
  }
  std::uint64_t calls_made = 0;     // its calls so far, this one included (for_call), on either path
  std::uint64_t blocking_runs = 0;  // its blocking calls so far (after_blocking; the trial counts them only where active)
  bool last_trial = false;  // the previous call tried a candidate other than the choice
  std::size_t told_algorithm = 0;  // the choice said at TNBC_LOG=info
  /// priority::size_class of the call's total bytes (0 for Alltoallv), as plans write it.
  std::uint32_t size_class = 0;
  std::uint64_t comm_id = 0;
  int comm_size = 0;
  bool one_node = false;
  std::uint64_t last_entry_ns = 0;  // entry of the key's previous call (0: none yet)
  std::uint64_t last_interval_ns = 0;  // from the previous call's entry to this one's (0: first call)
  /// The key's first interval (after its first call: MPI's and the engine's setup on the
  /// communicator) and its path, which the closing summary leaves out (measured_saving).
  std::uint64_t first_interval_ns = 0;
  Path first_interval_path = Path::blocking;
  Path last_path = Path::blocking;
  Turns last_turns = Turns::none;  // what the previous call's interval compares
  // The plan entry whose message shape (Bcast segments and tree, per-node turns in their order)
  // every call of the key uses: this rank's entry at the key's first call if every rank's had
  // the same shape, else none (the defaults).  Agreed once, at that first call.
  bool shape_agreed = false;
  bool shape_unused_told = false;  // a later call's per-node entry the agreed shape lacks: said once
  bool path_told = false;  // the path was said at TNBC_LOG=info (one line per key and change)
  bool memory_told = false;  // a call of it kept from returning early by TNBC_MAX_MEMORY was said (info)
  Path told_path = Path::blocking;
  const priority::PlanEntry* shape = nullptr;
  /// A decision point's vote (decide/policy.hpp, D), taken without holding the program up: this
  /// rank's part is measured at the call where the decision is due, with the intervals up to
  /// its entry (due), posted as an MPI_Iallreduce after that call (posted; summed where MPI
  /// refused the nonblocking one), and decided at the key's next call, which takes the path
  /// decided; the call between stays on the path of the segment that ended (its interval goes
  /// into no decision).  The room point's vote is posted after the call before it and decided
  /// at the room point.  A blocking vote made every rank wait for the slowest before the call
  /// (6-13 ms each on a full node), a synchronisation the program does not have; measured on
  /// heFFTe over 2 emulated nodes (docs/apps.md): 0.99 of plain MPICH against 1.01 at 200 Mbit/s,
  /// no difference on unshaped links.
  enum class VoteStage : std::uint8_t { none, due, posted, summed };
  VoteStage vote_stage = VoteStage::none;
  MPI_Request voting = MPI_REQUEST_NULL;
  double vote_mine[Vote::kFields] = {}, vote_sum[Vote::kFields] = {};
  /// The plan's word on the key's latest call (its entry's "return"; measure: none), a vote.
  priority::Return plan_return = priority::Return::measure;
};

/// The path of one call and the key it belongs to.  `why` names the reason of a blocking path
/// (a fallback reason of the statistics).
struct Decision {
  Path path = Path::early;
  Key* key = nullptr;
  const char* why = nullptr;
  /// The plan entry that shapes this call's messages, the same in shape on every rank (Key::shape).
  const priority::PlanEntry* shape = nullptr;
  /// Where this call's costs go: the key's entry for the call site.
  Costs* costs = nullptr;
  /// A blocking call designated for observation (learn.hpp): watch its receive buffer.
  bool observe = false;
  /// A blocking call that the engine's exchange runs, completed before returning (received in
  /// place), rather than MPI's blocking call (TNBC_BLOCKING).  The same on every rank.
  bool engine = false;
  /// An early call that takes per-node turns in `turn_order` (learned for the key and decided
  /// by measurement, the same on every rank: decide/policy.hpp, KeyState::allow_turns).
  bool turns = false;
  const priority::PlanEntry* turn_order = nullptr;
};

/// Applies the settings (TNBC_ADAPT, TNBC_ADAPT_WARMUP, TNBC_ADAPT_WIDE, TNBC_ALGORITHMS),
/// creates the communicator attribute that holds each communicator's keys and looks MPI's
/// algorithms up (algorithm.hpp): `mine` gets this rank's values to agree on.  No message; every
/// rank calls it, then agreed_decisions with the minimum of every rank's `mine` over
/// MPI_COMM_WORLD.  plan_loaded: the first call of each key asks every rank's plan.  False if
/// MPI cannot create the attribute.
bool start_decisions(const config::Config& cfg, bool plan_loaded, AlgorithmAgreement& mine);
void agreed_decisions(const AlgorithmAgreement& agreed);
/// The barrier that starts a trial call on every rank together (trial.hpp): replay mode's own
/// MPI_Barrier (a fraction of a millisecond on a full node, where MPICH's takes 4-16 ms: 4
/// ranks on 2 cores); PMPI_Barrier until set.
void set_trial_barrier(int (*barrier)(MPI_Comm));
/// What makes the engine ready for `comm` before a sample of its exchange (collective over
/// `comm`; engine.hpp, Engine::prepare); nothing until set.
void set_engine_prepare(void (*prepare)(MPI_Comm));

/// Whether calls on `comm` are measured and may return early under the per-call decision: not
/// with TNBC_ADAPT=off (every call early, nothing measured), nor on a communicator within one
/// node under TNBC_ADAPT=on (every call blocking, nothing measured).  Local, no communication:
/// learning asks it before it pays for a call's site.
bool measured(MPI_Comm comm);

/// Decides the path of this call.  Called by every rank of `comm` for the same collective,
/// after the checks every rank shares and before anything rank-local: at a decision point it
/// is collective over `comm` (an MPI_Iallreduce of Vote::kFields doubles, posted after the call
/// and completed at the key's next call, which decides: Key::vote_stage; blocking at a key's
/// first call with a plan); so is a call that enters the
/// early path after blocking calls were observed (the learn point of learn.hpp).  `bytes` must be the same
/// on every rank (0 for Alltoallv, whose sizes differ).  `entry`: this rank's plan entry for
/// the call, whose "return" is this rank's vote (ranks may find different entries: the votes
/// are summed, and "blocking" from any rank wins).  With a plan, the key's first call is also
/// collective: the ranks agree on the shape its entries give the messages (Key::shape), since
/// each rank finds its entry by its own call site and a program may call one collective from
/// different places on different ranks.
/// `site`: the call site (-1: not captured), whose costs the call's are.
Decision for_call(MPI_Comm comm, priority::Op op, std::uint64_t bytes, const priority::PlanEntry* entry,
                std::int64_t site);

/// Counts `bytes` received from rank `from` of the decision's communicator (a rank's own bytes
/// are not counted).
inline void count_received(const Decision& d, int self, int from, std::uint64_t bytes) {
  if (from == self || bytes == 0 || from < 0 || static_cast<std::size_t>(from) >= d.key->peer_on_node.size()) return;
  d.costs->add_received(d.key->peer_on_node[static_cast<std::size_t>(from)] != 0, bytes);
}

/// Counts the call just made on the decision's path.  Where the key's next call is its room
/// point, the ranks post their votes on it here, after this call's data is complete (an
/// MPI_Iallreduce over `comm`, every rank at the same call, completed at the room point): a
/// small collective right before a large Alltoall with
/// MPICH's scattered algorithm made that Alltoall 1-1.4 s slower on 2 emulated nodes (8 MiB
/// blocks, 1.4 s calls; the same right after the previous call costs 7-20 ms).
void done(const Decision& d, MPI_Comm comm);

/// Before a blocking call of the decision's key: sets the algorithm this call runs
/// (algorithm.hpp), after a barrier on `comm` where the call is a trial.  Returns what
/// after_blocking takes.
struct BlockingRun {
  std::size_t candidate = 0;
  bool written = false;
  /// The call's CPU counts (after_blocking): the key weighs its candidates' CPU (it has the
  /// engine's exchange among them), and the call is one of the first kEngineAskAt, a sample or a trial.
  bool wants_cpu = false;
};
/// after_blocking's `cpu_ns` where the call's CPU was not measured (BlockingRun::wants_cpu).
inline constexpr std::uint64_t kCpuUnmeasured = ~std::uint64_t{0};
BlockingRun before_blocking(const Decision& d, MPI_Comm comm);
/// After it: MPI's default is set again, and the call counts for the trial by its time `wall_ns`
/// and the CPU `cpu_ns` it took on this rank (the calling thread's, and for the engine's exchange
/// the progress thread's too): wall_ns + cpu_ns x the share of the key's MPI blocking calls in
/// which the rank's core ran something else (what the call's CPU took from the node's other
/// processes; 0 on a core of its own, where only time counts).  After a round's last call the
/// ranks agree the choice (collective over `comm`, every rank at the same call).
void after_blocking(const Decision& d, const BlockingRun& run, std::uint64_t wall_ns, std::uint64_t cpu_ns,
                    MPI_Comm comm);

/// TNBC_LOG=debug: one line for a call on the decision's early path that the engine ran,
/// returned early or completed before returning (`why`: the reason it could not return early),
/// `ns` inside the call.  (Blocking calls say theirs in after_blocking.)
void say_early_path_call(const Decision& d, bool early, const char* why, std::uint64_t ns);

/// For the closing summary: what this rank's early calls saved (or cost) against its blocking
/// calls, as measured: per key that measured both paths, its early intervals times the
/// difference of the mean intervals after a blocking and after an early call (its first
/// interval left out: it carries the communicator's setup).  Empty where no
/// key measured both.  E.g. "; by the mean intervals of the 2 keys that ran both paths, the
/// early calls saved about 812 ms".
std::string measured_saving();

/// Completes the agreements still in flight (Key::agreeing: a key whose next call never came;
/// every rank posted them after the same call).  At MPI_Finalize, before the statistics.
void finish_agreements();

/// How the statistics name a call site: its plan key, and its innermost frame's function and
/// module path (for tnbc-stats, which resolves file and line from them).
struct SiteName {
  std::string key, function, module;
};
/// The statistics of every key, as the "keys" array of docs/config.md; `site_name` names a
/// call site by its index.
std::string keys_json(const std::function<SiteName(std::int64_t)>& site_name);

}  // namespace tnbc::shim::replay::decide
