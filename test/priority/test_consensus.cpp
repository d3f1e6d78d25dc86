#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "priority/consensus.hpp"

using namespace tnbc::priority;

namespace {

using Order = std::vector<std::size_t>;

// One call whose sub-message i is first touched after delays[i] µs (negative = untouched).
CallRecord call(std::vector<double> delays, double tcomm = 100) {
  CallRecord c;
  c.tcomm_us = tcomm;
  for (double d : delays) c.touches.push_back(d < 0 ? FirstTouch::untouched() : FirstTouch::at(d));
  return c;
}

CallSite site(std::size_t n, std::vector<std::vector<CallRecord>> per_rank) {
  CallSite s;
  s.id = "test";
  s.messages = n;
  s.comm_size = static_cast<int>(per_rank.size());
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    s.ranks.push_back(RankRecord{static_cast<int>(r), std::move(per_rank[r])});
  return s;
}

// Reading order -> delays: the k-th sub-message read is touched at base + k·step µs.
std::vector<double> reading(const Order& order, double base = 10, double step = 10) {
  std::vector<double> d(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) d[order[k]] = base + static_cast<double>(k) * step;
  return d;
}

// Definition of concordance, O(n²), to check the O(n log n) one.
double brute_concordance(const Order& a, std::size_t a_tail, const Order& b, std::size_t b_tail) {
  std::size_t n = a.size();
  std::vector<std::size_t> pa(n), pb(n);
  for (std::size_t p = 0; p < n; ++p) {
    pa[a[p]] = p;
    pb[b[p]] = p;
  }
  long c = 0, d = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      bool both_a = pa[i] >= n - a_tail && pa[j] >= n - a_tail;
      bool both_b = pb[i] >= n - b_tail && pb[j] >= n - b_tail;
      if (both_a || both_b) continue;
      ((pa[i] < pa[j]) == (pb[i] < pb[j]) ? c : d)++;
    }
  if (c + d == 0) return 1.0;
  return std::max(0.0, double(c - d) / double(c + d));
}

}  // namespace

TEST_CASE("a common order is recovered exactly despite noise", "[consensus]") {
  // Every rank reads 2, 0, 3, 1; times differ per rank and call but never reorder.
  Order truth{2, 0, 3, 1};
  std::vector<std::vector<CallRecord>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back({call(reading(truth, 5 + r, 7)), call(reading(truth, 50 + r, 3))});
  SiteAnalysis a = analyse(site(4, ranks));
  CHECK(a.order == truth);
  CHECK(a.ordered == 4);
  CHECK(a.agreement == 1.0);
  CHECK(a.disagreeing.empty());
  CHECK(a.warnings.empty());
  for (const auto& r : a.ranks) CHECK(r.order == truth);
}

TEST_CASE("a minority of reversed ranks is listed and lowers agreement by hand-computed amounts",
          "[consensus]") {
  SECTION("four ranks read 0,1,2, one reads 2,1,0: concordance 0 for it, agreement 4/5") {
    std::vector<std::vector<CallRecord>> ranks(4, {call(reading({0, 1, 2}))});
    ranks.push_back({call(reading({2, 1, 0}))});
    SiteAnalysis a = analyse(site(3, ranks));
    CHECK(a.order == Order{0, 1, 2});
    CHECK(a.ranks[4].concordance == 0.0);
    CHECK(a.ranks[4].order == Order{2, 1, 0});
    CHECK(a.agreement == Approx(0.8));
    CHECK(a.disagreeing == std::vector<int>{4});
  }
  SECTION("two ranks read 0,1,2, one reads 1,0,2: tau = (2-1)/3, agreement (1+1+1/3)/3 = 7/9") {
    std::vector<std::vector<CallRecord>> ranks(2, {call(reading({0, 1, 2}))});
    ranks.push_back({call(reading({1, 0, 2}))});
    SiteAnalysis a = analyse(site(3, ranks));
    CHECK(a.order == Order{0, 1, 2});
    CHECK(a.ranks[2].concordance == Approx(1.0 / 3));
    CHECK(a.agreement == Approx(7.0 / 9));
    CHECK(a.disagreeing == std::vector<int>{2});
    ConsensusOptions lenient;
    lenient.concordance_threshold = 0.3;
    CHECK(analyse(site(3, ranks), lenient).disagreeing.empty());
  }
}

TEST_CASE("each rank has one vote whatever its number of calls", "[consensus]") {
  // Rank 0 traced five calls reading 1,0; ranks 1 and 2 one call each reading 0,1.
  std::vector<CallRecord> many(5, call(reading({1, 0})));
  SiteAnalysis a = analyse(site(2, {many, {call(reading({0, 1}))}, {call(reading({0, 1}))}}));
  CHECK(a.order == Order{0, 1});
  CHECK(a.disagreeing == std::vector<int>{0});
}

TEST_CASE("ties in the median delay go to the median position, then to the index",
          "[consensus]") {
  SECTION("equal median delays, sub-message 1 read first in most calls") {
    // m1 {1, 2, 10}, m0 {1.5, 2.5, 2}: both medians are 2; m1 is first in two calls of three.
    SiteAnalysis a = analyse(site(2, {{call({1.5, 1}), call({2.5, 2}), call({2, 10})}}));
    CHECK(a.messages[0].key_us == 2);
    CHECK(a.messages[1].key_us == 2);
    CHECK(a.messages[0].median_position == 1);
    CHECK(a.messages[1].median_position == 0);
    CHECK(a.order == Order{1, 0});
  }
  SECTION("equal delays everywhere: index order") {
    SiteAnalysis a = analyse(site(3, {{call({5, 5, 5})}, {call({7, 7, 7})}}));
    CHECK(a.order == Order{0, 1, 2});
    CHECK(a.agreement == 1.0);
  }
}

TEST_CASE("untouched and unobserved sub-messages go last, in index order", "[consensus]") {
  CallRecord c = call({20, 0, 10, -1});
  c.touches[1] = FirstTouch::unobserved();
  SiteAnalysis a = analyse(site(4, {{c}}));
  CHECK(a.order == Order{2, 0, 1, 3});
  CHECK(a.ordered == 2);
  CHECK(a.messages[3].untouched == 1);
  CHECK(std::isinf(a.messages[3].key_us));
  CHECK(a.messages[1].unobserved == 1);
  CHECK(std::isnan(a.messages[1].key_us));
  CHECK(std::isnan(a.messages[1].median_us));

  SECTION("untouched by most calls (median +inf) is in the tail; by a minority it is not") {
    // m0 untouched in 2 of 3 calls; m1 untouched in 1 of 3.
    SiteAnalysis b = analyse(site(2, {{call({-1, 5}), call({-1, -1}), call({3, 6})}}));
    CHECK(b.order == Order{1, 0});
    CHECK(b.ordered == 1);
    CHECK(b.messages[1].key_us == 6);
  }
  SECTION("unobserved sub-messages do not count: the others decide") {
    CallRecord x = call({1, 2});
    x.touches[0] = FirstTouch::unobserved();
    SiteAnalysis b = analyse(site(2, {{x, call({9, 8}), call({7, 8})}}));
    CHECK(b.messages[0].key_us == 8);  // median of {9, 7}
    CHECK(b.messages[1].key_us == 8);  // median of {2, 8, 8}
    // Tie on delay; positions: m0 {1, 0} -> 0.5, m1 {0, 0, 1} -> 0.
    CHECK(b.order == Order{1, 0});
  }
}

TEST_CASE("a rank with a tail agrees on everything it observed", "[consensus]") {
  // Rank 1 saw only sub-messages 0 and 1 touched: pairs inside its tail do not count.
  SiteAnalysis a = analyse(site(4, {{call(reading({0, 1, 2, 3}))}, {call({10, 20, -1, -1})},
                                    {call(reading({0, 1, 2, 3}))}}));
  CHECK(a.order == Order{0, 1, 2, 3});
  CHECK(a.ranks[1].ordered == 2);
  CHECK(a.ranks[1].concordance == 1.0);
}

TEST_CASE("concordance: definition on hand examples and against brute force", "[consensus]") {
  CHECK(concordance(Order{0, 1, 2, 3}, 0, Order{0, 1, 2, 3}, 0) == 1.0);
  CHECK(concordance(Order{3, 2, 1, 0}, 0, Order{0, 1, 2, 3}, 0) == 0.0);
  // One swap of adjacent elements among 4: C = 5, D = 1 -> 4/6.
  CHECK(concordance(Order{1, 0, 2, 3}, 0, Order{0, 1, 2, 3}, 0) == Approx(4.0 / 6));
  // Pair (2,3) in both tails is skipped, whatever its order.
  CHECK(concordance(Order{0, 1, 2, 3}, 2, Order{0, 1, 3, 2}, 2) == 1.0);
  CHECK(concordance(Order{0}, 0, Order{0}, 0) == 1.0);
  CHECK(concordance(Order{0, 1}, 2, Order{1, 0}, 0) == 1.0);
  // Not permutations of the same set: 0, never out-of-bounds access.
  CHECK(concordance(Order{0, 1, 2}, 0, Order{0, 1}, 0) == 0.0);
  CHECK(concordance(Order{0, 5}, 0, Order{0, 1}, 0) == 0.0);
  CHECK(concordance(Order{1, 1}, 0, Order{0, 1}, 0) == 0.0);

  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::size_t n = 1 + rng() % 12;
    Order a(n), b(n);
    std::iota(a.begin(), a.end(), 0);
    std::iota(b.begin(), b.end(), 0);
    std::shuffle(a.begin(), a.end(), rng);
    std::shuffle(b.begin(), b.end(), rng);
    std::size_t ta = rng() % (n + 1), tb = rng() % (n + 1);
    INFO("trial " << trial);
    CHECK(concordance(a, ta, b, tb) == Approx(brute_concordance(a, ta, b, tb)));
  }
}

TEST_CASE("per sub-message statistics: counts, median and quartiles over touched calls",
          "[consensus]") {
  SiteAnalysis a = analyse(site(1, {{call({10}), call({20}), call({-1})}, {call({30}), call({40})}}));
  const MessageStats& m = a.messages[0];
  CHECK(m.touched == 4);
  CHECK(m.untouched == 1);
  CHECK(m.min_us == 10);
  CHECK(m.q1_us == 17.5);
  CHECK(m.median_us == 25);
  CHECK(m.q3_us == 32.5);
  CHECK(m.max_us == 40);
  // Rank 0: median {10, 20, inf} = 20; rank 1: median {30, 40} = 35; consensus = 27.5.
  CHECK(m.key_us == 27.5);
}

TEST_CASE("verdict: CURC when the first touch comes at half of Tcomm or later", "[consensus]") {
  CHECK(analyse(site(2, {{call({60, 70}, 100)}})).verdict == Verdict::curc);
  CHECK(analyse(site(2, {{call({50, 70}, 100)}})).verdict == Verdict::curc);
  CHECK(analyse(site(2, {{call({49, 70}, 100)}})).verdict == Verdict::crc);
  CHECK(analyse(site(2, {{call({-1, -1}, 100)}})).verdict == Verdict::unread);
  ConsensusOptions strict;
  strict.curc_fraction = 0.7;
  CHECK(analyse(site(2, {{call({60, 70}, 100)}}), strict).verdict == Verdict::crc);

  SiteAnalysis a = analyse(site(4, {{call({10, 20, 30, 40}, 100), call({20, 50, 80, 110}, 300)}}));
  CHECK(a.tcomm_us == 200);            // median {100, 300}
  CHECK(a.first_touch_us == 15);       // median {10, 20}
  CHECK(a.touch_interval_us == 20);    // median {(40-10)/3, (110-20)/3} = median {10, 30}
}

TEST_CASE("inconsistent input is repaired and reported, never fatal", "[consensus]") {
  CallRecord short_call = call({10});
  CallRecord long_call = call({10, 20, 30});
  CallRecord bad = call({-5, 20});
  bad.touches[0] = FirstTouch::at(std::numeric_limits<double>::quiet_NaN());
  bad.tcomm_us = -1;
  SiteAnalysis a = analyse(site(2, {{short_call, long_call, bad}}));
  REQUIRE(a.warnings.size() == 4);
  CHECK(a.warnings[0] ==
        "test: 1 call(s) with fewer than 2 first touches; the missing ones count as unobserved");
  CHECK(a.warnings[1] == "test: 1 call(s) with more than 2 first touches; the extra ones are ignored");
  CHECK(a.warnings[2] == "test: 1 negative or non-finite first-touch delay(s) ignored");
  CHECK(a.warnings[3] == "test: 1 negative or non-finite Tcomm value(s) ignored");
  CHECK(a.order == Order{0, 1});

  SiteAnalysis empty = analyse(site(3, {}));
  CHECK(empty.order == Order{0, 1, 2});
  CHECK(empty.ordered == 0);
  CHECK(empty.agreement == 1.0);
  CHECK(empty.verdict == Verdict::unread);
}

TEST_CASE("summaries gathered from the ranks give analyse()'s order (the learning path)", "[consensus]") {
  // Random sites: ranks reading in random orders, some sub-messages untouched or unobserved,
  // ranks with no call.  Replay mode's learning summarises each rank alone and runs consensus()
  // on the gathered summaries; tnbc-order runs analyse() on the whole site.  Same order.
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const std::size_t n = 1 + rng() % 12;
    const std::size_t ranks = 1 + rng() % 6;
    std::vector<std::vector<CallRecord>> per_rank(ranks);
    for (auto& calls : per_rank) {
      const std::size_t count = rng() % 5;
      for (std::size_t c = 0; c < count; ++c) {
        CallRecord rec;
        rec.tcomm_us = 50;
        for (std::size_t i = 0; i < n; ++i) {
          const unsigned kind = rng() % 8;
          rec.touches.push_back(kind == 0   ? FirstTouch::untouched()
                                : kind == 1 ? FirstTouch::unobserved()
                                            : FirstTouch::at(static_cast<double>(rng() % 1000)));
        }
        calls.push_back(rec);
      }
    }
    const CallSite s = site(n, per_rank);
    const SiteAnalysis a = analyse(s);
    std::vector<RankSummary> summaries;
    for (const RankRecord& r : s.ranks) summaries.push_back(summarise_rank(r.calls, n));
    const Consensus c = consensus(summaries, n);
    INFO("round " << round << ", " << n << " sub-messages, " << ranks << " ranks");
    CHECK(c.order == a.order);
    CHECK(c.ordered == a.ordered);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK((std::isnan(c.key[i]) ? std::isnan(a.messages[i].key_us) : c.key[i] == a.messages[i].key_us));
    }
  }
}

TEST_CASE("consensus() of one rank's summary is that rank's own order", "[consensus]") {
  const Order read = {3, 0, 2, 1};
  const CallSite s = site(4, {{call(reading(read)), call(reading(read, 20, 5))}});
  const RankSummary one = summarise_rank(s.ranks[0].calls, 4);
  const Consensus c = consensus(std::span(&one, 1), 4);
  CHECK(c.order == read);
  CHECK(c.ordered == 4);
  CHECK(c.order == analyse(s).ranks[0].order);
  // A summary of another length says nothing.
  const RankSummary wrong = summarise_rank(s.ranks[0].calls, 3);
  const Consensus none = consensus(std::span(&wrong, 1), 4);
  CHECK(none.ordered == 0);
  CHECK(none.order == Order({0, 1, 2, 3}));
}
