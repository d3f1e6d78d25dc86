// What tnbc-order's show and plot share (one call site as the tool presents it, and the words and
// numbers it prints), and plot's SVG.  tools/tnbc_order.cpp is the command-line front end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "priority/planner.hpp"
#include "trace/trace_file.hpp"

namespace tnbc::tools::order {

namespace pr = tnbc::priority;
namespace tr = tnbc::trace;

/// One call site: the observations of every rank, this tool's trace detail, and its plan.
struct SiteView {
  const pr::CallSite* site;
  const tnbc::shim::observe::CallSite* trace_site;
  pr::SitePlan plan;
};

/// Calls of the site over all ranks.
std::size_t total_calls(const pr::CallSite& site);
/// CRC, CURC or unread.
std::string verdict_name(pr::Verdict v);
/// Microseconds with one decimal, "-" when not finite.
std::string us(double v);

/// The site's first-touch plot: one SVG document; `number` is the site's number in `show`.
std::string plot_svg(const SiteView& v, std::size_t number);

}  // namespace tnbc::tools::order
