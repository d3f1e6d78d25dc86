// tnbc-sim's model (tools/sim/) on platforms small enough to work out by hand.  SimGrid runs one
// engine per process, so every case tagged [sim-*] runs in a process of its own
// (test/sim/meson.build passes the tag); the [pure] cases need no simulation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "shim/config.hpp"
#include "shim/replay/engine/schedule.hpp"
#include "priority/cost_model.hpp"
#include "tools/sim/alltoall.hpp"
#include "tools/sim/bcast.hpp"
#include "tools/sim/fluid.hpp"
#include "tools/sim/reader.hpp"
#include "tools/sim/traced.hpp"

#include "sim_checks.hpp"

using namespace tnbc::sim;
using namespace tnbc::sim::test;
namespace schedule = tnbc::shim::replay::engine::schedule;

TEST_CASE("one link each way, two ranks, one message each", "[sim-one-link]") {
  // 2 nodes x 1 rank; each node's link 1 MB/s each way, 1 ms to the switch; memory 1 GB/s.
  // Plain MPICH, 1 MB blocks, pairwise exchange: the own block copied (1e6 / 1e9 = 1 ms), then
  // one round, rank 0 -> 1 and 1 -> 0 at once on opposite halves of the links (no sharing):
  // latency 1 ms + 1 ms, then 1e6 / 1e6 = 1 s.  Total 1.003 s on both ranks.
  PlatformSpec spec{.nodes = 2, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  SimOptions opt{.block = 1000000, .chunk_bytes = 0, .tnbc = false, .cfg = kExact};
  const SimResult res = simulate(spec, opt);
  REQUIRE(res.plain_algorithm == "pairwise");
  REQUIRE(res.plain.size() == 2);
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(1.003).epsilon(1e-6));
}

TEST_CASE("one link each way under SimGrid's default model: its documented factors", "[sim-one-link-lv08]") {
  // The same exchange under LV08, SimGrid's default TCP model, with its factors as documented:
  // latency x 13.01, bandwidth x 0.97 (TCP's reverse traffic off: it would take a share of each
  // link that this case cannot work out by hand).  1 ms + 13.01 x 2 ms + 1e6 / (0.97 x 1e6) s
  // = 0.001 + 0.02602 + 1.0309278 = 1.0579478 s.
  PlatformSpec spec{.nodes = 2, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  SimOptions opt{.block = 1000000, .chunk_bytes = 0, .tnbc = false, .cfg = {"network/crosstraffic:0"}};
  const SimResult res = simulate(spec, opt);
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(1.0579478).epsilon(1e-5));
}

TEST_CASE("two nodes, two ranks each: the node's ranks share its link", "[sim-two-nodes]") {
  // 2 nodes x 2 ranks (block placement), links 1 MB/s each way and 1 ms; memory 1 GB/s (1 us);
  // 1 MB blocks.  Plain MPICH, pairwise exchange on 4 ranks (a power of two: partner rank ^ i):
  //   own copy                         1e6 / 1e9                        = 0.001 s
  //   round 1: 0<->1, 2<->3 in a node  two flows share the memory link: 2e6 / 1e9 + 1 us = 0.002001 s
  //   rounds 2, 3: 0<->2 1<->3, then 0<->3 1<->2: two flows share each node's UP half:
  //                                    2 x (2e6 / 1e6 + 1 ms + 1 ms)    = 4.004 s
  //   total                                                             = 4.007001 s
  PlatformSpec spec{.nodes = 2, .ppn = 2, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  SimOptions opt{.block = 1000000, .chunk_bytes = tnbc::config::kChunkBytesAcrossNodes, .cfg = kExact};
  // The engine: each node sends 2 ranks x 2 remote blocks = 4 MB through its UP half, 4 s at
  // least.  Its messages overlap each other's latency (two in flight per peer), so it ends
  // within a few latencies (1 ms each way) and copies (1 ms) of that; and the call returns once
  // its heads and tails (4 KiB each) are in, long before.
  check_two_by_two(simulate(spec, opt), 1e-6);
}

TEST_CASE("the simulated ranks run the step lists shim/replay/engine/schedule builds", "[sim-steps]") {
  // The same call as alltoall.cpp hands the engine for MPI_Alltoall (block i at i * block on both
  // sides, no plan, TNBC_CHUNK_BYTES' chunks in a job across nodes): every field of every step equal, and
  // every step completed.
  PlatformSpec spec{.nodes = 2, .ppn = 2};
  const std::size_t block = 1 << 20, chunk = tnbc::config::kChunkBytesAcrossNodes;
  // With a plan (receives in its order, --plan), the same builder with that order.
  const std::vector<int> order{3, 1, 0, 2};
  SimOptions opt{.block = block, .chunk_bytes = chunk, .plain = false, .tnbc_plan = true, .plan_order = order, .cfg = {}};
  const SimResult res = simulate(spec, opt);
  const int p = spec.ranks();
  REQUIRE(res.tnbc.size() == static_cast<std::size_t>(p));
  REQUIRE(res.tnbc_plan.size() == static_cast<std::size_t>(p));
  std::vector<std::size_t> bytes(4, block), displs{0, block, 2 * block, 3 * block};
  for (int call = 0; call < 2; ++call) {
    for (int r = 0; r < p; ++r) {
      const RankRun& run = (call == 0 ? res.tnbc : res.tnbc_plan)[static_cast<std::size_t>(r)];
      const std::vector<int> used = call == 0 ? std::vector<int>{} : order;
      const auto want = schedule::alltoallv(r, p, bytes, displs, bytes, displs, used, {chunk}).steps;
      REQUIRE(run.steps.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        const schedule::Step &a = run.steps[i], &b = want[i];
        CHECK(a.kind == b.kind);
        CHECK(a.peer == b.peer);
        CHECK(a.offset == b.offset);
        CHECK(a.bytes == b.bytes);
        CHECK(a.sub == b.sub);
        CHECK(a.piece == b.piece);
        CHECK(a.edge == b.edge);
        CHECK(a.after == b.after);
        CHECK(a.src_offset == b.src_offset);
        CHECK(run.step_done[i] >= run.entry);
      }
    }
  }
}

TEST_CASE("alltoall_steps: the engine's builder with alltoall.cpp's arguments", "[pure]") {
  for (int p : {1, 2, 5})
    for (std::size_t block : {std::size_t{100}, std::size_t{1} << 20})
      for (int r = 0; r < p; ++r) {
        std::vector<std::size_t> bytes(static_cast<std::size_t>(p), block), displs;
        for (int i = 0; i < p; ++i) displs.push_back(static_cast<std::size_t>(i) * block);
        const std::vector<int> order{p - 1};
        const auto a = alltoall_steps(r, p, block, order, 65536).steps;
        const auto b = schedule::alltoallv(r, p, bytes, displs, bytes, displs, order, {65536}).steps;
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          CHECK(a[i].peer == b[i].peer);
          CHECK(a[i].offset == b[i].offset);
          CHECK(a[i].bytes == b[i].bytes);
          CHECK(a[i].piece == b[i].piece);
        }
      }
}

TEST_CASE("reader_total: bench/overlap.c's deadlines, by hand", "[pure]") {
  // Return at 1 s, TCURC 2 s, TCRC 4 s over 2 blocks of 100 bytes read whole (2 s each).
  // Block 0 is there at 0: read at 3, its work ends at 5.  Block 1 comes at 10: the read waits
  // 5 s, so its work ends 2 s after the data came: 12.
  const Work work{2, 4, 1};
  auto ready = [](std::size_t lo, std::size_t) { return lo < 100 ? 0.0 : 10.0; };
  CHECK(reader_total(1, work, 2, 100, ready) == Approx(12));
  // Everything there at return: return + TCURC + TCRC.
  CHECK(reader_total(1, work, 2, 100, [](std::size_t, std::size_t) { return 0.0; }) == Approx(7));
}

TEST_CASE("link_bound: bench/link_model.py's bound, by hand", "[pure]") {
  // 2 nodes x 1 rank, links of 1 byte/s, blocks of 10 bytes.  Nothing to do: each link carries
  // one block, 10 s.  With TCRC 20 s (10 s per block): block 0 is needed at 0 and is 10 s
  // late; block 1 is needed at 10 and is on time: 20 + 10 = 30 s.
  CHECK(link_bound({0, 1}, 1.0, 10, Work{0, 0, 1}, 0) == Approx(10));
  CHECK(link_bound({0, 1}, 1.0, 10, Work{0, 20, 1}, 0) == Approx(30));
  // Both ranks on one node: no link to cross.
  CHECK(link_bound({0, 0}, 1.0, 10, Work{0, 20, 1}, 0) == Approx(20));
}

TEST_CASE("the fluid model on the hand-worked platforms: the same answers", "[pure]") {
  for (auto w : {FluidOptions::Weights::per_message, FluidOptions::Weights::per_pair}) {
    // "one link each way" above: 1 ms copy + 2 x 1 ms latency + 1 s = 1.003 s.
    PlatformSpec one{.nodes = 2, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
    SimOptions opt{.block = 1000000, .chunk_bytes = 0, .tnbc = false, .cfg = {}};
    for (const RankRun& r : simulate_fluid(one, opt, fluid_with(kExact, w)).plain)
      CHECK(elapsed(r, &RankRun::ret) == Approx(1.003).epsilon(1e-9));
    // Under LV08's factors: 1 ms + 13.01 x 2 ms + 1e6 / (0.97 x 1e6) s.
    for (const RankRun& r : simulate_fluid(one, opt, fluid_with({"network/crosstraffic:0"}, w)).plain)
      CHECK(elapsed(r, &RankRun::ret) == Approx(1.0579478).epsilon(1e-6));
    // "two nodes, two ranks each": 4.007001 s for plain MPICH; the engine's bounds.
    PlatformSpec two{.nodes = 2, .ppn = 2, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
    SimOptions both{.block = 1000000, .chunk_bytes = tnbc::config::kChunkBytesAcrossNodes, .cfg = {}};
    check_two_by_two(simulate_fluid(two, both, fluid_with(kExact, w)), 1e-9);
  }
}

TEST_CASE("the fluid model runs the step lists shim/replay/engine/schedule builds", "[pure]") {
  PlatformSpec spec{.nodes = 3, .ppn = 2, .cyclic = true};
  const std::size_t block = 100000, chunk = 16384;
  SimOptions opt{.block = block, .chunk_bytes = chunk, .plain = false, .cfg = {}};
  const int p = spec.ranks();
  std::vector<std::size_t> bytes(static_cast<std::size_t>(p), block), displs;
  for (int i = 0; i < p; ++i) displs.push_back(static_cast<std::size_t>(i) * block);
  int visited = 0;
  const SimResult res = simulate_fluid(spec, opt, FluidOptions{}, [&](int r, const RankRun& run) {
    ++visited;
    check_steps(run, schedule::alltoallv(r, p, bytes, displs, bytes, displs, {}, {chunk}).steps);
  });
  CHECK(visited == p);
  // Not kept unless asked: 4096 ranks' steps would not fit in memory.
  for (const RankRun& r : res.tnbc) CHECK(r.steps.empty());
}

TEST_CASE("the fluid model and SimGrid: the same time for every step", "[sim-fluid-agree]") {
  // SimGrid's default model (LV08, cross-traffic on): every step's time agrees to a nanosecond.
  check_fluid_agrees({}, true);
}

TEST_CASE("the fluid model and SimGrid without cross-traffic: the same time for every step",
          "[sim-fluid-agree-nocross]") {
  // CM02 without the reverse flows, ranks dealt in blocks: a node's UP link carries only the
  // flows its own ranks send.  (An Alltoall on equal nodes loads a node's UP and DOWN halves
  // alike, so this does not tell a solver that fixes the pairs ending at a node with its UP
  // link's share from a correct one; it checks the path without cross-traffic.)
  check_fluid_agrees(kExact, false);
}

TEST_CASE("per-node turns in the fluid model and in SimGrid's own flows: the same time for every step",
          "[sim-turns]") {
  // The plan's call with per-node turns on 3 nodes x 2 ranks in blocks (and so on a 2 to 1 fat
  // tree below): each node's second member sends off the node once the first member's last
  // body arrived and the turn, a message of no bytes within the node, reached it; the send
  // window of TNBC_CHUNK_WINDOW's default.
  check_fluid_agrees({}, false, PlatformSpec{.nodes = 3, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6}, true);
}

TEST_CASE("per-node turns with the engine's setup and a slow send copy: the same time for every step",
          "[sim-turns-setup]") {
  // 2 ms of setup and a send copy at 50 MB/s (about as long as the exchange): sends wait for
  // their bytes while turns pass.
  check_fluid_agrees({}, true, PlatformSpec{.nodes = 3, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6}, true, 2e-3, 50e6);
}

TEST_CASE("the progress thread's CPU per send: the same time for every step", "[sim-cpu]") {
  // 10 ms of progress-thread CPU per call spread over each rank's sends (a few hundred us
  // each, posted one after the other), with per-node turns and 1 ms of setup.
  check_fluid_agrees({}, false, PlatformSpec{.nodes = 3, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6}, true, 1e-3, 0,
                     10e-3);
}

TEST_CASE("per-node turns on a tapered fat tree, cyclic placement: the same time for every step", "[sim-turns-fat-tree]") {
  check_fluid_agrees(kExact, true,
                     PlatformSpec{.nodes = 4, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6, .leaf_nodes = 2, .spines = 1},
                     true);
}

TEST_CASE("the fluid model and SimGrid on a tapered fat tree: the same time for every step", "[sim-fat-tree]") {
  // 4 nodes x 2 ranks in leaves of 2 nodes with one spine (2 to 1): messages between leaves
  // share the leaves' links to the spine, and with cross-traffic the reverse flows of SimGrid's
  // routes back (which go through the spine of the other destination).
  check_fluid_agrees({}, true, PlatformSpec{.nodes = 4, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6,
                                            .leaf_nodes = 2, .spines = 1});
}

TEST_CASE("the fluid model and SimGrid on a tapered fat tree under CM02: the same time for every step",
          "[sim-fat-tree-cm02]") {
  // CM02 without reverse flows, ranks in blocks: CM02's weight-S is 0, so flows within and
  // between leaves weigh by their routes' latencies alone.
  check_fluid_agrees(kExact, false, PlatformSpec{.nodes = 4, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6,
                                                 .leaf_nodes = 2, .spines = 1});
}

TEST_CASE("a fat tree by hand: four links between leaves, destination-mod-k spines, the taper", "[pure]") {
  // 4 nodes x 1 rank, leaves {0, 1} and {2, 3}; links 1 MB/s each way, 1 ms each; 1 MB blocks;
  // CM02 without reverse flows.  Plain MPICH's pairwise exchange on a power of two: the own
  // block copied (1 ms), then round 1 with rank ^ 1 within the leaf (2 links: 2 ms + 1 s), rounds
  // 2 and 3 with rank ^ 2 and ^ 3 in the other leaf (4 links: 4 ms).  With one spine the two
  // messages leaving a leaf share its link to the spine (2 s each); with two spines node d is
  // reached through spine d mod 2, and 0 -> 2, 1 -> 3 (or 0 -> 3, 1 -> 2) go apart (1 s).
  for (const int spines : {1, 2}) {
    PlatformSpec spec{.nodes = 4, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9, .leaf_nodes = 2,
                      .spines = spines};
    SimOptions opt{.block = 1000000, .chunk_bytes = 0, .tnbc = false, .cfg = kExact};
    const SimResult res = simulate_fluid(spec, opt, fluid_with(kExact, FluidOptions::Weights::per_message));
    const double inter = spines == 1 ? 2.004 : 1.004;
    for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(0.001 + 1.002 + 2 * inter).epsilon(1e-6));
  }
  PlatformSpec flat{.nodes = 4, .ppn = 1};
  CHECK(hops(flat, 0, 3) == 2);
  PlatformSpec tree{.nodes = 8, .ppn = 1, .leaf_nodes = 4, .spines = 2};
  CHECK(hops(tree, 0, 3) == 2);
  CHECK(hops(tree, 3, 4) == 4);
  CHECK(leaf_of(tree, 5) == 1);
  CHECK(spine_to(tree, 5) == 1);
}

TEST_CASE("per-node turns: a node's second member sends off the node after its first is done", "[pure]") {
  // 2 nodes x 2 ranks in blocks (nodes {0, 1} and {2, 3}), a plan reading 0..3: rank 0 takes
  // the first turn on node 0 and rank 2 on node 1.  Every inter-node body of the second member
  // arrives after the last of the first member's; without turns they go at once, interleaved.
  PlatformSpec spec{.nodes = 2, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6};
  const std::size_t chunk = 16384;
  for (bool per_node : {true, false}) {
    SimOptions opt{.block = 100000, .chunk_bytes = chunk, .plain = false, .tnbc = false, .tnbc_plan = true,
                   .plan_order = {0, 1, 2, 3}, .plan_per_node = per_node, .chunk_window = 2, .cfg = {}};
    const SimResult res = simulate_fluid(spec, opt, FluidOptions{}, {}, true);
    REQUIRE(res.tnbc_plan.size() == 4);
    // When the inter-node bodies of rank r arrived: the first and the last.
    auto bodies = [&](int r) {
      const RankRun& run = res.tnbc_plan[static_cast<std::size_t>(r)];
      double first = 1e9, last = 0;
      for (std::size_t i = 0; i < run.steps.size(); ++i) {
        const schedule::Step& st = run.steps[i];
        if (st.kind != schedule::Kind::send || st.edge || node_of(spec, st.peer) == node_of(spec, r)) continue;
        first = std::min(first, run.step_done[i]);
        last = std::max(last, run.step_done[i]);
      }
      return std::pair{first, last};
    };
    for (auto [a, b] : {std::pair{0, 1}, std::pair{2, 3}}) {
      const auto [a_first, a_last] = bodies(a);
      const auto [b_first, b_last] = bodies(b);
      REQUIRE(a_last > 0);
      REQUIRE(b_last > 0);
      if (per_node) {
        CHECK(b_first > a_last);
      } else {
        CHECK(b_first < a_last);
        CHECK(a_first < b_last);
      }
    }
  }
  // (SimGrid's own flows take the same turns: unit-sim-turns compares every step.)
}

TEST_CASE("FluidOptions::apply_cfg: SimGrid's settings, and no other", "[pure]") {
  FluidOptions f;
  f.apply_cfg({"network/crosstraffic:0", "network/model:CM02"});
  CHECK(f.latency_factor == 1);
  CHECK(f.bandwidth_factor == 1);
  CHECK_FALSE(f.crosstraffic);
  f.apply_cfg({"network/latency-factor:2", "network/model:LV08"});  // the model first, whatever the order
  CHECK(f.latency_factor == 2);
  CHECK(f.bandwidth_factor == 0.97);
  CHECK_THROWS_AS(f.apply_cfg({"network/TCP-gamma:1000"}), std::invalid_argument);
  CHECK_THROWS_AS(f.apply_cfg({"network/model:IB"}), std::invalid_argument);
}
