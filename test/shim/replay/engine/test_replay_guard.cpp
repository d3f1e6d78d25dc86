// The replay guard (shim/replay/engine/replay_guard.hpp) with real page protection and real SIGSEGV: threads
// that touch a guarded page wait until it is published and then read the new bytes; a fault
// that reaches the handler after its collective retired is retried, but one that keeps coming
// back is not ours and goes to the handler installed before; so does every fault outside the
// guarded ranges; wait_range() waits for every guarded page it overlaps.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "test/shim/observe/previous_handler.hpp"
#include "shim/replay/engine/replay_guard.hpp"

using tnbc::shim::replay::engine::ReplayGuard;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

/// `pages` pages filled with 'a', then made PROT_NONE and registered as one guarded range;
/// publish(i) writes 'b' into page i and releases it, as the engine's mremap would.
struct Guarded {
  std::size_t pages;
  char* base;
  std::unique_ptr<std::atomic<std::uint8_t>[]> state;
  std::atomic<std::uint64_t> waited{0};
  int slot = -1;

  explicit Guarded(std::size_t n) : pages(n), state(new std::atomic<std::uint8_t>[n]) {
    void* p = mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    base = static_cast<char*>(p);
    std::memset(base, 'a', n * kPage);
    for (std::size_t i = 0; i < n; ++i) state[i].store(0);
    REQUIRE(mprotect(base, n * kPage, PROT_NONE) == 0);
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    slot = ReplayGuard::instance().add(b, b + n * kPage, state.get(), &waited);
    REQUIRE(slot >= 0);
  }
  ~Guarded() { munmap(base, pages * kPage); }
  char* page(std::size_t i) const { return base + i * kPage; }
  void publish(std::size_t i) {
    REQUIRE(mprotect(page(i), kPage, PROT_READ | PROT_WRITE) == 0);
    std::memset(page(i), 'b', kPage);
    state[i].store(1, std::memory_order_release);
  }
  void retire() {
    for (std::size_t i = 0; i < pages; ++i)
      if (state[i].load() == 0) publish(i);
    ReplayGuard::instance().retire(slot, std::move(state));
  }
};

/// Installs the guard for one test case and removes it afterwards (Catch2 restores its own
/// SIGSEGV handler after each test case; ours must be gone by then).
struct Installed {
  Installed() { REQUIRE_FALSE(ReplayGuard::instance().install().has_value()); }
  ~Installed() { ReplayGuard::instance().uninstall(); }
};

char read_byte(const char* p) { return *static_cast<const volatile char*>(p); }

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

/// Waits (up to 10 s) until the guard has counted `n` faults in all; true if it did.
bool faults_reach(std::uint64_t n) {
  for (int i = 0; i < 10000 && ReplayGuard::instance().faults() < n; ++i) sleep_ms(1);
  return ReplayGuard::instance().faults() >= n;
}

/// The handler installed before the guard (previous_handler.hpp), then the guard on top of it;
/// restores both.
struct WithPrevious {
  tnbc::test::PreviousHandler previous;
  WithPrevious() { REQUIRE_FALSE(ReplayGuard::instance().install().has_value()); }
  ~WithPrevious() { ReplayGuard::instance().uninstall(); }
};

}  // namespace

TEST_CASE("replay guard: a thread touching a guarded page waits for it and reads the published bytes",
          "[replay_guard]") {
  Installed guard;
  Guarded g(4);
  const std::uint64_t faults0 = ReplayGuard::instance().faults();
  std::atomic<bool> done{false};
  char seen = 0;
  std::thread reader([&] {
    seen = read_byte(g.page(2) + 100);
    done = true;
  });
  REQUIRE(faults_reach(faults0 + 1));
  sleep_ms(30);
  CHECK_FALSE(done.load());  // still waiting: page 2 is not published
  g.publish(1);               // another page does not release it
  sleep_ms(20);
  CHECK_FALSE(done.load());
  g.publish(2);
  reader.join();
  CHECK(seen == 'b');
  CHECK(ReplayGuard::instance().faults() == faults0 + 1);
  CHECK(g.waited.load() >= 50'000'000);  // the 50 ms or more it waited, charged to the range's sink
  g.retire();
}

TEST_CASE("replay guard: threads faulting together are released page by page, in any order",
          "[replay_guard]") {
  Installed guard;
  constexpr int kThreads = 4;
  Guarded g(kThreads);
  const std::uint64_t faults0 = ReplayGuard::instance().faults();
  std::atomic<int> done{0};
  std::vector<char> seen(kThreads, 0);
  std::vector<std::thread> readers;
  for (int t = 0; t < kThreads; ++t)
    readers.emplace_back([&, t] {
      seen[t] = read_byte(g.page(t) + t);
      done.fetch_add(1);
    });
  REQUIRE(faults_reach(faults0 + kThreads));  // every thread waits in the handler
  for (int i = kThreads - 1; i >= 0; --i) {
    CHECK(done.load() == kThreads - 1 - i);  // exactly the pages published so far let go
    g.publish(static_cast<std::size_t>(i));
    for (int spin = 0; spin < 2000 && done.load() < kThreads - i; ++spin) sleep_ms(1);
  }
  for (auto& r : readers) r.join();
  CHECK(seen == std::vector<char>(kThreads, 'b'));
  CHECK(ReplayGuard::instance().faults() == faults0 + kThreads);
  g.retire();
}

TEST_CASE("replay guard: wait_range() waits for every guarded page it overlaps", "[replay_guard]") {
  Installed guard;
  Guarded g(4);
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    ReplayGuard::instance().wait_range(g.page(1) + 10, 2 * kPage - 20);  // pages 1 and 2
    done = true;
  });
  g.publish(0);
  g.publish(3);
  sleep_ms(30);
  CHECK_FALSE(done.load());
  g.publish(1);
  sleep_ms(30);
  CHECK_FALSE(done.load());
  g.publish(2);
  waiter.join();
  CHECK(done.load());
  g.retire();
}

TEST_CASE("replay guard: a fault on a retired range is retried a few times, then it is not ours",
          "[replay_guard]") {
  Installed guard;
  Guarded g(2);
  const auto addr = reinterpret_cast<std::uintptr_t>(g.page(1));
  g.retire();
  // What the handler does for a fault that raced with the publication of its page: retry.
  CHECK(ReplayGuard::instance().wait_published(addr));
  CHECK(ReplayGuard::instance().wait_published(addr));
  CHECK(ReplayGuard::instance().wait_published(addr));
  // The same address a fourth time: the memory changed hands, the fault is someone else's.
  CHECK_FALSE(ReplayGuard::instance().wait_published(addr));
  // Outside every range: never ours.
  int local = 0;
  CHECK_FALSE(ReplayGuard::instance().wait_published(reinterpret_cast<std::uintptr_t>(&local)));
}

TEST_CASE("replay guard: late faults on the same address in successive collectives are each retried",
          "[replay_guard]") {
  // A program that reads its receive buffer after every call may lose the race with the last
  // publication at the same address in many calls; each time the retry succeeds, and the
  // retired slots of the earlier calls on the buffer are still there.
  Installed guard;
  void* p = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  char* buf = static_cast<char*>(p);
  const auto b = reinterpret_cast<std::uintptr_t>(buf), addr = b + kPage;
  for (int call = 0; call < 8; ++call) {
    std::unique_ptr<std::atomic<std::uint8_t>[]> state(new std::atomic<std::uint8_t>[2]);
    state[0].store(0);
    state[1].store(0);
    REQUIRE(mprotect(buf, 2 * kPage, PROT_NONE) == 0);
    const int slot = ReplayGuard::instance().add(b, b + 2 * kPage, state.get());
    REQUIRE(slot >= 0);
    REQUIRE(mprotect(buf, 2 * kPage, PROT_READ | PROT_WRITE) == 0);
    state[0].store(1);
    state[1].store(1);
    ReplayGuard::instance().retire(slot, std::move(state));
    CHECK(ReplayGuard::instance().wait_published(addr));  // this call's race: retried
  }
  // Within one collective the retries stay bounded.
  CHECK(ReplayGuard::instance().wait_published(addr));
  CHECK(ReplayGuard::instance().wait_published(addr));
  CHECK_FALSE(ReplayGuard::instance().wait_published(addr));
  munmap(p, 2 * kPage);
}

TEST_CASE("replay guard: faults that are not ours reach the handler installed before it", "[replay_guard]") {
  WithPrevious handlers;
  void* p = mmap(nullptr, 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  char* none = static_cast<char*>(p);

  SECTION("a protected page no range covers") {
    CHECK(tnbc::test::PreviousHandler::read_passed_on(none + 5));
    CHECK(tnbc::test::PreviousHandler::calls.load() == 1);
    CHECK(tnbc::test::PreviousHandler::addr.load() == reinterpret_cast<std::uintptr_t>(none + 5));
  }
  SECTION("a page of a retired range that stays protected: retried, then passed on") {
    std::unique_ptr<std::atomic<std::uint8_t>[]> state(new std::atomic<std::uint8_t>[2]);
    state[0].store(1);
    state[1].store(1);
    const auto b = reinterpret_cast<std::uintptr_t>(none);
    const int slot = ReplayGuard::instance().add(b, b + 2 * kPage, state.get());
    REQUIRE(slot >= 0);
    ReplayGuard::instance().retire(slot, std::move(state));
    CHECK(tnbc::test::PreviousHandler::read_passed_on(none + kPage + 7));
    CHECK(tnbc::test::PreviousHandler::calls.load() == 1);
    CHECK(tnbc::test::PreviousHandler::addr.load() == reinterpret_cast<std::uintptr_t>(none + kPage + 7));
  }
  munmap(p, 2 * kPage);
}
