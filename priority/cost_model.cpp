#include "cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tnbc::priority {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Time the CRC needs to read everything: Tcomm·Rcomm/RCRC (= n·c).
double crc_time_us(const OverlapInputs& in) {
  if (!(in.rcrc > 0) || std::isinf(in.rcrc)) return 0;
  return in.tcomm_us * in.rcomm / in.rcrc;
}

int binomial_rounds(int ranks) {
  int rounds = 0;
  while (rounds < 31 && (1 << rounds) < ranks) ++rounds;
  return rounds;
}

}  // namespace

OverlapInputs derive_inputs(std::size_t messages, const SiteAnalysis& analysis, double tinit_us) {
  OverlapInputs in;
  in.messages = messages;
  in.tinit_us = std::max(0.0, tinit_us);
  if (!(analysis.tcomm_us > 0) || messages == 0) return in;
  in.tcomm_us = analysis.tcomm_us;
  // Never read in the trace: all the work after the call is unrelated to it.
  in.tcurc_us = analysis.verdict == Verdict::unread ? in.tcomm_us : analysis.first_touch_us;
  in.rcomm = static_cast<double>(messages) / in.tcomm_us;
  in.rcrc = analysis.touch_interval_us > 0 ? 1.0 / analysis.touch_interval_us : kInf;
  return in;
}

double overlap_formula1(const OverlapInputs& in) {
  if (!(in.tcomm_us > 0)) return 0;
  return std::min(in.tcomm_us, in.tcurc_us + crc_time_us(in));
}

double overlap_formula3(const OverlapInputs& in) {
  if (!(in.tcomm_us > 0)) return 0;
  return std::max(0.0, std::min(in.tcomm_us - in.tinit_us, in.tcurc_us + crc_time_us(in)));
}

double simulate_overlap(const OverlapInputs& in, std::span<const std::size_t> read_order,
                        std::span<const std::size_t> arrival_slot) {
  const double remaining = in.tcomm_us - in.tinit_us;
  const std::size_t n = in.messages;
  if (n == 0 || !(remaining > 0)) return 0;
  const double read = (in.rcrc > 0 && !std::isinf(in.rcrc)) ? 1.0 / in.rcrc : 0.0;
  const double per_slot = remaining / static_cast<double>(n);
  // 1. Unrelated work first.
  double now = std::max(0.0, in.tcurc_us);
  double overlap = std::min(now, remaining);
  // 2. Blocks in read order, each when it has arrived; 3. count what falls inside [0, R].
  for (std::size_t i : read_order) {
    if (i >= n || i >= arrival_slot.size()) continue;
    double arrival = static_cast<double>(arrival_slot[i] + 1) * per_slot;
    double start = std::max(now, arrival);
    double end = start + read;
    overlap += std::max(0.0, std::min(end, remaining) - std::min(start, remaining));
    now = end;
  }
  return std::min(overlap, remaining);
}

std::vector<std::size_t> default_arrival_slots(Op op, std::size_t messages, std::size_t rank) {
  std::vector<std::size_t> slot(messages);
  for (std::size_t i = 0; i < messages; ++i)
    slot[i] = op == Op::bcast ? i : (i + messages - rank % messages) % messages;
  return slot;
}

OverlapPrediction predict_overlap(const OverlapInputs& in, Op op,
                                  std::span<const std::size_t> read_order, std::size_t ranks) {
  OverlapPrediction out;
  out.formula1_us = overlap_formula1(in);
  out.formula3_us = overlap_formula3(in);
  std::vector<std::size_t> plan_slot(in.messages, 0);
  for (std::size_t p = 0; p < read_order.size(); ++p)
    if (read_order[p] < in.messages) plan_slot[read_order[p]] = p;
  out.plan_us = simulate_overlap(in, read_order, plan_slot);
  if (op == Op::bcast || ranks == 0) ranks = 1;
  double sum = 0;
  for (std::size_t r = 0; r < ranks; ++r)
    sum += simulate_overlap(in, read_order, default_arrival_slots(op, in.messages, r));
  out.default_us = sum / static_cast<double>(ranks);
  return out;
}

double hop_us(const LogGP& p, double bytes) {
  return 2 * p.overhead_us + p.latency_us + bytes * p.us_per_byte;
}

double send_us(const LogGP& p, double bytes) { return p.overhead_us + bytes * p.us_per_byte; }

double chains_time_us(const LogGP& p, int ranks, double bytes, int k) {
  if (ranks <= 1) return 0;
  k = std::clamp(k, 1, ranks - 1);
  return (static_cast<double>(ranks - 1) / k + 1) * hop_us(p, bytes) + (k - 1) * send_us(p, bytes);
}

int best_chains(const LogGP& p, int ranks, double bytes) {
  if (ranks <= 2) return 1;
  double a = hop_us(p, bytes), b = send_us(p, bytes);
  double k_star = b > 0 ? std::sqrt(a * (ranks - 1) / b) : static_cast<double>(ranks - 1);
  if (!std::isfinite(k_star)) k_star = ranks - 1;
  int lo = std::clamp(static_cast<int>(std::floor(k_star)), 1, ranks - 1);
  int hi = std::clamp(lo + 1, 1, ranks - 1);
  return chains_time_us(p, ranks, bytes, hi) < chains_time_us(p, ranks, bytes, lo) ? hi : lo;
}

double tree_time_us(const LogGP& p, int ranks, double bytes, TreeShape shape) {
  if (ranks <= 1) return 0;
  if (shape.kind == TreeKind::chains) return chains_time_us(p, ranks, bytes, shape.chains);
  return binomial_rounds(ranks) * hop_us(p, bytes);
}

double pipeline_step_us(const LogGP& p, int ranks, double bytes, TreeShape shape) {
  if (ranks <= 1) return 0;
  if (shape.kind == TreeKind::chains) {
    int k = std::clamp(shape.chains, 1, ranks - 1);
    return std::max({p.gap_us, k * send_us(p, bytes), 2 * p.overhead_us + bytes * p.us_per_byte});
  }
  return std::max(p.gap_us, binomial_rounds(ranks) * send_us(p, bytes));
}

double bcast_time_us(const LogGP& p, int ranks, std::uint64_t bytes, int segments,
                     TreeShape shape) {
  segments = std::max(1, segments);
  double s = static_cast<double>(bytes) / segments;
  return tree_time_us(p, ranks, s, shape) + (segments - 1) * pipeline_step_us(p, ranks, s, shape);
}

BcastChoice choose_bcast(const LogGP& p, int ranks, std::uint64_t bytes, const BcastLimits& limits) {
  BcastChoice best;
  if (ranks <= 1) return best;
  std::uint64_t by_size = limits.min_segment_bytes > 0 ? bytes / limits.min_segment_bytes : bytes;
  int max_m = static_cast<int>(std::min<std::uint64_t>(
      std::max(1, limits.max_segments), std::max<std::uint64_t>(1, by_size)));
  // 1. Best shape for m segments.
  auto evaluate = [&](int m) {
    BcastChoice c;
    c.segments = m;
    double s = static_cast<double>(bytes) / m;
    TreeShape chains{TreeKind::chains, best_chains(p, ranks, s)};
    double t_binomial = bcast_time_us(p, ranks, bytes, m, TreeShape{});
    double t_chains = bcast_time_us(p, ranks, bytes, m, chains);
    if (t_chains < t_binomial) {
      c.shape = chains;
      c.time_us = t_chains;
    } else {
      c.time_us = t_binomial;
    }
    c.exposed_us = c.time_us / m;
    return c;
  };
  // 2. Add segments while each one still pays.
  best = evaluate(1);
  for (int m = 2; m <= max_m; ++m) {
    BcastChoice next = evaluate(m);
    if (!(next.exposed_us <= (1 - limits.min_gain) * best.exposed_us)) break;
    best = next;
  }
  return best;
}

BcastShape default_bcast_shape(int ranks, std::uint64_t bytes) {
  const BcastChoice c = choose_bcast(LogGP{}, ranks, bytes, BcastLimits{});
  return {c.segments, c.shape.kind == TreeKind::chains ? c.shape.chains : 0};
}

}  // namespace tnbc::priority
