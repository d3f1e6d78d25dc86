// The per-call decision of replay mode: one key per (communicator, operation, total class: floor(log2)
// of the call's bytes) with its three parts, each a struct of its own (the path choice: policy.hpp
// applied per key; the algorithm of its blocking calls: blocking.cpp; its learning: learn.hpp),
// what its calls cost, the tallies that settle its choices (tally.hpp), and the rule that
// a communicator within one node runs blocking.  call.cpp asks for_call() before each call and
// done() after it.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally.hpp"
#include "algorithm.hpp"
#include "engine_ledger.hpp"
#include "explore.hpp"
#include "policy.hpp"
#include "trial.hpp"
#include "shim/config.hpp"
#include "shim/replay/learn/learn.hpp"
#include "priority/plan.hpp"

namespace tnbc::shim::replay::adapt {

/// What the calls of one key made from one call site cost (the statistics' breakdown).
struct SiteCosts {
  std::int64_t site = -1;  ///< index in call.cpp's call-site table; -1: not captured
  Costs costs;
  /// The plan entry's order for the site (sub-messages or segments, first to complete first;
  /// empty: no entry, or one without an order), for the statistics.
  std::vector<std::uint32_t> plan_order;
};

/// The candidate name of the engine's exchange run blocking among MPI's algorithms
/// (AlgorithmChoice::candidates).
inline constexpr const char* kEngineCandidate = "engine";

/// Where a key's vote on its path stands: none; due (measured at a decision point's entry, to
/// be posted after its call); posted (summed by the key's next call, which decides); summed.
enum class VoteStage : std::uint8_t { none, due, posted, summed };

/// A key's choice between returning early and blocking (policy.hpp): the rule's state, the
/// intervals it compares, and the vote in flight.  A decision point's vote does not hold the
/// program up: measured at the call where it is due, posted after that call, decided at the
/// key's next call, which takes the path decided (the call between stays on the path of the
/// segment that ended; its interval goes into no decision).
struct PathChoice {
  PathChoice(const Policy& p, bool decide_first) : state(p, decide_first) {}
  KeyState state;
  Intervals intervals;
  VoteStage vote_stage = VoteStage::none;
  Tally vote;  ///< Vote::kFields doubles
  /// The plan's word on the key's latest call (its entry's "return"; measure: none), a vote.
  priority::Return plan_return = priority::Return::measure;
  std::uint64_t last_entry_ns = 0;     ///< entry of the key's previous call (0: none yet)
  std::uint64_t last_interval_ns = 0;  ///< from the previous call's entry to this one's (0: first call)
  /// The key's first interval (MPI's and the engine's setup on the communicator) and its path,
  /// which the closing summary leaves out (measured_saving).
  std::uint64_t first_interval_ns = 0;
  Path first_interval_path = Path::blocking;
  Path last_path = Path::blocking;
  Turns last_turns = Turns::none;  ///< what the previous call's interval compares
  bool told = false;               ///< the path was said at TNBC_LOG=info (one line per key and change)
  Path told_path = Path::blocking;
  /// The exploration budget this key's early probe holds, from its probe point's vote to the
  /// decision after the probe (explore.hpp, reserve); none while it holds none.
  std::optional<std::uint64_t> reserved_ns;
};

/// The CPU of a key's blocking calls that MPI ran: how many, their time and this rank's CPU
/// inside them (what a call's CPU costs the node: trial.hpp, cpu_weight).
struct PolledCpu {
  std::uint64_t calls = 0, wall_ns = 0, cpu_ns = 0;
};

/// Where the engine's exchange stands as a key's first choice for its blocking calls
/// (blocking.cpp): not asked yet (or, in a job across nodes, refused by some rank's exploration
/// budget and to be asked again: EngineSamples::ask_at); the CPU weight being agreed; its sample calls running; their
/// costs being agreed; the ranks' budgets being asked again for a check they could not afford
/// at the samples' verdict; its check calls running (after the samples or a trial round chose
/// it); the check's intervals being agreed; decided; in a job on one node, the joint verdict of the
/// rank's keys being agreed (EngineSamples::joint_at).
enum class EngineStage : std::uint8_t { ask, weighing, sampling, judging, asking, checking, rechecking, decided, joining };

/// The check of the engine's exchange after its samples or a trial round made it a key's choice
/// (blocking.cpp): kBlocks blocks of kBlockCalls blocking calls, MPI's choice, the engine's, the
/// engine's, MPI's, each block's intervals (from a call's entry to the key's next entry: what the
/// program paid while that call's algorithm ran) summed on this rank.
struct EngineCheck {
  static constexpr int kBlocks = 4, kBlockCalls = 2;
  static constexpr int kCalls = kBlocks * kBlockCalls;
  std::size_t mpi_choice = 0;      ///< MPI's candidate the samples compared the engine with
  double block_ns[kBlocks] = {0, 0, 0, 0};
  int calls = 0;                   ///< check calls made so far
  std::uint64_t last_call = 0;     ///< Key::calls_made at the latest check call
  /// What the check is predicted to cost this rank (explore.hpp): its calls of MPI's choice at
  /// what each of MPI's samples cost beyond the engine's.
  std::uint64_t predicted_ns = 0;
  /// Where some rank's budget could not afford the check: the key's blocking call (the trial's
  /// count) after which the ranks are asked again (0: none due), each time twice as far on, and
  /// how many times a budget refused it.
  std::uint64_t ask_at = 0;
  int refusals = 0;
  /// How many checks the key started (each switch to the engine is checked): its calls, blocks and
  /// verdict are the latest check's; `refusals` counts over them all.
  int started = 0;
  /// Whether the check ran to its verdict, and its blocks summed over the ranks (trial.hpp).
  bool judged = false;
  CheckSums agreed;
  /// Judged by the rule of a job on one node (CheckSums::engine_loses), set at the verdict.
  bool loss_only = false;
  bool kept() const { return judged && (loss_only ? !agreed.engine_loses() : agreed.engine_wins()); }
};

/// The engine's sample calls of a key (blocking.cpp): their stage, the CPU weight agreed, their
/// cost (time plus CPU by the weight) and their time summed and how many ([0] MPI's, [1] the
/// engine's), each call's cost, and whether they made the engine the first choice.
struct EngineSamples {
  EngineStage stage = EngineStage::ask;
  double weight = 0;
  bool weighed = false;
  double cost[2] = {0, 0};
  /// Each sample call's cost, by candidate and in order (the statistics).
  double call_cost[2][2] = {{0, 0}, {0, 0}};
  double wall_ns[2] = {0, 0};
  int calls[2] = {0, 0};
  bool preferred = false;
  /// In a job across nodes, where some rank's exploration budget could not afford the samples and
  /// their check when the weight was agreed: the key's blocking call (the trial's count) at which
  /// the ranks are asked again (0: at kEngineAskAt), each time twice as far on, and how many times
  /// a budget refused them.
  std::uint64_t ask_at = 0;
  int refusals = 0;
  EngineCheck check;
  /// MPI's candidate the samples compared the engine with (the choice before them).
  std::size_t mpi_choice = 0;
  /// In a job on one node, after the samples' verdict: the key's blocking call (the trial's count)
  /// after which its ranks next judge it with the rank's other keys (joint.hpp; 0: never), the
  /// joint verdicts agreed, the latest, and the switches they made.
  std::uint64_t joint_at = 0;
  int joint_verdicts = 0, joint_switches = 0;
  JointVerdict joint_last = JointVerdict::own;
  /// The spread of this rank's samples: the squares of the difference between the two sample
  /// calls of each candidate, summed (blocking.cpp, verdict_agreed).
  double spread_squared() const {
    double sq = 0;
    for (int c = 0; c < 2; ++c)
      if (calls[c] >= 2) sq += (call_cost[c][0] - call_cost[c][1]) * (call_cost[c][0] - call_cost[c][1]);
    return sq;
  }
  /// What a call of the engine's exchange took beyond MPI's, by this rank's samples (explore.hpp).
  double engine_excess_ns() const { return adapt::engine_excess_ns(wall_ns, calls); }
};

/// The algorithm of a key's blocking calls (blocking.cpp): MPI's own algorithms and the engine's
/// exchange as candidates, their trial, the engine's samples, and the tally in flight.
struct AlgorithmChoice {
  /// MPI's own algorithms (algorithm.hpp; MPI's default first), and kEngineCandidate.
  std::vector<std::string> candidates;
  AlgorithmTrial trial;
  PolledCpu polled;
  EngineSamples engine;
  /// The CPU weight's, the samples' or a trial round's tally (which: engine.stage and
  /// round_pending), and the choice before a round.
  Tally tally;
  bool round_pending = false;
  std::size_t before = 0;
  bool weighs_cpu = false;    ///< its candidates include the engine's exchange: their CPU counts
  bool last_trial = false;    ///< the previous call tried a candidate other than the choice
  std::size_t told = 0;       ///< the choice said at TNBC_LOG=info
  std::uint64_t blocking_runs = 0;  ///< its blocking calls so far (after_blocking)
  /// The key's next blocking call runs on the engine's exchange (its trial's candidate or choice).
  bool engine_next() const { return candidates[trial.next()] == kEngineCandidate; }
  /// The engine's exchange among the candidates: its index, or candidates.size() where it is none.
  std::size_t engine_index() const {
    return static_cast<std::size_t>(std::find(candidates.begin(), candidates.end(), kEngineCandidate) -
                                    candidates.begin());
  }
};

/// The plan entry whose message shape (Bcast segments and tree, per-node turns in their order)
/// every call of the key uses: this rank's entry at the key's first call if every rank's had
/// the same shape, else none (the defaults).  Agreed once, at that first call.
struct PlanShape {
  bool agreed = false;
  bool unused_told = false;  ///< a later call's per-node entry the agreed shape lacks: said once
  const priority::PlanEntry* shape = nullptr;
};

/// One (communicator, operation, size of the call): what it is, and its three parts: the path
/// choice, the algorithm of its blocking calls, and its learning.
struct Key {
  Key(const Policy& p, bool decide_first) : path(p, decide_first) {}
  std::string_view op;
  priority::Op op_kind = priority::Op::alltoall;
  std::uint64_t first_bytes = 0;  ///< the key's bytes at its first call (names it in messages)
  /// priority::size_class of the call's total bytes, the same on every rank (0 for Alltoallv).
  /// Not the block size class of a plan entry.
  std::uint32_t total_class = 0;
  std::uint64_t comm_id = 0;
  int comm_size = 0;
  bool one_node = false;
  /// Per rank of the communicator: 1 if it shares this rank's node.
  std::vector<char> peer_on_node;
  std::uint64_t calls_made = 0;  ///< its calls so far, this one included (for_call), on either path
  /// Costs per call site (one entry, site -1, when call sites are not captured).  A deque:
  /// operations in flight point into it while it grows.  Only the thread calling the key's
  /// collective adds to it (MPI forbids concurrent collectives on one communicator).
  std::deque<SiteCosts> sites;
  PathChoice path;
  AlgorithmChoice algorithm;
  learn::KeyLearning learning;  ///< the read orders learned for its call sites (learn.hpp)
  PlanShape plan;
  bool memory_told = false;  ///< a call of it kept from returning early by TNBC_MAX_MEMORY was said (info)
};

/// The path of one call and the key it belongs to.  `why` names the reason of a blocking path
/// (a fallback reason of the statistics).
struct Decision {
  Path path = Path::early;
  Key* key = nullptr;
  const char* why = nullptr;
  /// The plan entry that shapes this call's messages, the same in shape on every rank (Key::plan).
  const priority::PlanEntry* shape = nullptr;
  /// Where this call's costs go: the key's entry for the call site.
  Costs* costs = nullptr;
  /// A blocking call designated for observation (learn.hpp): watch its receive buffer.
  bool observe = false;
  /// A blocking call that the engine's exchange runs, completed before returning (received in
  /// place), rather than MPI's blocking call (TNBC_BLOCKING).  The same on every rank.
  bool engine = false;
  /// An early call that takes per-node turns in `turn_order` (learned for the key and decided
  /// by measurement, the same on every rank: adapt/policy.hpp, KeyState::allow_turns).
  bool turns = false;
  const priority::PlanEntry* turn_order = nullptr;
};

/// Applies the settings (TNBC_ADAPT, TNBC_ADAPT_WARMUP, TNBC_ADAPT_WIDE, TNBC_ALGORITHMS),
/// creates the communicator attribute that holds each communicator's keys and looks MPI's
/// algorithms up (algorithm.hpp): `mine` gets this rank's values to agree on.  No message; every
/// rank calls it, then agreed_decisions with the minimum of every rank's `mine` over
/// MPI_COMM_WORLD.  plan_loaded: the first call of each key asks every rank's plan.  False if
/// MPI cannot create the attribute.
bool start_decisions(const config::Config& cfg, bool plan_loaded, AlgorithmValues& mine);
void agreed_decisions(const AlgorithmValues& agreed);
/// The barrier that starts a trial call on every rank together (trial.hpp): replay mode's own
/// MPI_Barrier, far cheaper than MPICH's on a full node (docs/measurements/adapt-history.md);
/// PMPI_Barrier until set.
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
/// is collective over `comm` (an MPI_Iallreduce of Vote::kFields doubles, posted after the call,
/// completed by the progress thread or at the latest at the key's next call, which decides:
/// PathChoice; blocking at a key's
/// first call with a plan); so is a call that enters the
/// early path after blocking calls were observed (the learn point of learn.hpp).  `bytes` must be the same
/// on every rank (0 for Alltoallv, whose sizes differ).  `entry`: this rank's plan entry for
/// the call, whose "return" is this rank's vote (ranks may find different entries: the votes
/// are summed, and "blocking" from any rank wins).  With a plan, the key's first call is also
/// collective: the ranks agree on the shape its entries give the messages (Key::shape), since
/// each rank finds its entry by its own call site and a program may call one collective from
/// different places on different ranks (Key::plan).
/// `site`: the call site (-1: not captured), whose costs the call's are.
Decision for_call(MPI_Comm comm, priority::Op op, std::uint64_t bytes, const priority::PlanEntry* entry,
                std::int64_t site);

/// Counts `bytes` received from rank `from` of the decision's communicator (a rank's own bytes
/// are not counted).
inline void count_received(const Decision& d, int self, int from, std::uint64_t bytes) {
  if (from == self || bytes == 0 || from < 0 || static_cast<std::size_t>(from) >= d.key->peer_on_node.size()) return;
  d.costs->add_received(d.key->peer_on_node[static_cast<std::size_t>(from)] != 0, bytes);
}

/// Counts the call just made on the decision's path, and posts the vote due (or, where the key's
/// next call is its room point, the room votes) after this call's data is complete, every rank
/// at the same call: never right before a call (docs/measurements/decision-notes.md).
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

/// For the closing summary: what exploring cost this rank against TNBC_EXPLORE's bound
/// (explore.hpp), e.g. "; exploring cost 12 ms of the 1% (48 ms) allowed"; empty where nothing
/// was explored.
std::string exploration_summary();

/// Completes the tallies still in flight (a key whose next call never came;
/// every rank posted them after the same call).  At MPI_Finalize, before the statistics.
void finish_tallies();

/// How the statistics name a call site: its plan key, and its innermost frame's function and
/// module path (for tnbc-stats, which resolves file and line from them).
struct SiteName {
  std::string key, function, module;
};
/// The statistics of every key, as the "keys" array of docs/config.md; `site_name` names a
/// call site by its index.
std::string keys_json(const std::function<SiteName(std::int64_t)>& site_name);

}  // namespace tnbc::shim::replay::adapt
