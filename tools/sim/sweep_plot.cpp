#include "sweep_plot.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "util/file.hpp"
#include "util/xml.hpp"

namespace tnbc::sim {

std::string rate_text(double bytes_per_s) {
  const double bits = bytes_per_s * 8;
  if (bits >= 1e9) return fmt::format("{:g} Gbit", bits / 1e9);
  if (bits >= 1e6) return fmt::format("{:g} Mbit", bits / 1e6);
  return fmt::format("{:g} kbit", bits / 1e3);
}

std::string sweep_svg(std::string_view title, const std::vector<SweepPoint>& points, bool with_plan) {
  constexpr double W = 720, H = 420, left = 70, right = 170, top = 40, bottom = 60;
  const double pw = W - left - right, ph = H - top - bottom;
  double xmin = 1, xmax = 2, ymax = 1.2;
  if (!points.empty()) {
    xmin = std::log2(std::max(1, points.front().ranks));
    xmax = xmin;
    for (const SweepPoint& p : points) {
      const double x = std::log2(std::max(1, p.ranks));
      xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      for (double g : {p.no_plan, p.plan, p.bound})
        if (std::isfinite(g)) ymax = std::max(ymax, g);
    }
  }
  if (xmax - xmin < 1) xmax = xmin + 1;
  ymax = std::ceil(ymax * 5) / 5;  // a tick of 0.2 at the top
  auto X = [&](int ranks) { return left + (std::log2(std::max(1, ranks)) - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double g) { return top + ph - std::clamp(g, 0.0, ymax) / ymax * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n",
      W, H, W, H, left, util::xml_escape(title));
  // Axes, the gain ticks every 0.2 (labels every 0.4 above 2), and 1.0: plain MPICH.
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, top + ph);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", left, top + ph, left + pw);
  const double step = ymax > 2 ? 0.4 : 0.2;
  for (double g = 0; g <= ymax + 1e-9; g += step)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.1f}</text>\n", left - 6, Y(g) + 4, g);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n",
                   left, Y(1.0), left + pw);
  s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#555\">plain MPICH</text>\n", left + pw + 6, Y(1.0) + 4);
  for (const SweepPoint& p : points)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", X(p.ranks), top + ph + 18, p.ranks);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">ranks</text>\n", left + pw / 2, H - 16);
  s += fmt::format("<text x=\"18\" y=\"{0}\" transform=\"rotate(-90 18 {0})\" text-anchor=\"middle\">"
                   "gain: plain MPICH's time / the configuration's</text>\n",
                   top + ph / 2);
  struct Line {
    const char* name;
    const char* colour;
    const char* dash;
    double SweepPoint::*field;
  };
  std::vector<Line> lines = {{"tnbc, no plan", "#1f77b4", "", &SweepPoint::no_plan}};
  if (with_plan) lines.push_back({"tnbc, plan", "#d62728", "", &SweepPoint::plan});
  lines.push_back({"link bound", "#2ca02c", " stroke-dasharray=\"6 4\"", &SweepPoint::bound});
  double legend_y = top + 10;
  for (const Line& l : lines) {
    std::string pts;
    for (const SweepPoint& p : points)
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", X(p.ranks), Y(p.*l.field));
    s += fmt::format("<polyline class=\"gain\" data-name=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
                     l.name, l.colour, l.dash, pts);
    for (const SweepPoint& p : points)
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{} ranks: {:.3f}</title></circle>\n",
                       X(p.ranks), Y(p.*l.field), l.colour, p.ranks, p.*l.field);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>"
                     "<text x=\"{5}\" y=\"{6}\">{7}</text>\n",
                     left + pw + 6, legend_y + 20, left + pw + 30, l.colour, l.dash, left + pw + 36, legend_y + 24, l.name);
    legend_y += 18;
  }
  s += "</svg>\n";
  return s;
}

std::optional<std::string> write_sweep_svg(const std::string& path, std::string_view title,
                                           const std::vector<SweepPoint>& points, bool with_plan) {
  if (auto err = util::write_file_atomic(path, sweep_svg(title, points, with_plan)))
    return fmt::format("--svg {}: {}", path, *err);
  return std::nullopt;
}

}  // namespace tnbc::sim
