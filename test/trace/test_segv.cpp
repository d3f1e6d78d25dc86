// The one SIGSEGV handler (trace/segv.hpp), with real faults: claims are asked in turn and a
// claimed fault is retried; a fault no claim takes reaches the handler installed before; the
// last claim removed puts that handler back; the table has room for kMaxClaims.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdint>

#include "segv.hpp"

namespace segv = tnbc::trace::segv;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
char* g_page = nullptr;  // PROT_NONE until a claim opens it
std::atomic<int> g_asked_a{0}, g_asked_b{0}, g_previous{0};

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

sigjmp_buf g_jump;
void previous(int, siginfo_t*, void*) {
  g_previous.fetch_add(1);
  siglongjmp(g_jump, 1);
}

/// Installs `previous` as the process's SIGSEGV handler for the test case and restores the one
/// before it (Catch2's) afterwards.
struct Previous {
  struct sigaction saved {};
  Previous() {
    struct sigaction sa {};
    sa.sa_sigaction = previous;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGSEGV, &sa, &saved) == 0);
    g_asked_a = g_asked_b = g_previous = 0;
    void* p = mmap(nullptr, 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    g_page = static_cast<char*>(p);
  }
  ~Previous() {
    munmap(g_page, 2 * kPage);
    sigaction(SIGSEGV, &saved, nullptr);
  }
};

/// Reads *p; true when the read ended in the previous handler instead of completing.
bool passed_on(const char* p) {
  if (sigsetjmp(g_jump, 1) != 0) return true;
  (void)*static_cast<const volatile char*>(p);
  return false;
}

bool handler_is(void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction now {};
  return sigaction(SIGSEGV, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == fn;
}

}  // namespace

TEST_CASE("segv: a claimed fault is retried; the claims are asked in turn", "[segv]") {
  Previous prev;
  REQUIRE_FALSE(segv::add(claim_a).has_value());
  REQUIRE_FALSE(segv::add(claim_b).has_value());
  CHECK_FALSE(handler_is(previous));  // ours is installed on top
  CHECK_FALSE(passed_on(g_page + 10));  // B opened the page: the read completed
  CHECK(g_asked_a.load() == 1);
  CHECK(g_asked_b.load() == 1);
  CHECK(g_previous.load() == 0);
  segv::remove(claim_b);
  segv::remove(claim_a);
  CHECK(handler_is(previous));  // the last claim out puts the previous handler back
}

TEST_CASE("segv: a fault no claim takes reaches the handler installed before", "[segv]") {
  Previous prev;
  REQUIRE_FALSE(segv::add(claim_a).has_value());
  REQUIRE_FALSE(segv::add(claim_a).has_value());  // the same claim twice counts once
  CHECK(passed_on(g_page + kPage + 3));  // the second page: no claim opens it
  CHECK(g_asked_a.load() == 1);
  CHECK(g_previous.load() == 1);
  segv::remove(claim_a);
  CHECK(handler_is(previous));
}

TEST_CASE("segv: the table holds kMaxClaims claims and says so when full", "[segv]") {
  Previous prev;
  static_assert(segv::kMaxClaims == 4);
  for (auto c : {claim_a, claim_none, claim_2, claim_3}) REQUIRE_FALSE(segv::add(c).has_value());
  auto err = segv::add(claim_b);
  REQUIRE(err.has_value());
  CHECK(*err == "too many SIGSEGV claims");
  segv::remove(claim_none);  // a freed entry is used again, the handler stays installed
  CHECK_FALSE(handler_is(previous));
  REQUIRE_FALSE(segv::add(claim_b).has_value());
  CHECK_FALSE(passed_on(g_page + 1));
  for (auto c : {claim_a, claim_b, claim_2, claim_3}) segv::remove(c);
  CHECK(handler_is(previous));
}
