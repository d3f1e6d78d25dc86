#include "reader.hpp"

#include <algorithm>
#include <set>
#include <tuple>

namespace tnbc::sim {

const std::vector<Scenario>& scenarios() {
  // bench/overlap.py's SCENARIOS (fractions from the paper's Table 1: Tcomm 268 ms).
  static const std::vector<Scenario> all{
      {"a", "TCURC >= Tcomm", 1.66, 0.0},
      {"b", "TCURC = 0, RCRC < Rcomm", 0.0, 1.3},
      {"c", "TCURC = 0, RCRC > Rcomm", 0.0, 0.65},
      {"d", "0 < TCURC < Tcomm, RCRC < Rcomm", 0.66, 1.3},
      {"e", "0 < TCURC < Tcomm, RCRC > Rcomm", 0.66, 0.65},
      {"none", "data read at once, nothing to overlap", 0.0, 0.0},
  };
  return all;
}

std::optional<Scenario> find_scenario(std::string_view name) {
  for (const Scenario& s : scenarios())
    if (s.name == name) return s;
  return std::nullopt;
}

double reader_total(double ret, const Work& work, int ranks, std::size_t block,
                    const std::function<double(std::size_t, std::size_t)>& ready) {
  // bench/overlap.c: a read longer than this waited for its data; shorter ones did not.
  constexpr double kWaited = 200e-6;
  const int parts = std::max(work.parts, 1);
  const double share = work.crc / ranks / parts;
  double deadline = ret + work.curc;
  double t = deadline;  // spin_until(deadline)
  for (int b = 0; b < ranks; ++b)
    for (int q = 0; q < parts; ++q) {
      const std::size_t base = static_cast<std::size_t>(b) * block;
      const std::size_t lo = block * static_cast<std::size_t>(q) / static_cast<std::size_t>(parts);
      const std::size_t hi = block * static_cast<std::size_t>(q + 1) / static_cast<std::size_t>(parts);
      const double p1 = std::max(t, ready(base + lo, base + hi));
      if (p1 - t > kWaited) deadline = std::max(deadline, p1);
      deadline += share;
      t = std::max(p1, deadline);
    }
  return t;
}

double link_bound(const std::vector<int>& node_of, double rate, std::size_t block, const Work& work,
                  double tinit) {
  const std::vector<std::size_t> block_of(node_of.size(), block);
  const std::vector<double> crc_of(node_of.size(), work.crc);
  return link_bound(node_of, rate, block_of, crc_of, work, tinit);
}

double link_bound(const std::vector<int>& node_of, double rate, std::span<const std::size_t> block_of,
                  std::span<const double> crc_of, const Work& work, double tinit) {
  const int p = static_cast<int>(node_of.size());
  const int parts = std::max(work.parts, 1);
  const double start = tinit + work.curc;
  // Reader r needs part q of block b at start + (b * parts + q) * TCRC_r / (p * parts) and
  // finishes at start + TCRC_r when nothing waits.
  std::vector<Need> needs;
  std::vector<double> end_of(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    const std::size_t block = block_of[static_cast<std::size_t>(r)];
    const double crc = crc_of[static_cast<std::size_t>(r)], w = crc / (p * parts);
    end_of[static_cast<std::size_t>(r)] = start + crc;
    for (int b = 0; b < p; ++b)
      for (int q = 0; q < parts; ++q) {
        const std::size_t lo = block * static_cast<std::size_t>(q) / static_cast<std::size_t>(parts);
        const std::size_t hi = block * static_cast<std::size_t>(q + 1) / static_cast<std::size_t>(parts);
        needs.push_back({r, b, static_cast<double>(hi - lo), start + (b * parts + q) * w});
      }
  }
  return link_bound(node_of, rate, needs, end_of);
}

double link_bound(const std::vector<int>& node_of, double rate, std::span<const Need> needs,
                  std::span<const double> end_of) {
  // A reader finishes at its end plus the largest lateness (arrival - need) of its blocks: the
  // bound is the largest of the ends and (arrival - need + end) over the blocks that cross a
  // link.  Jackson's rule (send by due date need - end) minimises that largest value on one link.
  double worst = end_of.empty() ? 0 : *std::max_element(end_of.begin(), end_of.end());
  for (int n : std::set<int>(node_of.begin(), node_of.end()))
    for (const bool outgoing : {true, false}) {
      // (due date, bytes, need, end of the reader) of every block that crosses the link.
      std::vector<std::tuple<double, double, double, double>> units;
      for (const Need& x : needs) {
        const bool sender_here = node_of[static_cast<std::size_t>(x.sender)] == n;
        const bool reader_here = node_of[static_cast<std::size_t>(x.reader)] == n;
        if (sender_here == reader_here || sender_here != outgoing) continue;
        const double end = end_of[static_cast<std::size_t>(x.reader)];
        units.emplace_back(x.need - end, x.bytes, x.need, end);
      }
      std::sort(units.begin(), units.end());
      double sent = 0;
      for (const auto& [due, bytes, need, end] : units) {
        sent += bytes;
        worst = std::max(worst, sent / rate - need + end);
      }
    }
  return worst;
}

}  // namespace tnbc::sim
