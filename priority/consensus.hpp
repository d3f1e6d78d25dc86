// Consensus first-touch order of one call site, how far the ranks agree with it, per
// sub-message timing, and the CURC/CRC verdict.  docs/ordering.md states the same rules for users.
//
// Algorithm: two-level median rank aggregation.
//   Idea: a sub-message's key is the median time from return to its first touch.  Medians make
//   the order robust: a minority of ranks (or of calls within one rank) reading in another order
//   cannot move a key past the values of the majority, which is what an SPMD program's plan
//   should follow (the paper's optimisation targets ranks reading in the same order).  Delays
//   rather than positions are the primary key because they also separate "read at once" from
//   "read much later"; positions only break ties.
//   1. Per call, the call's own order: touched sub-messages by (delay, index); position p of a
//      touched sub-message = its place in that order; untouched ones get position n (after
//      all).  Unobserved ones say nothing and are left out of every median.
//   2. Per rank, per sub-message: median over the rank's calls of the delay (untouched = +inf)
//      and of the position.  Sorting the rank's sub-messages by these gives the rank's order.
//   3. Consensus, per sub-message: median over ranks of the per-rank medians (each rank one vote,
//      whatever its number of calls).
//   4. Order: sub-messages with a finite key first, by (key, median position, index); then the
//      tail - keys +inf (untouched by most) or without any observation - by index (stable).
//   Edge cases: no rank or no call -> identity order, everything in the tail; a call with the
//   wrong number of touches is padded with "unobserved" / cut, and a warning says so.
//   Median of an even count = mean of the two middle values (+inf if either is +inf).
//   Cost: O(R·C·n log n) for R ranks, C calls, n sub-messages.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "observations.hpp"

namespace tnbc::priority {

/// What the application does first after the collective returns.
enum class Verdict {
  crc,     ///< communication-related: reads the received data soon after return (first touch
           ///< before curc_fraction·Tcomm); the read order decides the overlap
  curc,    ///< communication-unrelated work first: the first touch comes at or after
           ///< curc_fraction·Tcomm, so much of the collective hides behind it whatever the order
  unread,  ///< no sub-message was ever touched in any traced call: everything can overlap
};

std::string_view to_string(Verdict verdict);

/// Thresholds of the analysis; defaults are the documented ones.
struct ConsensusOptions {
  /// Ranks whose concordance with the consensus is below this are listed as disagreeing.
  double concordance_threshold = 0.8;
  /// CURC when the median first touch is at least this fraction of the median Tcomm: then
  /// unrelated work alone hides that fraction of the collective (formula (1) with RCRC -> inf).
  double curc_fraction = 0.5;
};

/// Timing of one sub-message, pooled over every rank and call.  The *_us statistics are over
/// touched observations only and are NaN when there is none.
struct MessageStats {
  std::size_t touched = 0;
  std::size_t untouched = 0;
  std::size_t unobserved = 0;
  double key_us = 0;  ///< consensus key (step 3); +inf when untouched by most, NaN when no data
  double median_position = 0;  ///< consensus median position (step 3); NaN when no data
  double min_us = 0, q1_us = 0, median_us = 0, q3_us = 0, max_us = 0;  ///< quantiles (type 7)
};

/// One rank's own order and how well it agrees with the consensus.
struct RankAgreement {
  int rank = 0;
  std::vector<std::size_t> order;  ///< the rank's own order (step 2), a permutation of 0..n-1
  std::size_t ordered = 0;         ///< length of its evidence-ordered head
  double concordance = 1.0;        ///< see concordance()
};

/// Everything analyse() finds about one call site.
struct SiteAnalysis {
  std::vector<std::size_t> order;  ///< consensus order, a permutation of 0..n-1, first read first
  std::size_t ordered = 0;         ///< length of the evidence-ordered head; order[ordered..] is the tail
  std::vector<MessageStats> messages;  ///< indexed by sub-message
  std::vector<RankAgreement> ranks;    ///< in the order of CallSite::ranks
  double agreement = 1.0;              ///< mean concordance over ranks (1.0 when no rank)
  std::vector<int> disagreeing;        ///< ranks below the concordance threshold, ascending
  Verdict verdict = Verdict::unread;
  double tcomm_us = 0;        ///< median Tcomm over all calls (0 when no call)
  double first_touch_us = 0;  ///< median over calls with a touch of the earliest touch (TCURC)
  double touch_interval_us = 0;  ///< median over calls with >= 2 touches of
                                 ///< (last - first touch) / (touches - 1); 0 when none
  std::vector<std::string> warnings;  ///< inconsistent input that was repaired
};

/// Analyses one call site.  Never throws on inconsistent data (see warnings); ranks with no call
/// get concordance 1.0 and the identity order.
SiteAnalysis analyse(const CallSite& site, const ConsensusOptions& options = {});

/// Step 2 of one rank, per sub-message: the median over its calls of the first-touch delay
/// (+inf untouched) and of the position (n untouched); NaN where no call observed it.
struct RankSummary {
  std::vector<double> delay;
  std::vector<double> position;
};
/// Steps 1 and 2 over one rank's calls (calls of the wrong length are padded or cut, silently).
RankSummary summarise_rank(std::span<const CallRecord> calls, std::size_t messages);

/// Steps 3 and 4: the consensus key, median position and order of `messages` sub-messages.
struct Consensus {
  std::vector<std::size_t> order;  ///< a permutation of 0..messages-1, first read first
  std::size_t ordered = 0;         ///< length of the evidence-ordered head
  std::vector<double> key;         ///< per sub-message: median over ranks of their delays
  std::vector<double> position;    ///< per sub-message: median over ranks of their positions
};
/// From the ranks' summaries (each rank one vote; summaries of another length are left out).
/// analyse() orders with the same two functions: replay mode's online learning
/// (shim/replay/learn/learn.hpp) gathers summaries from every rank and calls consensus() itself.
Consensus consensus(std::span<const RankSummary> ranks, std::size_t messages);

/// Kendall-style concordance in [0, 1] of `order` with `reference` (both permutations of
/// 0..n-1).  `order_tail` / `reference_tail` are how many trailing entries of each are an
/// unordered tail.  Pairs lying both in the same tail are skipped; over the other pairs with C
/// concordant and D discordant, concordance = max(0, (C - D) / (C + D)): 1 for the same order,
/// about 0 for an unrelated one, 0 for the reverse.  1 when no pair counts; 0 when the two are
/// not permutations of the same 0..n-1.
double concordance(std::span<const std::size_t> order, std::size_t order_tail,
                   std::span<const std::size_t> reference, std::size_t reference_tail);

/// Median as defined above (mean of the two middle values; +inf if either is +inf; NaN when
/// `values` is empty).  Sorts `values`.
double median(std::vector<double>& values);

/// Quantile q in [0, 1], type 7 (linear interpolation between order statistics), of finite
/// values; NaN when empty.  Sorts `values`.
double quantile(std::vector<double>& values, double q);

}  // namespace tnbc::priority
