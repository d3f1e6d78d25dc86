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
#include "tools/sim/alltoall.hpp"
#include "tools/sim/bcast.hpp"
#include "tools/sim/fluid.hpp"
#include "tools/sim/options.hpp"
#include "tools/sim/platform.hpp"
#include "tools/sim/reader.hpp"
#include "tools/sim/sweep_plot.hpp"
#include "tools/sim/traced.hpp"
#include "util/json.hpp"

namespace {

using namespace tnbc::sim;

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

/// The model of a platform: --model, else by its rank count (docs/measurements/scale.md, "Timings").
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
  if (a.alltoallv)
    opt.blocks = a.traced && !a.is_counts ? scaled_blocks(*a.traced, p, a.bytes_given ? a.bytes : 0) : is_like_blocks(p, a.bytes);
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
    for (int r = 0; r < p; ++r) {
      const double received = static_cast<double>(opt.bytes_to(r)) * p;  // per call, its own block too
      reads.push_back(scaled_work(a.trace_per_byte ? per_byte_reads(*a.traced, r, p, received) : scaled_reads(*a.traced, r, p),
                                  a.trace_work_scale));
    }
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

/// The JSON object of one prediction (docs/measurements/scale.md names its fields).
std::string json_of(const Args& a, const Prediction& r) {
  const std::string plan_ms = a.plan ? fmt::format("{:.3f}", ms(r.tnbc_plan)) : "null";
  const std::string plan_exchange_ms = a.plan ? fmt::format("{:.3f}", ms(r.plan_exchange)) : "null";
  const std::string fat_tree =
      r.spec.fat_tree() ? fmt::format("{{\"leaf_nodes\": {}, \"spines\": {}}}", r.spec.leaf_nodes, r.spec.spines) : "null";
  const std::string trace =
      a.traced ? fmt::format("\"trace\": {}, \"site\": {}, \"trace_ranks\": {}, \"trace_tcomm_ms\": {:.3f}, "
                             "\"trace_work\": \"{}\", \"trace_work_scale\": {}, ",
                             tnbc::util::json_string(a.traced->dir), tnbc::util::json_string(a.traced->key), a.traced->ranks,
                             ms(a.traced->tcomm), a.trace_per_byte ? "per-byte" : "per-block", a.trace_work_scale)
               : "\"trace\": null, ";
  return fmt::format(
      "{{\"nodes\": {}, \"ppn\": {}, \"ranks\": {}, \"placement\": \"{}\", \"fat_tree\": {}, \"link_bytes_per_s\": {}, \"latency_s\": {}, "
      "\"mem_bytes_per_s\": {}, \"model\": \"{}\", \"op\": \"{}\", \"bytes\": {}, \"bytes_min\": {}, \"bytes_max\": {}, \"chunk_bytes\": {}, \"chunk_window\": {}, \"connection_depth\": {}, "
      "\"scenario\": \"{}\", \"parts\": {}, \"work_sizing_ms\": {:.3f}, \"curc_ms\": {:.3f}, \"crc_ms\": {:.3f}, "
      "\"plain_algorithm\": \"{}\", \"plain_exchange_ms\": {:.3f}, \"plain_ms\": {:.3f}, "
      "\"tnbc_init_ms\": {:.3f}, \"tnbc_exchange_ms\": {:.3f}, \"tnbc_ms\": {:.3f}, \"tnbc_plan_ms\": {}, \"tnbc_plan_exchange_ms\": {}, \"plan\": \"{}\", \"plan_per_node\": {}, "
      "\"setup_us\": {:.3f}, \"copy_bytes_per_s\": {}, \"progress_cpu_us\": {:.3f}, {}\"link_bound_ms\": {:.3f}}}",
      r.spec.nodes, r.spec.ppn, r.spec.ranks(), r.spec.cyclic ? "cyclic" : "block", fat_tree, r.spec.link_Bps, r.spec.latency_s,
      r.spec.mem_Bps, r.model, a.alltoallv ? "alltoallv" : "alltoall", a.bytes, r.block_min, r.block_max, a.chunk_bytes, a.window, a.depth, a.traced ? "trace" : a.scenario.name, a.parts, ms(r.sizing), ms(r.work.curc),
      ms(r.work.crc), r.plain_algorithm, ms(r.tcomm), ms(r.plain), ms(r.tinit), ms(r.tnbc_exchange), ms(r.tnbc),
      plan_ms, plan_exchange_ms, !a.plan ? "none" : a.traced ? "trace" : "natural", a.plan && r.per_node ? "true" : "false", a.setup_s * 1e6, a.copy_Bps > 0 ? a.copy_Bps : r.spec.mem_Bps, a.progress_cpu_s * 1e6, trace, ms(r.bound));
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
    const char* counts = a.is_counts ? "NPB IS's key spread" : "the trace's counts";
    if (r == nullptr) return fmt::format("MPI_Alltoallv with {}, {} bytes per block on average", counts, a.bytes);
    return fmt::format("MPI_Alltoallv with {}, {} bytes per block on average ({} to {} by receiver)", counts,
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
    out += fmt::format(": {:.1f} ms before the first read and {:.1f} ms after it on average{}{}", ms(r->work.curc),
                       ms(r->work.crc), a.trace_per_byte ? ", per byte received" : ranks != t.ranks ? ", scaled to the rank count" : "",
                       a.trace_work_scale != 1 ? fmt::format(", times {:g}", a.trace_work_scale) : "");
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
    if (a.is_counts && !v) return usage_error(fmt::format("--counts is: the traced site {} is an MPI_Alltoall", a.traced->key));
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
