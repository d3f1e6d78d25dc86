#include "planner.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace tnbc::priority {

namespace {

// Frames are for humans: keep them printable and trimmed so that the plan stays valid.
std::vector<std::string> printable_frames(const std::vector<std::string>& frames) {
  std::vector<std::string> out;
  for (std::string f : frames) {
    for (char& c : f)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    auto first = f.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    f = f.substr(first, f.find_last_not_of(' ') - first + 1);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<std::uint32_t> segment_order(std::span<const std::size_t> piece_order,
                                         std::size_t pieces, int segments) {
  const std::size_t m = static_cast<std::size_t>(std::max(1, segments));
  std::vector<std::size_t> first_read(m, std::numeric_limits<std::size_t>::max());
  for (std::size_t pos = 0; pos < piece_order.size(); ++pos) {
    std::size_t piece = piece_order[pos];
    if (piece >= pieces) continue;
    std::size_t seg = piece * m / pieces;
    first_read[seg] = std::min(first_read[seg], pos);
  }
  std::vector<std::uint32_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return first_read[a] < first_read[b]; });
  return order;
}

std::optional<double> overlap_share(const SitePlan& plan) {
  if (plan.analysis.verdict == Verdict::unread || !(plan.inputs.tcomm_us > 0)) return std::nullopt;
  return plan.prediction.plan_us / plan.inputs.tcomm_us;
}

SitePlan plan_site(const CallSite& site, const PlannerOptions& options) {
  SitePlan out;
  out.analysis = analyse(site, options.consensus);
  out.warnings = out.analysis.warnings;
  const std::size_t n = site.messages;
  out.inputs = derive_inputs(n, out.analysis, options.tinit_us);
  out.prediction = predict_overlap(out.inputs, site.op, out.analysis.order,
                                   static_cast<std::size_t>(std::max(1, site.comm_size)));

  PlanEntry e;
  e.site = site.id;
  e.op = site.op;
  e.comm_size = std::max(0, site.comm_size);
  // The class of what replay looks the entry up by: Alltoall a block, Bcast the whole buffer
  // (a traced Bcast's sub-messages are TNBC_TRACE_BCAST_UNITS pieces of it, which replay does
  // not know).  Alltoallv: any class, since each rank looks it up by its own mean block, which
  // differs between ranks (bench/is: 1/6 to 11/6 of the mean on 4 ranks): a class would leave
  // some ranks without the entry, and their per-node turns without an agreed plan.
  e.size_class = site.op == Op::alltoallv ? -1
                                          : size_class(site.op == Op::bcast ? site.message_bytes * n : site.message_bytes);
  e.frames = printable_frames(site.frames);
  e.agreement = std::clamp(out.analysis.agreement, 0.0, 1.0);
  e.verdict = out.analysis.verdict;

  if (n == 0) {
    out.warnings.push_back(fmt::format("{}: no sub-messages; not planned", site.id));
    return out;
  }
  if (site.op == Op::bcast) {
    std::uint64_t total = site.message_bytes * n;
    out.bcast = choose_bcast(options.loggp, std::max(1, site.comm_size), total, options.bcast);
    e.segments = out.bcast->segments;
    e.tree = out.bcast->shape;
    e.order = segment_order(out.analysis.order, n, e.segments);
  } else {
    if (n != static_cast<std::size_t>(site.comm_size)) {
      out.warnings.push_back(fmt::format(
          "{}: {} sub-messages but a communicator of {}; not planned", site.id, n, site.comm_size));
      return out;
    }
    e.order.assign(out.analysis.order.begin(), out.analysis.order.end());
    e.per_node = options.per_node && site.comm_size > 1 && out.analysis.verdict != Verdict::unread &&
                 out.analysis.agreement >= options.per_node_agreement;
    if (e.per_node && out.analysis.verdict == Verdict::crc) e.window = options.read_at_once_window;
  }
  // The data is read and Tcomm known: nothing to win where the predicted overlap is a sliver of
  // the exchange; much to win, from the first call, where it is most of it.
  if (const auto share = overlap_share(out)) {
    if (options.blocking_below > 0 && *share < options.blocking_below)
      e.ret = Return::blocking;
    else if (options.early_above > 0 && *share >= options.early_above)
      e.ret = Return::early;
  }
  Plan single;
  single.entries.push_back(e);
  if (auto error = validate_plan(single)) {
    out.warnings.push_back(fmt::format("{}: not planned ({})", site.id, *error));
    return out;
  }
  out.entry = std::move(e);
  return out;
}

Plan make_plan(const Observations& observations, const PlannerOptions& options,
               std::vector<std::string>* warnings) {
  Plan plan;
  std::set<std::tuple<std::string, Op, int, int>> keys;
  for (const CallSite& site : observations.sites) {
    SitePlan sp = plan_site(site, options);
    if (warnings) warnings->insert(warnings->end(), sp.warnings.begin(), sp.warnings.end());
    if (!sp.entry) continue;
    const PlanEntry& e = *sp.entry;
    if (!keys.emplace(e.site, e.op, e.comm_size, e.size_class).second) {
      if (warnings)
        warnings->push_back(fmt::format("{}: a second site with the same plan key; kept the first",
                                        e.site));
      continue;
    }
    plan.entries.push_back(std::move(*sp.entry));
  }
  return plan;
}

}  // namespace tnbc::priority
