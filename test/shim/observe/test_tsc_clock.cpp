// TscClock: calibration against CLOCK_MONOTONIC, with the hardware replaced by a fake.
#include <catch2/catch.hpp>

#include "shim/observe/tsc_clock.hpp"

using namespace tnbc::shim::observe;

namespace {

// Counters the test moves by hand.
class FakeSource final : public TickSource {
 public:
  bool invariant = true;
  std::uint64_t tsc = 0, ns = 0;
  bool invariant_tsc() const override { return invariant; }
  std::uint64_t ticks() const override { return tsc; }
  std::uint64_t monotonic_ns() const override { return ns; }
};

}  // namespace

TEST_CASE("TscClock: the rate is ticks over microseconds between begin and end", "[tsc]") {
  FakeSource src;
  src.tsc = 1'000'000;
  src.ns = 5'000'000'000;
  TscClock clock(src);
  clock.begin();
  REQUIRE(clock.uses_tsc());
  src.tsc += 2'400'000'000;  // 2.4 GHz for one second
  src.ns += 1'000'000'000;
  REQUIRE_FALSE(clock.end());
  CHECK(clock.ticks_per_us() == Approx(2400.0));
  CHECK(clock.stamp() == src.tsc);
}

TEST_CASE("TscClock: without an invariant TSC, stamps are CLOCK_MONOTONIC nanoseconds", "[tsc]") {
  FakeSource src;
  src.invariant = false;
  src.tsc = 77;
  src.ns = 123;
  TscClock clock(src);
  clock.begin();
  CHECK_FALSE(clock.uses_tsc());
  CHECK(clock.ticks_per_us() == 1000.0);
  CHECK(clock.stamp() == 123);
  src.ns = 5000;
  CHECK_FALSE(clock.end());
  CHECK(clock.ticks_per_us() == 1000.0);
}

TEST_CASE("TscClock: an empty or backwards interval is an error and keeps the rate", "[tsc]") {
  FakeSource src;
  src.tsc = 100;
  src.ns = 100;
  TscClock clock(src);
  clock.begin();
  auto err = clock.end();
  REQUIRE(err);
  CHECK(*err == "TSC calibration interval is empty or the counters went backwards");
  CHECK(clock.ticks_per_us() == 0.0);
}

TEST_CASE("TscClock: the host clock advances and its rate is plausible", "[tsc][host]") {
  TscClock clock;
  clock.begin();
  auto t0 = clock.stamp();
  auto deadline = read_monotonic_ns() + 20'000'000;
  while (read_monotonic_ns() < deadline) {}
  REQUIRE_FALSE(clock.end());
  CHECK(clock.stamp() > t0);
  CHECK(clock.stamp_fn()() > t0);
  // Between 100 MHz and 10 GHz, whichever source is in use.
  CHECK(clock.ticks_per_us() > 100.0);
  CHECK(clock.ticks_per_us() < 10000.0);
}
