// The one SIGSEGV handler (shim/observe/segv.hpp), with real faults: claims are asked in turn and a
// claimed fault is retried; a fault no claim takes reaches the handler installed before; the
// last claim removed puts that handler back; the table has room for kMaxClaims.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>

#include "previous_handler.hpp"
#include "shim/observe/segv.hpp"

namespace segv = tnbc::shim::observe::segv;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
char* g_page = nullptr;  // PROT_NONE until a claim opens it
std::atomic<int> g_asked_a{0}, g_asked_b{0};

// Claim A never takes a fault; claim B takes faults on g_page and opens it.
bool claim_a(const siginfo_t*) {
  g_asked_a.fetch_add(1);
  return false;
}
bool claim_b(const siginfo_t* info) {
  g_asked_b.fetch_add(1);
  auto* addr = static_cast<char*>(info->si_addr);
  if (addr < g_page || addr >= g_page + kPage) return false;
  return mprotect(g_page, kPage, PROT_READ | PROT_WRITE) == 0;
}
bool claim_none(const siginfo_t*) { return false; }
bool claim_2(const siginfo_t*) { return false; }
bool claim_3(const siginfo_t*) { return false; }

/// The handler installed before ours (previous_handler.hpp) for the test case, and two pages
/// that stay PROT_NONE until a claim opens them.
struct Previous {
  tnbc::test::PreviousHandler handler;
  Previous() {
    g_asked_a = g_asked_b = 0;
    void* p = mmap(nullptr, 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    g_page = static_cast<char*>(p);
  }
  ~Previous() { munmap(g_page, 2 * kPage); }
};

bool passed_on(const char* p) { return tnbc::test::PreviousHandler::read_passed_on(p); }
bool previous_installed() { return tnbc::test::PreviousHandler::installed(); }

}  // namespace

TEST_CASE("segv: a claimed fault is retried; the claims are asked in turn", "[segv]") {
  Previous prev;
  REQUIRE_FALSE(segv::add(claim_a).has_value());
  REQUIRE_FALSE(segv::add(claim_b).has_value());
  CHECK_FALSE(previous_installed());  // ours is installed on top
  CHECK_FALSE(passed_on(g_page + 10));  // B opened the page: the read completed
  CHECK(g_asked_a.load() == 1);
  CHECK(g_asked_b.load() == 1);
  CHECK(tnbc::test::PreviousHandler::calls.load() == 0);
  segv::remove(claim_b);
  segv::remove(claim_a);
  CHECK(previous_installed());  // the last claim out puts the previous handler back
}

TEST_CASE("segv: a fault no claim takes reaches the handler installed before", "[segv]") {
  Previous prev;
  REQUIRE_FALSE(segv::add(claim_a).has_value());
  REQUIRE_FALSE(segv::add(claim_a).has_value());  // the same claim twice counts once
  CHECK(passed_on(g_page + kPage + 3));  // the second page: no claim opens it
  CHECK(g_asked_a.load() == 1);
  CHECK(tnbc::test::PreviousHandler::calls.load() == 1);
  segv::remove(claim_a);
  CHECK(previous_installed());
}

TEST_CASE("segv: while the handler is installed a blocked mask leaves SIGSEGV out", "[segv]") {
  sigset_t all, scratch;
  sigfillset(&all);
  REQUIRE_FALSE(segv::installed());
  CHECK(segv::without_segv(SIG_BLOCK, &all, &scratch) == &all);  // no handler: the program's mask
  REQUIRE_FALSE(segv::add(claim_a).has_value());
  CHECK(segv::installed());
  for (int how : {SIG_BLOCK, SIG_SETMASK}) {
    const sigset_t* got = segv::without_segv(how, &all, &scratch);
    REQUIRE(got == &scratch);
    CHECK(sigismember(got, SIGSEGV) == 0);
    CHECK(sigismember(got, SIGUSR1) == 1);
  }
  CHECK(segv::without_segv(SIG_UNBLOCK, &all, &scratch) == &all);
  CHECK(segv::without_segv(SIG_BLOCK, nullptr, &scratch) == nullptr);
  segv::remove(claim_a);
  CHECK_FALSE(segv::installed());
}

TEST_CASE("segv: the table holds kMaxClaims claims and says so when full", "[segv]") {
  Previous prev;
  static_assert(segv::kMaxClaims == 4);
  for (auto c : {claim_a, claim_none, claim_2, claim_3}) REQUIRE_FALSE(segv::add(c).has_value());
  auto err = segv::add(claim_b);
  REQUIRE(err.has_value());
  CHECK(*err == "too many SIGSEGV claims");
  segv::remove(claim_none);  // a freed entry is used again, the handler stays installed
  CHECK_FALSE(previous_installed());
  REQUIRE_FALSE(segv::add(claim_b).has_value());
  CHECK_FALSE(passed_on(g_page + 1));
  for (auto c : {claim_a, claim_b, claim_2, claim_3}) segv::remove(c);
  CHECK(previous_installed());
}
