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
  const int p = static_cast<int>(node_of.size());
  const int parts = std::max(work.parts, 1);
  const double w = work.crc / (p * parts);
  const double start = tinit + work.curc;
  std::vector<std::size_t> part_bytes;
  for (int q = 0; q < parts; ++q)
    part_bytes.push_back(block * static_cast<std::size_t>(q + 1) / static_cast<std::size_t>(parts) -
                         block * static_cast<std::size_t>(q) / static_cast<std::size_t>(parts));
  double lateness = 0;
  for (int n : std::set<int>(node_of.begin(), node_of.end())) {
    // (need time, reader, block, part) of every part that crosses n's outgoing link, sent
    // earliest-need-first (Jackson's rule minimises the largest lateness on the link).
    std::vector<std::tuple<double, int, int, int>> units;
    std::vector<int> here;  // the ranks on node n
    for (int b = 0; b < p; ++b)
      if (node_of[static_cast<std::size_t>(b)] == n) here.push_back(b);
    for (int r = 0; r < p; ++r)
      if (node_of[static_cast<std::size_t>(r)] != n)
        for (int b : here)
          for (int q = 0; q < parts; ++q) units.emplace_back(start + (b * parts + q) * w, r, b, q);
    std::sort(units.begin(), units.end());
    double sent = 0;
    for (const auto& [need, r, b, q] : units) {
      sent += static_cast<double>(part_bytes[static_cast<std::size_t>(q)]);
      lateness = std::max(lateness, sent / rate - need);
    }
  }
  return start + work.crc + lateness;
}

}  // namespace tnbc::sim
