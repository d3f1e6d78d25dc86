// MinNumaDist (Kurnosov & Tokmasheva 2020, section 5): the root of a node barrier is the rank
// whose NUMA node has the smallest total distance to the NUMA nodes of all ranks (highest
// closeness), because the root first-writes, and so places, the global flags.
#pragma once

#include <span>

#include "topology.hpp"

namespace tnbc::barrier {

/// Sum over j of topology.distance(nodes[i], nodes[j]).
long numa_distance_sum(const Topology& topology, std::span<const int> nodes, int i);

/// The index i (local rank) minimising numa_distance_sum(); the first minimum wins.
/// `nodes[i]` is the NUMA node of local rank i.  O(p^2); 0 for an empty span.
int min_numa_dist(const Topology& topology, std::span<const int> nodes);

}  // namespace tnbc::barrier
