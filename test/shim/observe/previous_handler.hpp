// For tests of the SIGSEGV handler and its claims (shim/observe/segv.hpp): a handler installed before
// the one under test, which counts the faults passed on to it, records the last address and
// jumps back to the read that faulted.  One per test case (it restores the handler it replaced,
// Catch2's, when it goes).
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdint>

namespace tnbc::test {

class PreviousHandler {
 public:
  PreviousHandler() {
    struct sigaction sa {};
    sa.sa_sigaction = handle;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGSEGV, &sa, &saved_) == 0);
    calls = 0;
    addr = 0;
  }
  ~PreviousHandler() { sigaction(SIGSEGV, &saved_, nullptr); }
  PreviousHandler(const PreviousHandler&) = delete;
  PreviousHandler& operator=(const PreviousHandler&) = delete;

  /// Reads *p; true when the read ended in this handler instead of completing.
  static bool read_passed_on(const char* p) {
    if (sigsetjmp(jump_, 1) != 0) return true;
    (void)*static_cast<const volatile char*>(p);
    return false;
  }
  /// True when this handler is the process's SIGSEGV handler again.
  static bool installed() {
    struct sigaction now {};
    return sigaction(SIGSEGV, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == handle;
  }

  static inline std::atomic<int> calls{0};            ///< faults passed on to this handler
  static inline std::atomic<std::uintptr_t> addr{0};  ///< the last one's address

 private:
  static void handle(int, siginfo_t* info, void*) {
    addr.store(reinterpret_cast<std::uintptr_t>(info->si_addr));
    calls.fetch_add(1);
    siglongjmp(jump_, 1);
  }
  static inline sigjmp_buf jump_;
  struct sigaction saved_ {};
};

}  // namespace tnbc::test
