// trace_cost: what the page guard costs per sub-message, without MPI.
//
// For each block size, a buffer of kSubs blocks is protected, then the first byte of every block
// is read (one fault, record and unprotect each), then everything is released.  Printed per
// sub-message: protect (mprotect + bookkeeping), fault (handler, record, mprotect), the same
// first-byte reads on unprotected memory, and the bare mprotect calls (PROT_NONE over the whole
// buffer, PROT_READ|PROT_WRITE per block) for reference, and what writing every page of the
// opened blocks costs afterwards against writing them untouched (rewrite_us, plain_rewrite_us: a
// page left write-protected costs a fault there).  Usage: trace_cost [repetitions]
// [pages_per_sub] (0, the default, protects every page as trace mode does; N > 0 samples N
// pages per sub-message as replay mode's learning does).  Last, what the first read of a page
// costs after a PROT_NONE -> RW round trip with no fault left to take (see reaccess()).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "shim/observe/page_guard.hpp"
#include "shim/observe/tsc_clock.hpp"

using namespace tnbc::shim::observe;
using Clock = std::chrono::steady_clock;

namespace {
constexpr int kSubs = 16;
double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// The first access to a page after mprotect(PROT_NONE) then mprotect(PROT_READ|PROT_WRITE), with
// no protection fault left to take: what a published receive page or an opened observed page
// costs the program on its first read, against reading it again.  Also: the same first read by
// another thread first, then by this one.
void reaccess(int reps, std::size_t ps) {
  const std::size_t pages = 4096, bytes = pages * ps;
  auto* buf = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(buf, 1, bytes);
  long sink = 0;
  auto read_all = [&] {
    for (std::size_t o = 0; o < bytes; o += ps) sink += *static_cast<volatile char*>(buf + o);
  };
  double first = 0, again = 0, other = 0, after_other = 0;
  long faults = 0;
  const int n = std::max(1, std::min(reps, 10));
  for (int r = 0; r < n; ++r) {
    mprotect(buf, bytes, PROT_NONE);
    mprotect(buf, bytes, PROT_READ | PROT_WRITE);
    const long f0 = minor_faults();
    auto t0 = Clock::now();
    read_all();
    auto t1 = Clock::now();
    faults += minor_faults() - f0;
    read_all();
    auto t2 = Clock::now();
    first += us(t1 - t0);
    again += us(t2 - t1);
    mprotect(buf, bytes, PROT_NONE);
    mprotect(buf, bytes, PROT_READ | PROT_WRITE);
    double other_us = 0;
    std::thread([&] {
      auto a = Clock::now();
      read_all();
      other_us = us(Clock::now() - a);
    }).join();
    auto t3 = Clock::now();
    read_all();
    other += other_us;
    after_other += us(Clock::now() - t3);
  }
  const double per = static_cast<double>(n) * static_cast<double>(pages);
  std::printf("\nfirst read of a page after PROT_NONE -> RW (%zu pages, %d rounds), per page:\n"
              "  first read %.3f us (minor faults per page: %.3f), read again %.3f us;\n"
              "  first read by another thread %.3f us, then by this one %.3f us\n",
              pages, n, first / per, static_cast<double>(faults) / per, again / per, other / per, after_other / per);
  munmap(buf, bytes);
  if (sink == 42) std::printf(" ");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::size_t pages_per_sub = argc > 2 ? static_cast<std::size_t>(std::atol(argv[2])) : 0;
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  TscClock clock;
  clock.begin();
  PageGuard guard(clock.stamp_fn());
  if (auto err = guard.install()) {
    std::fprintf(stderr, "%s\n", err->c_str());
    return 1;
  }
  std::printf("pages per sub-message: %s\n", pages_per_sub == 0 ? "all" : std::to_string(pages_per_sub).c_str());
  std::printf("%10s %12s %12s %12s %12s %14s %14s %12s %16s\n", "block", "protect_us", "fault_us", "plain_us",
              "total_us", "mprotect_none", "mprotect_rw", "rewrite_us", "plain_rewrite_us");
  for (std::size_t block : {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
    std::size_t bytes = block * kSubs;
    auto* buf = static_cast<char*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(buf, 1, bytes);
    std::vector<SubRange> subs;
    for (int i = 0; i < kSubs; ++i) subs.push_back({i * block, block});
    double protect = 0, fault = 0, plain = 0, raw_protect = 0, raw_open = 0, rewrite = 0, plain_rewrite = 0;
    auto write_pages = [&] {
      for (std::size_t o = 0; o < bytes; o += ps) buf[o] = static_cast<char>(o);
    };
    long sink = 0;
    for (int r = 0; r < reps; ++r) {
      std::string err;
      auto t0 = Clock::now();
      if (!guard.protect(static_cast<std::uint32_t>(r), buf, subs, &err, pages_per_sub)) {
        std::fprintf(stderr, "protect: %s\n", err.c_str());
        return 1;
      }
      auto t1 = Clock::now();
      for (int i = kSubs - 1; i >= 0; --i) sink += *static_cast<volatile char*>(buf + i * block);
      auto t2 = Clock::now();
      for (int i = kSubs - 1; i >= 0; --i) sink += *static_cast<volatile char*>(buf + i * block);
      auto t3 = Clock::now();
      write_pages();
      auto t3b = Clock::now();
      write_pages();
      auto t3c = Clock::now();
      rewrite += us(t3b - t3);
      plain_rewrite += us(t3c - t3b);
      guard.reset();
      // The system calls alone: the same protection and unprotection without the guard.
      auto t4 = Clock::now();
      mprotect(buf, bytes, PROT_NONE);
      auto t5 = Clock::now();
      for (int i = kSubs - 1; i >= 0; --i) mprotect(buf + i * block, block, PROT_READ | PROT_WRITE);
      auto t6 = Clock::now();
      write_pages();  // the next repetition starts from writable pages
      raw_protect += us(t5 - t4);
      raw_open += us(t6 - t5);
      protect += us(t1 - t0);
      fault += us(t2 - t1);
      plain += us(t3 - t2);
    }
    double n = static_cast<double>(reps) * kSubs;
    std::printf("%9zuK %12.2f %12.2f %12.3f %12.2f %14.2f %14.2f %12.2f %16.2f\n", block >> 10, protect / n,
                fault / n, plain / n, (protect + fault) / n, raw_protect / n, raw_open / n, rewrite / n,
                plain_rewrite / n);
    munmap(buf, bytes);
    if (sink == 42) std::printf(" ");  // keeps the reads
  }
  reaccess(reps, ps);
  return 0;
}
