#include <catch2/catch.hpp>

#include <limits>

#include "priority/cost_model.hpp"

using namespace tnbc::priority;

namespace {

// n = 4 sub-messages, Tcomm = 100 µs, TCURC = 10 µs, reading one block takes c = 20 µs.
OverlapInputs example(double tinit = 0) {
  OverlapInputs in;
  in.messages = 4;
  in.tcomm_us = 100;
  in.tinit_us = tinit;
  in.tcurc_us = 10;
  in.rcomm = 4.0 / 100;
  in.rcrc = 1.0 / 20;
  return in;
}

const std::vector<std::size_t> kInOrder{0, 1, 2, 3};

}  // namespace

TEST_CASE("formulas (1) and (3) on hand-computed values", "[model]") {
  // Tcomm·Rcomm/RCRC = 100 · 0.04 / 0.05 = 80.
  CHECK(overlap_formula1(example()) == Approx(90));     // min(100, 10 + 80)
  CHECK(overlap_formula3(example(20)) == Approx(80));   // min(100 - 20, 90)
  CHECK(overlap_formula3(example(5)) == Approx(90));    // min(95, 90)
  OverlapInputs at_once = example();
  at_once.rcrc = std::numeric_limits<double>::infinity();
  CHECK(overlap_formula1(at_once) == Approx(10));       // CRC reads everything at once
  OverlapInputs long_curc = example();
  long_curc.tcurc_us = 150;
  CHECK(overlap_formula1(long_curc) == Approx(100));    // capped at Tcomm
  CHECK(overlap_formula3(example(200)) == 0);           // never negative
  CHECK(overlap_formula1(OverlapInputs{}) == 0);
}

TEST_CASE("block simulation: plan order vs the staggered default order", "[model]") {
  // Blocks arrive at 25, 50, 75, 100.  Plan order: reads at 25-45, 50-70, 75-95, 100-120:
  // 10 + 20 + 20 + 20 + 0 = 70 µs of compute inside [0, 100].
  std::vector<std::size_t> plan_slots{0, 1, 2, 3};
  CHECK(simulate_overlap(example(), kInOrder, plan_slots) == Approx(70));

  // Default: rank r receives sub-message i in slot (i - r) mod 4.
  CHECK(default_arrival_slots(Op::alltoall, 4, 1) == std::vector<std::size_t>{3, 0, 1, 2});
  CHECK(default_arrival_slots(Op::alltoall, 4, 3) == std::vector<std::size_t>{1, 2, 3, 0});
  CHECK(default_arrival_slots(Op::bcast, 3, 2) == std::vector<std::size_t>{0, 1, 2});
  // Rank 1 needs block 0 first, which comes last (at 100): only the CURC overlaps.
  CHECK(simulate_overlap(example(), kInOrder, default_arrival_slots(Op::alltoall, 4, 1)) ==
        Approx(10));
  // Rank 2: block 0 at 75 (read 75-95), block 1 at 100: 10 + 20.
  CHECK(simulate_overlap(example(), kInOrder, default_arrival_slots(Op::alltoall, 4, 2)) ==
        Approx(30));
  // Rank 3: block 0 at 50, block 1 at 75, block 2 at 100: 10 + 20 + 20.
  CHECK(simulate_overlap(example(), kInOrder, default_arrival_slots(Op::alltoall, 4, 3)) ==
        Approx(50));

  OverlapPrediction p = predict_overlap(example(), Op::alltoall, kInOrder, 4);
  CHECK(p.formula1_us == Approx(90));
  CHECK(p.formula3_us == Approx(90));
  CHECK(p.plan_us == Approx(70));
  CHECK(p.default_us == Approx((70 + 10 + 30 + 50) / 4.0));

  // Tinit = 20: R = 80, blocks at 20, 40, 60, 80: 10 + 20 + 20 + 20 = 70.
  CHECK(predict_overlap(example(20), Op::alltoall, kInOrder, 4).plan_us == Approx(70));

  // The plan follows the read order, whatever it is: reading 3,2,1,0 with plan slots 0..3.
  std::vector<std::size_t> reversed{3, 2, 1, 0};
  CHECK(predict_overlap(example(), Op::alltoall, reversed, 4).plan_us == Approx(70));
  // Bcast default = index order: reading in reverse waits for the last segment.
  CHECK(predict_overlap(example(), Op::bcast, reversed, 4).default_us == Approx(10));
}

TEST_CASE("inputs derived from an analysis", "[model]") {
  SiteAnalysis a;
  a.tcomm_us = 100;
  a.first_touch_us = 10;
  a.touch_interval_us = 20;
  a.verdict = Verdict::crc;
  OverlapInputs in = derive_inputs(4, a, 5);
  CHECK(in.tcomm_us == 100);
  CHECK(in.tinit_us == 5);
  CHECK(in.tcurc_us == 10);
  CHECK(in.rcomm == Approx(0.04));
  CHECK(in.rcrc == Approx(0.05));

  a.touch_interval_us = 0;  // one touch per call: read at once
  CHECK(derive_inputs(4, a, 0).rcrc == std::numeric_limits<double>::infinity());
  a.verdict = Verdict::unread;
  CHECK(overlap_formula1(derive_inputs(4, a, 0)) == Approx(100));
  a.tcomm_us = 0;
  CHECK(overlap_formula1(derive_inputs(4, a, 0)) == 0);
}

TEST_CASE("LogGP: k chains and k* on hand-checked parameters", "[model]") {
  LogGP p{2, 1, 0, 0};  // L = 2, o = 1, g = 0, G = 0: a = 4, b = 1
  CHECK(hop_us(p, 1000) == 4);
  CHECK(send_us(p, 1000) == 1);
  CHECK(hop_us(LogGP{2, 1, 0, 0.001}, 1000) == Approx(5));
  CHECK(send_us(LogGP{2, 1, 0, 0.001}, 1000) == Approx(2));
  // P = 17: k* = sqrt(4·16/1) = 8; t(8) = 3·4 + 7 = 19, t(9) = (16/9 + 1)·4 + 8 = 19.11.
  CHECK(chains_time_us(p, 17, 0, 8) == Approx(19));
  CHECK(chains_time_us(p, 17, 0, 9) == Approx(100.0 / 9 + 8));
  CHECK(best_chains(p, 17, 0) == 8);
  // P = 64: k* = sqrt(252) = 15.87; t(15) = 34.8, t(16) = 34.75.
  CHECK(best_chains(p, 64, 0) == 16);
  CHECK(best_chains(p, 2, 0) == 1);
  // Binomial over 17 ranks: 5 rounds of a.
  CHECK(tree_time_us(p, 17, 0, TreeShape{}) == 20);
  CHECK(pipeline_step_us(p, 17, 0, TreeShape{}) == 5);
  CHECK(pipeline_step_us(p, 17, 0, TreeShape{TreeKind::chains, 8}) == 8);
}

TEST_CASE("Bcast: segment count and tree on hand-checked parameters", "[model]") {
  LogGP p{2, 1, 0, 0};
  // P = 17: binomial T(m) = 20 + 5(m-1), chains(8) T(m) = 19 + 8(m-1).
  // m=1: chains 19 (E 19); m=2: binomial 25 (E 12.5); m=3: 30 (E 10); m=4: 35 (E 8.75);
  // m=5: 40 (E 8); m=6: 45 (E 7.5, 6.25 % better); m=7: 50 (E 7.14, only 4.8 % better).
  BcastChoice one = choose_bcast(p, 17, 4096, BcastLimits{5, 4096, 0.05});
  CHECK(one.segments == 1);
  CHECK(one.shape == TreeShape{TreeKind::chains, 8});
  CHECK(one.time_us == Approx(19));

  BcastChoice two = choose_bcast(p, 17, 8192);
  CHECK(two.segments == 2);
  CHECK(two.shape == TreeShape{});
  CHECK(two.exposed_us == Approx(12.5));

  BcastChoice capped = choose_bcast(p, 17, 1 << 20);
  CHECK(capped.segments == 5);
  CHECK(capped.time_us == Approx(40));
  CHECK(capped.exposed_us == Approx(8));

  BcastChoice gain = choose_bcast(p, 17, 1 << 20, BcastLimits{10, 4096, 0.05});
  CHECK(gain.segments == 6);

  CHECK(choose_bcast(p, 1, 1 << 20).segments == 1);
  CHECK(choose_bcast(p, 1, 1 << 20).time_us == 0);
  // P = 2: one chain costs 2a against one binomial round a.
  CHECK(choose_bcast(p, 2, 4096).shape == TreeShape{});
}
