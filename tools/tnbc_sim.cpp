// tnbc-sim: predicts plain MPICH's and libtnbc.so's time for one MPI_Alltoall, MPI_Alltoallv or
// MPI_Bcast and the work after it, on a simulated cluster (SimGrid), from the step lists the
// replay engine builds.
//
// Exit codes: 0 ok, 1 the SVG could not be written, 2 bad usage, 3 the trace could not be used.
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "shim/config.hpp"
#include "sim/alltoall.hpp"
#include "sim/bcast.hpp"
#include "sim/fluid.hpp"
#include "sim/platform.hpp"
#include "sim/reader.hpp"
#include "sim/sweep_plot.hpp"
#include "sim/traced.hpp"
#include "util/json.hpp"

namespace {

using namespace tnbc::sim;

constexpr std::string_view kUsage =
    "usage: tnbc-sim [--nodes N] [--ppn P] [--link RATE] [--latency T] [--mem-bw RATE]\n"
    "                [--placement block|cyclic] [--fat-tree LEAF:SPINES]\n"
    "                [--op alltoall|alltoallv|bcast] [--bytes B] [--chunk-bytes B]\n"
    "                [--root R] [--segments M] [--chains K|binomial] [--chain-sweep K1,K2,...]\n"
    "                [--chunk-window W] [--connection-depth D] [--setup-us T] [--copy-bw RATE]\n"
    "                [--progress-cpu-us T]\n"
    "                [--scenario a|b|c|d|e|none] [--work-ms W] [--parts N]\n"
    "                [--trace DIR [--site KEY]] [--cfg KEY:VALUE]\n"
    "                [--model simgrid|fluid|pairs] [--plan natural|none] [--per-node on|off]\n"
    "                [--sweep RANKS,RANKS,...] [--svg FILE] [--json]\n"
    "\n"
    "Predict the time of one MPI_Alltoall, MPI_Alltoallv or MPI_Bcast and the work after it\n"
    "(bench/overlap.c's scenarios, or what a trace recorded), under plain MPICH and under\n"
    "libtnbc.so without and with a plan, on a simulated cluster: N nodes on one switch (or a\n"
    "fat tree), each with a full-duplex link, P ranks per node.  The simulation (SimGrid's flow\n"
    "model) runs, one actor per rank, the step lists the replay engine builds; docs/scale.md\n"
    "says what it models and what not.\n"
    "\n"
    "platform:\n"
    "  --nodes N             nodes (default 2)\n"
    "  --ppn P               ranks per node (default 2)\n"
    "  --link RATE           each direction of a node's link, tc syntax (default 200mbit)\n"
    "  --latency T           a node's link to the switch, one way (default 25us)\n"
    "  --mem-bw RATE         copies within a node (default 8gbps: 8 GB/s)\n"
    "  --placement block|cyclic\n"
    "                        ranks 0..P-1 on node 0 (block, default) or rank r on node r mod N\n"
    "  --fat-tree LEAF:SPINES\n"
    "                        a two-level fat tree instead of one switch (SimGrid's FatTreeZone):\n"
    "                        leaf switches of LEAF nodes, each linked to each of SPINES spine\n"
    "                        switches at the nodes' rate and latency; fewer spines than LEAF taper\n"
    "                        it (LEAF / SPINES to one); the node count a multiple of LEAF\n"
    "  --cfg KEY:VALUE       a SimGrid setting, e.g. network/model:CM02 (repeatable; the fluid\n"
    "                        models take network/model, crosstraffic, latency- and bandwidth-factor,\n"
    "                        weight-S)\n"
    "  --model M             how messages share the links (docs/scale.md, \"Models\"):\n"
    "                        simgrid  one SimGrid flow per message (slow: 17-26 s of CPU at\n"
    "                                 128 ranks with 64 KiB blocks);\n"
    "                        fluid    SimGrid's sharing rule, computed per pair of nodes: the same\n"
    "                                 answers, re-solved at every message (default up to 512 ranks);\n"
    "                        pairs    every busy pair of nodes weighs one in the sharing (times\n"
    "                                 its route's SimGrid penalty), its messages share its rate\n"
    "                                 (default above 512 ranks)\n"
    "\n"
    "call:\n"
    "  --op alltoall         the collective: MPI_Alltoall (default), or\n"
    "     alltoallv          MPI_Alltoallv with bench/is's key spread: every rank sends rank d\n"
    "                        the share of its keys that NPB IS's distribution gives d (middle\n"
    "                        ranks get most); plain MPICH runs its scattered algorithm\n"
    "     bcast              MPI_Bcast of --bytes from --root, the data read at once (--model\n"
    "                        simgrid, one platform per run)\n"
    "  --bytes B             bytes per rank and destination (default 1048576); alltoallv: on\n"
    "                        average; bcast: the buffer\n"
    "  --chunk-bytes B       the engine's body chunks (default: TNBC_CHUNK_BYTES' default)\n"
    "  --chunk-window W      TNBC_CHUNK_WINDOW: under per-node turns, a rank's inter-node body\n"
    "                        chunks in flight at once, at least one per peer on another node,\n"
    "                        as the engine raises it (default: TNBC_CHUNK_WINDOW's default)\n"
    "  --connection-depth D  the engine's messages to one peer in flight at once (default 2:\n"
    "                        the next one's handshake overlaps the transfer before it)\n"
    "  --setup-us T          the engine's time inside each call before it copies the send side\n"
    "                        (TNBC_STATS' setup_us per early call; default 0)\n"
    "  --copy-bw RATE        the engine's send copy rate (default: --mem-bw)\n"
    "  --progress-cpu-us T   the progress thread's CPU per call, spread over the rank's sends,\n"
    "                        each posted its share later, one after the other (default 0);\n"
    "                        `tnbc-stats --sim PREFIX` prints these three from a real run\n"
    "\n"
    "bcast:\n"
    "  --root R              the root (default 0)\n"
    "  --segments M          the engine's segments (default: its LogGP choice, as replay.cpp's)\n"
    "  --chains K|binomial   the engine's tree: K chains from the root, or binomial (default:\n"
    "                        its LogGP choice)\n"
    "  --chain-sweep K1,...  also the engine with one segment over each chain count, beside seed\n"
    "                        003's t(k) = ((P-1)/k + 1)a + (k-1)b and its k* (JSON: chain_sweep,\n"
    "                        best_chains_sim, best_chains_seed, k_star)\n"
    "\n"
    "application (bench/overlap.c):\n"
    "  --scenario S          a..e or none (default none: the data read at once)\n"
    "  --work-ms W           the Tcomm the scenario's work is a fraction of (default: the\n"
    "                        predicted plain MPICH exchange)\n"
    "  --parts N             each block read in N parts (default 1)\n"
    "  --plan natural|none   the plan simulated for 'tnbc, plan': natural (default) is the\n"
    "                        order the scenario reads, 0..p-1, as `tnbc-order plan` derives it\n"
    "                        from a trace of bench/overlap (with --trace: the order it derives\n"
    "                        from that trace), as per-message priorities; none: no plan\n"
    "  --trace DIR           the application as trace mode recorded it (libtnbc_trace.so's\n"
    "                        TNBC_TRACE_DIR): each rank's blocks in the order it first touched\n"
    "                        them, the work before each touch and after the last, from the\n"
    "                        site's MPI_Alltoall or MPI_Alltoallv; on other rank counts each\n"
    "                        traced rank and block stands for a run of neighbours, the work per\n"
    "                        block as traced (docs/scale.md, \"Traces\"); the op and --bytes\n"
    "                        default to the site's, the platform to the traced job's nodes;\n"
    "                        not with --scenario, --work-ms or --parts\n"
    "  --site KEY            the call site of --trace (a plan key, as `tnbc-order show` prints;\n"
    "                        default: the Alltoall(v) site with the most traced calls)\n"
    "  --per-node on|off     the plan's per-node turns, in its order, with TNBC_CHUNK_WINDOW's\n"
    "                        window of synchronous sends (default on; a turn passes as a message\n"
    "                        of no bytes within the node)\n"
    "\n"
    "sweep:\n"
    "  --sweep R1,R2,...     one prediction per rank count, each a multiple of --ppn (nodes =\n"
    "                        ranks / ppn; not with --nodes); the model by each count unless\n"
    "                        --model; a table of the gains over plain MPICH\n"
    "  --svg FILE            with --sweep: also write the gains against the rank count as SVG\n"
    "\n"
    "output:\n"
    "  --json                one JSON object: plain_ms, tnbc_ms, tnbc_plan_ms (null with --plan\n"
    "                        none), link_bound_ms and what they came from; with --sweep one\n"
    "                        object {\"sweep\": [...]} holding one such object per rank count\n"
    "  -h, --help            this text\n"
    "\n"
    "exit codes: 0 ok, 1 the SVG could not be written, 2 bad usage, 3 the trace could not be used\n";

int usage_error(std::string_view msg) {
  std::fprintf(stderr, "tnbc-sim: %.*s\n\n%.*s", static_cast<int>(msg.size()), msg.data(),
               static_cast<int>(kUsage.size()), kUsage.data());
  return 2;
}

template <typename T>
T parse_number(std::string_view opt, std::string_view text) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(fmt::format("{}: not a number: '{}'", opt, text));
  return v;
}

struct Args {
  PlatformSpec spec;
  std::size_t bytes = 1 << 20;
  std::size_t chunk_bytes = tnbc::config::Config{}.chunk_bytes;
  Scenario scenario = *find_scenario("none");
  std::optional<double> work_ms;
  int parts = 1;
  int depth = SimOptions{}.connection_depth;
  double setup_s = 0;   // --setup-us
  double copy_Bps = 0;  // --copy-bw (0: --mem-bw)
  double progress_cpu_s = 0;  // --progress-cpu-us
  std::size_t window = static_cast<std::size_t>(tnbc::config::Config{}.chunk_window);
  std::vector<std::string> cfg;
  std::string model;  // empty: by the rank count
  bool json = false;
  bool plan = true;  // --plan natural
  std::optional<bool> per_node;  // --per-node (default: on with the fluid models)
  std::vector<int> sweep;        // --sweep: rank counts
  std::string svg;               // --svg
  bool nodes_given = false;
  bool alltoallv = false;  // --op alltoallv
  bool bcast = false;      // --op bcast
  int root = 0;                    // --root
  std::optional<int> segments;     // --segments (default: the engine's choice)
  std::optional<int> chains;       // --chains (0: binomial; default: the engine's choice)
  std::vector<int> chain_sweep;    // --chain-sweep
  bool scenario_given = false;
  bool fat_tree_given = false;
  bool ppn_given = false, placement_given = false, bytes_given = false, op_given = false;
  std::string trace;  // --trace DIR
  std::string site;   // --site KEY
  std::optional<TracedSite> traced;  // loaded from --trace
};

/// "64,256,1024": rank counts, each at least 1.
std::vector<int> parse_ranks(std::string_view opt, std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    out.push_back(parse_number<int>(opt, item));
    if (out.back() < 1) throw std::invalid_argument(fmt::format("{}: a rank count below 1: '{}'", opt, item));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: no rank counts", opt));
  return out;
}

/// "16:8": nodes per leaf switch and spine switches, each at least 1.
void parse_fat_tree(std::string_view text, PlatformSpec& spec) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) throw std::invalid_argument(fmt::format("not LEAF:SPINES: '{}'", text));
  spec.leaf_nodes = parse_number<int>("LEAF", text.substr(0, colon));
  spec.spines = parse_number<int>("SPINES", text.substr(colon + 1));
  if (spec.leaf_nodes < 1 || spec.spines < 1) throw std::invalid_argument(fmt::format("LEAF and SPINES: at least 1, not '{}'", text));
}

// Above this many ranks --model defaults to pairs (docs/scale.md, "Timings").
constexpr int kFluidMaxRanks = 512;

// Parses argv into `a`; returns an error message, or nullopt.  --help prints and exits.
std::optional<std::string> parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      std::fwrite(kUsage.data(), 1, kUsage.size(), stdout);
      std::exit(0);
    }
    if (opt == "--json") {
      a.json = true;
      continue;
    }
    if (i + 1 >= argc) return fmt::format("{}: unknown option, or its value is missing", opt);
    const std::string_view v = argv[++i];
    try {
      if (opt == "--nodes") a.spec.nodes = parse_number<int>(opt, v), a.nodes_given = true;
      else if (opt == "--ppn") a.spec.ppn = parse_number<int>(opt, v), a.ppn_given = true;
      else if (opt == "--link") a.spec.link_Bps = parse_rate(v);
      else if (opt == "--latency") a.spec.latency_s = parse_time(v);
      else if (opt == "--mem-bw") a.spec.mem_Bps = parse_rate(v);
      else if (opt == "--placement" && (v == "block" || v == "cyclic"))
        a.spec.cyclic = v == "cyclic", a.placement_given = true;
      else if (opt == "--fat-tree") parse_fat_tree(v, a.spec), a.fat_tree_given = true;
      else if (opt == "--op" && (v == "alltoall" || v == "alltoallv" || v == "bcast"))
        a.alltoallv = v == "alltoallv", a.bcast = v == "bcast", a.op_given = true;
      else if (opt == "--root") a.root = parse_number<int>(opt, v);
      else if (opt == "--segments") a.segments = parse_number<int>(opt, v);
      else if (opt == "--chains") a.chains = v == "binomial" ? 0 : parse_number<int>(opt, v);
      else if (opt == "--chain-sweep") a.chain_sweep = parse_ranks(opt, v);
      else if (opt == "--bytes") a.bytes = parse_number<std::size_t>(opt, v), a.bytes_given = true;
      else if (opt == "--chunk-bytes") a.chunk_bytes = parse_number<std::size_t>(opt, v);
      else if (opt == "--connection-depth") a.depth = parse_number<int>(opt, v);
      else if (opt == "--setup-us") a.setup_s = parse_number<double>(opt, v) * 1e-6;
      else if (opt == "--copy-bw") {
        a.copy_Bps = parse_rate(v);
        if (!(a.copy_Bps > 0)) return "--copy-bw: a rate above 0";
      }
      else if (opt == "--progress-cpu-us") a.progress_cpu_s = parse_number<double>(opt, v) * 1e-6;
      else if (opt == "--chunk-window") a.window = parse_number<std::size_t>(opt, v);
      else if (opt == "--scenario" && find_scenario(v)) a.scenario = *find_scenario(v), a.scenario_given = v != "none";
      else if (opt == "--work-ms") a.work_ms = parse_number<double>(opt, v);
      else if (opt == "--parts") a.parts = parse_number<int>(opt, v);
      else if (opt == "--cfg") a.cfg.emplace_back(v);
      else if (opt == "--trace") a.trace = v;
      else if (opt == "--site") a.site = v;
      else if (opt == "--model" && (v == "simgrid" || v == "fluid" || v == "pairs")) a.model = v;
      else if (opt == "--plan" && (v == "natural" || v == "none")) a.plan = v == "natural";
      else if (opt == "--per-node" && (v == "on" || v == "off")) a.per_node = v == "on";
      else if (opt == "--sweep") a.sweep = parse_ranks(opt, v);
      else if (opt == "--svg") a.svg = v;
      else return fmt::format("{} {}: unknown option or value", opt, v);
    } catch (const std::invalid_argument& e) {
      return fmt::format("{}: {}", opt, e.what());
    }
  }
  if (a.spec.nodes < 1 || a.spec.ppn < 1) return "--nodes and --ppn: at least 1";
  if (a.bytes == 0) return "--bytes: at least 1";
  if (a.parts < 1) return "--parts: at least 1";
  if (a.depth < 1) return "--connection-depth: at least 1";
  if (a.window < 1) return "--chunk-window: at least 1";
  if (!(a.setup_s >= 0) || a.setup_s > 1e3) return "--setup-us: 0 to 1e9";

  if (!(a.progress_cpu_s >= 0) || a.progress_cpu_s > 1e3) return "--progress-cpu-us: 0 to 1e9";
  if (a.work_ms && *a.work_ms < 0) return "--work-ms: not negative";
  if (!a.svg.empty() && a.sweep.empty()) return "--svg: needs --sweep (it plots the gain against the rank count)";
  if (!a.site.empty() && a.trace.empty()) return "--site: needs --trace";
  if (!a.trace.empty()) {
    if (a.bcast) return "--trace: takes MPI_Alltoall and MPI_Alltoallv sites (not --op bcast)";
    if (a.scenario_given || a.work_ms || a.parts != 1)
      return "--trace: the work comes from the trace (no --scenario, --work-ms or --parts)";
  }
  if (a.bcast) {
    // One SimGrid engine per process, SimGrid's own flows, the data read at once.
    if (!a.sweep.empty()) return "--op bcast: one platform per run (no --sweep)";
    if (a.model == "fluid" || a.model == "pairs") return "--op bcast: simulated by --model simgrid only";
    if (a.scenario_given || a.work_ms || a.parts != 1) return "--op bcast: the data is read at once (no --scenario, --work-ms or --parts)";
    if (!a.plan || a.per_node || a.chunk_bytes != tnbc::config::Config{}.chunk_bytes ||
        a.window != static_cast<std::size_t>(tnbc::config::Config{}.chunk_window))
      return "--op bcast: --plan, --per-node, --chunk-bytes and --chunk-window are Alltoall(v) options (the shape is --segments and --chains)";
    if (a.progress_cpu_s > 0) return "--progress-cpu-us: the Alltoall(v) predictions only (not --op bcast)";
    if (a.root < 0 || a.root >= a.spec.ranks()) return fmt::format("--root: a rank of the {} simulated", a.spec.ranks());
    if (a.segments && (*a.segments < 1 || *a.segments > 253)) return "--segments: 1 to 253";
    if (a.chains && *a.chains < 0) return "--chains: a chain count, or binomial";
  } else if (a.segments || a.chains || !a.chain_sweep.empty() || a.root != 0) {
    return "--root, --segments, --chains and --chain-sweep: with --op bcast only";
  }
  if (!a.sweep.empty() && a.nodes_given) return "--sweep: sets the node count of each prediction; leave out --nodes";
  if (a.spec.fat_tree()) {
    if (a.bcast) return "--fat-tree: the Alltoall(v) predictions only (not --op bcast)";
    if (a.sweep.empty() && a.spec.nodes % a.spec.leaf_nodes != 0)
      return fmt::format("--fat-tree: {} nodes do not fill leaves of {}", a.spec.nodes, a.spec.leaf_nodes);
    for (int ranks : a.sweep)
      if (ranks % (a.spec.ppn * a.spec.leaf_nodes) != 0)
        return fmt::format("--sweep: {} ranks do not fill leaves of {} nodes x {} ranks", ranks, a.spec.leaf_nodes, a.spec.ppn);
  }
  for (int ranks : a.sweep)
    if (ranks % a.spec.ppn != 0)
      return fmt::format("--sweep: {} ranks is not a multiple of --ppn {}", ranks, a.spec.ppn);
  return std::nullopt;
}

// The slowest rank decides, as in bench/overlap.c.
double slowest(const std::vector<RankRun>& runs, double RankRun::*field) {
  double t = 0;
  for (const RankRun& r : runs) t = std::max(t, r.*field - r.entry);
  return t;
}

/// One prediction, in seconds: what the table, the JSON object and the sweep show.
struct Prediction {
  PlatformSpec spec;
  std::string model;
  bool per_node = false;
  std::string plain_algorithm;
  Work work;
  double sizing = 0, tcomm = 0, plain = 0, tnbc = 0, tnbc_plan = 0, bound = 0;
  double tinit = 0, tnbc_exchange = 0, plan_init = 0, plan_exchange = 0;
  std::size_t block_min = 0, block_max = 0;  ///< the smallest and largest block (they differ in an Alltoallv)
};

/// The model of a platform: --model, else by its rank count (docs/scale.md, "Timings").
std::string model_for(const Args& a, const PlatformSpec& spec) {
  if (!a.model.empty()) return a.model;
  return spec.ranks() <= kFluidMaxRanks ? "fluid" : "pairs";
}

/// Predicts plain MPICH, tnbc without and with the plan and the link bound on `spec`.
/// Throws std::invalid_argument for a --cfg the fluid models do not take.
Prediction predict(const Args& a, const PlatformSpec& spec) {
  Prediction out;
  out.spec = spec;
  out.model = model_for(a, spec);
  out.per_node = a.per_node.value_or(true);
  const int p = spec.ranks();

  SimOptions opt;
  opt.block = a.bytes;
  if (a.alltoallv) opt.blocks = a.traced ? scaled_blocks(*a.traced, p, a.bytes_given ? a.bytes : 0) : is_like_blocks(p, a.bytes);
  opt.chunk_bytes = a.chunk_bytes;
  opt.connection_depth = a.depth;
  opt.cfg = a.cfg;
  opt.setup_s = a.setup_s;
  opt.copy_Bps = a.copy_Bps;
  opt.progress_cpu_s = a.progress_cpu_s;
  FluidOptions fluid;
  if (out.model != "simgrid") {
    fluid.apply_cfg(a.cfg);
    fluid.weights = out.model == "fluid" ? FluidOptions::Weights::per_message : FluidOptions::Weights::per_pair;
  }

  // The plain exchange sizes the work (unless --work-ms): simulate it first.
  SimOptions plain_opt = opt;
  plain_opt.tnbc = false;
  // The plan: blocks read 0..p-1 (bench/overlap.c reads them in that order), or the trace's.
  std::vector<int> plan_order(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) plan_order[static_cast<std::size_t>(r)] = r;
  if (a.traced) plan_order = scaled_order(*a.traced, p);
  std::vector<TracedReads> reads;  // --trace: each rank's
  if (a.traced)
    for (int r = 0; r < p; ++r) reads.push_back(scaled_reads(*a.traced, r, p));
  opt.tnbc_plan = a.plan;
  opt.plan_order = plan_order;
  opt.plan_per_node = a.plan && out.per_node;
  opt.chunk_window = a.window;
  SimOptions tnbc_opt = opt;
  tnbc_opt.plain = false;
  tnbc_opt.tnbc_plan = false;
  SimOptions plan_opt = tnbc_opt;
  plan_opt.tnbc = false;
  plan_opt.tnbc_plan = a.plan;
  SimResult res;
  if (out.model == "simgrid") {
    res = simulate(spec, opt);  // SimGrid allows one engine per process: every call in one run
  } else {
    res = simulate_fluid(spec, plain_opt, fluid);
  }
  out.plain_algorithm = res.plain_algorithm;
  out.tcomm = slowest(res.plain, &RankRun::ret);
  out.sizing = a.work_ms ? *a.work_ms * 1e-3 : out.tcomm;
  out.work = Work{a.scenario.curc * out.sizing, a.scenario.crc * out.sizing, a.parts};
  if (a.traced) {  // shown as the mean work before the first read and after it
    out.work = Work{};
    for (const TracedReads& x : reads) {
      const double first = x.gap.empty() ? 0 : x.gap.front();
      out.work.curc += first / p;
      out.work.crc += (x.work() - first) / p;
    }
  }
  const Work& work = out.work;
  // Rank r's reads: p blocks of opt.bytes_to(r) bytes, with TCRC in proportion to its bytes (as
  // bench/is ranks what it received); TCRC as given for the mean block.
  std::vector<std::size_t> block_of(static_cast<std::size_t>(p));
  std::vector<double> crc_of(static_cast<std::size_t>(p));
  std::size_t sum = 0;
  for (int r = 0; r < p; ++r) sum += block_of[static_cast<std::size_t>(r)] = opt.bytes_to(r);
  const double mean = static_cast<double>(sum) / p;  // exactly the block of an Alltoall
  for (int r = 0; r < p; ++r)  // (an Alltoallv in which nobody sends anything reads nothing)
    crc_of[static_cast<std::size_t>(r)] =
        mean > 0 ? work.crc * static_cast<double>(block_of[static_cast<std::size_t>(r)]) / mean : 0;
  auto work_of = [&](int r) { return Work{work.curc, crc_of[static_cast<std::size_t>(r)], work.parts}; };
  // Rank r's total from the call's return at `ret`, its buffer's bytes [lo, hi) readable at
  // ready(lo, hi): the scenario's reads or the trace's (block b at b * its block bytes).
  auto total_of = [&](int r, double ret, const std::function<double(std::size_t, std::size_t)>& ready) {
    if (!a.traced) return reader_total(ret, work_of(r), p, opt.bytes_to(r), ready);
    const std::size_t block = opt.bytes_to(r);
    return reader_total(ret, reads[static_cast<std::size_t>(r)], [&](int b) {
      return ready(static_cast<std::size_t>(b) * block, static_cast<std::size_t>(b + 1) * block);
    });
  };
  for (int r = 0; r < p; ++r) {
    const RankRun& run = res.plain[static_cast<std::size_t>(r)];
    out.plain = std::max(out.plain, total_of(r, run.ret - run.entry,
                                             [&](std::size_t, std::size_t) { return run.ret - run.entry; }));
  }
  auto engine_total = [&](int rank, const RankRun& r) {
    const std::vector<double> ready = page_ready(r, static_cast<std::size_t>(p) * opt.bytes_to(rank));
    auto when = [&](std::size_t lo, std::size_t hi) {
      double t = 0;
      for (std::size_t pg = (lo + kBufferPageOffset) / kPageBytes; pg * kPageBytes < hi + kBufferPageOffset; ++pg)
        t = std::max(t, ready[pg] - r.entry);
      return t;
    };
    return total_of(rank, r.ret - r.entry, when);
  };
  auto tnbc_total = [&](int rank, const RankRun& r) { out.tnbc = std::max(out.tnbc, engine_total(rank, r)); };
  auto plan_total = [&](int rank, const RankRun& r) {
    out.tnbc_plan = std::max(out.tnbc_plan, engine_total(rank, r));
  };
  if (out.model == "simgrid") {
    for (int r = 0; r < p; ++r) tnbc_total(r, res.tnbc[static_cast<std::size_t>(r)]);
    for (int r = 0; r < static_cast<int>(res.tnbc_plan.size()); ++r) plan_total(r, res.tnbc_plan[static_cast<std::size_t>(r)]);
  } else {
    res.tnbc = simulate_fluid(spec, tnbc_opt, fluid, tnbc_total).tnbc;
    if (a.plan) res.tnbc_plan = simulate_fluid(spec, plan_opt, fluid, {}, false, plan_total).tnbc_plan;
  }
  std::vector<int> nodes;
  for (int r = 0; r < p; ++r) nodes.push_back(node_of(spec, r));
  if (a.traced) {
    std::vector<Need> needs;
    std::vector<double> end_of;
    for (int r = 0; r < p; ++r) {
      const TracedReads& x = reads[static_cast<std::size_t>(r)];
      double need = 0;
      for (std::size_t k = 0; k < x.order.size(); ++k)
        needs.push_back({r, x.order[k], static_cast<double>(opt.bytes_to(r)), need += x.gap[k]});
      end_of.push_back(x.work());
    }
    out.bound = link_bound(nodes, spec.link_Bps, needs, end_of);
  } else {
    out.bound = link_bound(nodes, spec.link_Bps, block_of, crc_of, work, 0);
  }
  out.block_min = *std::min_element(block_of.begin(), block_of.end());
  out.block_max = *std::max_element(block_of.begin(), block_of.end());
  out.tinit = slowest(res.tnbc, &RankRun::ret);
  out.tnbc_exchange = slowest(res.tnbc, &RankRun::done);
  out.plan_init = slowest(res.tnbc_plan, &RankRun::ret);
  out.plan_exchange = slowest(res.tnbc_plan, &RankRun::done);
  return out;
}

double ms(double s) { return s * 1e3; }

/// The JSON object of one prediction (docs/scale.md names its fields).
std::string json_of(const Args& a, const Prediction& r) {
  const std::string plan_ms = a.plan ? fmt::format("{:.3f}", ms(r.tnbc_plan)) : "null";
  const std::string fat_tree =
      r.spec.fat_tree() ? fmt::format("{{\"leaf_nodes\": {}, \"spines\": {}}}", r.spec.leaf_nodes, r.spec.spines) : "null";
  const std::string trace =
      a.traced ? fmt::format("\"trace\": {}, \"site\": {}, \"trace_ranks\": {}, \"trace_tcomm_ms\": {:.3f}, ",
                             tnbc::util::json_string(a.traced->dir), tnbc::util::json_string(a.traced->key), a.traced->ranks, ms(a.traced->tcomm))
               : "\"trace\": null, ";
  return fmt::format(
      "{{\"nodes\": {}, \"ppn\": {}, \"ranks\": {}, \"placement\": \"{}\", \"fat_tree\": {}, \"link_bytes_per_s\": {}, \"latency_s\": {}, "
      "\"mem_bytes_per_s\": {}, \"model\": \"{}\", \"op\": \"{}\", \"bytes\": {}, \"bytes_min\": {}, \"bytes_max\": {}, \"chunk_bytes\": {}, \"chunk_window\": {}, \"connection_depth\": {}, "
      "\"scenario\": \"{}\", \"parts\": {}, \"work_sizing_ms\": {:.3f}, \"curc_ms\": {:.3f}, \"crc_ms\": {:.3f}, "
      "\"plain_algorithm\": \"{}\", \"plain_exchange_ms\": {:.3f}, \"plain_ms\": {:.3f}, "
      "\"tnbc_init_ms\": {:.3f}, \"tnbc_exchange_ms\": {:.3f}, \"tnbc_ms\": {:.3f}, \"tnbc_plan_ms\": {}, \"plan\": \"{}\", \"plan_per_node\": {}, "
      "\"setup_us\": {:.3f}, \"copy_bytes_per_s\": {}, \"progress_cpu_us\": {:.3f}, {}\"link_bound_ms\": {:.3f}}}",
      r.spec.nodes, r.spec.ppn, r.spec.ranks(), r.spec.cyclic ? "cyclic" : "block", fat_tree, r.spec.link_Bps, r.spec.latency_s,
      r.spec.mem_Bps, r.model, a.alltoallv ? "alltoallv" : "alltoall", a.bytes, r.block_min, r.block_max, a.chunk_bytes, a.window, a.depth, a.traced ? "trace" : a.scenario.name, a.parts, ms(r.sizing), ms(r.work.curc),
      ms(r.work.crc), r.plain_algorithm, ms(r.tcomm), ms(r.plain), ms(r.tinit), ms(r.tnbc_exchange), ms(r.tnbc),
      plan_ms, !a.plan ? "none" : a.traced ? "trace" : "natural", a.plan && r.per_node ? "true" : "false", a.setup_s * 1e6, a.copy_Bps > 0 ? a.copy_Bps : r.spec.mem_Bps, a.progress_cpu_s * 1e6, trace, ms(r.bound));
}

/// The first line of a table: the simulated cluster.
void print_platform(const PlatformSpec& spec) {
  fmt::print("{} nodes x {} ranks ({} placement), links {:.1f} MB/s each way, latency {:g} us, memory {:.1f} GB/s\n",
             spec.nodes, spec.ppn, spec.cyclic ? "cyclic" : "block", spec.link_Bps / 1e6, spec.latency_s * 1e6,
             spec.mem_Bps / 1e9);
  if (spec.fat_tree())
    fmt::print("fat tree: leaves of {} nodes, {} spine(s), {:g} to 1 taper; the link bound counts the nodes' links only\n",
               spec.leaf_nodes, spec.spines, static_cast<double>(spec.leaf_nodes) / spec.spines);
}

/// The call a prediction is of, in words; with `r`, an Alltoallv's smallest and largest block.
std::string call_text(const Args& a, const Prediction* r) {
  if (a.traced) {
    if (!a.alltoallv) return fmt::format("MPI_Alltoall of {} bytes per block", a.bytes);
    if (r == nullptr) return fmt::format("MPI_Alltoallv with the trace's counts, {} bytes per block on average", a.bytes);
    return fmt::format("MPI_Alltoallv with the trace's counts, {} bytes per block on average ({} to {} by receiver)",
                       a.bytes, r->block_min, r->block_max);
  }
  if (!a.alltoallv) return fmt::format("MPI_Alltoall of {} bytes per block", a.bytes);
  if (r == nullptr) return fmt::format("MPI_Alltoallv of bench/is's key spread, {} bytes per block on average", a.bytes);
  return fmt::format("MPI_Alltoallv of bench/is's key spread, {} bytes per block on average ({} to {} by receiver)",
                     a.bytes, r->block_min, r->block_max);
}

/// The trace a prediction's work came from, in words.
std::string trace_text(const Args& a, int ranks, const Prediction* r) {
  const TracedSite& t = *a.traced;
  std::string out = fmt::format("the work of trace {} (site {}, {} ranks, {} traced calls, measured Tcomm {:.1f} ms)",
                                t.dir, t.key, t.ranks, t.calls, ms(t.tcomm));
  if (r != nullptr)
    out += fmt::format(": {:.1f} ms before the first read and {:.1f} ms after it on average{}", ms(r->work.curc),
                       ms(r->work.crc), ranks != t.ranks ? ", scaled to the rank count" : "");
  for (const std::string& n : t.notes) out += "; " + n;
  return out;
}

void print_table(const Args& a, const Prediction& r) {
  print_platform(r.spec);
  fmt::print("model: {}\n", r.model == "simgrid" ? "one SimGrid flow per message"
                               : r.model == "fluid" ? "SimGrid's sharing per pair of nodes (fluid)"
                                                    : "busy pairs of nodes share links equally (pairs)");
  if (a.traced)
    fmt::print("{}; {}\n\n", call_text(a, &r), trace_text(a, r.spec.ranks(), &r));
  else
    fmt::print("{}; scenario {} ({}): TCURC {:.1f} ms, TCRC {:.1f} ms{}, {} part(s) per block\n\n", call_text(a, &r),
               a.scenario.name, a.scenario.what, ms(r.work.curc), ms(r.work.crc),
               a.alltoallv ? " for the mean block (in proportion to a rank's bytes)" : "", a.parts);
  fmt::print("| configuration | total | exchange | call returns |\n|---|---|---|---|\n");
  fmt::print("| plain MPICH ({} exchange) | {:.1f} ms | {:.1f} ms | {:.1f} ms |\n", r.plain_algorithm,
             ms(r.plain), ms(r.tcomm), ms(r.tcomm));
  fmt::print("| tnbc, no plan | {:.1f} ms | {:.1f} ms | {:.1f} ms |\n", ms(r.tnbc), ms(r.tnbc_exchange), ms(r.tinit));
  if (a.plan)
    fmt::print("| tnbc, plan ({}{}) | {:.1f} ms | {:.1f} ms | {:.1f} ms |\n", a.traced ? "the trace's order" : "order 0..p-1",
               r.per_node ? ", per-node turns" : "; per-message priorities only", ms(r.tnbc_plan),
               ms(r.plan_exchange), ms(r.plan_init));
  fmt::print("| link bound (any schedule) | {:.1f} ms | | |\n", ms(r.bound));
}

void print_sweep_table(const Args& a, const std::vector<Prediction>& points) {
  if (a.traced)
    fmt::print("{}, {} ranks per node ({} placement), {}\n"
               "gain = plain MPICH's total / the configuration's (above 1: faster than plain MPICH)\n\n",
               call_text(a, nullptr), a.spec.ppn, a.spec.cyclic ? "cyclic" : "block", trace_text(a, 0, nullptr));
  else
    fmt::print("{}, {} ranks per node ({} placement), scenario {} ({}), {} part(s) per block\n"
             "gain = plain MPICH's total / the configuration's (above 1: faster than plain MPICH)\n\n",
             call_text(a, nullptr), a.spec.ppn, a.spec.cyclic ? "cyclic" : "block", a.scenario.name, a.scenario.what,
             a.parts);
  fmt::print("| ranks | nodes | model | plain MPICH | tnbc, no plan | tnbc, plan | link bound | gain, no plan | gain, plan | gain at most |\n"
             "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Prediction& r : points) {
    const std::string plan = a.plan ? fmt::format("{:.1f} ms", ms(r.tnbc_plan)) : "-";
    const std::string plan_gain = a.plan ? fmt::format("{:.2f}", r.plain / r.tnbc_plan) : "-";
    fmt::print("| {} | {} | {} | {:.1f} ms | {:.1f} ms | {} | {:.1f} ms | {:.2f} | {} | {:.2f} |\n", r.spec.ranks(),
               r.spec.nodes, r.model, ms(r.plain), ms(r.tnbc), plan, ms(r.bound), r.plain / r.tnbc, plan_gain,
               r.plain / r.bound);
  }
}

/// --op bcast: plain MPICH, the engine in its shape (the default's, or --segments and
/// --chains), and with --chain-sweep the engine with one segment over each chain count beside
/// seed 003's t(k); a table or one JSON object.
int run_bcast(const Args& a) {
  const PlatformSpec& spec = a.spec;
  const int p = spec.ranks();
  BcastShape shape = default_bcast_shape(p, a.bytes);
  if (a.segments) shape.segments = *a.segments;
  if (a.chains) shape.chains = *a.chains;
  BcastOptions opt;
  opt.bytes = a.bytes;
  opt.root = a.root;
  opt.connection_depth = a.depth;
  opt.cfg = a.cfg;
  opt.setup_s = a.setup_s;
  opt.copy_Bps = a.copy_Bps;
  opt.shapes.push_back(shape);
  for (int k : a.chain_sweep) opt.shapes.push_back({1, k});
  BcastResult res;
  try {
    res = simulate_bcast(spec, opt);
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
  auto slowest_ready = [](const std::vector<RankRun>& runs) {
    double t = 0;
    for (const RankRun& r : runs) t = std::max(t, bcast_ready(r) - r.entry);
    return t;
  };
  const double plain = slowest(res.plain, &RankRun::ret);
  const double tnbc = slowest_ready(res.tnbc[0]), tinit = slowest(res.tnbc[0], &RankRun::ret);
  // Every node but the root's receives the whole buffer through its link.
  const double bound = spec.nodes > 1 ? static_cast<double>(a.bytes) / spec.link_Bps : 0;
  struct Point {
    int k;
    double sim, seed;
  };
  std::vector<Point> sweep;
  for (std::size_t i = 0; i < a.chain_sweep.size(); ++i)
    sweep.push_back({a.chain_sweep[i], slowest_ready(res.tnbc[i + 1]), seed_chains_time(spec, a.bytes, a.chain_sweep[i])});
  auto best = [&](double Point::*f) {
    return std::min_element(sweep.begin(), sweep.end(), [&](const Point& x, const Point& y) { return x.*f < y.*f; })->k;
  };
  const double k_star = seed_best_chains(spec, a.bytes);
  const std::string tree = shape.chains > 0 ? fmt::format("{} chains", shape.chains) : "binomial tree";
  if (a.json) {
    std::string points;
    for (const Point& x : sweep)
      points += fmt::format("{}{{\"chains\": {}, \"tnbc_one_segment_ms\": {:.3f}, \"seed_ms\": {:.3f}}}",
                            points.empty() ? "" : ", ", x.k, ms(x.sim), ms(x.seed));
    const std::string best_sim = sweep.empty() ? "null" : std::to_string(best(&Point::sim));
    const std::string best_seed = sweep.empty() ? "null" : std::to_string(best(&Point::seed));
    fmt::print("{{\"nodes\": {}, \"ppn\": {}, \"ranks\": {}, \"placement\": \"{}\", \"link_bytes_per_s\": {}, "
               "\"latency_s\": {}, \"mem_bytes_per_s\": {}, \"model\": \"simgrid\", \"op\": \"bcast\", \"bytes\": {}, "
               "\"root\": {}, \"connection_depth\": {}, \"segments\": {}, \"chains\": {}, \"plain_algorithm\": \"{}\", "
               "\"plain_ms\": {:.3f}, \"tnbc_init_ms\": {:.3f}, \"tnbc_ms\": {:.3f}, \"tnbc_plan_ms\": null, "
               "\"link_bound_ms\": {:.3f}, \"chain_sweep\": [{}], \"best_chains_sim\": {}, \"best_chains_seed\": {}, "
               "\"k_star\": {:.3f}}}\n",
               spec.nodes, spec.ppn, p, spec.cyclic ? "cyclic" : "block", spec.link_Bps, spec.latency_s, spec.mem_Bps,
               a.bytes, a.root, a.depth, shape.segments, shape.chains, res.plain_algorithm, ms(plain), ms(tinit),
               ms(tnbc), ms(bound), points, best_sim, best_seed, k_star);
    return 0;
  }
  print_platform(spec);
  fmt::print("model: one SimGrid flow per message\nMPI_Bcast of {} bytes from rank {}, the data read at once\n\n",
             a.bytes, a.root);
  fmt::print("| configuration | data everywhere | call returns |\n|---|---|---|\n");
  fmt::print("| plain MPICH ({}) | {:.2f} ms | {:.2f} ms |\n", res.plain_algorithm, ms(plain), ms(plain));
  fmt::print("| tnbc, {} segment(s), {} | {:.2f} ms | {:.2f} ms |\n", shape.segments, tree, ms(tnbc), ms(tinit));
  fmt::print("| link bound (the buffer through one link) | {:.2f} ms | |\n", ms(bound));
  if (sweep.empty()) return 0;
  fmt::print("\nOne segment over k chains: the engine against seed 003's t(k) = ((P-1)/k + 1)a + (k-1)b "
             "(a = 2 latencies + bytes/link, b = bytes/link; k* = sqrt(a(P-1)/b) = {:.1f})\n\n", k_star);
  fmt::print("| chains k | tnbc, one segment | seed 003's t(k) |\n|---|---|---|\n");
  const int bs = best(&Point::sim), bf = best(&Point::seed);
  for (const Point& x : sweep)
    fmt::print("| {} | {:.2f} ms{} | {:.2f} ms{} |\n", x.k, ms(x.sim), x.k == bs ? " (least)" : "", ms(x.seed),
               x.k == bf ? " (least)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto err = parse(argc, argv, a)) return usage_error(*err);
  if (!a.trace.empty()) {
    try {
      a.traced = load_traced_site(a.trace, a.site);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "tnbc-sim: --trace: %s\n", e.what());
      return 3;
    }
    const bool v = a.traced->op == tnbc::priority::Op::alltoallv;
    if (a.op_given && v != a.alltoallv)
      return usage_error(fmt::format("--op: the traced site {} is an {}", a.traced->key, v ? "MPI_Alltoallv" : "MPI_Alltoall"));
    a.alltoallv = v;
    if (!a.bytes_given) a.bytes = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(a.traced->block)));
    if (!a.nodes_given && !a.ppn_given && !a.placement_given && !a.fat_tree_given && a.sweep.empty() &&
        !traced_layout(*a.traced, a.spec))
      a.traced->notes.push_back("the traced job's nodes ran unequal shares of ranks: the platform is --nodes and --ppn's");
  }
  if (a.bcast) return run_bcast(a);
  std::vector<PlatformSpec> specs;
  if (a.sweep.empty()) {
    specs.push_back(a.spec);
  } else {
    for (int ranks : a.sweep) {
      PlatformSpec s = a.spec;
      s.nodes = ranks / a.spec.ppn;
      specs.push_back(s);
    }
  }
  std::vector<Prediction> points;
  for (const PlatformSpec& spec : specs) {
    try {
      points.push_back(predict(a, spec));
    } catch (const std::invalid_argument& e) {
      return usage_error(e.what());
    }
  }
  if (!a.svg.empty()) {
    std::vector<SweepPoint> curve;
    for (const Prediction& r : points)
      curve.push_back({r.spec.ranks(), r.plain / r.tnbc, a.plan ? r.plain / r.tnbc_plan : 0.0, r.plain / r.bound});
    const std::string title = fmt::format("{}, {} B {}blocks, {} ranks/node, {}/s links, {}",
                                          !a.alltoallv ? "MPI_Alltoall" : a.traced ? "MPI_Alltoallv" : "MPI_Alltoallv (IS-like)",
                                          a.bytes, a.alltoallv ? "mean " : "", a.spec.ppn, rate_text(a.spec.link_Bps),
                                          a.traced ? "the work of a trace" : "scenario " + a.scenario.name);
    if (auto err = write_sweep_svg(a.svg, title, curve, a.plan)) {
      std::fprintf(stderr, "tnbc-sim: %s\n", err->c_str());
      return 1;
    }
  }
  if (a.json) {
    if (a.sweep.empty()) {
      fmt::print("{}\n", json_of(a, points.front()));
    } else {
      std::string all;
      for (const Prediction& r : points) all += (all.empty() ? "" : ", ") + json_of(a, r);
      fmt::print("{{\"sweep\": [{}]}}\n", all);
    }
    return 0;
  }
  if (a.sweep.empty()) print_table(a, points.front());
  else print_sweep_table(a, points);
  return 0;
}
