// The NUMA access model reproduces the direction of the paper's result: on an asymmetric
// placement the MinNumaDist root cuts the distance-weighted traffic of root-based algorithms;
// on a symmetric one, and for dissemination (no root), nothing changes.
#include <catch2/catch.hpp>

#include "barrier/machines.hpp"
#include "barrier/min_numa_dist.hpp"
#include "barrier/numa_model.hpp"

using namespace tnbc::barrier;

namespace {
using machines::kIntel2;
}

TEST_CASE("model: rank 0 isolated on one socket, MinNumaDist lowers root-based costs", "[model]") {
  std::vector<int> nodes = {0, 1, 1, 1, 1, 1, 1, 1};
  MatrixTopology topo(kIntel2, nodes);
  int root = min_numa_dist(topo, nodes);
  REQUIRE(root == 1);
  for (Algorithm a : {Algorithm::flat_tree, Algorithm::gather_release, Algorithm::combining_tree,
                      Algorithm::tournament}) {
    CAPTURE(to_string(a));
    ModelCost at0 = model_cost(a, topo, nodes, 0, 5);
    ModelCost best = model_cost(a, topo, nodes, root, 5);
    CHECK(best.weighted < at0.weighted);
    CHECK(best.remote < at0.remote);
  }
  // flat_tree, exactly: per barrier 8 arrive writes (each local: 80), the root's 7 arrive
  // reads, 1 release write (local: 10) and 7 release reads.
  // Root 0: 7 reads on socket 1 (147), 7 remote release reads (147): 80 + 147 + 10 + 147 = 384.
  CHECK(model_cost(Algorithm::flat_tree, topo, nodes, 0, 5).weighted == Approx(384));
  // Root 1: only rank 0's arrive line (read by the root) and rank 0's release read cross the
  // sockets: 80 + (21 + 6*10) + 10 + (21 + 6*10) = 252.
  CHECK(model_cost(Algorithm::flat_tree, topo, nodes, 1, 5).weighted == Approx(252));
}

TEST_CASE("model: dissemination has no root; symmetric placements keep rank 0", "[model]") {
  std::vector<int> isolated = {0, 1, 1, 1};
  MatrixTopology topo(kIntel2, isolated);
  CHECK(model_cost(Algorithm::dissemination, topo, isolated, 0, 5).weighted ==
        Approx(model_cost(Algorithm::dissemination, topo, isolated, 1, 5).weighted));
  std::vector<int> symmetric = {0, 0, 1, 1};
  MatrixTopology sym(kIntel2, symmetric);
  CHECK(min_numa_dist(sym, symmetric) == 0);
}
