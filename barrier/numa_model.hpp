// A NUMA cost model of the node barriers: run the real algorithm on threads, record every line
// access (wait.hpp's AccessRecorder) and weight it by the NUMA distance between the accessing
// rank's node and the node holding the line (first touch: the global block on the root's
// node, rank r's block on r's node).  A machine with one NUMA node cannot measure what
// MinNumaDist changes; the model shows the direction on modelled machines (docs/measurements/barrier.md).
#pragma once

#include <span>

#include "barrier.hpp"
#include "topology.hpp"

namespace tnbc::barrier {

struct ModelCost {
  double weighted = 0;  ///< sum of distance(accessor node, home node) per barrier
  double accesses = 0;  ///< line accesses per barrier
  double remote = 0;    ///< of which to a line on another NUMA node
};

/// Mean cost of one barrier of algorithm `a` over `episodes` barriers (after one warm-up),
/// ranks on NUMA nodes `nodes` (local rank i on nodes[i]), rooted at `root`.  A wait counts as
/// one read; central_counter's last arrival varies between runs, hence the mean.
ModelCost model_cost(Algorithm a, const Topology& topology, std::span<const int> nodes, int root,
                     int episodes = 50);

}  // namespace tnbc::barrier
