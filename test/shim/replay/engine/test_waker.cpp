// The progress thread's nap (shim/replay/engine/waker.hpp): a kick ends it, with or without a
// descriptor to poll; a descriptor becoming readable ends it; nothing ends it early otherwise.
// The margins are wide (a nap of 2 s that ends within 1 s was woken), so a loaded machine does
// not fail them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <thread>

#include "shim/replay/engine/waker.hpp"

using tnbc::shim::replay::engine::Waker;

namespace {

constexpr unsigned kLongNapUs = 2000000;

/// Milliseconds `nap` took while `meanwhile` ran on another thread after 20 ms.
template <typename Nap, typename Meanwhile>
double timed(Nap nap, Meanwhile meanwhile) {
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    meanwhile();
  });
  const auto t0 = std::chrono::steady_clock::now();
  nap();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  other.join();
  return ms;
}

}  // namespace

TEST_CASE("waker: a kick ends a nap, on the futex and while polling a descriptor", "[waker]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  for (int fd : {-1, fds[0]}) {
    INFO((fd < 0 ? "futex" : "polling a pipe"));
    Waker w;
    const std::uint32_t seen = w.word();
    CHECK(timed([&] { w.nap(kLongNapUs, seen, fd); }, [&] { w.kick(); }) < 1000);
    // A kick before the nap: the word moved, the nap returns at once.
    w.kick();
    CHECK(timed([&] { w.nap(kLongNapUs, seen, fd); }, [] {}) < 1000);
  }
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("waker: a descriptor becoming readable ends a nap that polls it; nothing else does", "[waker]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  Waker w;
  CHECK(timed([&] { w.nap(kLongNapUs, w.word(), fds[0]); }, [&] { REQUIRE(write(fds[1], "x", 1) == 1); }) < 1000);
  char c;
  REQUIRE(read(fds[0], &c, 1) == 1);
  // Nothing happens: the nap lasts (most of) its time.
  CHECK(timed([&] { w.nap(100000, w.word(), fds[0]); }, [] {}) >= 90);
  CHECK(timed([&] { w.nap(100000, w.word(), -1); }, [] {}) >= 90);
  close(fds[0]);
  close(fds[1]);
}
