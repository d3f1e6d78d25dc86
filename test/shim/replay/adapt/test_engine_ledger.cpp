// The engine's ledger of a rank and the joint verdict of a job on one node
// (shim/replay/adapt/engine_ledger.hpp), driven with made-up costs.
#include <catch2/catch.hpp>

#include <array>
#include <thread>
#include <vector>

#include "shim/replay/adapt/engine_ledger.hpp"

using tnbc::shim::replay::adapt::EngineLedger;
using tnbc::shim::replay::adapt::joint_verdict;
using tnbc::shim::replay::adapt::JointVerdict;
using tnbc::shim::replay::adapt::LedgerPart;

namespace {

using Part = std::array<double, LedgerPart::kFields>;

/// The sum of the ranks' parts, as the key's tally gives it.
Part summed(const std::vector<Part>& parts) {
  Part sum{};
  for (const Part& p : parts)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
  return sum;
}

}  // namespace

TEST_CASE("the ledger sums every key's samples and checks on the rank") {
  EngineLedger ledger;
  REQUIRE(ledger.part() == Part{});
  ledger.add_samples(100, 60, 9);
  ledger.add_samples(40, 50, 16);
  ledger.add_check(300, 280, 12);
  const Part p = ledger.part();
  REQUIRE(p[LedgerPart::samples_mpi] == 140);
  REQUIRE(p[LedgerPart::samples_engine] == 110);
  REQUIRE(p[LedgerPart::sampled] == 2);
  REQUIRE(p[LedgerPart::samples_spread_sq] == 25);
  REQUIRE(p[LedgerPart::checks_mpi] == 300);
  REQUIRE(p[LedgerPart::checks_engine] == 280);
  REQUIRE(p[LedgerPart::checked] == 1);
  REQUIRE(p[LedgerPart::checks_spread_sq] == 144);
}

TEST_CASE("keys of several threads add to one ledger without losing any") {
  EngineLedger ledger;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ledger.add_samples(1, 2, 0), ledger.add_check(3, 4, 1);
    });
  for (auto& t : threads) t.join();
  const Part p = ledger.part();
  REQUIRE(p[LedgerPart::sampled] == 4000);
  REQUIRE(p[LedgerPart::samples_engine] == 8000);
  REQUIRE(p[LedgerPart::checked] == 4000);
  REQUIRE(p[LedgerPart::checks_engine] == 16000);
  REQUIRE(p[LedgerPart::checks_spread_sq] == 4000);
}

TEST_CASE("the joint verdict: the pooled samples decide, a judged check's loss beyond its spread vetoes the engine") {
  // Two ranks of a 2-rank key, each with its own key and one other sampled.
  EngineLedger a, b;
  a.add_samples(100, 60, 0);  // this key on rank a: the engine cheaper
  b.add_samples(100, 70, 0);
  a.add_samples(50, 70, 0);   // another key on each: MPI cheaper, by less
  b.add_samples(50, 65, 0);
  // 300 against 265 in all: the engine, although the other keys alone said MPI.
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::engine);
  // A judged check whose engine blocks took longer, but within its spread: the engine stays.
  a.add_check(200, 205, 10);
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::engine);
  // One whose engine blocks took longer beyond the pooled spread: MPI for all.
  b.add_check(200, 240, 10);
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::mpi);
  // More checks that show the engine's gain outweigh it (pooled).
  b.add_check(200, 150, 10);
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::engine);
}

TEST_CASE("the joint verdict: MPI's calls only where the engine's samples cost more beyond their pooled spread") {
  // 2DECOMP&FFT's row and column keys on two ranks (one node, AMD, 2026-12-02): MPI's and the
  // engine's sample calls, each key's two of each (ms), scattered over 2-70 ms.
  auto key = [](EngineLedger& l, double m0, double m1, double e0, double e1) {
    l.add_samples(m0 + m1, e0 + e1, (m0 - m1) * (m0 - m1) + (e0 - e1) * (e0 - e1));
  };
  EngineLedger r0, r1;
  key(r0, 2.7, 19.7, 28.9, 19.1), key(r0, 6.7, 10.0, 17.7, 5.1);
  key(r1, 2.7, 4.1, 5.7, 5.0), key(r1, 15.5, 69.9, 15.0, 10.4);
  // The engine's samples cost 106.9 against MPI's 131.3 in all (spread 59.5): the engine.
  REQUIRE(joint_verdict(summed({r0.part(), r1.part()}), 2) == JointVerdict::engine);
  // The other way round, within the spread: still the engine.
  EngineLedger s0, s1;
  key(s0, 28.9, 19.1, 2.7, 19.7), key(s0, 17.7, 5.1, 6.7, 10.0);
  key(s1, 5.7, 5.0, 2.7, 4.1), key(s1, 15.0, 10.4, 15.5, 69.9);
  REQUIRE(joint_verdict(summed({s0.part(), s1.part()}), 2) == JointVerdict::engine);
  // Without the spread the same sums chose MPI's calls.
  Part no_spread = summed({s0.part(), s1.part()});
  no_spread[LedgerPart::samples_spread_sq] = 0;
  REQUIRE(joint_verdict(no_spread, 2) == JointVerdict::mpi);
  // Large blocks on one node, as NPB IS A's samples measured them when they came at its calls 4-7:
  // 8-10 ms by MPI's shared memory, 7-43 ms on the engine, on both keys: dearer beyond the spread,
  // MPI's calls.
  EngineLedger i0, i1;
  for (EngineLedger* l : {&i0, &i1}) key(*l, 8.0, 10.0, 30.0, 43.0), key(*l, 9.0, 9.5, 7.0, 38.0);
  REQUIRE(joint_verdict(summed({i0.part(), i1.part()}), 2) == JointVerdict::mpi);
  // heFFTe's keys on one rank pair: MPI's calls wait a time slice (7-10 ms), the engine's take 1-6
  // ms, on most keys; two keys the other way round, by less.
  EngineLedger h0, h1;
  for (EngineLedger* l : {&h0, &h1}) {
    key(*l, 0.3, 0.8, 2.9, 3.5), key(*l, 7.6, 8.7, 1.0, 3.7), key(*l, 9.3, 9.6, 3.9, 6.5);
    key(*l, 9.2, 9.2, 4.4, 3.1), key(*l, 7.5, 10.4, 2.1, 2.3), key(*l, 1.0, 0.4, 1.3, 5.1);
  }
  REQUIRE(joint_verdict(summed({h0.part(), h1.part()}), 2) == JointVerdict::engine);
}

TEST_CASE("the joint verdict says nothing without another key's evidence") {
  EngineLedger a, b;
  a.add_samples(100, 10, 0);
  b.add_samples(100, 10, 0);
  // Only the key's own samples, one per rank: its own verdict stands.
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::own);
  // One rank with another key: now it speaks (MPI cheaper in all).
  a.add_samples(500, 900, 0);
  REQUIRE(joint_verdict(summed({a.part(), b.part()}), 2) == JointVerdict::mpi);
  // Equal costs: the engine, whose caller sleeps where MPI's polls on a core others want (the
  // weight that made the keys sample it).
  EngineLedger c, d;
  c.add_samples(50, 50, 0), c.add_samples(50, 50, 0);
  d.add_samples(50, 50, 0);
  REQUIRE(joint_verdict(summed({c.part(), d.part()}), 2) == JointVerdict::engine);
  // Fewer fields than a part: nothing to judge, its own verdict.
  REQUIRE(joint_verdict(std::vector<double>{1, 2, 3}, 2) == JointVerdict::own);
}
