// See order_plot.hpp.
#include "order_plot.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "util/xml.hpp"

namespace tnbc::tools::order {

std::size_t total_calls(const pr::CallSite& site) {
  std::size_t n = 0;
  for (const auto& r : site.ranks) n += r.calls.size();
  return n;
}

std::string verdict_name(pr::Verdict v) {
  switch (v) {
    case pr::Verdict::crc: return "CRC";
    case pr::Verdict::curc: return "CURC";
    case pr::Verdict::unread: return "unread";
  }
  return "?";
}

std::string us(double v) { return std::isfinite(v) ? fmt::format("{:.1f}", v) : "-"; }

namespace {

/// Ticks for [0, hi]: a step of 1, 2 or 5 times a power of ten giving 4-8 ticks.
std::vector<double> nice_ticks(double hi) {
  if (!(hi > 0)) hi = 1;
  double raw = hi / 5;
  double pow10 = std::pow(10.0, std::floor(std::log10(raw)));
  double step = pow10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * pow10 >= raw) {
      step = m * pow10;
      break;
    }
  std::vector<double> ticks;
  for (int i = 0; i * step <= hi * 1.0000001 + step; ++i) {
    ticks.push_back(i * step);
    if (i * step >= hi) break;
  }
  return ticks;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3) return fmt::format("{:.0e}", v);
  return fmt::format("{}", v);
}

}  // namespace

std::string plot_svg(const SiteView& v, std::size_t number) {
  const auto& s = *v.site;
  const auto& a = v.plan.analysis;
  constexpr double kW = 900, kH = 540, kLeft = 80, kRight = 170, kTop = 60, kBottom = 70;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  const std::size_t n = std::max<std::size_t>(s.messages, 1);

  double hi = 0;
  for (const auto& r : s.ranks)
    for (const auto& c : r.calls)
      for (const auto& t : c.touches)
        if (t.state == pr::TouchState::touched) hi = std::max(hi, t.delay_us);
  auto ticks = nice_ticks(hi);
  const double ymax = ticks.back() > 0 ? ticks.back() : 1;
  auto x_of = [&](double k) { return kLeft + (k + 0.5) * pw / static_cast<double>(n); };
  auto y_of = [&](double us) { return kTop + ph - us / ymax * ph; };

  static constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                             "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::string o = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kW, kH);
  std::string where = s.frames.empty() ? s.id : s.frames.front();
  o += fmt::format("<title>First touch after return: {} at {}</title>\n", pr::to_string(s.op), util::xml_escape(where));
  o += fmt::format(
      "<text id=\"title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">First touch after "
      "return: call site {}, {} at {}</text>\n",
      kLeft + pw / 2, number, pr::to_string(s.op), util::xml_escape(where));
  o += fmt::format(
      "<text x=\"{}\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">{} calls on {} ranks, agreement "
      "{:.3f}, verdict {}, Tcomm {} us</text>\n",
      kLeft + pw / 2, total_calls(s), s.ranks.size(), a.agreement, verdict_name(a.verdict), us(a.tcomm_us));

  // Axes, ticks, grid.
  o += "<g id=\"axes\" stroke=\"black\" fill=\"none\">\n";
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", kLeft, kTop, kTop + ph);
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>\n", kLeft, kTop + ph, kLeft + pw);
  o += "</g>\n<g id=\"yticks\" font-size=\"11\">\n";
  for (double t : ticks) {
    double y = y_of(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#ddd\"/>"
                     "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"black\"/>"
                     "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                     kLeft, kLeft + pw, kLeft - 5, kLeft, kLeft - 8, y + 4, tick_label(t),
                     fmt::arg("y", y));
  }
  o += "</g>\n<g id=\"xticks\" font-size=\"11\">\n";
  const std::size_t label_every = n <= 32 ? 1 : (n + 31) / 32;
  for (std::size_t k = 0; k < n; ++k) {
    double x = x_of(static_cast<double>(k));
    o += fmt::format("<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"black\"/>", kTop + ph,
                     kTop + ph + 5, fmt::arg("x", x));
    if (k % label_every == 0)
      o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x, kTop + ph + 18, k);
    o += "\n";
  }
  o += "</g>\n";
  o += fmt::format("<text id=\"xlabel\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">sub-message index ({})</text>\n",
                   kLeft + pw / 2, kH - 25,
                   s.op == pr::Op::bcast ? "unit of the buffer" : "source rank");
  o += fmt::format("<text id=\"ylabel\" x=\"20\" y=\"{0}\" text-anchor=\"middle\" "
                   "transform=\"rotate(-90 20 {0})\">delay from return to first touch (us)</text>\n",
                   kTop + ph / 2);

  // Marks: one per rank, call and touched sub-message; spread sideways by rank so that equal
  // delays of different ranks stay visible.
  const double slot = pw / static_cast<double>(n);
  const double spread = std::min(slot * 0.6, 40.0);
  o += "<g id=\"marks\">\n";
  for (std::size_t ri = 0; ri < s.ranks.size(); ++ri) {
    const auto& r = s.ranks[ri];
    const char* colour = kColours[static_cast<std::size_t>(r.rank) % std::size(kColours)];
    double dx = s.ranks.size() > 1
                    ? (static_cast<double>(ri) / static_cast<double>(s.ranks.size() - 1) - 0.5) * spread
                    : 0;
    o += fmt::format("<g class=\"rank\" data-rank=\"{}\" fill=\"{}\" fill-opacity=\"0.7\">\n", r.rank, colour);
    for (std::size_t ci = 0; ci < r.calls.size(); ++ci) {
      const auto& c = r.calls[ci];
      for (std::size_t k = 0; k < c.touches.size() && k < n; ++k) {
        if (c.touches[k].state != pr::TouchState::touched) continue;
        o += fmt::format("<circle class=\"mark\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\"><title>rank {} call {} "
                         "sub-message {}: {:.1f} us</title></circle>\n",
                         x_of(static_cast<double>(k)) + dx, y_of(c.touches[k].delay_us), r.rank, ci, k,
                         c.touches[k].delay_us);
      }
    }
    o += "</g>\n";
  }
  o += "</g>\n";

  // Median per sub-message (over every rank and call).
  std::string points;
  for (std::size_t k = 0; k < a.messages.size() && k < n; ++k)
    if (std::isfinite(a.messages[k].median_us))
      points += fmt::format("{:.2f},{:.2f} ", x_of(static_cast<double>(k)), y_of(a.messages[k].median_us));
  if (!points.empty()) {
    points.pop_back();
    o += fmt::format("<polyline id=\"median\" points=\"{}\" fill=\"none\" stroke=\"black\" "
                     "stroke-width=\"2\"/>\n", points);
  }

  // Legend.
  const double lx = kLeft + pw + 20;
  double ly = kTop + 10;
  o += "<g id=\"legend\">\n";
  o += fmt::format("<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"black\" stroke-width=\"2\"/>"
                   "<text x=\"{}\" y=\"{}\">median</text>\n",
                   lx, lx + 20, lx + 26, ly + 4, fmt::arg("ly", ly));
  const std::size_t shown = std::min<std::size_t>(s.ranks.size(), 20);
  for (std::size_t ri = 0; ri < shown; ++ri) {
    ly += 18;
    int rank = s.ranks[ri].rank;
    o += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">rank {}</text>\n",
                     lx + 10, ly, kColours[static_cast<std::size_t>(rank) % std::size(kColours)], lx + 26,
                     ly + 4, rank);
  }
  if (shown < s.ranks.size())
    o += fmt::format("<text x=\"{}\" y=\"{}\">... {} more ranks</text>\n", lx, ly + 22,
                     s.ranks.size() - shown);
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace tnbc::tools::order
