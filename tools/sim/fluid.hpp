// The fast model of tnbc-sim: the same calls as alltoall.hpp's simulate (plain MPICH's algorithm,
// the engine's step lists posted as progress.cpp posts them), with SimGrid's flow-sharing rule
// computed per pair of nodes instead of per message.
//
// Why: SimGrid keeps one max-min variable per message in flight and solves the system again at
// every start and end of a flow.  An MPI_Alltoall on p ranks has p^2 messages in flight, and each
// of the p^2 ends re-solves all of them: p^4 work, 85 s at 128 ranks and out of reach at 1024.
//
// What is the same as SimGrid's CM02/LV08 model on tnbc-sim's platform (platform.hpp): a message
// pays the route's latency times the latency factor before it moves; then it is a flow through
// the sender's UP half and the receiver's DOWN half (the node's memory link within a node),
// with a 5% reverse flow on the way back when cross-traffic is on; the link capacities are shared
// max-min; a flow moves at the bandwidth factor times its share.  On this platform every flow
// between the same two nodes crosses the same links with the same latency, so max-min gives
// them all the same rate: the model keeps one variable per pair of nodes whose links are busy,
// and the messages of a pair share its rate equally (processor sharing, with a virtual clock per
// pair: O(log n) per message).
//
// Two ways to weigh a pair in the max-min sharing (FluidOptions::weights):
// - per_message: the pair weighs as many flows as it has messages moving; this is SimGrid's
//   per-flow rule exactly, and re-solves (O(nodes^2)) at every message start and end.
// - per_pair: every busy pair weighs one; re-solves only when a pair's link use starts or stops.
//   The same as per_message whenever the pairs sharing a link carry equally many messages
//   (an Alltoall on equal nodes, most of the time); otherwise an approximation (docs/measurements/scale.md
//   compares the two and SimGrid).
// Not modelled (as in tnbc-sim's SimGrid platform they never bind): TCP's window bound
// (network/TCP-gamma) and the per-flow bandwidth bound of the route.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "alltoall.hpp"
#include "platform.hpp"

namespace tnbc::sim {

struct FluidOptions {
  enum class Weights { per_message, per_pair };
  Weights weights = Weights::per_pair;
  /// SimGrid's network settings the model follows (LV08 defaults; CM02: 1, 1).
  double latency_factor = 13.01;
  double bandwidth_factor = 0.97;
  /// network/weight-S: a flow's sharing penalty is its route's latency plus weight_S over each
  /// link's bandwidth (LV08 20537, CM02 0); it matters where flows of different routes share a
  /// link (a fat tree's node links carry flows within and between leaves).
  double weight_S = 20537;
  bool crosstraffic = true;
  /// Reads SimGrid --cfg settings (network/model:LV08|CM02, network/crosstraffic:0|1,
  /// network/latency-factor:X, network/bandwidth-factor:X, network/weight-S:X); throws std::invalid_argument on any
  /// other, since the model would silently ignore it.
  void apply_cfg(const std::vector<std::string>& cfg);
};

/// Called once per rank and call with the rank's run, steps included; the run is dropped after
/// (at 4096 ranks every rank's steps at once would not fit in memory).
using RankVisitor = std::function<void(int rank, const RankRun& run)>;

/// Runs the calls SimOptions asks for on the fluid model.  The result's per-rank runs carry
/// entry, ret and done; their steps and step times are handed to `tnbc_visitor` (the engine
/// without a plan) and `plan_visitor` (with the plan's order), when set, and not kept, unless
/// `keep_steps`.
SimResult simulate_fluid(const PlatformSpec& spec, const SimOptions& options, const FluidOptions& fluid,
                         const RankVisitor& tnbc_visitor = {}, bool keep_steps = false,
                         const RankVisitor& plan_visitor = {});

}  // namespace tnbc::sim
