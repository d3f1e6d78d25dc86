// What the tnbc-sim tests share (test_sim.cpp, test_sim_v_bcast.cpp): SimGrid settings, and
// checks of a simulated run against times worked out by hand.
#pragma once

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

namespace tnbc::sim::test {

using namespace tnbc::sim;
namespace schedule = tnbc::shim::replay::engine::schedule;

// SimGrid's plain max-min model: no latency or bandwidth factors, no reverse traffic for TCP's
// acknowledgements, so that a message of S bytes over links of bandwidth B and latencies L1, L2
// takes exactly L1 + L2 + S / B.
inline const std::vector<std::string> kExact{"network/model:CM02", "network/crosstraffic:0"};

inline double elapsed(const RankRun& r, double RankRun::*field) { return r.*field - r.entry; }

// "two nodes, two ranks each" (below), worked out there: plain MPICH takes 4.007001 s; each
// node's engine sends 4 MB through its UP half, so it ends at 4 s at least and within a few
// latencies and copies of that, and its calls return once heads and tails are in.
inline void check_two_by_two(const SimResult& res, double plain_epsilon) {
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(4.007001).epsilon(plain_epsilon));
  for (const RankRun& r : res.tnbc) {
    CHECK(elapsed(r, &RankRun::done) >= 4.0);
    CHECK(elapsed(r, &RankRun::done) <= 4.02);
    CHECK(elapsed(r, &RankRun::ret) < 0.05);
  }
}

inline FluidOptions fluid_with(const std::vector<std::string>& cfg, FluidOptions::Weights w) {
  FluidOptions f;
  f.apply_cfg(cfg);
  f.weights = w;
  return f;
}

// The fluid model ran exactly the steps `want` (the engine's builder's), each done in the call.
inline void check_steps(const RankRun& run, const std::vector<schedule::Step>& want) {
  REQUIRE(run.steps.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(run.steps[i].kind == want[i].kind);
    CHECK(run.steps[i].peer == want[i].peer);
    CHECK(run.steps[i].offset == want[i].offset);
    CHECK(run.steps[i].bytes == want[i].bytes);
    CHECK(run.steps[i].piece == want[i].piece);
    CHECK(run.steps[i].edge == want[i].edge);
    CHECK(run.steps[i].after == want[i].after);
    CHECK(run.step_done[i] >= run.entry);
    CHECK(run.step_done[i] <= run.done);
  }
}

// Every step's time of the fluid model against SimGrid's, on 3 nodes x 2 ranks (dealt cyclically
// or in blocks) under SimGrid's settings `cfg`: each link is shared by the flows of two pairs of
// nodes (and, with cross-traffic, the reverse flows of two more), so the max-min sharing is not
// trivial.
inline void check_fluid_agrees(const std::vector<std::string>& cfg, bool cyclic,
                        PlatformSpec spec = {.nodes = 3, .ppn = 2, .link_Bps = 25e6, .latency_s = 25e-6},
                        bool per_node = false, double setup_s = 0, double copy_Bps = 0, double cpu_s = 0) {
  spec.cyclic = cyclic;
  // The plan's call too, in an order that is neither the default nor its reverse.
  std::vector<int> order{2, 0, 4, 1, 5, 3};
  for (int r = 6; r < spec.ranks(); ++r) order.insert(order.begin() + (r % 2 ? 1 : 0), r);
  SimOptions opt{.block = 100000, .chunk_bytes = 16384, .tnbc_plan = true, .plan_order = order,
                 .plan_per_node = per_node, .cfg = cfg};
  opt.setup_s = setup_s;
  opt.copy_Bps = copy_Bps;
  opt.progress_cpu_s = cpu_s;
  const SimResult sg = simulate(spec, opt);
  for (auto w : {FluidOptions::Weights::per_message, FluidOptions::Weights::per_pair}) {
    const SimResult fl = simulate_fluid(spec, opt, fluid_with(cfg, w), {}, true);
    // per_pair weighs every busy pair of nodes as one flow: here the pairs sharing a link carry
    // equally many messages only most of the time, so it may differ a little.
    const double tol = w == FluidOptions::Weights::per_message ? 1e-9 : 0.02;
    // The return, a few ms into the call, within 0.5 ms under per_pair (sends delayed by the
    // progress thread's CPU move the edge pieces' arrivals by a share of a send).
    const double ret_margin = w == FluidOptions::Weights::per_message ? 1e-9 : 0.5e-3;
    REQUIRE(fl.plain.size() == sg.plain.size());
    for (std::size_t r = 0; r < sg.plain.size(); ++r)
      CHECK(elapsed(fl.plain[r], &RankRun::ret) == Approx(elapsed(sg.plain[r], &RankRun::ret)).epsilon(tol));
    for (auto call : {&SimResult::tnbc, &SimResult::tnbc_plan}) {
      REQUIRE((sg.*call).size() == sg.plain.size());
      REQUIRE((fl.*call).size() == (sg.*call).size());
      for (std::size_t r = 0; r < (sg.*call).size(); ++r) {
        const RankRun &a = (fl.*call)[r], &b = (sg.*call)[r];
        CHECK(elapsed(a, &RankRun::ret) == Approx(elapsed(b, &RankRun::ret)).epsilon(tol).margin(ret_margin));
        CHECK(elapsed(a, &RankRun::done) == Approx(elapsed(b, &RankRun::done)).epsilon(tol).margin(1e-9));
        REQUIRE(a.step_done.size() == b.step_done.size());
        if (w == FluidOptions::Weights::per_message)
          for (std::size_t i = 0; i < a.step_done.size(); ++i)
            CHECK(a.step_done[i] - a.entry == Approx(b.step_done[i] - b.entry).epsilon(1e-9).margin(1e-9));
      }
    }
  }
}

}  // namespace tnbc::sim::test
