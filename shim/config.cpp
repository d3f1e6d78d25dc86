#include "config.hpp"

#include <array>
#include <type_traits>
#include <charconv>
#include <cstring>
#include <fmt/format.h>

#include "barrier/algorithms.hpp"
#include "barrier/segment.hpp"  // kMaxLocalSize
#include "util/file.hpp"
#include "util/hash.hpp"

namespace tnbc::config {
namespace {

/// A boolean setting stored in `Field`.
template <auto Field>
std::optional<std::string> apply_bool(Config& cfg, std::string_view v) {
  std::string err;
  auto b = parse_bool(v, &err);
  if (!b) return err;
  cfg.*Field = *b;
  return std::nullopt;
}

std::optional<std::string> apply_log(Config& cfg, std::string_view v) {
  for (auto level : {LogLevel::quiet, LogLevel::info, LogLevel::debug}) {
    if (v == to_string(level)) {
      cfg.log = level;
      return std::nullopt;
    }
  }
  return std::string("expected one of quiet, info, debug");
}

/// A text setting (a path) stored in `Field` as given.
template <auto Field>
std::optional<std::string> apply_string(Config& cfg, std::string_view v) {
  cfg.*Field = std::string(v);
  return std::nullopt;
}

/// An integer setting in [Min, Max] stored in `Field`.
template <auto Field, std::int64_t Min, std::int64_t Max>
std::optional<std::string> apply_int(Config& cfg, std::string_view v) {
  std::string err;
  auto n = parse_int(v, Min, Max, &err);
  if (!n) return err;
  cfg.*Field = static_cast<std::remove_reference_t<decltype(cfg.*Field)>>(*n);
  return std::nullopt;
}

std::optional<std::string> apply_adapt(Config& cfg, std::string_view v) {
  if (v == "measure") {
    cfg.adapt = Adapt::measure;
    return std::nullopt;
  }
  std::string err;
  auto b = parse_bool(v, &err);
  if (!b) return std::string("expected on, off or measure");
  cfg.adapt = *b ? Adapt::on : Adapt::off;
  return std::nullopt;
}

std::optional<std::string> apply_blocking(Config& cfg, std::string_view v) {
  if (v == "auto") cfg.blocking = Blocking::automatic;
  else if (v == "mpi") cfg.blocking = Blocking::mpi;
  else if (v == "engine") cfg.blocking = Blocking::engine;
  else return std::string("expected auto, mpi or engine");
  return std::nullopt;
}

std::optional<std::string> apply_explore(Config& cfg, std::string_view v) {
  if (v == "off") {
    cfg.explore = -1.0;
    return std::nullopt;
  }
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || end != v.data() + v.size() || !(d >= 0 && d <= 100))
    return std::string("expected off or a percentage from 0 to 100 (e.g. 1 or 0.5)");
  cfg.explore = d;
  return std::nullopt;
}

std::string show_explore(const Config& cfg) { return cfg.explore < 0 ? "off" : fmt::format("{:g}", cfg.explore); }

constexpr char kAnInteger[] = "an integer";
constexpr char kALocalRank[] = "a local rank";

/// An integer setting that also takes "auto" (stored as `Auto`); `What` names the integer in
/// the error message.
template <auto Field, int Auto, std::int64_t Min, std::int64_t Max, const char* What = kAnInteger>
std::optional<std::string> apply_auto_int(Config& cfg, std::string_view v) {
  if (v == "auto") {
    cfg.*Field = Auto;
    return std::nullopt;
  }
  std::string err;
  auto n = parse_int(v, Min, Max, &err);
  if (!n) return fmt::format("expected auto or {} from {} to {}", What, Min, Max);
  cfg.*Field = static_cast<int>(*n);
  return std::nullopt;
}

template <auto Field>
std::optional<std::string> apply_auto_size(Config& cfg, std::string_view v) {
  if (v == "auto") {
    cfg.*Field = 0;
    return std::nullopt;
  }
  std::string err;
  auto n = parse_size(v, &err);
  if (!n || *n == 0) return n ? std::string("expected auto or a size above 0") : err;
  cfg.*Field = *n;
  return std::nullopt;
}

std::optional<std::string> apply_chunk_bytes(Config& cfg, std::string_view v) {
  if (v == "auto") {
    cfg.chunk_bytes = kChunkBytesAuto;
    return std::nullopt;
  }
  std::string err;
  auto n = parse_size(v, &err);
  if (!n || *n == kChunkBytesAuto) return n ? std::string("expected auto or a size") : err;
  cfg.chunk_bytes = *n;
  return std::nullopt;
}

std::string show_chunk_bytes(const Config& cfg) {
  return cfg.chunk_bytes == kChunkBytesAuto ? "auto" : fmt::format("{}", cfg.chunk_bytes);
}

template <auto Field>
std::optional<std::string> apply_size(Config& cfg, std::string_view v) {
  std::string err;
  auto n = parse_size(v, &err);
  if (!n) return err;
  cfg.*Field = *n;
  return std::nullopt;
}

std::optional<std::string> apply_barrier_algo(Config& cfg, std::string_view v) {
  if (v == "auto" || v == "mpich" || barrier::parse_algorithm(v)) {
    cfg.barrier_algo = std::string(v);
    return std::nullopt;
  }
  std::string expected = "expected auto, mpich";
  for (auto a : barrier::kAllAlgorithms) expected += fmt::format(", {}", barrier::to_string(a));
  return expected;
}

/// The value of `F` in effect, as text (numbers, paths and names as they are).
template <auto F>
std::string show(const Config& cfg) {
  return fmt::format("{}", cfg.*F);
}

std::string show_log(const Config& cfg) { return std::string(to_string(cfg.log)); }

std::string show_blocking(const Config& cfg) {
  return cfg.blocking == Blocking::engine ? "engine" : cfg.blocking == Blocking::mpi ? "mpi" : "auto";
}

std::string show_adapt(const Config& cfg) {
  return cfg.adapt == Adapt::measure ? "measure" : cfg.adapt == Adapt::on ? "on" : "off";
}

// The Field of each kind of setting, named once per row.
template <auto F>
constexpr Field kBool{apply_bool<F>, show<F>};
template <auto F>
constexpr Field kText{apply_string<F>, show<F>};
template <auto F, std::int64_t Min, std::int64_t Max>
constexpr Field kInt{apply_int<F, Min, Max>, show<F>};
template <auto F, int Auto, std::int64_t Min, std::int64_t Max, const char* What = kAnInteger>
constexpr Field kAutoInt{apply_auto_int<F, Auto, Min, Max, What>, show<F>};
template <auto F>
constexpr Field kSize{apply_size<F>, show<F>};
template <auto F>
constexpr Field kAutoSize{apply_auto_size<F>, show<F>};
constexpr Field kLog{apply_log, show_log};
constexpr Field kAdapt{apply_adapt, show_adapt};
constexpr Field kBlocking{apply_blocking, show_blocking};
constexpr Field kExplore{apply_explore, show_explore};
constexpr Field kBarrierAlgo{apply_barrier_algo, show<&Config::barrier_algo>};
constexpr Field kChunkBytes{apply_chunk_bytes, show_chunk_bytes};

std::optional<std::string> apply_publish(Config& cfg, std::string_view v) {
  if (v != "auto" && v != "move" && v != "write" && v != "mremap") return std::string("expected auto, move, write or mremap");
  cfg.publish = std::string(v);
  return std::nullopt;
}
constexpr Field kPublish{apply_publish, show<&Config::publish>};

constexpr std::array kSettings = {
    Setting{"TNBC_DISABLE", "bool", "0", Agree::value,
            "1 makes the library a pure pass-through to MPICH: no early return, no tracing, "
            "no statistics files.",
            kBool<&Config::disable>},
    Setting{"TNBC_LOG", "enum", "info", Agree::no,
            "What the library prints on standard error: quiet (only problems that change "
            "behaviour), info (also notable events), debug (also per-call detail).  May differ "
            "between ranks: it changes only what a rank prints.",
            kLog},
    Setting{"TNBC_STATS", "path", "", Agree::no,
            "If set, each rank writes PREFIX.<rank>.json at MPI_Finalize (creating PREFIX's "
            "folder if missing): calls, early returns, fallbacks and their reasons, faults, "
            "barrier algorithm.  May differ between ranks: each rank writes its own file.",
            kText<&Config::stats_prefix>},
    Setting{"TNBC_TRACE_DIR", "path", "", Agree::no,
            "libtnbc_trace.so: the folder that receives one trace file per rank "
            "(<rank>.tnbct) at MPI_Finalize; created if missing.  Unset: a new folder "
            "tnbc-trace-<date>-<time>-<pid of rank 0> in the working directory of rank 0.  "
            "Refused (the program runs untraced, with one message) when it is not owned by the "
            "user, or is writable by group or others without the sticky bit.  May differ between "
            "ranks: only rank 0's value is used.",
            kText<&Config::trace_dir>},
    Setting{"TNBC_TRACE_BCAST_UNITS", "int", "16", Agree::value,
            "A traced MPI_Bcast buffer is cut into this many equal, page-aligned sub-messages "
            "(1 to 4096) whose first touches are recorded (libtnbc_trace.so), or observed while "
            "learning (libtnbc.so with TNBC_LEARN=1).",
            kInt<&Config::trace_bcast_units, 1, 4096>},
    Setting{"TNBC_PLAN", "path", "", Agree::content,
            "libtnbc.so: plan written by `tnbc-order plan` (per call site: the order in which "
            "sub-messages are delivered, Bcast segments and tree).  Unset, missing or invalid: "
            "default priorities (one message from rank 0 if it cannot be used).  Every rank must "
            "find the same bytes (the paths may differ; a rank that cannot read the file has "
            "no plan).",
            kText<&Config::plan>},
    Setting{"TNBC_MIN_BYTES", "size", "64K", Agree::value,
            "libtnbc.so: an MPI_Alltoall or MPI_Bcast moving fewer bytes per rank runs as the "
            "plain blocking call (the same on every rank); an MPI_Alltoallv receiving fewer "
            "bytes completes before returning.",
            kSize<&Config::min_bytes>},
    Setting{"TNBC_BCAST_SEGMENTS", "int", "auto", Agree::value,
            "libtnbc.so: segments a replayed MPI_Bcast is cut into and pipelined in, when no "
            "plan gives a count: auto (the LogGP model of docs/ordering.md, at most 5) or "
            "1..253.",
            kAutoInt<&Config::bcast_segments, 0, 1, 253>},
    Setting{"TNBC_BCAST_CHAINS", "int", "auto", Agree::value,
            "libtnbc.so: tree of a replayed MPI_Bcast when no plan gives one: auto (binomial "
            "or k chains, whichever the LogGP model of docs/ordering.md finds faster), 0 = "
            "binomial tree, k = k parallel chains from the root.",
            kAutoInt<&Config::bcast_chains, -1, 0, 4096>},
    Setting{"TNBC_ADAPT", "enum", "on", Agree::value,
            "libtnbc.so: decide per call, from measurements, whether returning early pays.  "
            "on: collectives on a communicator whose ranks all share one node run blocking, "
            "and each (communicator, operation, call size) tries both paths and keeps the "
            "cheaper one, agreed by all its ranks (docs/replay.md, \"Deciding per call\"); "
            "measure: the same, one node included; off: return early wherever possible (for "
            "experiments and comparisons).  1/0, yes/no, true/false mean on/off.",
            kAdapt},
    Setting{"TNBC_ADAPT_WARMUP", "int", "6", Agree::value,
            "libtnbc.so: with TNBC_ADAPT=on or measure, the calls of each (communicator, "
            "operation, call size) that run blocking before returning early is first tried "
            "(0..1000000; at least 2 are made; the first 2 are not measured, the first only when "
            "there are 2, and of the others the last 4 are).  A probe of the early path costs up "
            "to 6% of a call when the program has nothing to overlap (measured on 2 emulated "
            "nodes); a short program is better served by a plan.  TNBC_ADAPT_WARMUP_ROOM ends it sooner where the program's reads "
            "leave room to overlap.",
            kInt<&Config::adapt_warmup, 0, 1000000>},
    Setting{"TNBC_ADAPT_WARMUP_ROOM", "int", "4", Agree::value,
            "libtnbc.so: with TNBC_ADAPT=on or measure and TNBC_LEARN on, the warm-up of a key "
            "ends after this many calls (at least 3) where most ranks' reads of the calls it "
            "observed leave room to overlap (the predicted overlap of a rank's own observations, "
            "as `tnbc-order plan` predicts it from a trace, at least a quarter of the exchange): "
            "the ranks vote once, at the end of that call, on the calls before it, and the early "
            "probe follows at once where every rank's TNBC_EXPLORE budget affords it (else the "
            "warm-up goes on to its end, where the budgets are asked again).  Elsewhere the "
            "warm-up runs its TNBC_ADAPT_WARMUP calls.  0 (or TNBC_ADAPT_WARMUP or more): "
            "always the whole warm-up.",
            kInt<&Config::adapt_warmup_room, 0, 1000000>},
    Setting{"TNBC_ADAPT_WIDE", "int", "10", Agree::value,
            "libtnbc.so: with TNBC_ADAPT=on or measure, a decision whose chosen path saves at "
            "least this percentage of the other path's cost counts as two confirmations: the "
            "first run before the next probe is 64 calls instead of 32, a confirmation "
            "quadruples the run instead of doubling it, the first comparison of per-node "
            "turns takes one round of 4 calls instead of two, and a wide first decision of the "
            "turns lets the first run keep them uncompared (docs/replay.md, \"Deciding per "
            "call\").  0..99; 0: no decision counts twice (for experiments and comparisons).",
            kInt<&Config::adapt_wide, 0, 99>},
    Setting{"TNBC_EXPLORE", "enum", "1", Agree::value,
            "libtnbc.so: with TNBC_ADAPT=on or measure, the share of the time the program has "
            "run so far, in percent, that trying something other than MPI's default blocking "
            "call may cost each rank (docs/replay.md, \"Deciding per call\"): a probe of the "
            "early path begins only where every rank's budget affords what it is predicted to "
            "cost (the key's last probe, else the rank's last of any key, else a whole blocking "
            "interval per call, and then at least what the key's samples measured the engine's "
            "exchange to take beyond MPI's call) and no other probe is under way on the rank, and "
            "else waits for as many calls again; early probes, the engine's sample and check "
            "calls and trials of MPI's algorithms are charged what they cost beyond the calls "
            "they replaced (TNBC_STATS: `explore`; the summary line).  The room point "
            "(TNBC_ADAPT_WARMUP_ROOM), in a job across nodes the engine's samples with their "
            "check, and in a job on one node the engine's check (docs/algorithms.md; refused, "
            "they are asked for again after twice the key's blocking calls) ask too; not "
            "asked where a plan says how to return.  0..100 (0: "
            "early only where a plan says so); off: no bound, the probes at their calls (experiments, "
            "tests).",
            kExplore},
    Setting{"TNBC_BLOCKING", "enum", "auto", Agree::value,
            "libtnbc.so: with TNBC_ADAPT on or measure, what runs the blocking calls of a "
            "(communicator, operation, call size).  engine: the library's own "
            "exchange, completed before the call returns (received in place: no guard, no "
            "mirror; the caller sleeps while the progress thread moves the data, where MPI's "
            "blocking call polls, which leaves CPU to the other ranks of a full node); mpi: "
            "MPI's blocking call, with MPI's algorithm chosen per key (TNBC_ALGORITHMS); auto: "
            "the engine's exchange is one more candidate of that choice, judged by time and the "
            "CPU it takes from the node (docs/algorithms.md; needs TNBC_ALGORITHMS=1).",
            kBlocking},
    Setting{"TNBC_ALGORITHMS", "bool", "1", Agree::value,
            "libtnbc.so: blocking calls run the fastest of MPI's own algorithms for each "
            "(communicator, operation, call size), measured while the program runs: MPICH's "
            "default and the candidates of docs/algorithms.md, tried in "
            "turn among the key's blocking calls and chosen by every rank alike, then selected "
            "per call through MPI_T.  Needs TNBC_ADAPT on or measure.  Under an MPI without "
            "these control variables (Open MPI), or where the user set "
            "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM or MPIR_CVAR_BCAST_INTRA_ALGORITHM, MPI's own "
            "choice runs.  0: always MPI's own choice.",
            kBool<&Config::algorithms>},
    Setting{"TNBC_ALGORITHMS_AFTER", "int", "auto", Agree::value,
            "libtnbc.so: with TNBC_ALGORITHMS=1, the blocking calls of a key that run its first "
            "choice of MPI's algorithm (docs/algorithms.md) before the candidates are first tried.  "
            "auto: each round of the trial waits until the key's blocking calls so far are 33 "
            "times what the rounds up to it cost (about 3 calls per candidate and round: with 4 "
            "candidates at calls 400, 800, 1200, ...), so that a program never pays more than 3% "
            "for trying algorithms that lose.  1..1000000: the first round after that many calls, "
            "the next 30, 120, 480, ... calls apart (tests, experiments).",
            kAutoInt<&Config::algorithms_after, 0, 1, 1000000>},
    Setting{"TNBC_LEARN", "bool", "1", Agree::value,
            "libtnbc.so: learn each call site's first-touch order while the program runs and "
            "use it as the per-message priorities (and, measured, the per-node turns) of its "
            "early calls, where no plan entry gives one (docs/replay.md, \"Learning the "
            "order\").  Needs TNBC_ADAPT on or measure: the order is observed in some of the "
            "blocking calls of the warm-up and the probes (under TNBC_ADAPT=on not within one "
            "node, whose calls are all blocking).  0 turns it off (experiments, comparisons).",
            kBool<&Config::learn>},
    Setting{"TNBC_LEARN_PER_NODE", "bool", "1", Agree::value,
            "libtnbc.so: with TNBC_LEARN=1, a communicator that spans nodes also decides per-node "
            "priority from measurements: its early Alltoall calls take turns on each node in the "
            "learned order, or not, as measured cheaper (docs/replay.md, \"Learning the "
            "order\").  0 keeps learned calls to per-message priorities.",
            kBool<&Config::learn_per_node>},
    Setting{"TNBC_PLAN_OUT", "path", "", Agree::no,
            "libtnbc.so: at MPI_Finalize, rank 0 writes the orders learned so far (TNBC_LEARN) "
            "to this file in the plan format (`tnbc-order` prints it, TNBC_PLAN reads it "
            "back).  May differ between ranks: only rank 0's value is used.",
            kText<&Config::plan_out>},
    Setting{"TNBC_PROGRESS_SLEEP_US", "int", "20", Agree::no,
            "libtnbc.so: the progress thread's first nap after a round that moved nothing "
            "(microseconds, 0..10000); each further idle round doubles it up to "
            "TNBC_PROGRESS_MAX_SLEEP_US, and any progress or any thread waiting for the engine "
            "brings it back here.  May differ between ranks: it changes when this rank's progress "
            "thread looks again, not what it sends.",
            kInt<&Config::progress_sleep_us, 0, 10000>},
    Setting{"TNBC_PROGRESS_MAX_SLEEP_US", "int", "1000", Agree::no,
            "libtnbc.so: the progress thread's longest nap while a collective is in flight and "
            "nothing moves, or a sum of the per-call decision it took up is pending (microseconds, "
            "0..100000); lower reacts faster, higher leaves more "
            "CPU to the application.  A value below TNBC_PROGRESS_SLEEP_US counts as equal to it.  "
            "May differ between ranks, as TNBC_PROGRESS_SLEEP_US.",
            kInt<&Config::progress_max_sleep_us, 0, 100000>},
    Setting{"TNBC_PUBLISH", "enum", "auto", Agree::no,
            "libtnbc.so: how the pages a call returned early from are put in place as they "
            "complete (docs/publishing.md).  move: the user's own pages are moved "
            "out while the call is in flight and back when complete (userfaultfd, Linux 6.8 "
            "and later: nothing copied, no page protected, a thread touching one sleeps in the "
            "kernel); write: the pages are protected and the received bytes written into them "
            "(/proc/self/mem); mremap: protected, and the received pages moved over them.  auto: "
            "the first of these that works here.  A way that does not work here, or a buffer "
            "whose pages the kernel will not move (a file's private pages, pages shared with a "
            "fork()ed child), takes the next "
            "way.  May differ between ranks: it changes only how a rank fills its own pages.",
            kPublish},
    Setting{"TNBC_CHUNK_BYTES", "size", "auto", Agree::value,
            "libtnbc.so: the engine's MPI_Alltoall(v) sends each block body in chunks of this "
            "size, published page by page as they arrive, so that code reading a block front "
            "to back starts before the whole block is in (0 = whole blocks; at most 254 chunks "
            "per block).  auto: 64K in a job that spans nodes, 1M in a job on one node, where "
            "each chunk costs the progress thread a round of its own (docs/replay.md).",
            kChunkBytes},
    Setting{"TNBC_MAX_MEMORY", "size", "auto", Agree::no,
            "libtnbc.so: the most memory the engine may map for send copies and receive mirrors "
            "(each early return keeps a copy of its send side and a mirror of its receive pages "
            "until it completes; up to 6 buffers of finished calls are kept for reuse while "
            "calls keep coming, and unmapped first).  A call that would exceed it first waits "
            "for those in flight; a call "
            "that alone exceeds it receives in place and returns when done (fallback reason "
            "memory).  auto: a quarter of this rank's share of the node's memory, or of the "
            "address-space limit (ulimit -v) if that is smaller.  May differ between ranks: "
            "a call that does not return early still exchanges the same messages.",
            kAutoSize<&Config::max_memory>},
    Setting{"TNBC_CHUNK_WINDOW", "int", "2", Agree::value,
            "libtnbc.so: under per-node priority, the inter-node body chunks a replayed "
            "MPI_Alltoall(v) keeps in flight, sent strictly in priority order as synchronous "
            "sends (a chunk is in flight until its receiver has matched it), so that a rank's "
            "turn on its node ends when its data has reached the other node; raised to one "
            "chunk per peer on another node where a rank has more such peers (docs/measurements/scale.md, "
            "\"The send window at scale\"); 0 = all at once, as standard sends.  Other body "
            "chunks always go at once as standard sends.  A plan entry's `window` replaces it "
            "for the calls it shapes (docs/plan-format.md), and so does the window learned with "
            "per-node turns where most ranks read the data right after the call (8; "
            "docs/measurements/scale.md).",
            kInt<&Config::chunk_window, 0, 254>},
    Setting{"TNBC_BARRIER_ALGO", "enum", "auto", Agree::value,
            "MPI_Barrier of libtnbc.so: mpich (MPICH's own), auto (central_counter on nodes "
            "with up to 8 ranks, mcs above; docs/measurements/barrier.md gives the "
            "measurements) or a shared-memory algorithm: central_counter, flat_tree, "
            "gather_release, combining_tree, combining_tree_atomic, mcs, tournament, "
            "dissemination. libtnbc_trace.so always uses MPICH's.",
            kBarrierAlgo},
    Setting{"TNBC_BARRIER_ROOT", "enum", "auto", Agree::value,
            "Root of the shared-memory barrier on each node (it places the global flags and "
            "roots the trees): auto (MinNumaDist: the rank whose NUMA node is closest in "
            "total to all ranks' nodes) or a local rank; on a node with fewer ranks, auto.",
            kAutoInt<&Config::barrier_root, kBarrierRootAuto, 0, barrier::kMaxLocalSize - 1, kALocalRank>},
    Setting{"TNBC_NUMA_TOPOLOGY", "path", "", Agree::content,
            "File with a NUMA distance matrix and the NUMA node of each rank of "
            "MPI_COMM_WORLD (format in docs/barrier.md); replaces libnuma for MinNumaDist.  Every "
            "rank must find the same bytes (the paths may differ).",
            kText<&Config::numa_topology>},
    Setting{"TNBC_BARRIER_SPLIT", "int", "0", Agree::value,
            "For testing the multi-node barrier on one host: every N consecutive ranks of a "
            "node act as a node of their own (own segment, leader in the leaders' barrier). "
            "0 = off.",
            kInt<&Config::barrier_split, 0, barrier::kMaxLocalSize>},
    Setting{"TNBC_WATCHDOG", "int", "30", Agree::no,
            "libtnbc.so: a collective the engine runs (returned early, or run to completion) "
            "none of whose messages completed for this many seconds is reported once on stderr "
            "by each rank that waits: the bytes still to receive and send, from and to which "
            "ranks (a stopped rank, or one that never entered the call, is named there).  So is "
            "a shared-memory MPI_Barrier that has waited this long: the ranks of the node not yet "
            "in it, or that it waits for another node; and, by the thread that waits for it, a "
            "progress thread held this long in one round (blocked in an MPI call or a page "
            "fault).  0 = never.",
            kInt<&Config::watchdog, 0, 86400>},
    Setting{"TNBC_BARRIER_AFTER", "int", "auto", Agree::value,
            "libtnbc.so: when a communicator's shared-memory barrier is built (a node "
            "communicator, a segment and a few collectives: about 10 ms per communicator on 2 "
            "emulated nodes); the calls before it run MPICH's barrier.  auto: once the "
            "communicator's MPICH barriers have cost as much as the longest build any of its ranks "
            "measured (each one's latency, agreed by the ranks in the barrier itself), and at the "
            "latest at its 10th call, so that a program with few barriers, or a communicator made, "
            "used and freed, pays nothing for it (docs/barrier.md).  0..1000000: built at the "
            "communicator's call N + 1 (0: at its first).",
            kAutoInt<&Config::barrier_after, -1, 0, 1000000>},
};

}  // namespace

std::span<const Setting> settings() { return kSettings; }

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::quiet: return "quiet";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "info";
}

std::string_view to_string(Agree agree) {
  switch (agree) {
    case Agree::no: return "no";
    case Agree::value: return "yes";
    case Agree::content: return "file contents";
  }
  return "no";
}

std::uint64_t agreement_digest(const Setting& s, const Config& cfg) {
  if (s.agree == Agree::no) return 0;
  const std::string value = s.field.show(cfg);
  if (s.agree == Agree::value) return util::fnv(util::kFnvOffset, value.data(), value.size());
  // Agree::content: the file's bytes, read as they come (never held whole).  Anything but a
  // readable regular file is no file, as the readers of these settings treat it.
  if (value.empty()) return 0;
  util::InputFile file(value, UINT64_MAX);
  std::uint64_t h = util::kFnvOffset;
  for (std::string chunk; file.read(1 << 16, chunk) && !chunk.empty(); chunk.clear())
    h = util::fnv(h, chunk.data(), chunk.size());
  return file.error().empty() ? h : 0;
}

std::optional<bool> parse_bool(std::string_view t, std::string* error) {
  for (auto yes : {"1", "yes", "true", "on"})
    if (t == yes) return true;
  for (auto no : {"0", "no", "false", "off"})
    if (t == no) return false;
  *error = "expected 1/0, yes/no, true/false or on/off";
  return std::nullopt;
}

std::optional<std::int64_t> parse_int(std::string_view t, std::int64_t min, std::int64_t max,
                                      std::string* error) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) {
    *error = "expected an integer";
    return std::nullopt;
  }
  if (v < min || v > max) {
    *error = fmt::format("expected an integer from {} to {}", min, max);
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> parse_size(std::string_view t, std::string* error) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  std::string_view rest(p, static_cast<std::size_t>(t.data() + t.size() - p));
  std::uint64_t mult = 1;
  if (rest == "K" || rest == "k") mult = 1ull << 10;
  else if (rest == "M" || rest == "m") mult = 1ull << 20;
  else if (rest == "G" || rest == "g") mult = 1ull << 30;
  else if (!rest.empty()) ec = std::errc::invalid_argument;
  if (ec != std::errc() || p == t.data() || v > UINT64_MAX / mult) {
    *error = "expected a byte count, optionally with a K, M or G suffix (e.g. 64K)";
    return std::nullopt;
  }
  return v * mult;
}

LoadResult load(const char* const* envp) {
  LoadResult r;
  for (; envp && *envp; ++envp) {
    std::string_view entry(*envp);
    if (entry.substr(0, 5) != "TNBC_") continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    auto name = entry.substr(0, eq);
    auto value = entry.substr(eq + 1);
    const Setting* found = nullptr;
    for (const auto& s : kSettings)
      if (s.name == name) found = &s;
    if (!found) {
      r.messages.push_back(fmt::format(
          "unknown setting {} ignored (`tnbc-order config` lists the settings)", name));
      continue;
    }
    if (value.empty()) continue;
    if (auto err = found->field.apply(r.config, value)) {
      r.messages.push_back(fmt::format("{}={}: {}; using the default ({})", name, value, *err,
                                       found->default_value.empty() ? "unset"
                                                                    : found->default_value));
    }
  }
  return r;
}

std::string render_table(bool markdown) {
  std::string out;
  if (markdown) {
    out += "| name | type | default | same on all ranks | description |\n|---|---|---|---|---|\n";
    for (const auto& s : kSettings)
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", s.name, s.type,
                         s.default_value.empty() ? "(unset)" : fmt::format("`{}`", s.default_value),
                         to_string(s.agree), s.description);
    return out;
  }
  for (const auto& s : kSettings) {
    out += fmt::format("{:<24} {:<7} default: {}; same on all ranks: {}\n", s.name, s.type,
                       s.default_value.empty() ? "(unset)" : s.default_value, to_string(s.agree));
    // Wrap the description at ~76 columns, indented.
    std::string_view d = s.description;
    while (!d.empty()) {
      std::size_t cut = d.size() <= 72 ? d.size() : d.rfind(' ', 72);
      if (cut == std::string_view::npos || cut == 0) cut = std::min<std::size_t>(72, d.size());
      out += fmt::format("    {}\n", d.substr(0, cut));
      d.remove_prefix(cut);
      while (!d.empty() && d.front() == ' ') d.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace tnbc::config
