// From observations to a plan: analyse each call site, predict its overlap, choose the Bcast
// segmentation, and fill a PlanEntry.  The rules are in docs/ordering.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "consensus.hpp"
#include "cost_model.hpp"
#include "observations.hpp"
#include "plan.hpp"

namespace tnbc::priority {

/// Everything the planner may be told; defaults are the documented ones.
struct PlannerOptions {
  ConsensusOptions consensus;
  LogGP loggp;
  BcastLimits bcast;
  double tinit_us = 0;  ///< Tinit for formula (3); traces cannot measure it
  /// Per-node priority at all.  Off by default: on the emulated cluster it made the FT-like
  /// kernel slower (docs/replay.md, "Per-node priority"); `tnbc-order plan --per-node` asks.
  bool per_node = false;
  /// Per-node priority only pays when ranks need the same source first, i.e. agree on the order.
  double per_node_agreement = 0.8;
  /// A site whose predicted overlap (simulated, plan order) is below this share of its Tcomm
  /// gets "return blocking": returning early cannot pay for its costs there.  0 = never.
  double blocking_below = 0.10;
  /// A site whose predicted overlap is at least this share of its Tcomm gets "return early":
  /// the library returns early from its first call instead of measuring both paths for dozens
  /// of calls first (docs/replay.md, "Deciding per call").  0 = never.
  double early_above = 0.50;
  /// The send window ("window N") of a site with per-node priority whose data is read right
  /// after the call (verdict CRC): its inter-node chunks go this many at a time instead of
  /// TNBC_CHUNK_WINDOW's 2.  There the program waits for the data anyway, and a window of 8 was
  /// faster than 2 in all 8 such cells of bench/overlap.py on the emulated links; where
  /// unrelated work comes first (CURC) the deeper window's packet work cost that work 7-12%
  /// (docs/measurements/scale.md, "The send window at scale").  0 = never written.
  int read_at_once_window = 8;
};

/// The planner's view of one call site (what `tnbc-order show` prints).
struct SitePlan {
  SiteAnalysis analysis;
  OverlapInputs inputs;
  OverlapPrediction prediction;
  std::optional<BcastChoice> bcast;  ///< Bcast sites only
  std::optional<PlanEntry> entry;    ///< nullopt when the site cannot be planned (see warnings)
  std::vector<std::string> warnings;
};

/// Plans one site.  The entry:
///   order: the consensus order (Bcast: segment_order of it over the chosen segment count);
///   per-node on for Alltoall(v) with comm size > 1, verdict not unread and agreement >=
///   per_node_agreement; off otherwise (Bcast: always off);
///   comm size and size class of the site; frames made printable; agreement and verdict;
///   return blocking when the site's data is read (verdict not unread), its Tcomm is known and
///   the predicted overlap with the plan order is below blocking_below of Tcomm; return early
///   under the same conditions when it is at least early_above of Tcomm.
/// No entry (and a warning) for an id a plan cannot hold, no sub-messages, or an Alltoall(v)
/// whose sub-message count differs from its communicator size.
SitePlan plan_site(const CallSite& site, const PlannerOptions& options = {});

/// The predicted overlap of a planned site (simulated, its consensus order) as a share of its
/// Tcomm: what plan_site's return verdicts compare with blocking_below and early_above, and
/// what replay mode's room point asks of a rank's own observations (shim/replay/learn/learn.hpp, room()).
/// nullopt where the data is never read (verdict unread) or Tcomm is unknown.
std::optional<double> overlap_share(const SitePlan& plan);

/// Plans every site; sites that cannot be planned are left out and their warnings appended to
/// *warnings (when not null).  Two sites with the same key keep the first.
Plan make_plan(const Observations& observations, const PlannerOptions& options = {},
               std::vector<std::string>* warnings = nullptr);

/// Order of `segments` segments from the read order of `pieces` traced pieces of one buffer:
/// piece i lies in segment floor(i·segments/pieces); a segment ranks by the earliest read
/// position of its pieces, ties by index.  Identity when pieces is 0.
std::vector<std::uint32_t> segment_order(std::span<const std::size_t> piece_order,
                                         std::size_t pieces, int segments);

}  // namespace tnbc::priority
