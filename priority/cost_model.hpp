// Cost models: how much of a collective the application can overlap (paper section 3), and the
// LogGP choice of segment count and tree shape for Bcast (seed 4: k parallel chains).
// docs/ordering.md gives the same rules for users.
//
// Units: microseconds; rates in sub-messages per microsecond (all sub-messages of a call are
// taken to be the same size, so bytes cancel out of Tcomm·Rcomm/RCRC).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "consensus.hpp"
#include "observations.hpp"

namespace tnbc::priority {

/// The quantities of formulas (1) and (3).
struct OverlapInputs {
  std::size_t messages = 0;  ///< n, sub-messages per call
  double tcomm_us = 0;       ///< Tcomm: duration of the blocking collective
  double tinit_us = 0;       ///< Tinit: part of Tcomm spent before the early return
  double tcurc_us = 0;       ///< TCURC: unrelated work before the first touch
  double rcomm = 0;          ///< Rcomm = n / Tcomm
  double rcrc = 0;           ///< RCRC = 1 / (per-message read time); +inf = read all at once
};

/// Derives the inputs from an analysis (rules in docs/ordering.md):
///   Tcomm = median Tcomm; TCURC = median time to the first touch of a call;
///   per-message read time c = median over calls of (last - first touch) / (touches - 1);
///   Rcomm = n / Tcomm; RCRC = 1 / c (+inf when c = 0).  Tinit is not in a trace (the traced call
///   blocks): it is given, e.g. measured by the replay library's statistics.  With no data
///   (unread, Tcomm = 0) the rates are 0 and every overlap below is 0.
OverlapInputs derive_inputs(std::size_t messages, const SiteAnalysis& analysis, double tinit_us);

/// Formula (1): min(Tcomm, TCURC + Tcomm·Rcomm/RCRC).  The paper's fluid model: data arrives in
/// the order it is read, so reading never waits for a block that another block delayed.
double overlap_formula1(const OverlapInputs& in);
/// Formula (3): min(Tcomm - Tinit, TCURC + Tcomm·Rcomm/RCRC), never below 0.
double overlap_formula3(const OverlapInputs& in);

/// Algorithm: block simulation (discrete version of (3), which also shows what a bad order costs).
///   Idea: time 0 is the early return; the remaining communication, R = Tcomm - Tinit, delivers
///   the block in arrival slot s at (s+1)·R/n (uniform rate).  `arrival_slot[i]` is the slot of
///   sub-message i.
///   1. The application computes TCURC (unrelated work).
///   2. It reads the blocks in `read_order`, each for c = 1/RCRC, starting a block when both the
///      previous one is read and the block has arrived.
///   3. Result: compute time inside [0, R] (the overlap), in µs.
///   Edge cases: n = 0 or R <= 0 -> 0; RCRC = +inf -> c = 0.  With the plan order (slot = read
///   position) the result is below (3) by at most one block: the last block can only be read
///   after it has arrived - the paper's best overlap (m-1)/m.  Cost O(n).
double simulate_overlap(const OverlapInputs& in, std::span<const std::size_t> read_order,
                        std::span<const std::size_t> arrival_slot);

/// Arrival slots without priorities: MPICH's staggered Alltoall(v) sends to (rank+k) mod p at
/// step k, so rank r receives from (r-k) mod p, i.e. sub-message i arrives in slot (i-r) mod n.
/// Bcast segments arrive in index order whatever the rank.
std::vector<std::size_t> default_arrival_slots(Op op, std::size_t messages, std::size_t rank);

/// What each ordering is expected to hide, in µs.
struct OverlapPrediction {
  double formula1_us = 0;  ///< (1), plan order
  double formula3_us = 0;  ///< (3), plan order
  double plan_us = 0;      ///< simulate_overlap, plan order (blocks arrive in read order)
  double default_us = 0;   ///< simulate_overlap, default order, mean over ranks 0..ranks-1
};

/// Predicts overlap with the plan order vs no priorities; every rank is taken to read in
/// `read_order` (the consensus).  `ranks` = ranks to average the default order over (the
/// communicator size; 1 for Bcast, whose default order does not depend on the rank).
OverlapPrediction predict_overlap(const OverlapInputs& in, Op op,
                                  std::span<const std::size_t> read_order, std::size_t ranks);

// ---- Bcast: segment count and tree shape (LogGP) ------------------------------------------

/// LogGP parameters.  Defaults: order of magnitude of MPICH over TCP on 10 GbE (L 10 µs,
/// o 2 µs per message, g 2 µs between messages, G 0.0008 µs/byte = 1.25 GB/s).  Give measured
/// values where known.
struct LogGP {
  double latency_us = 10;         ///< L
  double overhead_us = 2;         ///< o, per send or receive
  double gap_us = 2;              ///< g, minimum interval between two messages of one process
  double us_per_byte = 0.0008;    ///< G
};

/// How a broadcast tree is shaped.
enum class TreeKind {
  binomial,  ///< MPICH's default: ceil(log2 P) rounds, the root sends to log2 P children
  chains,    ///< k parallel chains from the root (seed 4); k in TreeShape::chains
};

struct TreeShape {
  TreeKind kind = TreeKind::binomial;
  int chains = 0;  ///< k for TreeKind::chains, 0 for binomial
  bool operator==(const TreeShape&) const = default;
};

/// Limits of the segment-count choice; defaults documented in docs/ordering.md.
struct BcastLimits {
  int max_segments = 5;               ///< paper: beyond m = 4-5 little is gained
  std::uint64_t min_segment_bytes = 4096;  ///< protection works on pages and pays above 4 KiB
  double min_gain = 0.05;             ///< add a segment only if it cuts the exposed time by 5 %
};

/// a(s) = 2o + L + s·G: one hop of an s-byte message (send overhead, wire, receive overhead).
double hop_us(const LogGP& p, double bytes);
/// b(s) = o + s·G: what one more send costs its sender.
double send_us(const LogGP& p, double bytes);
/// Seed 4: t(k) = ((P-1)/k + 1)·a + (k-1)·b, one unsegmented s-byte message over k chains.
double chains_time_us(const LogGP& p, int ranks, double bytes, int k);
/// The integer k in [1, P-1] minimising t(k): floor or ceil of k* = sqrt(a(P-1)/b), the smaller
/// k on a tie.  1 when P <= 2.
int best_chains(const LogGP& p, int ranks, double bytes);
/// One unsegmented s-byte message: binomial ceil(log2 P)·a; chains t(k).  0 when P <= 1.
double tree_time_us(const LogGP& p, int ranks, double bytes, TreeShape shape);
/// Pipeline step (the time each further segment adds): the busiest process's work per segment.
/// Binomial: max(g, ceil(log2 P)·b).  Chains: max(g, k·b, 2o + s·G) (root, or a chain link that
/// receives and forwards).
double pipeline_step_us(const LogGP& p, int ranks, double bytes, TreeShape shape);
/// T(m) = tree_time(s) + (m-1)·pipeline_step(s), s = bytes/m.
double bcast_time_us(const LogGP& p, int ranks, std::uint64_t bytes, int segments, TreeShape shape);

struct BcastChoice {
  int segments = 1;
  TreeShape shape;
  double time_us = 0;     ///< T(m)
  double exposed_us = 0;  ///< T(m)/m: what the reader still waits for with perfect priorities
};

/// Algorithm: Bcast segment count m and tree.
///   Idea: with priorities the reader waits for about one segment, E(m) = T(m)/m (the paper's
///   best overlap (m-1)/m), but every segment adds a pipeline step; keep m small.
///   1. For each m in 1..M, M = min(max_segments, max(1, bytes / min_segment_bytes)): the shape
///      of smaller T(m) among binomial and best_chains(s) chains (binomial on a tie).
///   2. Start at m = 1; go to m + 1 while E(m+1) <= (1 - min_gain)·E(m).
///   Edge cases: P <= 1 -> m = 1, binomial, time 0; bytes < min_segment_bytes -> m = 1.
///   Cost: O(M) evaluations of the LogGP formulas.
BcastChoice choose_bcast(const LogGP& p, int ranks, std::uint64_t bytes,
                         const BcastLimits& limits = {});

/// The messages of the engine's Bcast: its segment count and tree, k chains from the root or
/// binomial (chains 0).  The replay library and the simulator take it alike.
struct BcastShape {
  int segments = 1;
  int chains = 0;
};
/// The shape without a plan or settings: choose_bcast with the default LogGP parameters.
BcastShape default_bcast_shape(int ranks, std::uint64_t bytes);

}  // namespace tnbc::priority
