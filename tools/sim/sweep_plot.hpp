// tnbc-sim --sweep --svg: the predicted gain over plain MPICH against the rank count, as one SVG
// document (no dependencies: the text is written here).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tnbc::sim {

/// One rank count of a sweep: plain MPICH's predicted total divided by each configuration's
/// (above 1: faster than plain MPICH).  plan 0: no plan was simulated.
struct SweepPoint {
  int ranks = 0;
  double no_plan = 0, plan = 0, bound = 0;
};

/// The SVG document: ranks on a log2 axis, one line per configuration (tnbc without a plan,
/// with the plan when `with_plan`, and the link bound: the gain no schedule exceeds), 1.0 marked.
std::string sweep_svg(std::string_view title, const std::vector<SweepPoint>& points, bool with_plan);

/// Writes sweep_svg() to `path` (atomically); an error message, or nullopt.
std::optional<std::string> write_sweep_svg(const std::string& path, std::string_view title,
                                           const std::vector<SweepPoint>& points, bool with_plan);

/// A link rate for people: "100 Gbit", "200 Mbit" (bytes per second in).
std::string rate_text(double bytes_per_s);

}  // namespace tnbc::sim
