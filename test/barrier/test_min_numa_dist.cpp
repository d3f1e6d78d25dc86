// MinNumaDist on modelled machines: the seed paper's 2 x AMD EPYC (8 NUMA nodes), a 2-socket
// Intel machine (10/21) and its Sub-NUMA-Cluster variant, symmetric and asymmetric placements.
#include <catch2/catch.hpp>

#include <vector>

#include "barrier/machines.hpp"
#include "barrier/min_numa_dist.hpp"

using namespace tnbc::barrier;

namespace {

using machines::kCascadeSnc;
using machines::kEpyc;
using machines::kIntel2;

int root_of(const std::vector<std::vector<int>>& matrix, std::vector<int> nodes) {
  MatrixTopology topo(matrix, nodes);
  return min_numa_dist(topo, nodes);
}

}  // namespace

TEST_CASE("EPYC, one rank per NUMA node: all sums equal, the first rank wins", "[min_numa_dist]") {
  // Every row of the matrix sums to 10 + 3*16 + 22 + 3*28 = 164.
  std::vector<int> nodes = {0, 1, 2, 3, 4, 5, 6, 7};
  MatrixTopology topo(kEpyc, nodes);
  for (int i = 0; i < 8; ++i) CHECK(numa_distance_sum(topo, nodes, i) == 164);
  CHECK(min_numa_dist(topo, nodes) == 0);
}

TEST_CASE("EPYC, rank 0 isolated on node 0, the others on node 6: the root moves to node 6",
          "[min_numa_dist]") {
  // rank 0: 10 + 7*22 = 164; ranks 1..7: 22 + 7*10 = 92.
  std::vector<int> nodes = {0, 6, 6, 6, 6, 6, 6, 6};
  MatrixTopology topo(kEpyc, nodes);
  CHECK(numa_distance_sum(topo, nodes, 0) == 164);
  CHECK(numa_distance_sum(topo, nodes, 1) == 92);
  CHECK(min_numa_dist(topo, nodes) == 1);
}

TEST_CASE("EPYC, most ranks on the second socket (paper section 3): root on the crowded node",
          "[min_numa_dist]") {
  // Ranks 0,1 on node 0; 2,3 on node 5; 4..7 on node 6.
  //   node 0: 2*10 + 2*28 + 4*22 = 164
  //   node 5: 2*28 + 2*10 + 4*16 = 140
  //   node 6: 2*22 + 2*16 + 4*10 = 116  <- minimum, first rank there is 4
  std::vector<int> nodes = {0, 0, 5, 5, 6, 6, 6, 6};
  MatrixTopology topo(kEpyc, nodes);
  CHECK(numa_distance_sum(topo, nodes, 0) == 164);
  CHECK(numa_distance_sum(topo, nodes, 2) == 140);
  CHECK(numa_distance_sum(topo, nodes, 4) == 116);
  CHECK(min_numa_dist(topo, nodes) == 4);
}

TEST_CASE("EPYC, a direct inter-socket link decides between equal crowds", "[min_numa_dist]") {
  // Ranks 0..2 on node 1, ranks 3..5 on node 7 (1-7 is a direct link, 22), rank 6 on node 4.
  //   node 1: 3*10 + 3*22 + 28 = 124;  node 7: 3*22 + 3*10 + 16 = 112;  node 4: 3*28 + 3*16 + 10 = 142
  std::vector<int> nodes = {1, 1, 1, 7, 7, 7, 4};
  CHECK(root_of(kEpyc, nodes) == 3);
}

TEST_CASE("2-socket Intel: symmetric placements keep rank 0", "[min_numa_dist]") {
  CHECK(root_of(kIntel2, {0, 0, 1, 1}) == 0);
  CHECK(root_of(kIntel2, {0, 1, 0, 1}) == 0);
  CHECK(root_of(kIntel2, {0, 0, 0, 0}) == 0);
}

TEST_CASE("2-socket Intel: rank 0 alone on one socket, the root moves to the crowded side",
          "[min_numa_dist]") {
  // rank 0: 10 + 3*21 = 73; ranks 1..3: 21 + 3*10 = 51.
  CHECK(root_of(kIntel2, {0, 1, 1, 1}) == 1);
  // The paper's figure 8 placement: rank 0 with 7 others on socket 0 is not isolated.
  CHECK(root_of(kIntel2, {0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}) == 0);
  CHECK(root_of(kIntel2, {1, 1, 0, 0, 0}) == 2);
}

TEST_CASE("Cascade Lake with Sub-NUMA Clustering: same-socket nodes count as near",
          "[min_numa_dist]") {
  // Ranks on nodes 0 (rank 0), 2, 2, 1: node 2: 11 + 2*10 + 21 = 52; node 0: 10 + 2*11 + 21 = 53.
  CHECK(root_of(kCascadeSnc, {0, 2, 2, 1}) == 1);
  CHECK(root_of(kCascadeSnc, {0, 1, 2, 3}) == 0);
}

TEST_CASE("degenerate inputs", "[min_numa_dist]") {
  CHECK(root_of(kIntel2, {}) == 0);
  CHECK(root_of(kIntel2, {1}) == 0);
}
