// tnbc-order: inspect tnbc traces and turn them into plans.  docs/tnbc-order.md is the manual.
//
// Exit codes: 0 ok, 1 findings (with --strict), 2 bad input or usage.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "shim/config.hpp"
#include "priority/planner.hpp"
#include "order_plot.hpp"
#include "trace_observations.hpp"
#include "trace/trace_file.hpp"
#include "util/file.hpp"
#include "util/json.hpp"
#include "version.hpp"

namespace {

namespace pr = tnbc::priority;
namespace tr = tnbc::trace;
namespace util = tnbc::util;
using namespace tnbc::tools::order;
using tnbc::tools::TraceSet;

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;
constexpr int kExitUsage = 2;


constexpr std::string_view kUsage =
    "usage: tnbc-order <command> [options]\n"
    "\n"
    "Inspect tnbc traces and turn them into plans for libtnbc.so.\n"
    "\n"
    "commands:\n"
    "  show DIR [--json]                per call site: order, agreement, timing, verdict, prediction\n"
    "  plan DIR -o FILE [--strict] [--per-node] [--measure-all]\n"
    "                                   write a plan (TNBC_PLAN)\n"
    "  export --chrome DIR -o FILE      Chrome trace-event JSON (Perfetto, chrome://tracing)\n"
    "  plot DIR [--callsite ID] -o FILE\n"
    "                                   SVG chart of first-touch delays per sub-message\n"
    "  check FILE                       read a plan (tnbc-order plan, TNBC_PLAN_OUT) as libtnbc.so\n"
    "                                   does and print its entries\n"
    "  config [--markdown]              print every TNBC_* setting with its type, default and meaning\n"
    "\n"
    "DIR is a trace folder written by libtnbc_trace.so (one <rank>.tnbct per rank).\n"
    "\n"
    "--partial (show, plan, export, plot): accept missing ranks, with a warning.\n"
    "\n"
    "options:\n"
    "  -h, --help            this text (also: tnbc-order <command> --help)\n"
    "  --version             print the version\n"
    "\n"
    "exit codes: 0 ok, 1 findings (with --strict), 2 bad input or usage\n";

constexpr std::string_view kConfigUsage =
    "usage: tnbc-order config [--markdown]\n"
    "\n"
    "Print the TNBC_* environment variables read by libtnbc.so and libtnbc_trace.so at\n"
    "MPI initialisation.  --markdown prints the table as docs/config.md has it.\n";

constexpr std::string_view kCheckUsage =
    "usage: tnbc-order check FILE\n"
    "\n"
    "Read a plan file -- written by `tnbc-order plan`, or learned by libtnbc.so and written\n"
    "at MPI_Finalize with TNBC_PLAN_OUT -- with the parser libtnbc.so uses for TNBC_PLAN, and\n"
    "print one line per entry: call site, operation, communicator size, size class, order\n"
    "(first to complete first), Bcast segments and tree, per-node priority, send window,\n"
    "return, agreement.\n"
    "Exit 2, naming the line, when libtnbc.so would refuse it.\n";

constexpr std::string_view kShowUsage =
    "usage: tnbc-order show DIR [--json] [--partial]\n"
    "\n"
    "Per call site of the traces in DIR: operation, frames, calls, sub-messages, the consensus\n"
    "first-touch order and its agreement, Tcomm, the delay from return to first touch of each\n"
    "sub-message (median and quartiles), the CURC/CRC verdict, disagreeing ranks, and the\n"
    "predicted overlap with the plan order and with no priorities.\n"
    "\n"
    "  --json      machine-readable output (format \"tnbc-order/1\", docs/tnbc-order.md)\n"
    "  --partial   accept missing ranks (warning) and use the others\n";

constexpr std::string_view kPlanUsage =
    "usage: tnbc-order plan DIR -o FILE [--strict] [--per-node] [--measure-all] [--partial]\n"
    "\n"
    "Write the plan derived from the traces in DIR to FILE (atomically), for TNBC_PLAN.\n"
    "\n"
    "  -o FILE     where to write the plan (required; '-' for standard output)\n"
    "  --strict    exit 1 when a planned call site has agreement below 0.8 (the plan is\n"
    "              still written)\n"
    "  --per-node  turn per-node priority on where ranks agree (off by default: it was\n"
    "              slower on the emulated cluster, docs/measurements/per-node/); where the data is\n"
    "              read right after the call (verdict CRC) the entry also gets 'window 8',\n"
    "              8 inter-node chunks in flight per rank instead of TNBC_CHUNK_WINDOW\n"
    "  --measure-all  never write 'return' lines (by default a call site whose predicted\n"
    "              overlap is below 10% of its Tcomm gets 'return blocking' and runs the\n"
    "              blocking call; one whose predicted overlap is at least 50% gets 'return\n"
    "              early' and returns early from its first call)\n"
    "  --partial   accept missing ranks (warning) and use the others\n";

constexpr std::string_view kExportUsage =
    "usage: tnbc-order export --chrome DIR -o FILE [--partial]\n"
    "\n"
    "Write the traces as Chrome trace-event JSON (open in https://ui.perfetto.dev or\n"
    "chrome://tracing): one process per rank, each collective from its start to its return,\n"
    "the program's work between calls, each first touch as an instant event; microseconds\n"
    "on one clock for all ranks (each rank's stamp at a moment all ranks name in MPI_Init).\n"
    "\n"
    "  --chrome    the output format (the only one so far; required)\n"
    "  -o FILE     where to write ('-' for standard output)\n"
    "  --partial   accept missing ranks (warning) and use the others\n";

constexpr std::string_view kPlotUsage =
    "usage: tnbc-order plot DIR [--callsite ID] -o FILE [--partial]\n"
    "\n"
    "Write an SVG chart of one call site: delay from return to first touch (us) of every\n"
    "sub-message, one mark per rank and call, and the median per sub-message.\n"
    "\n"
    "  --callsite ID  the call site: its id (as in `show --json`) or its number in `show`\n"
    "                 (default: the one with the most calls)\n"
    "  -o FILE        where to write ('-' for standard output)\n"
    "  --partial      accept missing ranks (warning) and use the others\n";

int usage_error(std::string_view msg, std::string_view usage) {
  std::fprintf(stderr, "tnbc-order: %.*s\n\n%.*s", static_cast<int>(msg.size()), msg.data(),
               static_cast<int>(usage.size()), usage.data());
  return kExitUsage;
}

int input_error(const std::string& msg) {
  std::fprintf(stderr, "tnbc-order: %s\n", msg.c_str());
  return kExitUsage;
}

bool is_help(std::string_view a) { return a == "-h" || a == "--help"; }

/// Writes `text` to `path` so that the file is either the old one or complete
/// (util::write_file_atomic).  "-" is standard output.  Returns an error message.
std::optional<std::string> write_atomically(const std::string& path, const std::string& text) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      return "cannot write to standard output: " + std::string(std::strerror(errno));
    return std::nullopt;
  }
  return util::write_file_atomic(path, text);
}

/// A number for JSON: null when not finite; shortest round-trip form otherwise.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);
}

// ---- arguments --------------------------------------------------------------------------

struct Args {
  std::string dir;
  std::string output;
  std::string callsite;
  bool json = false, partial = false, strict = false, chrome = false, help = false, per_node = false;
  bool measure_all = false;
};

/// Parses the options a command accepts (`allowed`: "json", "strict", "chrome", "output",
/// "callsite"; --partial and --help always).  Returns an error message or nullopt.
std::optional<std::string> parse_args(std::string_view cmd, const std::vector<std::string_view>& in,
                                      std::initializer_list<std::string_view> allowed, Args& out) {
  auto allows = [&](std::string_view what) {
    return std::find(allowed.begin(), allowed.end(), what) != allowed.end();
  };
  std::string c(cmd);
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::string_view a = in[i];
    if (is_help(a)) {
      out.help = true;
      return std::nullopt;
    }
    if (a == "--partial") {
      out.partial = true;
    } else if (a == "--json" && allows("json")) {
      out.json = true;
    } else if (a == "--strict" && allows("strict")) {
      out.strict = true;
    } else if (a == "--per-node" && allows("per-node")) {
      out.per_node = true;
    } else if (a == "--measure-all" && allows("measure-all")) {
      out.measure_all = true;
    } else if (a == "--chrome" && allows("chrome")) {
      out.chrome = true;
    } else if ((a == "-o" || a == "--output") && allows("output")) {
      if (i + 1 >= in.size()) return c + ": " + std::string(a) + " needs a file name";
      out.output = in[++i];
    } else if (a == "--callsite" && allows("callsite")) {
      if (i + 1 >= in.size()) return c + ": --callsite needs an id";
      out.callsite = in[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      return c + ": unknown option '" + std::string(a) + "'";
    } else if (out.dir.empty()) {
      out.dir = a;
    } else {
      return c + ": unexpected argument '" + std::string(a) + "'";
    }
  }
  if (out.dir.empty()) return c + ": no trace directory given";
  if (allows("output") && out.output.empty()) return c + ": no output file given (-o FILE)";
  return std::nullopt;
}

/// Loads DIR; prints warnings; on error prints it and returns nullopt.
std::optional<TraceSet> load(const Args& args) {
  auto loaded = tnbc::tools::load_trace_dir(args.dir, args.partial);
  for (const auto& w : loaded.warnings) std::fprintf(stderr, "tnbc-order: warning: %s\n", w.c_str());
  if (!loaded.traces) {
    std::fprintf(stderr, "tnbc-order: %s\n", loaded.error.c_str());
    return std::nullopt;
  }
  return std::move(loaded.traces);
}

// ---- show --------------------------------------------------------------------------------

std::vector<SiteView> analyse_all(const pr::Observations& obs,
                                  const std::vector<tnbc::shim::observe::CallSite>& detail) {
  std::vector<SiteView> views;
  for (std::size_t i = 0; i < obs.sites.size(); ++i)
    views.push_back({&obs.sites[i], &detail[i], pr::plan_site(obs.sites[i])});
  return views;
}

std::string show_text(const TraceSet& set, const std::vector<SiteView>& views) {
  std::string o = fmt::format("{}: {} ranks ({} traced), {} call site{}\n", set.dir, set.size,
                              set.size - static_cast<int>(set.missing.size()), views.size(),
                              views.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto& v = views[i];
    const auto& a = v.plan.analysis;
    const auto& s = *v.site;
    o += fmt::format("\ncall site {}: {}  (id {})\n", i + 1, pr::to_string(s.op), s.id);
    for (const auto& f : v.trace_site->frames) {
      std::string where = tnbc::tools::frame_label(tnbc::shim::observe::Frame{f.module, f.offset, ""});
      o += fmt::format("  at {:<32} {}\n", f.symbol.empty() ? "?" : f.symbol, where);
    }
    o += fmt::format("  calls {} on {} rank{}, {} sub-messages of {} B, communicator of {}\n",
                     total_calls(s), s.ranks.size(), s.ranks.size() == 1 ? "" : "s", s.messages,
                     s.message_bytes, s.comm_size);
    std::string order;
    for (std::size_t k = 0; k < a.order.size(); ++k)
      order += (k ? " " : "") + std::to_string(a.order[k]) + (k + 1 == a.ordered && k + 1 < a.order.size() ? " |" : "");
    o += fmt::format("  order      {}\n", order);
    o += fmt::format("  agreement  {:.3f}   verdict {}   Tcomm {} us   first touch {} us\n",
                     a.agreement, verdict_name(a.verdict), us(a.tcomm_us), us(a.first_touch_us));
    std::string dis;
    for (std::size_t k = 0; k < a.disagreeing.size(); ++k)
      dis += (k ? ", " : "") + std::to_string(a.disagreeing[k]);
    o += fmt::format("  disagreeing ranks: {}\n", dis.empty() ? "none" : dis);
    o += "  sub  touched untouched unobserved   median us   q1 us      q3 us      min us     max us\n";
    for (std::size_t k = 0; k < a.messages.size(); ++k) {
      const auto& m = a.messages[k];
      o += fmt::format("  {:>3}  {:>7} {:>9} {:>10}   {:>9}   {:>8}   {:>8}   {:>8}   {:>8}\n", k,
                       m.touched, m.untouched, m.unobserved, us(m.median_us), us(m.q1_us),
                       us(m.q3_us), us(m.min_us), us(m.max_us));
    }
    const auto& p = v.plan.prediction;
    o += fmt::format(
        "  overlap    formula (1) {} us, (3) {} us; simulated: plan order {} us, no priorities {} us\n",
        us(p.formula1_us), us(p.formula3_us), us(p.plan_us), us(p.default_us));
    // show plans with the default options: name the thresholds they apply.
    const pr::PlannerOptions defaults;
    if (v.plan.entry && v.plan.entry->ret == pr::Return::blocking)
      o += fmt::format("  verdict    nothing to win: the plan says 'return blocking' (predicted overlap below "
                       "{:g}% of Tcomm)\n", 100 * defaults.blocking_below);
    if (v.plan.entry && v.plan.entry->ret == pr::Return::early)
      o += fmt::format("  verdict    room to overlap: the plan says 'return early' (predicted overlap at least "
                       "{:g}% of Tcomm)\n", 100 * defaults.early_above);
    if (v.plan.bcast)
      o += fmt::format("  bcast      {} segment{}, {}\n", v.plan.bcast->segments,
                       v.plan.bcast->segments == 1 ? "" : "s",
                       v.plan.bcast->shape.kind == pr::TreeKind::binomial
                           ? std::string("binomial tree")
                           : fmt::format("{} chains", v.plan.bcast->shape.chains));
    for (const auto& w : v.plan.warnings) o += "  warning: " + w + "\n";
  }
  return o;
}

std::string show_json(const TraceSet& set, const std::vector<SiteView>& views) {
  std::string o = "{\"format\":\"tnbc-order/1\",\"ranks\":" + std::to_string(set.size) +
                  ",\"missing_ranks\":[";
  for (std::size_t k = 0; k < set.missing.size(); ++k) o += (k ? "," : "") + std::to_string(set.missing[k]);
  o += "],\"callsites\":[";
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto& v = views[i];
    const auto& a = v.plan.analysis;
    const auto& s = *v.site;
    o += i ? ",\n" : "\n";
    o += "{\"id\":" + util::json_string(s.id) + ",\"op\":" + util::json_string(pr::to_string(s.op)) + ",\"frames\":[";
    for (std::size_t k = 0; k < s.frames.size(); ++k) o += (k ? "," : "") + util::json_string(s.frames[k]);
    o += "],\"calls\":" + std::to_string(total_calls(s)) +
         ",\"traced_ranks\":" + std::to_string(s.ranks.size()) +
         ",\"comm_size\":" + std::to_string(s.comm_size) +
         ",\"message_bytes\":" + std::to_string(s.message_bytes) +
         ",\"submessages\":" + std::to_string(s.messages) + ",\"order\":[";
    for (std::size_t k = 0; k < a.order.size(); ++k) o += (k ? "," : "") + std::to_string(a.order[k]);
    o += "],\"ordered\":" + std::to_string(a.ordered) + ",\"agreement\":" + json_number(a.agreement) +
         ",\"first_touch_us\":[";
    for (std::size_t k = 0; k < a.messages.size(); ++k) o += (k ? "," : "") + json_number(a.messages[k].median_us);
    o += "],\"spread_us\":[";
    for (std::size_t k = 0; k < a.messages.size(); ++k)
      o += (k ? "," : "") + std::string("[") + json_number(a.messages[k].q1_us) + "," +
           json_number(a.messages[k].q3_us) + "]";
    o += "],\"comm_us\":" + json_number(a.tcomm_us) +
         ",\"verdict\":" + util::json_string(pr::to_string(a.verdict)) + ",\"disagreeing\":[";
    for (std::size_t k = 0; k < a.disagreeing.size(); ++k) o += (k ? "," : "") + std::to_string(a.disagreeing[k]);
    const auto& p = v.plan.prediction;
    o += "],\"prediction\":{\"formula1_us\":" + json_number(p.formula1_us) +
         ",\"formula3_us\":" + json_number(p.formula3_us) + ",\"plan_us\":" + json_number(p.plan_us) +
         ",\"default_us\":" + json_number(p.default_us) + "}";
    if (v.plan.bcast)
      o += ",\"bcast\":{\"segments\":" + std::to_string(v.plan.bcast->segments) + ",\"chains\":" +
           std::to_string(v.plan.bcast->shape.chains) + "}";
    o += "}";
  }
  return o + "\n]}\n";
}

int cmd_show(const std::vector<std::string_view>& argv) {
  Args args;
  if (auto e = parse_args("show", argv, {"json"}, args)) return usage_error(*e, kShowUsage);
  if (args.help) return std::fputs(kShowUsage.data(), stdout), kExitOk;
  auto set = load(args);
  if (!set) return kExitUsage;
  std::vector<tnbc::shim::observe::CallSite> detail;
  auto obs = tnbc::tools::to_observations(*set, &detail);
  auto views = analyse_all(obs, detail);
  std::string text = args.json ? show_json(*set, views) : show_text(*set, views);
  if (auto e = write_atomically("-", text)) return input_error(*e);
  return kExitOk;
}

// ---- plan --------------------------------------------------------------------------------

int cmd_plan(const std::vector<std::string_view>& argv) {
  Args args;
  if (auto e = parse_args("plan", argv, {"output", "strict", "per-node", "measure-all"}, args))
    return usage_error(*e, kPlanUsage);
  if (args.help) return std::fputs(kPlanUsage.data(), stdout), kExitOk;
  auto set = load(args);
  if (!set) return kExitUsage;
  auto obs = tnbc::tools::to_observations(*set);
  std::vector<std::string> warnings;
  pr::PlannerOptions options;
  options.per_node = args.per_node;
  if (args.measure_all) options.blocking_below = options.early_above = 0;
  pr::Plan plan = pr::make_plan(obs, options, &warnings);
  for (const auto& w : warnings) std::fprintf(stderr, "tnbc-order: warning: %s\n", w.c_str());
  std::vector<std::string> comments = {
      fmt::format("from {} ({} ranks{}) by tnbc-order {}", set->dir, set->size,
                  set->missing.empty() ? "" : fmt::format(", {} missing", set->missing.size()),
                  tnbc::kVersion)};
  if (auto e = write_atomically(args.output, pr::write_plan(plan, comments))) return input_error(*e);
  int status = kExitOk;
  if (args.strict) {
    for (const auto& e : plan.entries) {
      if (e.agreement && *e.agreement < options.per_node_agreement) {
        std::fprintf(stderr, "tnbc-order: low agreement %.3f (below %.1f) at call site %s %s\n",
                     *e.agreement, options.per_node_agreement, e.site.c_str(), std::string(pr::to_string(e.op)).c_str());
        status = kExitFindings;
      }
    }
  }
  return status;
}

// ---- export --------------------------------------------------------------------------------

std::string chrome_json(const TraceSet& set) {
  std::string o = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto add = [&](const std::string& event) {
    o += first ? "\n" : ",\n";
    first = false;
    o += event;
  };
  // One clock for all ranks: each rank's stamps count from its sync stamp (the moment every
  // rank names, measured in MPI_Init: trace-format.md), shifted so that no event of any rank is
  // before 0.  A trace without one (0: written by hand) keeps its own origin, its earliest stamp.
  auto earliest = [](const tr::Trace& t) {
    std::uint64_t base = std::numeric_limits<std::uint64_t>::max();
    for (const auto& c : t.calls) base = std::min(base, c.start_stamp);
    for (const auto& x : t.touches) base = std::min(base, x.stamp);
    return base;
  };
  auto sync_of = [&](const tr::Trace& t) { return t.header.sync_stamp != 0 ? t.header.sync_stamp : earliest(t); };
  double shift = 0.0;  // µs
  for (const auto& t : set.ranks) {
    if (!t) continue;
    const std::uint64_t sync = sync_of(*t);
    shift = std::max(shift, static_cast<double>(sync - std::min(earliest(*t), sync)) / t->header.ticks_per_us);
  }
  for (int r = 0; r < set.size; ++r) {
    const auto& t = set.ranks[static_cast<std::size_t>(r)];
    if (!t) continue;
    const double tpu = t->header.ticks_per_us;
    const std::uint64_t sync = sync_of(*t);
    auto at = [&](std::uint64_t stamp) {
      const double us = stamp >= sync ? static_cast<double>(stamp - sync) / tpu : -static_cast<double>(sync - stamp) / tpu;
      return json_number(std::max(us + shift, 0.0));
    };
    add(fmt::format("{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                    "\"args\":{{\"name\":{}}}}}",
                    r, util::json_string(fmt::format("rank {} ({})", r, t->header.hostname))));
    add(fmt::format("{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                    "\"args\":{{\"sort_index\":{}}}}}", r, r));
    add(fmt::format("{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                    "\"args\":{{\"name\":\"program\"}}}}", r));
    for (std::size_t ci = 0; ci < t->calls.size(); ++ci) {
      const auto& c = t->calls[ci];
      std::uint64_t end = std::max(c.return_stamp, c.start_stamp);
      add(fmt::format(
          "{{\"name\":{},\"cat\":\"collective\",\"ph\":\"X\",\"pid\":{},\"tid\":0,\"ts\":{},"
          "\"dur\":{},\"args\":{{\"call\":{},\"callsite\":{},\"traced\":{},\"comm_size\":{},"
          "\"submessages\":{},\"tcomm_us\":{}}}}}",
          util::json_string(tr::to_string(c.op)), r, at(c.start_stamp),
          json_number(static_cast<double>(end - c.start_stamp) / tpu), ci,
          util::json_string(tnbc::tools::site_key(t->callsites[c.callsite])),
          (c.flags & tr::kCallTraced) ? "true" : "false", c.comm_size, c.subs.size(),
          json_number(static_cast<double>(c.tcomm) / tpu)));
      // The program's own work until its next collective.
      if (ci + 1 < t->calls.size() && t->calls[ci + 1].start_stamp > end)
        add(fmt::format("{{\"name\":\"computation\",\"cat\":\"program\",\"ph\":\"X\",\"pid\":{},\"tid\":0,"
                        "\"ts\":{},\"dur\":{},\"args\":{{\"after_call\":{}}}}}",
                        r, at(end), json_number(static_cast<double>(t->calls[ci + 1].start_stamp - end) / tpu), ci));
    }
    for (const auto& x : t->touches) {
      add(fmt::format(
          "{{\"name\":{},\"cat\":\"first touch\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":0,"
          "\"ts\":{},\"args\":{{\"call\":{},\"sub\":{},\"seq\":{},\"thread\":{}}}}}",
          util::json_string(fmt::format("touch {}", x.sub)), r, at(x.stamp), x.call, x.sub, x.seq,
          x.thread));
    }
  }
  return o + "\n]}\n";
}

int cmd_export(const std::vector<std::string_view>& argv) {
  Args args;
  if (auto e = parse_args("export", argv, {"output", "chrome"}, args)) return usage_error(*e, kExportUsage);
  if (args.help) return std::fputs(kExportUsage.data(), stdout), kExitOk;
  if (!args.chrome) return usage_error("export: no format given (--chrome)", kExportUsage);
  auto set = load(args);
  if (!set) return kExitUsage;
  if (auto e = write_atomically(args.output, chrome_json(*set))) return input_error(*e);
  return kExitOk;
}

// ---- plot --------------------------------------------------------------------------------

int cmd_plot(const std::vector<std::string_view>& argv) {
  Args args;
  if (auto e = parse_args("plot", argv, {"output", "callsite"}, args)) return usage_error(*e, kPlotUsage);
  if (args.help) return std::fputs(kPlotUsage.data(), stdout), kExitOk;
  auto set = load(args);
  if (!set) return kExitUsage;
  std::vector<tnbc::shim::observe::CallSite> detail;
  auto obs = tnbc::tools::to_observations(*set, &detail);
  if (obs.sites.empty()) return input_error(args.dir + ": no traced call, nothing to plot");
  std::size_t pick = 0;
  if (args.callsite.empty()) {
    for (std::size_t i = 1; i < obs.sites.size(); ++i)
      if (total_calls(obs.sites[i]) > total_calls(obs.sites[pick])) pick = i;
  } else {
    std::size_t found = obs.sites.size();
    for (std::size_t i = 0; i < obs.sites.size() && found == obs.sites.size(); ++i)
      if (obs.sites[i].id == args.callsite) found = i;
    if (found == obs.sites.size()) {
      char* end = nullptr;
      unsigned long n = std::strtoul(args.callsite.c_str(), &end, 10);
      if (end && *end == '\0' && n >= 1 && n <= obs.sites.size()) found = n - 1;
    }
    if (found == obs.sites.size())
      return input_error(args.dir + ": no call site '" + args.callsite + "' (see tnbc-order show)");
    pick = found;
  }
  SiteView view{&obs.sites[pick], &detail[pick], pr::plan_site(obs.sites[pick])};
  if (auto e = write_atomically(args.output, plot_svg(view, pick + 1))) return input_error(*e);
  return kExitOk;
}

int cmd_config(const std::vector<std::string_view>& args) {
  bool markdown = false;
  for (auto a : args) {
    if (is_help(a)) {
      std::fputs(kConfigUsage.data(), stdout);
      return kExitOk;
    }
    if (a == "--markdown") markdown = true;
    else return usage_error("config: unknown option '" + std::string(a) + "'", kConfigUsage);
  }
  std::fputs(tnbc::config::render_table(markdown).c_str(), stdout);
  return kExitOk;
}

// ---- check ------------------------------------------------------------------------------

int cmd_check(const std::vector<std::string_view>& argv) {
  if (argv.size() == 1 && is_help(argv[0])) return std::fputs(kCheckUsage.data(), stdout), kExitOk;
  if (argv.size() != 1 || argv[0].starts_with("-")) return usage_error("check: give one plan file", kCheckUsage);
  const std::string path(argv[0]);
  std::string text;
  if (auto err = tnbc::util::read_file(path, pr::kMaxPlanBytes, text)) return input_error(*err);
  auto parsed = pr::parse_plan(text);
  if (auto* e = std::get_if<pr::PlanError>(&parsed)) return input_error(path + ": " + e->to_string());
  const pr::Plan& plan = std::get<pr::Plan>(parsed);
  std::string out = fmt::format("{}: {} entries, accepted by libtnbc.so\n", path, plan.entries.size());
  for (const pr::PlanEntry& e : plan.entries) {
    out += fmt::format("{} {} comm={} class={} order={}", e.site, pr::to_string(e.op),
                       e.comm_size ? std::to_string(e.comm_size) : "*",
                       e.size_class >= 0 ? std::to_string(e.size_class) : "*", fmt::join(e.order, ","));
    if (e.op == pr::Op::bcast)
      out += fmt::format(" segments={} tree={}", e.segments,
                         e.tree.kind == pr::TreeKind::chains ? fmt::format("chains:{}", e.tree.chains) : "binomial");
    if (e.per_node) out += " per-node";
    if (e.window != 0) out += fmt::format(" window={}", e.window);
    if (e.ret != pr::Return::measure) out += fmt::format(" return={}", pr::to_string(e.ret));
    if (e.agreement) out += fmt::format(" agreement={:.2f}", *e.agreement);
    out += "\n";
  }
  if (auto e = write_atomically("-", out)) return input_error(*e);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("no command given", kUsage);
  auto cmd = args.front();
  std::vector<std::string_view> rest(args.begin() + 1, args.end());
  if (is_help(cmd)) {
    std::fputs(kUsage.data(), stdout);
    return kExitOk;
  }
  if (cmd == "--version") {
    std::printf("tnbc-order %s\n", tnbc::kVersion);
    return kExitOk;
  }
  if (cmd == "config") return cmd_config(rest);
  if (cmd == "show") return cmd_show(rest);
  if (cmd == "check") return cmd_check(rest);
  if (cmd == "plan") return cmd_plan(rest);
  if (cmd == "export") return cmd_export(rest);
  if (cmd == "plot") return cmd_plot(rest);
  return usage_error("unknown command '" + std::string(cmd) + "'", kUsage);
}
