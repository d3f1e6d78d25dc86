#include "topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <numa.h>
#include <sched.h>

#include "util/file.hpp"

namespace tnbc::barrier {

int NumaTopology::distance(int a, int b) const {
  if (numa_available() < 0) return 10;
  int d = numa_distance(a, b);
  return d > 0 ? d : (a == b ? 10 : 20);
}

int NumaTopology::node_of_self(int) const {
  if (numa_available() < 0) return 0;
  int cpu = sched_getcpu();
  if (cpu < 0) return 0;
  int node = numa_node_of_cpu(cpu);
  return node < 0 ? 0 : node;
}

int NumaTopology::node_count() const {
  // The highest node number, not numa_num_configured_nodes(), which counts nodes with memory
  // only: CPUs on a memoryless node are on a node of their own.
  return numa_available() < 0 ? 1 : std::max(1, numa_max_node() + 1);
}

namespace {

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) words.push_back(line.substr(i, j - i));
    i = j;
  }
  return words;
}

std::optional<int> to_int(std::string_view w) {
  int v = 0;
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || p != w.data() + w.size() || v < 0) return std::nullopt;
  return v;
}

TopologyParse fail(std::string message) { return TopologyParse{std::nullopt, std::move(message)}; }

}  // namespace

TopologyParse parse_topology(std::string_view text) {
  enum class Section { none, distances, ranks } section = Section::none;
  std::vector<std::vector<int>> rows;
  std::vector<int> ranks;
  std::vector<int> row_lines;  // line number of each row, for messages
  int line_no = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto words = split_words(line);
    if (words.empty()) continue;
    std::size_t first = 0;
    if (words[0] == "distances") {
      if (section != Section::none)
        return fail(fmt::format("line {}: 'distances' must come first and only once", line_no));
      if (words.size() > 1)
        return fail(fmt::format("line {}: the matrix rows go on the lines after 'distances'",
                                line_no));
      section = Section::distances;
      continue;
    }
    if (words[0] == "ranks") {
      if (section != Section::distances)
        return fail(fmt::format("line {}: 'ranks' must follow the 'distances' section", line_no));
      section = Section::ranks;
      first = 1;
    }
    if (section == Section::none)
      return fail(fmt::format("line {}: expected 'distances'", line_no));
    std::vector<int> values;
    for (std::size_t i = first; i < words.size(); ++i) {
      auto v = to_int(words[i]);
      if (!v)
        return fail(fmt::format("line {}: '{}' is not a non-negative integer", line_no, words[i]));
      values.push_back(*v);
    }
    if (section == Section::distances) {
      rows.push_back(std::move(values));
      row_lines.push_back(line_no);
    } else {
      ranks.insert(ranks.end(), values.begin(), values.end());
    }
  }
  if (section == Section::none) return fail("no 'distances' section");
  if (rows.empty()) return fail("'distances' has no rows");
  if (section != Section::ranks) return fail("no 'ranks' section");
  const std::size_t n = rows.size();
  for (std::size_t i = 0; i < n; ++i)
    if (rows[i].size() != n)
      return fail(fmt::format("line {}: row {} has {} distances, expected {} (one per NUMA node)",
                              row_lines[i], i, rows[i].size(), n));
  if (ranks.empty()) return fail("'ranks' lists no rank");
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r] >= static_cast<int>(n))
      return fail(fmt::format("rank {} is on NUMA node {}, but the matrix has {} nodes", r,
                              ranks[r], n));
  return TopologyParse{MatrixTopology(std::move(rows), std::move(ranks)), {}};
}

TopologyParse load_topology(const std::string& path) {
  std::string text;
  if (auto err = util::read_file(path, kMaxTopologyBytes, text)) return fail(*err);
  TopologyParse r = parse_topology(text);
  if (!r.topology) r.error = fmt::format("{}: {}", path, r.error);
  return r;
}

}  // namespace tnbc::barrier
