// tnbc-sim's command line (options.hpp).
#include "options.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>

namespace tnbc::sim {
namespace {

constexpr std::string_view kUsage =
    "usage: tnbc-sim [--nodes N] [--ppn P] [--link RATE] [--latency T] [--mem-bw RATE]\n"
    "                [--placement block|cyclic] [--fat-tree LEAF:SPINES]\n"
    "                [--op alltoall|alltoallv|bcast] [--bytes B] [--chunk-bytes B]\n"
    "                [--root R] [--segments M] [--chains K|binomial] [--chain-sweep K1,K2,...]\n"
    "                [--chunk-window W] [--connection-depth D] [--setup-us T] [--copy-bw RATE]\n"
    "                [--progress-cpu-us T]\n"
    "                [--scenario a|b|c|d|e|none] [--work-ms W] [--parts N]\n"
    "                [--trace DIR [--site KEY] [--trace-work per-block|per-byte]\n"
    "                [--trace-work-scale F] [--counts trace|is]] [--cfg KEY:VALUE]\n"
    "                [--model simgrid|fluid|pairs] [--plan natural|none] [--per-node on|off]\n"
    "                [--sweep RANKS,RANKS,...] [--svg FILE] [--json]\n"
    "\n"
    "Predict a collective's time on a simulated cluster, with and without libtnbc.so.  One\n"
    "MPI_Alltoall, MPI_Alltoallv or MPI_Bcast and the work after it (bench/overlap.c's\n"
    "scenarios, or what a trace recorded), under plain MPICH and under libtnbc.so without and\n"
    "with a plan: N nodes on one switch (or a fat tree), each with a full-duplex link, P ranks\n"
    "per node.  The simulation (SimGrid's flow model) runs, one actor per rank, the step lists\n"
    "the replay engine builds; docs/measurements/scale.md says what it models and what not.\n"
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
    "  --model M             how messages share the links (docs/measurements/scale.md, \"Models\"):\n"
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
    "  --chunk-bytes B       the engine's body chunks (default: TNBC_CHUNK_BYTES' across nodes, 64K)\n"
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
    "  --segments M          the engine's segments (default: its LogGP choice, as libtnbc.so's)\n"
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
    "                        block as traced (docs/measurements/scale.md, \"Traces\"); the op and --bytes\n"
    "                        default to the site's, the platform to the traced job's nodes;\n"
    "                        not with --scenario, --work-ms or --parts\n"
    "  --site KEY            the call site of --trace (a plan key, as `tnbc-order show` prints;\n"
    "                        default: the Alltoall(v) site with the most traced calls, of\n"
    "                        those every rank called, then the largest sub-messages)\n"
    "  --trace-work per-block|per-byte\n"
    "                        on another rank count or --bytes, the traced work per block as\n"
    "                        traced (per-block, default), or per byte received (per-byte: each\n"
    "                        rank's work times the bytes it receives over its traced rank's,\n"
    "                        spread over its blocks; a program run at another size, e.g. NPB FT\n"
    "                        class A on 2 ranks for class C on 64)\n"
    "  --trace-work-scale F  the traced work times F (a slower or faster core; default 1)\n"
    "  --counts trace|is     an MPI_Alltoallv's bytes per receiver: the trace's (default), or\n"
    "                        NPB IS's key spread at the simulated rank count, as without --trace\n"
    "                        (a trace of fewer ranks cannot show how uneven it becomes)\n"
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

}  // namespace

int usage_error(std::string_view msg) {
  std::fprintf(stderr, "tnbc-sim: %.*s (tnbc-sim --help lists the options)\n", static_cast<int>(msg.size()), msg.data());
  return 2;
}

namespace {

template <typename T>
T parse_number(std::string_view opt, std::string_view text) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(fmt::format("{}: not a number: '{}'", opt, text));
  return v;
}


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

}  // namespace

namespace {

/// The options that take a value (each handled in parse below), for the error messages.
constexpr std::string_view kValued[] = {
    "--nodes", "--ppn", "--link", "--latency", "--mem-bw", "--placement", "--fat-tree", "--op",
    "--root", "--segments", "--chains", "--chain-sweep", "--bytes", "--chunk-bytes",
    "--connection-depth", "--setup-us", "--copy-bw", "--progress-cpu-us", "--chunk-window",
    "--scenario", "--work-ms", "--parts", "--cfg", "--trace", "--site", "--trace-work",
    "--trace-work-scale", "--counts", "--model", "--plan",
    "--per-node", "--sweep", "--svg"};

bool valued(std::string_view opt) {
  return std::find(std::begin(kValued), std::end(kValued), opt) != std::end(kValued);
}

}  // namespace

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
    // kValued only words the errors: an option the chain below takes is never refused by it.
    if (i + 1 >= argc) return fmt::format("{}: {}", opt, valued(opt) ? "needs a value" : "unknown option");
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
      else if (opt == "--trace-work" && (v == "per-block" || v == "per-byte")) a.trace_per_byte = v == "per-byte";
      else if (opt == "--trace-work-scale") a.trace_work_scale = parse_number<double>(opt, v);
      else if (opt == "--counts" && (v == "trace" || v == "is")) a.is_counts = v == "is";
      else if (opt == "--model" && (v == "simgrid" || v == "fluid" || v == "pairs")) a.model = v;
      else if (opt == "--plan" && (v == "natural" || v == "none")) a.plan = v == "natural";
      else if (opt == "--per-node" && (v == "on" || v == "off")) a.per_node = v == "on";
      else if (opt == "--sweep") a.sweep = parse_ranks(opt, v);
      else if (opt == "--svg") a.svg = v;
      else if (valued(opt)) return fmt::format("{} {}: not a value it takes", opt, v);
      else return fmt::format("{}: unknown option", opt);
    } catch (const std::invalid_argument& e) {
      // The message names the option already where the parser was given it.
      const std::string_view why = e.what();
      return why.rfind(opt, 0) == 0 ? std::string(why) : fmt::format("{}: {}", opt, why);
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
  if (a.trace_per_byte && a.trace.empty()) return "--trace-work: needs --trace";
  if (a.trace_work_scale != 1 && a.trace.empty()) return "--trace-work-scale: needs --trace";
  if (!(a.trace_work_scale > 0) || a.trace_work_scale > 1e6) return "--trace-work-scale: above 0, at most 1e6";
  if (a.is_counts && a.trace.empty()) return "--counts: with --trace only (without it the counts are NPB IS's)";
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
    if (!a.plan || a.per_node || a.chunk_bytes != tnbc::config::kChunkBytesAcrossNodes ||
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

}  // namespace tnbc::sim
