// The statistics of one key (docs/config.md, the "keys" entries of "adapt"): its costs by call
// site, what its decision compared, its learning, turns and algorithm.
#include "report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "blocking.hpp"
#include "util/json.hpp"

namespace tnbc::shim::replay::adapt {
namespace {

/// The costs of a key's calls from one site, or summed over its sites.
struct Totals {
  std::uint64_t early_calls = 0, init_ns = 0, setup_ns = 0, send_copy_ns = 0, inside_wait_ns = 0,
                publish_ns = 0, wait_ns = 0, progress_cpu_ns = 0, blocking_calls = 0, blocking_ns = 0,
                intra_node_bytes = 0, inter_node_bytes = 0, engine_blocking_calls = 0, order_plan_calls = 0,
                order_learned_calls = 0, turn_calls = 0;
  void add(const Costs& c) {
    engine_blocking_calls += c.engine_blocking_calls.load();
    order_plan_calls += c.order_plan_calls.load(), order_learned_calls += c.order_learned_calls.load();
    turn_calls += c.turn_calls.load();
    early_calls += c.early_calls.load(), init_ns += c.init_ns.load(), setup_ns += c.setup_ns.load();
    send_copy_ns += c.send_copy_ns.load(), inside_wait_ns += c.inside_wait_ns.load();
    publish_ns += c.publish_ns.load(), wait_ns += c.wait_ns.load(), progress_cpu_ns += c.progress_cpu_ns.load();
    blocking_calls += c.blocking_calls.load(), blocking_ns += c.blocking_ns.load();
    intra_node_bytes += c.intra_node_bytes.load(), inter_node_bytes += c.inter_node_bytes.load();
  }
  /// The JSON fields (no braces) of docs/config.md's "keys" entries.
  std::string fields() const {
    auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
    return fmt::format(
        R"("early_calls":{},"blocking_calls":{},"init_us":{:.3f},"setup_us":{:.3f},"send_copy_us":{:.3f},)"
        R"("inside_wait_us":{:.3f},"publish_us":{:.3f},"wait_us":{:.3f},"progress_cpu_us":{:.3f},)"
        R"("blocking_us":{:.3f},"intra_node_bytes":{},"inter_node_bytes":{},"engine_blocking_calls":{},)"
        R"("order_plan_calls":{},"order_learned_calls":{},"turn_calls":{})",
        early_calls, blocking_calls, us(init_ns), us(setup_ns), us(send_copy_ns), us(inside_wait_ns),
        us(publish_ns), us(wait_ns), us(progress_cpu_ns), us(blocking_ns), intra_node_bytes, inter_node_bytes,
        engine_blocking_calls, order_plan_calls, order_learned_calls, turn_calls);
  }
};

}  // namespace

namespace {

/// Mean microseconds of `n` intervals summing to `ns` (0 without any).
double mean_us(std::uint64_t ns, std::uint64_t n) { return n ? static_cast<double>(ns) / 1000.0 / static_cast<double>(n) : 0.0; }

/// The "turns" object of a key in the statistics (docs/config.md): per-node turns decided by
/// measurement (learned turn orders only).
std::string turns_json(const Key& k) {
  const auto& iv = k.path.intervals;
  const char* state = !k.path.state.turns_allowed() ? "none" : !k.path.state.turns_decided() ? "undecided"
                      : k.path.state.turns_chosen()  ? "on" : "off";
  return fmt::format(
      R"({{"state":"{}","decisions":{},"switches":{},"on_calls":{},"off_calls":{},"on_interval_us":{:.3f},)"
      R"("off_interval_us":{:.3f}}})",
      state, k.path.state.turn_decisions(), k.path.state.turn_switches(), iv.turns_on_intervals.load(),
      iv.turns_off_intervals.load(), mean_us(iv.turns_on_ns.load(), iv.turns_on_intervals.load()),
      mean_us(iv.turns_off_ns.load(), iv.turns_off_intervals.load()));
}

}  // namespace

std::string key_json(const Key& k, const char* path, const std::function<SiteName(std::int64_t)>& site_name) {
  const auto& iv = k.path.intervals;
  Totals all;
  std::string sites;
  for (const SiteCosts& s : k.sites) {
    Totals one;
    one.add(s.costs);
    all.add(s.costs);
    const SiteName name = s.site >= 0 ? site_name(s.site) : SiteName{};
    sites += fmt::format(R"({}{{"site":"{}","function":"{}","module":"{}",{},"plan_order":[{}]}})",
                         sites.empty() ? "" : ",", util::json_escape(name.key), util::json_escape(name.function),
                         util::json_escape(name.module), one.fields(), fmt::join(s.plan_order, ","));
  }
  return fmt::format(
      R"({{"comm":{},"comm_size":{},"op":"{}","total_class":{},"one_node":{},"path":"{}",)"
      R"("decisions":{},"switches":{},"short_warmup":{},{},"early_interval_us":{:.3f},"blocking_interval_us":{:.3f},)"
      R"("sites":[{}],"learning":{},"turns":{},"algorithm":{}}})",
      k.comm_id, k.comm_size, k.op, k.total_class, k.one_node ? "true" : "false", path, k.path.state.decisions(),
      k.path.state.switches(), k.path.state.short_warmup() ? "true" : "false", all.fields(),
      iv.mean_ns(Path::early) / 1000.0, iv.mean_ns(Path::blocking) / 1000.0, sites, learn::json(k.learning),
      turns_json(k), algorithm_json(k));
}

}  // namespace tnbc::shim::replay::adapt
