// Online learning's rules without MPI (shim/replay/learn/rules.hpp): which blocking calls are
// observed, and the hysteresis between the orders learn points find.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

#include "shim/replay/learn/rules.hpp"

using tnbc::priority::Consensus;
using namespace tnbc::shim::replay::learn;

namespace {

/// A consensus whose whole order is backed by evidence.
Consensus consensus_of(std::vector<std::size_t> order) {
  Consensus c;
  c.ordered = order.size();
  c.order = std::move(order);
  return c;
}

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<std::size_t> reversed(std::size_t n) {
  std::vector<std::size_t> v = identity(n);
  return {v.rbegin(), v.rend()};
}

std::vector<std::size_t> current_order(const SiteLearning& s) {
  REQUIRE(s.order.current != nullptr);
  return {s.order.current->order.begin(), s.order.current->order.end()};
}

}  // namespace

TEST_CASE("designated: every probing call, 1 in kBlockingRunEvery of a blocking run") {
  int run = 0;
  for (std::uint64_t call = 0; call < 10 * kBlockingRunEvery; ++call) {
    CHECK(designated(call, true));
    run += designated(call, false);
  }
  CHECK(run == 10);
  CHECK(designated(0, false));
  CHECK_FALSE(designated(1, false));
  CHECK(designated(kBlockingRunEvery, false));
}

TEST_CASE("the first order is adopted at once, with the key's op and size and the call") {
  KeyLearning k;
  k.op = tnbc::priority::Op::alltoallv;
  k.comm_size = 8;
  SiteLearning s;
  update(k, s.order, consensus_of(reversed(8)), 42);
  CHECK(current_order(s) == reversed(8));
  CHECK(s.order.current->op == tnbc::priority::Op::alltoallv);
  CHECK(s.order.current->comm_size == 8);
  CHECK(s.order.learned_at_call == 42);
  CHECK(s.order.changes == 0);
}

TEST_CASE("an order close to the current keeps it and forgets a candidate") {
  KeyLearning k;
  SiteLearning s;
  update(k, s.order, consensus_of(identity(16)), 1);
  update(k, s.order, consensus_of(reversed(16)), 2);  // a candidate
  REQUIRE_FALSE(s.order.candidate.empty());
  std::vector<std::size_t> close = identity(16);
  std::swap(close[14], close[15]);  // one pair of 120 out of order: concordance above 0.9
  update(k, s.order, consensus_of(close), 3);
  CHECK(current_order(s) == identity(16));
  CHECK(s.order.candidate.empty());
  CHECK(s.order.learned_at_call == 1);
  CHECK(s.order.entries.size() == 1);
}

TEST_CASE("another order replaces the current only when two learn points in a row agree on it") {
  KeyLearning k;
  SiteLearning s;
  update(k, s.order, consensus_of(identity(16)), 1);
  update(k, s.order, consensus_of(reversed(16)), 2);
  CHECK(current_order(s) == identity(16));  // seen once: only a candidate
  CHECK(s.order.candidate == reversed(16));
  update(k, s.order, consensus_of(reversed(16)), 3);
  CHECK(current_order(s) == reversed(16));
  CHECK(s.order.changes == 1);
  CHECK(s.order.learned_at_call == 3);
  CHECK(s.order.candidate.empty());
  // The old entry stays valid for calls in flight that point at it.
  REQUIRE(s.order.entries.size() == 2);
  CHECK(std::vector<std::size_t>(s.order.entries.front().order.begin(), s.order.entries.front().order.end()) == identity(16));
}

TEST_CASE("two different orders in a row that disagree with each other change nothing") {
  KeyLearning k;
  SiteLearning s;
  update(k, s.order, consensus_of(identity(8)), 1);
  std::vector<std::size_t> a = {4, 5, 6, 7, 0, 1, 2, 3};
  std::vector<std::size_t> b = reversed(8);
  update(k, s.order, consensus_of(a), 2);
  update(k, s.order, consensus_of(b), 3);
  CHECK(current_order(s) == identity(8));
  CHECK(s.order.changes == 0);
  CHECK(s.order.candidate == b);  // the latest stays the candidate
}
