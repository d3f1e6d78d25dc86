#include "traced.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "priority/consensus.hpp"
#include "tools/trace_observations.hpp"

namespace tnbc::sim {

namespace pr = tnbc::priority;

double TracedReads::work() const { return std::accumulate(gap.begin(), gap.end(), 0.0) + tail; }

bool traced_layout(const TracedSite& site, PlatformSpec& spec) {
  const int p = static_cast<int>(site.node_of.size());
  if (p == 0) return false;
  const int nodes = *std::max_element(site.node_of.begin(), site.node_of.end()) + 1;
  if (p % nodes != 0) return false;
  for (const bool cyclic : {false, true}) {
    PlatformSpec s = spec;
    s.nodes = nodes;
    s.ppn = p / nodes;
    s.cyclic = cyclic;
    bool same = true;
    for (int r = 0; r < p && same; ++r) same = node_of(s, r) == site.node_of[static_cast<std::size_t>(r)];
    if (same) {
      spec = s;
      return true;
    }
  }
  return false;
}

int traced_index(int i, int simulated, int traced) {
  return static_cast<int>(static_cast<long long>(i) * traced / simulated);
}

namespace {

// The ranks of `site`'s communicator that traced no call of it, ascending.
std::vector<int> untraced_ranks(const pr::CallSite& site) {
  std::vector<bool> seen(static_cast<std::size_t>(std::max(site.comm_size, 0)));
  for (const pr::RankRecord& r : site.ranks)
    if (r.rank >= 0 && r.rank < site.comm_size && !r.calls.empty()) seen[static_cast<std::size_t>(r.rank)] = true;
  std::vector<int> missing;
  for (std::size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) missing.push_back(static_cast<int>(r));
  return missing;
}

// How a traced block's span (the work from its touch to the next) goes to the simulated blocks
// standing for it: whole to each (the work per block stays as traced) or divided among them
// (the traced rank's work stays whole).
enum class Span { whole_each, shared };

// Simulated rank `rank`'s reads in its traced rank's order, each traced block standing for the
// simulated blocks that map to it (traced_index), ascending.  The work before the first touch
// counts once; the last span is part of the tail.  A traced block without a stand-in drops its
// span (whole_each) or passes it to the next read (shared).
TracedReads standing_reads(const TracedSite& site, int rank, int ranks, Span mode) {
  const TracedReads& t = site.reads[static_cast<std::size_t>(traced_index(rank, ranks, site.ranks))];
  std::vector<std::vector<int>> of(static_cast<std::size_t>(site.ranks));
  for (int b = 0; b < ranks; ++b) of[static_cast<std::size_t>(traced_index(b, ranks, site.ranks))].push_back(b);
  TracedReads out;
  double pending = 0;  // work owed before the next simulated read: the first gap, then spans
  for (std::size_t k = 0; k < t.order.size(); ++k) {
    const double span = k + 1 < t.order.size() ? t.gap[k + 1] : 0.0;
    if (k == 0) pending += t.gap[0];
    const std::vector<int>& standing = of[static_cast<std::size_t>(t.order[k])];
    if (standing.empty() && mode == Span::shared) pending += span;
    for (int b : standing) {
      out.order.push_back(b);
      out.gap.push_back(pending);
      pending = mode == Span::shared ? span / static_cast<double>(standing.size()) : span;
    }
  }
  out.tail = pending + t.tail;
  return out;
}

}  // namespace

TracedSite traced_site(const pr::CallSite& site) {
  if (site.op == pr::Op::bcast)
    throw std::invalid_argument(fmt::format("site {}: an MPI_Bcast site (tnbc-sim --trace takes MPI_Alltoall and MPI_Alltoallv sites)", site.id));
  const int n = site.comm_size;
  if (n < 1 || site.messages != static_cast<std::size_t>(n))
    throw std::invalid_argument(fmt::format("site {}: {} sub-messages per call on {} ranks", site.id, site.messages, n));
  TracedSite out;
  out.key = site.id;
  out.op = site.op;
  out.ranks = n;
  out.block = static_cast<double>(site.message_bytes);
  out.reads.resize(static_cast<std::size_t>(n));
  out.recv_block.assign(static_cast<std::size_t>(n), out.block);
  const pr::SiteAnalysis analysis = pr::analyse(site);
  out.tcomm = analysis.tcomm_us * 1e-6;
  out.order = analysis.order;
  std::size_t unobserved = 0, untouched = 0;
  for (const pr::RankRecord& rank : site.ranks) {
    if (rank.rank < 0 || rank.rank >= n || rank.calls.empty()) continue;
    out.calls += rank.calls.size();
    const pr::RankSummary sum = pr::summarise_rank(rank.calls, site.messages);
    // The blocks it touched, by median first-touch delay (ties by block).
    std::vector<int> touched;
    for (int b = 0; b < n; ++b) {
      const double d = sum.delay[static_cast<std::size_t>(b)];
      if (std::isfinite(d)) touched.push_back(b);
      else if (std::isnan(d)) ++unobserved;
      else ++untouched;
    }
    std::stable_sort(touched.begin(), touched.end(), [&](int x, int y) {
      return sum.delay[static_cast<std::size_t>(x)] < sum.delay[static_cast<std::size_t>(y)];
    });
    TracedReads& r = out.reads[static_cast<std::size_t>(rank.rank)];
    double last = 0;
    for (int b : touched) {
      const double d = std::max(0.0, sum.delay[static_cast<std::size_t>(b)]) * 1e-6;
      r.order.push_back(b);
      r.gap.push_back(std::max(0.0, d - last));
      last = std::max(last, d);
    }
    // The work after the last touch: the median time to the next call, less the last touch.
    std::vector<double> next;
    std::uint64_t bytes = 0;
    for (const pr::CallRecord& call : rank.calls) {
      if (std::isfinite(call.next_call_us) && call.next_call_us >= 0) next.push_back(call.next_call_us);
      bytes += call.recv_bytes;
    }
    if (!next.empty()) r.tail = std::max(0.0, pr::median(next) * 1e-6 - last);
    out.recv_block[static_cast<std::size_t>(rank.rank)] =
        static_cast<double>(bytes) / static_cast<double>(rank.calls.size()) / n;
  }
  const std::vector<int> missing = untraced_ranks(site);
  if (!missing.empty())
    throw std::invalid_argument(fmt::format("site {}: {} of its {} ranks traced no call of it (first: rank {})", site.id,
                                            missing.size(), n, missing.front()));
  if (unobserved > 0)
    out.notes.push_back(fmt::format("{} of {} blocks (ranks x sources) were never observed (e.g. on partial pages): "
                                    "their reads are not simulated", unobserved, static_cast<std::size_t>(n) * n));
  if (untouched > 0)
    out.notes.push_back(fmt::format("{} of {} blocks (ranks x sources) were not read before the next call: "
                                    "nothing waits for them", untouched, static_cast<std::size_t>(n) * n));
  return out;
}

const pr::CallSite* pick_site(const pr::Observations& obs, const std::string& key) {
  if (!key.empty()) {
    for (const pr::CallSite& s : obs.sites)
      if (s.id == key) return &s;
    return nullptr;
  }
  auto calls_of = [](const pr::CallSite& s) {
    std::size_t c = 0;
    for (const pr::RankRecord& r : s.ranks) c += r.calls.size();
    return c;
  };
  // Sites every rank called come first: a program may call one collective from two places by
  // rank (NPB IS's loop, where rank 0 prints), and such a site cannot be simulated.
  auto rank_of = [&](const pr::CallSite& x) {
    return std::make_tuple(untraced_ranks(x).empty(), calls_of(x), x.message_bytes);
  };
  const pr::CallSite* pick = nullptr;
  for (const pr::CallSite& s : obs.sites)
    if (s.op != pr::Op::bcast && (pick == nullptr || rank_of(s) > rank_of(*pick))) pick = &s;
  return pick;
}

TracedSite load_traced_site(const std::string& dir, const std::string& key) {
  const tools::LoadResult loaded = tools::load_trace_dir(dir, false);
  if (!loaded.traces) throw std::invalid_argument(loaded.error);
  const pr::Observations obs = tools::to_observations(*loaded.traces);
  const pr::CallSite* pick = pick_site(obs, key);
  if (pick == nullptr)
    throw std::invalid_argument(key.empty()
                                    ? fmt::format("{}: no traced MPI_Alltoall or MPI_Alltoallv call", dir)
                                    : fmt::format("{}: no call site {} (tnbc-order show {} lists them)", dir, key, dir));
  TracedSite out = traced_site(*pick);
  out.dir = dir;
  std::vector<std::uint32_t> ids;  // node ids in order of first appearance
  for (const auto& t : loaded.traces->ranks) {
    const std::uint32_t id = t->header.node_id;
    const auto at = std::find(ids.begin(), ids.end(), id);
    out.node_of.push_back(static_cast<int>(at - ids.begin()));
    if (at == ids.end()) ids.push_back(id);
  }
  return out;
}

TracedReads scaled_reads(const TracedSite& site, int rank, int ranks) {
  return standing_reads(site, rank, ranks, Span::whole_each);
}

TracedReads per_byte_reads(const TracedSite& site, int rank, int ranks, double received) {
  const std::size_t traced = static_cast<std::size_t>(traced_index(rank, ranks, site.ranks));
  const double had = site.recv_block[traced] * site.ranks;
  return scaled_work(standing_reads(site, rank, ranks, Span::shared), had > 0 ? received / had : 0.0);
}

TracedReads scaled_work(TracedReads reads, double factor) {
  for (double& g : reads.gap) g *= factor;
  reads.tail *= factor;
  return reads;
}

std::vector<int> scaled_order(const TracedSite& site, int ranks) {
  std::vector<std::size_t> place(site.order.size());
  for (std::size_t i = 0; i < site.order.size(); ++i) place[site.order[i]] = i;
  std::vector<int> out(static_cast<std::size_t>(ranks));
  std::iota(out.begin(), out.end(), 0);
  std::stable_sort(out.begin(), out.end(), [&](int x, int y) {
    return place[static_cast<std::size_t>(traced_index(x, ranks, site.ranks))] <
           place[static_cast<std::size_t>(traced_index(y, ranks, site.ranks))];
  });
  return out;
}

std::vector<std::size_t> scaled_blocks(const TracedSite& site, int ranks, std::size_t mean) {
  std::vector<double> raw(static_cast<std::size_t>(ranks));
  for (int d = 0; d < ranks; ++d)
    raw[static_cast<std::size_t>(d)] = site.recv_block[static_cast<std::size_t>(traced_index(d, ranks, site.ranks))];
  const double have = std::accumulate(raw.begin(), raw.end(), 0.0) / ranks;
  const double want = mean > 0 ? static_cast<double>(mean) : site.block;
  std::vector<std::size_t> out(static_cast<std::size_t>(ranks));
  for (int d = 0; d < ranks; ++d)
    out[static_cast<std::size_t>(d)] =
        have > 0 ? static_cast<std::size_t>(std::llround(raw[static_cast<std::size_t>(d)] * want / have)) : 0;
  return out;
}

double reader_total(double ret, const TracedReads& reads, const std::function<double(int)>& ready) {
  double t = ret;
  for (std::size_t k = 0; k < reads.order.size(); ++k) t = std::max(t + reads.gap[k], ready(reads.order[k]));
  return t + reads.tail;
}

}  // namespace tnbc::sim
