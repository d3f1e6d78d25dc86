// tnbc-sim's model on platforms worked out by hand: MPI_Alltoallv, MPI_Bcast and traced sites
// (test_sim.cpp: MPI_Alltoall, the fluid model against SimGrid, fat trees, per-node turns).
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

TEST_CASE("is_like_blocks: bench/is's key spread, by hand", "[pure]") {
  // 4 ranks, 1 MB per pair on average: 1e6 keys of 4 bytes per rank.  The mean of four uniform
  // numbers is below 1/4 with probability 1/24, below 1/2 with 1/2, below 3/4 with 23/24:
  // round(1e6 / 24) = 41667 keys to rank 0, 458333 to ranks 1 and 2, 41667 to rank 3.
  CHECK(is_like_blocks(4, 1000000) == std::vector<std::size_t>{166668, 1833332, 1833332, 166668});
  // 2 ranks: half each, the mean block.
  CHECK(is_like_blocks(2, 1000000) == std::vector<std::size_t>{1000000, 1000000});
  // Any rank count: every key sent once, symmetric, most to the middle ranks.
  for (int p : {3, 8, 64, 1000}) {
    const std::vector<std::size_t> b = is_like_blocks(p, 65536);
    std::size_t sum = 0;
    for (std::size_t x : b) sum += x;
    CHECK(sum == 65536u * static_cast<std::size_t>(p));
    for (std::size_t d = 0; d < b.size(); ++d) CHECK(b[d] + 4 >= b[b.size() - 1 - d]);
    CHECK(*std::max_element(b.begin(), b.end()) == b[b.size() / 2]);
    CHECK(b.front() < b[b.size() / 2]);
  }
}

TEST_CASE("the fluid model runs an MPI_Alltoallv's step lists as alltoall.cpp hands them over", "[pure]") {
  // bench/is's counts on 3 nodes x 2 ranks: block i of the send side packed at the sum of the
  // blocks before it; the receive side's block s at s * (what every rank sends this one).
  PlatformSpec spec{.nodes = 3, .ppn = 2, .cyclic = true};
  const std::size_t chunk = 16384;
  const int p = spec.ranks();
  SimOptions opt{.block = 100000, .chunk_bytes = chunk, .plain = false, .cfg = {}, .blocks = is_like_blocks(p, 100000)};
  REQUIRE(opt.alltoallv());
  int visited = 0;
  simulate_fluid(spec, opt, FluidOptions{}, [&](int r, const RankRun& run) {
    ++visited;
    std::vector<std::size_t> sdispls, rbytes, rdispls;
    std::size_t at = 0;
    for (int i = 0; i < p; ++i) {
      sdispls.push_back(at);
      at += opt.blocks[static_cast<std::size_t>(i)];
      rbytes.push_back(opt.blocks[static_cast<std::size_t>(r)]);
      rdispls.push_back(static_cast<std::size_t>(i) * opt.blocks[static_cast<std::size_t>(r)]);
    }
    check_steps(run, schedule::alltoallv(r, p, opt.blocks, sdispls, rbytes, rdispls, {}, {chunk}).steps);
  });
  CHECK(visited == p);
}

TEST_CASE("link_bound for an MPI_Alltoallv: the busier direction of each link, by hand", "[pure]") {
  // 3 nodes x 1 rank, links of 1 byte/s; every rank sends rank 2 40 bytes, the others 10.
  // Node 2's incoming link carries 40 + 40 bytes, node 0's outgoing 10 + 40: 80 s.
  const std::vector<std::size_t> blocks{10, 10, 40};
  CHECK(link_bound({0, 1, 2}, 1.0, blocks, std::vector<double>{0, 0, 0}, Work{}, 0) == Approx(80));
  // 2 nodes x 1 rank, 10-byte blocks; rank 0 reads for 20 s (its second block needed at 10,
  // there at 10: it ends at 20), rank 1 reads nothing (done when its block is there, 10): 20 s.
  const std::vector<std::size_t> even{10, 10};
  CHECK(link_bound({0, 1}, 1.0, even, std::vector<double>{20, 0}, Work{}, 0) == Approx(20));
  // TCURC 5 s and a call that returned at 1 s: the reads start at 6 and every block is there
  // by then (10 s < 6 + 10 for rank 0's second block): 6 + 20.
  CHECK(link_bound({0, 1}, 1.0, even, std::vector<double>{20, 0}, Work{5, 0, 1}, 1) == Approx(26));
}

TEST_CASE("plain MPICH's MPI_Alltoallv in the fluid model: no message of zero bytes", "[pure]") {
  // 2 nodes x 1 rank, rank 0 gets nothing and rank 1 1 MB from each: one message crosses
  // (2 x 1 ms latency + 1 s), rank 1's own block moves in memory (1 us + 1 ms).  Both ranks
  // return at 1.002 s; with a message of zero bytes to rank 0 posted, nothing would change
  // either, but a rank whose batch has no message at all must not wait for one.
  PlatformSpec spec{.nodes = 2, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  SimOptions opt{.block = 500000, .chunk_bytes = 0, .tnbc = false, .cfg = {}, .blocks = {0, 1000000}};
  const SimResult res = simulate_fluid(spec, opt, fluid_with(kExact, FluidOptions::Weights::per_message));
  CHECK(res.plain_algorithm == "scattered");
  REQUIRE(res.plain.size() == 2);
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(1.002).epsilon(1e-9));
  // Nothing to anyone: every batch is empty and the call returns at once.
  opt.blocks = {0, 0};
  for (const RankRun& r : simulate_fluid(spec, opt, fluid_with(kExact, FluidOptions::Weights::per_message)).plain)
    CHECK(elapsed(r, &RankRun::ret) == 0);
}

namespace {

// 3 nodes x 1 rank, links 1 MB/s each way and 1 ms, memory 1 GB/s; every rank sends rank 2
// 4 MB and the others 1 MB.  Plain MPICH (scattered) posts everything at once: each link half
// carries two flows at 0.5 MB/s, so the 1 MB messages between nodes end at 2 s; the two 4 MB
// messages into node 2 then share its incoming link, 3 MB each left at 0.5 MB/s: 6 s more.
// All messages paid 2 ms of latency first: 8.002 s on every rank.  The engine can do no better
// than node 2's link allows (8 MB at 1 MB/s), ends within 1% of it (its bodies wait for the
// heads and tails, each chunk pays its latency) and returns once the heads and tails are in.
void check_is_three_nodes(const SimResult& res) {
  REQUIRE(res.plain_algorithm == "scattered");
  REQUIRE(res.plain.size() == 3);
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(8.002).epsilon(1e-6));
  REQUIRE(res.tnbc.size() == 3);
  for (const RankRun& r : res.tnbc) {
    CHECK(elapsed(r, &RankRun::done) <= 8.08);
    CHECK(elapsed(r, &RankRun::ret) < 0.1);
  }
  CHECK(elapsed(res.tnbc[2], &RankRun::done) >= 8.0);
}

}  // namespace

TEST_CASE("an MPI_Alltoallv on three nodes: SimGrid and the fluid model, by hand", "[sim-alltoallv]") {
  PlatformSpec spec{.nodes = 3, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  SimOptions opt{.block = 2000000, .chunk_bytes = tnbc::config::kChunkBytesAcrossNodes, .cfg = kExact,
                 .blocks = {1000000, 1000000, 4000000}};
  check_is_three_nodes(simulate(spec, opt));
  check_is_three_nodes(simulate_fluid(spec, opt, fluid_with(kExact, FluidOptions::Weights::per_message)));
  check_is_three_nodes(simulate_fluid(spec, opt, fluid_with(kExact, FluidOptions::Weights::per_pair)));
}

TEST_CASE("MPI_Bcast: MPICH's algorithm by size, seed 003's t(k), the engine's default shape", "[pure]") {
  CHECK(plain_bcast_algorithm(12287, 64) == "binomial");
  CHECK(plain_bcast_algorithm(1 << 20, 7) == "binomial");
  CHECK(plain_bcast_algorithm(65536, 64) == "scatter + recursive doubling allgather");
  CHECK(plain_bcast_algorithm(65536, 48) == "scatter + ring allgather");
  CHECK(plain_bcast_algorithm(1 << 20, 64) == "scatter + ring allgather");
  // 48 ranks, 1 byte/s, 10 bytes, 1 s latency: a = 2 + 10 = 12 s, b = 10 s;
  // t(7) = (47/7 + 1) * 12 + 6 * 10 = 152.571... s.
  PlatformSpec spec{.nodes = 48, .ppn = 1, .link_Bps = 1, .latency_s = 1};
  CHECK(seed_chains_time(spec, 10, 7) == Approx((47.0 / 7 + 1) * 12 + 60));
  CHECK(seed_chains_time(PlatformSpec{.nodes = 1, .ppn = 1}, 10, 1) == 0);
  // What bcast.cpp's bcast_shape takes when neither a plan nor a setting fixes it.
  const auto choice = tnbc::priority::choose_bcast(tnbc::priority::LogGP{}, 48, 1 << 20);
  const BcastShape shape = default_bcast_shape(48, 1 << 20);
  CHECK(shape.segments == choice.segments);
  CHECK(shape.chains == (choice.shape.kind == tnbc::priority::TreeKind::chains ? choice.shape.chains : 0));
}

TEST_CASE("MPI_Bcast on 2 nodes x 2 ranks: MPICH's node-by-node broadcast, by hand", "[sim-bcast-smp]") {
  // Cyclic placement (nodes {0, 2} and {1, 3}), links 1 MB/s each way and 1 ms, memory 1 GB/s
  // (copies 1 us + 1 ms), 1 MB from rank 1, plain max-min.  4 ranks: MPICH's short path of
  // MPIR_Bcast_intra_smp.  Rank 1 is its node's local rank 0, so it first sends to the other
  // node's, rank 0 (2 ms + 1 s), then each local root to its node's other rank (1.001 ms; a
  // blocking send returns when the copy is done): every call returns at 1.003001 s.  (The
  // classic binomial tree on all 4 ranks would send two messages across, from ranks 1 and 3
  // at once through node 1's link: 2 s.)
  PlatformSpec spec{.nodes = 2, .ppn = 2, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9, .cyclic = true};
  BcastOptions opt{.bytes = 1000000, .root = 1, .shapes = {}, .connection_depth = 1, .cfg = kExact};
  const BcastResult res = simulate_bcast(spec, opt);
  CHECK(res.plain_algorithm == "smp: the root's node's local root, binomial among the nodes, binomial within each");
  REQUIRE(res.plain.size() == 4);
  for (const RankRun& r : res.plain) CHECK(elapsed(r, &RankRun::ret) == Approx(1.003001).epsilon(1e-9));
  CHECK(plain_bcast_smp(spec, 1000000));
  CHECK_FALSE(plain_bcast_smp(PlatformSpec{.nodes = 4, .ppn = 1}, 1000000));   // one rank per node
  CHECK_FALSE(plain_bcast_smp(PlatformSpec{.nodes = 4, .ppn = 4}, 1 << 20));   // scatter + ring
  CHECK(plain_bcast_description(PlatformSpec{.nodes = 4, .ppn = 4}, 65536) ==
        "smp: binomial within the root's node, binomial among the nodes, binomial within the others");
}

TEST_CASE("MPI_Bcast on three nodes: plain MPICH and the engine's trees, by hand", "[sim-bcast]") {
  // 3 nodes x 1 rank, links 1 MB/s each way and 1 ms, memory 1 GB/s, 1 MB from rank 0, plain
  // max-min (kExact); one message at a time per connection, so that each pays its latency and
  // has the link half to itself.
  // Plain MPICH (binomial: 3 ranks): rank 0 sends to rank 2, then to rank 1, each 2 ms + 1 s:
  // rank 1 has it at 2.004 s.
  // The engine, one chain of 4 segments (0 -> 1 -> 2): the edge pieces (4096 bytes: 2 ms +
  // 4.096 ms each) go first, then 4 segments of 247952 bytes (2 ms + 247.952 ms each); rank 1
  // forwards each as it arrives, just in time for the next: rank 2 has the last at
  // 2 x 6.096 + 5 x 249.952 ms, plus the root's copy of the first edge piece (4.096 us; the rest
  // is copied while that one travels).
  // The engine, one segment over 2 chains (both children of the root): the root's link sends
  // 2 MB, 2 s and a few latencies; one chain of one segment: the body twice in a row, just
  // under 2 s since the edge pieces are forwarded ahead.
  PlatformSpec spec{.nodes = 3, .ppn = 1, .link_Bps = 1e6, .latency_s = 1e-3, .mem_Bps = 1e9};
  BcastOptions opt{.bytes = 1000000, .shapes = {{4, 1}, {1, 2}, {1, 1}}, .connection_depth = 1, .cfg = kExact};
  const BcastResult res = simulate_bcast(spec, opt);
  CHECK(res.plain_algorithm == "binomial");
  REQUIRE(res.plain.size() == 3);
  CHECK(elapsed(res.plain[1], &RankRun::ret) == Approx(2.004).epsilon(1e-9));
  CHECK(elapsed(res.plain[2], &RankRun::ret) == Approx(1.002).epsilon(1e-9));
  REQUIRE(res.tnbc.size() == 3);
  CHECK(bcast_ready(res.tnbc[0][2]) - res.tnbc[0][2].entry == Approx(2 * 0.006096 + 5 * 0.249952 + 4.096e-6).epsilon(1e-6));
  CHECK(bcast_ready(res.tnbc[0][1]) - res.tnbc[0][1].entry == Approx(2 * 0.006096 + 4 * 0.249952 + 4.096e-6).epsilon(1e-6));
  for (const RankRun& r : res.tnbc[1]) {
    CHECK(bcast_ready(r) - r.entry <= 2.01);
    if (&r != &res.tnbc[1][0]) CHECK(bcast_ready(r) - r.entry >= 2.0);
  }
  CHECK(bcast_ready(res.tnbc[2][2]) - res.tnbc[2][2].entry == Approx(2.0).epsilon(0.002));
  // Every step completed within the call, after its `after` step (a forward after its receive).
  for (const auto& runs : res.tnbc)
    for (const RankRun& run : runs)
      for (std::size_t i = 0; i < run.steps.size(); ++i) {
        CHECK(run.step_done[i] >= run.entry);
        CHECK(run.step_done[i] <= run.done);
        if (run.steps[i].after >= 0) CHECK(run.step_done[i] > run.step_done[static_cast<std::size_t>(run.steps[i].after)]);
      }
  // A non-root's call returns once its edge pieces are in; the root's once its buffer is copied.
  for (const auto& runs : res.tnbc) {
    CHECK(elapsed(runs[0], &RankRun::ret) == Approx(1e-3).epsilon(1e-6));
    for (int r : {1, 2}) CHECK(elapsed(runs[static_cast<std::size_t>(r)], &RankRun::ret) < 0.03);
  }
}

namespace {

namespace pr = tnbc::priority;

// A traced call: delays in µs per block (< 0: untouched), the next call `next_us` after the return.
pr::CallRecord traced_call(std::vector<double> delays, double next_us, std::uint64_t bytes) {
  pr::CallRecord c;
  c.tcomm_us = 1000;
  for (double d : delays) c.touches.push_back(d < 0 ? pr::FirstTouch::untouched() : pr::FirstTouch::at(d));
  c.next_call_us = next_us;
  c.recv_bytes = bytes;
  return c;
}

// Two ranks: rank 0 reads block 1 at 10 ms, block 0 at 30 ms and calls again at 50 ms (two
// calls, the same each time); rank 1 reads block 0 at 5 ms, never block 1, and calls again at
// 25 ms.  Rank 0 receives 2 x 100 bytes, rank 1 2 x 300.
pr::CallSite two_rank_site() {
  pr::CallSite s;
  s.id = "app+0x10";
  s.op = pr::Op::alltoall;
  s.messages = 2;
  s.comm_size = 2;
  s.message_bytes = 200;
  s.ranks.push_back({0, {traced_call({30000, 10000}, 50000, 200), traced_call({30000, 10000}, 50000, 200)}});
  s.ranks.push_back({1, {traced_call({5000, -1}, 25000, 600)}});
  return s;
}

// 4 traced ranks, each reading blocks 0..3 at 1, 2, 4, 8 ms and calling again at 20 ms, 400
// bytes a call.
pr::CallSite four_rank_site() {
  pr::CallSite s;
  s.id = "app+0x20";
  s.messages = 4;
  s.comm_size = 4;
  s.message_bytes = 100;
  for (int r = 0; r < 4; ++r) s.ranks.push_back({r, {traced_call({1000, 2000, 4000, 8000}, 20000, 400)}});
  return s;
}

}  // namespace

TEST_CASE("traced_site: each rank's reads in first-touch order, the work between, by hand", "[pure]") {
  const TracedSite t = traced_site(two_rank_site());
  REQUIRE(t.ranks == 2);
  CHECK(t.calls == 3);
  CHECK(t.tcomm == Approx(1e-3));
  REQUIRE(t.reads.size() == 2);
  CHECK(t.reads[0].order == std::vector<int>{1, 0});
  CHECK(t.reads[0].gap[0] == Approx(0.010));
  CHECK(t.reads[0].gap[1] == Approx(0.020));
  CHECK(t.reads[0].tail == Approx(0.020));
  CHECK(t.reads[0].work() == Approx(0.050));
  CHECK(t.reads[1].order == std::vector<int>{0});  // block 1 untouched: nothing waits for it
  CHECK(t.reads[1].gap[0] == Approx(0.005));
  CHECK(t.reads[1].tail == Approx(0.020));
  CHECK(t.recv_block == std::vector<double>{100, 300});
  REQUIRE(t.notes.size() == 1);
  CHECK(t.notes[0].find("not read") != std::string::npos);
  // The consensus order (docs/ordering.md): block 0's key is the median of 30 and 5 ms, block
  // 1's the median of 10 ms and never (rank 1 did not read it): +inf, so block 0 first.
  CHECK(t.order == std::vector<std::size_t>{0, 1});
  pr::CallSite missing = two_rank_site();
  missing.ranks.pop_back();
  CHECK_THROWS_AS(traced_site(missing), std::invalid_argument);
  pr::CallSite bcast = two_rank_site();
  bcast.op = pr::Op::bcast;
  CHECK_THROWS_AS(traced_site(bcast), std::invalid_argument);
}

TEST_CASE("a trace on twice the ranks: each traced rank and block stands for two, the work per block as traced",
          "[pure]") {
  const TracedSite t = traced_site(two_rank_site());
  CHECK(traced_index(3, 4, 2) == 1);
  CHECK(traced_index(1, 4, 2) == 0);
  // Simulated ranks 0 and 1 are traced rank 0; blocks 2, 3 are traced block 1, read first.
  for (int rank : {0, 1}) {
    const TracedReads r = scaled_reads(t, rank, 4);
    CHECK(r.order == std::vector<int>{2, 3, 0, 1});
    REQUIRE(r.gap.size() == 4);
    CHECK(r.gap[0] == Approx(0.010));  // before the first read, as traced
    CHECK(r.gap[1] == Approx(0.020));  // traced block 1's work (to the next touch), once per block
    CHECK(r.gap[2] == Approx(0.020));
    CHECK(r.gap[3] == Approx(0.0));    // traced block 0 was the last read: its work is the tail
    CHECK(r.tail == Approx(0.020));    // the tail once
    CHECK(r.work() == Approx(0.070));
  }
  const TracedReads r3 = scaled_reads(t, 3, 4);
  CHECK(r3.order == std::vector<int>{0, 1});
  REQUIRE(r3.gap.size() == 2);
  CHECK(r3.gap[0] == Approx(0.005));
  CHECK(r3.gap[1] == Approx(0.0));
  CHECK(r3.tail == Approx(0.020));
  // Fewer ranks than traced: 4 traced ranks reading 0..3 at 1, 2, 4, 8 ms, calling again at
  // 20 ms, on 2 simulated ranks: simulated block 0 stands for traced block 0, block 1 for
  // traced block 2.  Traced block 1 has no stand-in and drops its work to the next touch (2 ->
  // 4 ms); traced block 3, the last read, has none either, and the tail (12 ms) counts once.
  const TracedReads down = scaled_reads(traced_site(four_rank_site()), 1, 2);
  CHECK(down.order == std::vector<int>{0, 1});
  REQUIRE(down.gap.size() == 2);
  CHECK(down.gap[0] == Approx(0.001));  // before the first read
  CHECK(down.gap[1] == Approx(0.001));  // traced block 0's work to the next touch
  CHECK(down.tail == Approx(0.004 + 0.012));  // traced block 2's work to the next touch, and the tail
  CHECK(down.work() == Approx(0.018));
  // The same rank count gives the trace back.
  const TracedReads same = scaled_reads(t, 0, 2);
  CHECK(same.order == t.reads[0].order);
  CHECK(same.gap == t.reads[0].gap);
  CHECK(same.tail == t.reads[0].tail);
  CHECK(scaled_order(t, 4) == std::vector<int>{0, 1, 2, 3});
  TracedSite reversed = t;
  reversed.order = {1, 0};
  CHECK(scaled_order(reversed, 4) == std::vector<int>{2, 3, 0, 1});
  CHECK(scaled_blocks(t, 4, 0) == std::vector<std::size_t>{100, 100, 300, 300});
  CHECK(scaled_blocks(t, 4, 400) == std::vector<std::size_t>{200, 200, 600, 600});
}

TEST_CASE("per_byte_reads: the traced rank's work kept whole, spread over the blocks, times the bytes, by hand",
          "[pure]") {
  const TracedSite t = traced_site(two_rank_site());  // rank 0: reads 1 then 0, 10 + 20 + 20 ms
  // Simulated rank 0 of 4 is traced rank 0 (received 2 x 100 bytes a call); blocks 2, 3 stand
  // for traced block 1 and share its 20 ms to the next touch, 10 ms each.
  const TracedReads r = per_byte_reads(t, 0, 4, 200);
  CHECK(r.order == std::vector<int>{2, 3, 0, 1});
  REQUIRE(r.gap.size() == 4);
  CHECK(r.gap[0] == Approx(0.010));  // before the first read, as traced
  CHECK(r.gap[1] == Approx(0.010));  // half of traced block 1's span
  CHECK(r.gap[2] == Approx(0.010));  // the other half
  CHECK(r.gap[3] == Approx(0.0));    // traced block 0, the last read: its work is the tail
  CHECK(r.tail == Approx(0.020));
  CHECK(r.work() == Approx(t.reads[0].work()));
  // Half the bytes, half of all of it; per block (scaled_reads) it would be 70 ms.
  const TracedReads half = per_byte_reads(t, 1, 4, 100);
  CHECK(half.work() == Approx(0.025));
  CHECK(half.tail == Approx(0.010));
  CHECK(scaled_reads(t, 1, 4).work() == Approx(0.070));
  // Fewer ranks than traced: 4 traced ranks reading 0..3 at 1, 2, 4, 8 ms and calling again at
  // 20 ms (400 bytes a call), on 2: traced blocks 1 and 3 have no stand-in, and their spans go
  // to the next read or the tail instead of being dropped: 20 ms in all, as traced.
  const TracedReads down = per_byte_reads(traced_site(four_rank_site()), 1, 2, 400);
  CHECK(down.order == std::vector<int>{0, 1});
  REQUIRE(down.gap.size() == 2);
  CHECK(down.gap[0] == Approx(0.001));
  CHECK(down.gap[1] == Approx(0.001 + 0.002));  // block 0's span and traced block 1's
  CHECK(down.tail == Approx(0.004 + 0.012));
  CHECK(down.work() == Approx(0.020));
  CHECK(scaled_work(down, 2).work() == Approx(0.040));
}

TEST_CASE("pick_site: the most calls among sites every rank called, then the larger sub-messages", "[pure]") {
  pr::Observations obs;
  pr::CallSite counts = two_rank_site();  // both ranks, 3 calls, 200 bytes
  counts.id = "counts";
  pr::CallSite data = counts;
  data.id = "data";
  data.op = pr::Op::alltoallv;
  data.message_bytes = 4000;
  pr::CallSite loop = counts;  // more calls, but rank 1 never called it here
  loop.id = "loop";
  loop.ranks.pop_back();
  loop.ranks[0].calls.resize(10, loop.ranks[0].calls[0]);
  pr::CallSite bcast = loop;
  bcast.id = "bcast";
  bcast.op = pr::Op::bcast;
  obs.sites = {counts, loop, data, bcast};
  REQUIRE(pick_site(obs, "") != nullptr);
  CHECK(pick_site(obs, "")->id == "data");
  CHECK(pick_site(obs, "loop")->id == "loop");
  CHECK(pick_site(obs, "none") == nullptr);
  obs.sites = {loop, bcast};  // no site every rank called: the one with the most calls
  CHECK(pick_site(obs, "")->id == "loop");
  obs.sites = {bcast};
  CHECK(pick_site(obs, "") == nullptr);
}

TEST_CASE("traced_layout: the traced job's nodes, block or cyclic", "[pure]") {
  TracedSite t;
  PlatformSpec spec;
  t.node_of = {0, 1, 0, 1, 0, 1};
  REQUIRE(traced_layout(t, spec));
  CHECK((spec.nodes == 2 && spec.ppn == 3 && spec.cyclic));
  t.node_of = {0, 0, 0, 1, 1, 1};
  REQUIRE(traced_layout(t, spec));
  CHECK((spec.nodes == 2 && spec.ppn == 3 && !spec.cyclic));
  t.node_of = {0, 0, 0, 1};
  const PlatformSpec before = spec;
  CHECK_FALSE(traced_layout(t, spec));
  CHECK((spec.nodes == before.nodes && spec.ppn == before.ppn));
}

TEST_CASE("reader_total of traced reads: a late block pushes the later work back, by hand", "[pure]") {
  TracedReads r{{1, 0}, {0.010, 0.020}, 0.020};
  // Returned at 1 ms; block 1 ready at 5 ms (no wait: read at 11 ms), block 0 at 40 ms (read
  // due at 31 ms: waits 9 ms), then 20 ms of work: 60 ms.
  const double total = reader_total(0.001, r, [](int b) { return b == 1 ? 0.005 : 0.040; });
  CHECK(total == Approx(0.060));
  CHECK(reader_total(0.001, r, [](int) { return 0.0; }) == Approx(0.051));
}

TEST_CASE("link_bound over needs: the late block's reader finishes late by as much, by hand", "[pure]") {
  // Two nodes of one rank, links of 1 MB/s.  Reader 0 needs 1 MB from rank 1 at 0.5 s and ends
  // at 1 s: the block arrives at 1 s at the earliest, 0.5 s late, so 1.5 s.  Reader 1 needs 1 MB
  // from rank 0 at once and ends at 0.2 s: 1 s + 0.2 s.
  const std::vector<int> nodes{0, 1};
  const std::vector<Need> needs{{0, 1, 1e6, 0.5}, {1, 0, 1e6, 0.0}};
  CHECK(link_bound(nodes, 1e6, needs, std::vector<double>{1.0, 0.2}) == Approx(1.5));
  // Both blocks from node 0 to node 1's two readers... on one link: Jackson's rule sends the
  // earlier due date (need - end) first.  Reader 1 (due 0 - 0.2) first: 1 s, late 1 s -> 1.2 s;
  // reader 2 (due 0.9 - 1.0) second: 2 s, late 1.1 s -> 2.1 s.
  const std::vector<int> three{0, 1, 1};
  const std::vector<Need> two{{1, 0, 1e6, 0.0}, {2, 0, 1e6, 0.9}};
  CHECK(link_bound(three, 1e6, two, std::vector<double>{0.0, 0.2, 1.0}) == Approx(2.1));
}
