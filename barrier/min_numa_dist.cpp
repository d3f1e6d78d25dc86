// Algorithm: min_numa_dist
//
// Idea: pick the root whose NUMA node is closest, in total, to every rank's NUMA node
// (minimum of the sum of distances, the inverse of closeness centrality).
//
// Phases:
//   1. For each rank i: dsum(i) = sum over j of distance(node(i), node(j)).
//   2. root = the first i with the smallest dsum.
//
// Edge cases: ties (symmetric placements) keep the lowest rank, so a symmetric machine keeps
// root 0 as the paper recommends.  Ranks on one node: every sum is equal, root 0.
//
// Cost: O(p^2) distance look-ups, once per communicator at setup.
#include "min_numa_dist.hpp"

#include <limits>

namespace tnbc::barrier {

long numa_distance_sum(const Topology& topology, std::span<const int> nodes, int i) {
  long sum = 0;
  for (int node : nodes) sum += topology.distance(nodes[i], node);
  return sum;
}

int min_numa_dist(const Topology& topology, std::span<const int> nodes) {
  int root = 0;
  long best = std::numeric_limits<long>::max();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    long sum = numa_distance_sum(topology, nodes, i);
    if (sum < best) {
      best = sum;
      root = i;
    }
  }
  return root;
}

}  // namespace tnbc::barrier
