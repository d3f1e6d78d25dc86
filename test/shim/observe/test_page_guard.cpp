// PageGuard: protection, first-touch recording, shared pages, chaining to earlier handlers.
#include <catch2/catch.hpp>

#include <atomic>
#include <csignal>
#include <cstring>
#include <set>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "shim/observe/page_guard.hpp"

using namespace tnbc::shim::observe;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
std::atomic<std::uint64_t> g_fake_time{1000};
std::uint64_t fake_stamp() { return g_fake_time.fetch_add(1); }

// Page-aligned anonymous memory, unmapped at the end.
struct Pages {
  explicit Pages(std::size_t n) : size(n * kPage) {
    mem = static_cast<char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(mem != MAP_FAILED);
    std::memset(mem, 7, size);
  }
  ~Pages() { munmap(mem, size); }
  char* mem;
  std::size_t size;
};

int read_byte(const char* p) { return *static_cast<const volatile char*>(p); }

// True if reading p faults (probed in a child process, so the guard is not involved).
bool readable_in_child(const char* p) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    (void)read_byte(p);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("PageGuard: the first touch of each sub-message is recorded once, in order", "[guard]") {
  Pages buf(8);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs;
  for (int i = 0; i < 4; ++i) subs.push_back({i * 2 * kPage, 2 * kPage});
  std::string err;
  GuardedCall* call = guard.protect(5, buf.mem, subs, &err);
  REQUIRE(call != nullptr);
  CHECK(call->protected_pages() == 8);
  CHECK(guard.any_guarded());
  CHECK_FALSE(readable_in_child(buf.mem + 3 * kPage));

  CHECK(read_byte(buf.mem + 5 * kPage + 10) == 7);  // sub 2
  CHECK(read_byte(buf.mem + 4 * kPage) == 7);       // sub 2 again: no new record
  buf.mem[1] = 9;                                   // sub 0, a write
  CHECK(buf.mem[1] == 9);

  CHECK(call->index() == 5);
  CHECK(call->outcome(2) == Outcome::touched);
  CHECK(call->outcome(0) == Outcome::touched);
  CHECK(call->outcome(1) == Outcome::untouched);
  CHECK(call->outcome(3) == Outcome::untouched);
  auto t2 = call->touch(2), t0 = call->touch(0);
  REQUIRE(t2);
  REQUIRE(t0);
  CHECK(t2->seq < t0->seq);
  CHECK(t2->stamp < t0->stamp);
  CHECK(t2->thread == static_cast<std::uint32_t>(gettid()));
  CHECK_FALSE(call->touch(1));
  CHECK(guard.any_guarded());

  guard.release_all();
  CHECK_FALSE(guard.any_guarded());
  CHECK(call->outcome(1) == Outcome::untouched);  // the end of the run is not a touch
  CHECK(readable_in_child(buf.mem + 3 * kPage));
}

TEST_CASE("PageGuard: sampled, only first, last and evenly spread pages are protected", "[guard]") {
  Pages buf(20);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  // sub 0: pages 0-9 (sampled: 0, 3, 6, 9); sub 1: pages 10-11 (both); sub 2: page 12 and half
  // of page 13, whose other half is sub 3's (page 13 is full, shared: sub 2 keeps it); sub 3: the
  // rest of page 13 and pages 14-19 (sampled: 13, 15, 17, 19).
  std::vector<SubRange> subs{{0, 10 * kPage}, {10 * kPage, 2 * kPage}, {12 * kPage, kPage + kPage / 2},
                             {13 * kPage + kPage / 2, 6 * kPage + kPage / 2}};
  std::string err;
  GuardedCall* call = guard.protect(3, buf.mem, subs, &err, 4);
  REQUIRE(call != nullptr);
  CHECK(call->protected_pages() == 4 + 2 + 1 + 4);
  CHECK_FALSE(readable_in_child(buf.mem));
  CHECK_FALSE(readable_in_child(buf.mem + 3 * kPage));
  CHECK(readable_in_child(buf.mem + 1 * kPage));  // not sampled: never protected
  CHECK(readable_in_child(buf.mem + 5 * kPage));
  CHECK_FALSE(readable_in_child(buf.mem + 9 * kPage));
  CHECK_FALSE(readable_in_child(buf.mem + 13 * kPage));
  CHECK(readable_in_child(buf.mem + 14 * kPage));
  CHECK_FALSE(readable_in_child(buf.mem + 19 * kPage));
  CHECK(readable_in_child(buf.mem + 18 * kPage));

  (void)read_byte(buf.mem + 2 * kPage);  // an unsampled page of sub 0: nothing seen
  CHECK(call->outcome(0) == Outcome::untouched);
  (void)read_byte(buf.mem + 19 * kPage + 8);  // sub 3 read from its end: seen
  CHECK(call->outcome(3) == Outcome::touched);
  CHECK(readable_in_child(buf.mem + 15 * kPage));  // every sampled page of sub 3 is open
  CHECK(readable_in_child(buf.mem + 13 * kPage));  // ... the shared one too
  (void)read_byte(buf.mem + 6 * kPage);  // sub 0's third sample
  CHECK(call->outcome(0) == Outcome::touched);
  CHECK(readable_in_child(buf.mem));
  CHECK(readable_in_child(buf.mem + 9 * kPage));
  auto t3 = call->touch(3), t0 = call->touch(0);
  REQUIRE(t3);
  REQUIRE(t0);
  CHECK(t3->seq < t0->seq);
  CHECK(guard.any_guarded());  // subs 1 and 2
  CHECK(call->outcome(2) == Outcome::untouched);  // it keeps page 12
  (void)read_byte(buf.mem + 12 * kPage);
  buf.mem[11 * kPage] = 1;
  CHECK(call->outcome(1) == Outcome::touched);
  CHECK(call->outcome(2) == Outcome::touched);
  CHECK_FALSE(guard.any_guarded());
}

TEST_CASE("PageGuard: a page shared by two sub-messages is opened by the first touch", "[guard]") {
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  // sub 0 = page 0 + half of page 1; sub 1 = the other half of page 1 + pages 2, 3.
  std::vector<SubRange> subs{{0, kPage + kPage / 2}, {kPage + kPage / 2, 2 * kPage + kPage / 2}};
  std::string err;
  GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
  REQUIRE(call);
  CHECK(call->protected_pages() == 4);
  (void)read_byte(buf.mem + 3 * kPage);  // sub 1: opens pages 1-3
  CHECK(call->outcome(1) == Outcome::touched);
  (void)read_byte(buf.mem + kPage + 1);  // sub 0's bytes on the opened shared page: not seen
  CHECK(call->outcome(0) == Outcome::untouched);
  (void)read_byte(buf.mem + 1);  // sub 0's own page: seen
  CHECK(call->outcome(0) == Outcome::touched);
}

TEST_CASE("PageGuard: an empty sub-message outside the others' pages is ignored", "[guard]") {
  // An Alltoallv receiving 0 bytes from a peer at a displacement beyond the other blocks: its
  // page was once counted in the per-page table, far outside it (a crash in trace mode).
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs{{0, 2 * kPage}, {(std::size_t{1} << 40) + 100, 0}, {2 * kPage, 2 * kPage}};
  std::string err;
  GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
  REQUIRE(call);
  CHECK(call->protected_pages() == 4);
  CHECK(call->outcome(1) == Outcome::unobserved);
  (void)read_byte(buf.mem + 3 * kPage);
  CHECK(call->outcome(2) == Outcome::touched);
}

TEST_CASE("PageGuard: a sub-message whose pages a neighbour opened is unobserved", "[guard]") {
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  // sub 0 lies in page 0 only, which it shares with sub 1; sub 2 lies in page 3 only, which it
  // also shares with sub 1; sub 3 is empty.
  std::vector<SubRange> subs{
      {0, 100}, {100, 3 * kPage - 100 + 50}, {3 * kPage + 50, kPage - 50}, {4 * kPage, 0}};
  std::string err;
  GuardedCall* call = guard.protect(1, buf.mem, subs, &err);
  REQUIRE(call);
  CHECK(call->observable(0));
  CHECK(call->observable(1));
  CHECK(call->observable(2));
  CHECK_FALSE(call->observable(3));
  CHECK(call->outcome(3) == Outcome::unobserved);
  (void)read_byte(buf.mem + 2 * kPage);  // sub 1 opens pages 0-3
  CHECK(call->outcome(1) == Outcome::touched);
  CHECK(call->outcome(0) == Outcome::unobserved);
  CHECK(call->outcome(2) == Outcome::unobserved);
  CHECK_FALSE(guard.any_guarded());
}

TEST_CASE("PageGuard: pages partly outside the buffer are never protected", "[guard]") {
  Pages buf(5);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  // A buffer that starts 100 bytes into page 0 and ends 100 bytes into page 4.
  char* base = buf.mem + 100;
  std::size_t len = 4 * kPage;
  std::vector<SubRange> subs{{0, len / 2}, {len / 2, len / 2}};
  std::string err;
  GuardedCall* call = guard.protect(2, base, subs, &err);
  REQUIRE(call);
  CHECK(call->protected_pages() == 3);
  CHECK(readable_in_child(buf.mem));
  CHECK(readable_in_child(buf.mem + 4 * kPage + 99));
  CHECK_FALSE(readable_in_child(buf.mem + kPage));
  buf.mem[0] = 1;  // the data before the buffer, on the same page
  buf.mem[4 * kPage + 4000] = 1;
  base[0] = 1;  // the buffer's own bytes on the partial page: not observable there
  CHECK(call->outcome(0) == Outcome::untouched);
  CHECK(call->outcome(1) == Outcome::untouched);

  // A buffer smaller than a page: nothing to protect, every sub-message unobservable.
  Pages small(1);
  std::vector<SubRange> tiny{{8, 64}, {72, 64}};
  GuardedCall* none = guard.protect(3, small.mem, tiny, &err);
  REQUIRE(none);
  CHECK(none->protected_pages() == 0);
  CHECK_FALSE(none->observable(0));
  CHECK(readable_in_child(small.mem));
}

TEST_CASE("PageGuard: release() opens overlapping sub-messages as a touch or as released",
          "[guard]") {
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs{{0, kPage}, {kPage, kPage}, {2 * kPage, kPage}, {3 * kPage, kPage}};
  std::string err;
  GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
  REQUIRE(call);
  CHECK(guard.release(buf.mem + kPage + 10, 20, PageGuard::Release::touch) == 1);
  CHECK(call->outcome(1) == Outcome::touched);
  CHECK(guard.release(buf.mem + 2 * kPage, 2 * kPage, PageGuard::Release::forget) == 2);
  CHECK(call->outcome(2) == Outcome::released);
  CHECK(call->outcome(3) == Outcome::released);
  CHECK(guard.release(buf.mem + 5 * kPage, kPage, PageGuard::Release::touch) == 0);
  CHECK(readable_in_child(buf.mem + 3 * kPage));
  CHECK_FALSE(readable_in_child(buf.mem));
}

TEST_CASE("PageGuard: overlapping sub-messages are refused and nothing is protected", "[guard]") {
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs{{0, 2 * kPage}, {kPage, 2 * kPage}};
  std::string err;
  CHECK(guard.protect(0, buf.mem, subs, &err) == nullptr);
  CHECK(err == "overlapping sub-messages");
  CHECK_FALSE(guard.any_guarded());
  CHECK(readable_in_child(buf.mem));
}

TEST_CASE("PageGuard: several threads touching received data are recorded with their ids",
          "[guard]") {
  constexpr int kThreads = 4;
  Pages buf(kThreads * 4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs;
  for (int i = 0; i < kThreads * 4; ++i) subs.push_back({i * kPage, kPage});
  std::string err;
  GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
  REQUIRE(call);
  std::vector<std::thread> threads;
  std::atomic<long> sum{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      long s = 0;
      // Every thread reads every sub-message: exactly one first touch each.
      for (int k = 0; k < kThreads * 4; ++k)
        s += read_byte(buf.mem + ((k + t * 4) % (kThreads * 4)) * kPage);
      sum += s;
    });
  for (auto& th : threads) th.join();
  CHECK(sum == 7L * kThreads * kThreads * 4);
  std::set<std::uint64_t> seqs;
  for (int i = 0; i < kThreads * 4; ++i) {
    REQUIRE(call->outcome(i) == Outcome::touched);
    auto t = call->touch(i);
    REQUIRE(t);
    seqs.insert(t->seq);
    CHECK(t->thread != 0);
  }
  CHECK(seqs.size() == kThreads * 4);
}

namespace {
std::atomic<int> g_app_hits{0};
char* g_app_page = nullptr;
void app_siginfo_handler(int, siginfo_t* info, void*) {
  ++g_app_hits;
  if (info->si_addr >= g_app_page && info->si_addr < g_app_page + kPage)
    mprotect(g_app_page, kPage, PROT_READ | PROT_WRITE);
}
void app_plain_handler(int) {
  ++g_app_hits;
  mprotect(g_app_page, kPage, PROT_READ | PROT_WRITE);
}
}  // namespace

TEST_CASE("PageGuard: faults that are not ours reach the handler installed before",
          "[guard][chain]") {
  Pages app(1), buf(2);
  g_app_page = app.mem;
  for (bool siginfo : {true, false}) {
    struct sigaction sa {
    }, old{};
    sigemptyset(&sa.sa_mask);
    if (siginfo) {
      sa.sa_sigaction = app_siginfo_handler;
      sa.sa_flags = SA_SIGINFO;
    } else {
      sa.sa_handler = app_plain_handler;
    }
    REQUIRE(sigaction(SIGSEGV, &sa, &old) == 0);
    {
      PageGuard guard(fake_stamp);
      REQUIRE_FALSE(guard.install());
      std::vector<SubRange> subs{{0, 2 * kPage}};
      std::string err;
      GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
      REQUIRE(call);
      g_app_hits = 0;
      mprotect(app.mem, kPage, PROT_NONE);
      app.mem[3] = 1;  // the application's own protected page: its handler opens it
      CHECK(g_app_hits == 1);
      (void)read_byte(buf.mem);  // ours: the application's handler never sees it
      CHECK(g_app_hits == 1);
      CHECK(call->outcome(0) == Outcome::touched);
      guard.uninstall();
      struct sigaction now {};
      sigaction(SIGSEGV, nullptr, &now);
      if (siginfo)
        CHECK(now.sa_sigaction == app_siginfo_handler);
      else
        CHECK(now.sa_handler == app_plain_handler);
    }
    sigaction(SIGSEGV, &old, nullptr);
  }
}

TEST_CASE("PageGuard: a real crash still ends the process by SIGSEGV (SIG_DFL or SIG_IGN before)",
          "[guard][chain]") {
  for (auto before : {SIG_DFL, SIG_IGN}) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);  // a handler loop would end by SIGALRM, which the check below rejects
      signal(SIGSEGV, before);
      PageGuard guard(fake_stamp);
      if (guard.install()) _exit(3);
      Pages buf(2);
      std::vector<SubRange> subs{{0, 2 * kPage}};
      std::string err;
      if (!guard.protect(0, buf.mem, subs, &err)) _exit(4);
      (void)read_byte(buf.mem);                  // ours: handled
      *static_cast<volatile int*>(nullptr) = 1;  // not ours
      _exit(5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    INFO("status " << status);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSEGV);
  }
}

TEST_CASE("PageGuard: a SIGSEGV sent by kill() is re-raised under SIG_DFL", "[guard][chain]") {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    signal(SIGSEGV, SIG_DFL);
    PageGuard guard(fake_stamp);
    if (guard.install()) _exit(3);
    raise(SIGSEGV);
    _exit(5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
}

TEST_CASE("PageGuard: install() gives the calling thread an alternate signal stack", "[guard]") {
  // Run in a fresh thread, which has none yet.
  bool had = true, has = false;
  std::thread([&] {
    stack_t st{};
    sigaltstack(nullptr, &st);
    had = !(st.ss_flags & SS_DISABLE);
    PageGuard guard(fake_stamp);
    REQUIRE_FALSE(guard.install());
    sigaltstack(nullptr, &st);
    has = !(st.ss_flags & SS_DISABLE);
    guard.uninstall();
  }).join();
  // Sanitizer runtimes give every thread one already; then there is nothing to check.
  if (had) WARN("the new thread already had an alternate stack");
  CHECK(has);
}

TEST_CASE("PageGuard: only one guard is installed at a time", "[guard]") {
  PageGuard a(fake_stamp), b(fake_stamp);
  REQUIRE_FALSE(a.install());
  auto err = b.install();
  REQUIRE(err);
  CHECK(*err == "another page guard is already installed");
}

TEST_CASE("PageGuard: release_all(lose_untouched) marks what was not read as unobserved",
          "[guard]") {
  Pages buf(4);
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs{{0, 2 * kPage}, {2 * kPage, 2 * kPage}};
  std::string err;
  GuardedCall* call = guard.protect(0, buf.mem, subs, &err);
  REQUIRE(call);
  (void)read_byte(buf.mem);
  guard.release_all(true);
  CHECK_FALSE(guard.any_guarded());
  CHECK(call->outcome(0) == Outcome::touched);
  CHECK(call->outcome(1) == Outcome::unobserved);
  CHECK(readable_in_child(buf.mem + 3 * kPage));
}

TEST_CASE("PageGuard: a failed mprotect leaves nothing protected and says why", "[guard]") {
  Pages buf(4);
  munmap(buf.mem + 2 * kPage, kPage);  // a hole: mprotect over the range fails with ENOMEM
  PageGuard guard(fake_stamp);
  REQUIRE_FALSE(guard.install());
  std::vector<SubRange> subs{{0, 2 * kPage}, {2 * kPage, 2 * kPage}};
  std::string err;
  CHECK(guard.protect(0, buf.mem, subs, &err) == nullptr);
  CHECK(err == "mprotect failed: Cannot allocate memory");
  CHECK_FALSE(guard.any_guarded());
  CHECK(readable_in_child(buf.mem));
  CHECK(readable_in_child(buf.mem + kPage));
  CHECK(readable_in_child(buf.mem + 3 * kPage));
}
