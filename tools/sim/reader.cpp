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
  auto part_bytes = [&](int r, int q) {
    const std::size_t block = block_of[static_cast<std::size_t>(r)];
    return static_cast<double>(block * static_cast<std::size_t>(q + 1) / static_cast<std::size_t>(parts) -
                               block * static_cast<std::size_t>(q) / static_cast<std::size_t>(parts));
  };
  // Reader r needs part q of block b at start + (b * parts + q) * TCRC_r / (p * parts) and
  // finishes at start + TCRC_r plus the largest lateness of its parts: the bound is start plus
  // the largest of TCRC_r and (arrival - need + TCRC_r) over the parts.  Jackson's rule (send
  // by due date need - TCRC_r) minimises that largest value on one link.
  double worst = *std::max_element(crc_of.begin(), crc_of.end());
  for (int n : std::set<int>(node_of.begin(), node_of.end()))
    for (const bool outgoing : {true, false}) {
      // (due date, bytes, need, TCRC of the reader) of every part that crosses the link.
      std::vector<std::tuple<double, double, double, double>> units;
      for (int r = 0; r < p; ++r)
        for (int b = 0; b < p; ++b) {
          const bool sender_here = node_of[static_cast<std::size_t>(b)] == n;
          const bool reader_here = node_of[static_cast<std::size_t>(r)] == n;
          if (sender_here == reader_here || sender_here != outgoing) continue;
          const double crc = crc_of[static_cast<std::size_t>(r)], w = crc / (p * parts);
          for (int q = 0; q < parts; ++q) {
            const double need = start + (b * parts + q) * w;
            units.emplace_back(need - crc, part_bytes(r, q), need, crc);
          }
        }
      std::sort(units.begin(), units.end());
      double sent = 0;
      for (const auto& [due, bytes, need, crc] : units) {
        sent += bytes;
        worst = std::max(worst, sent / rate - need + crc);
      }
    }
  return start + worst;
}

}  // namespace tnbc::sim
