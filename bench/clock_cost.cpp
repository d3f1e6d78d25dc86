// clock_cost: what one read of each clock the library reads on its hot paths costs on this
// machine, in nanoseconds (docs/measurements/watchdog-cost.md).
//
//   clock_cost [--reads N] [--rounds R]
//
// For util::now_ns (CLOCK_MONOTONIC: the decision's intervals, the progress thread's round time
// that the watchdog compares) and util::thread_cpu_ns (CLOCK_THREAD_CPUTIME_ID: the progress
// thread's CPU per round): N reads in a row (default 1,000,000), the median over R rounds
// (default 7) of the time per read, with the lowest and highest round.  Reads are summed into a
// value the program prints, so that none is optimised away.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "util/clock.hpp"

namespace {

struct Result {
  double median, low, high;
};

template <typename F>
Result per_read_ns(F read, long reads, int rounds, std::uint64_t& sink) {
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    const std::uint64_t t0 = tnbc::util::now_ns();
    for (long i = 0; i < reads; ++i) sink += read();
    const std::uint64_t t1 = tnbc::util::now_ns();
    ns.push_back(static_cast<double>(t1 - t0) / static_cast<double>(reads));
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns.front(), ns.back()};
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: clock_cost [--reads N] [--rounds R]\n"
               "  the cost of one read of CLOCK_MONOTONIC and of CLOCK_THREAD_CPUTIME_ID, in ns:\n"
               "  N reads in a row (default 1000000), median (lowest-highest) of R rounds (default 7)\n");
  std::exit(code);
}

long positive(const char* flag, const char* value) {
  char* end = nullptr;
  const long v = value ? std::strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || v < 1) {
    std::fprintf(stderr, "clock_cost: %s wants a positive integer, got '%s'\n", flag, value ? value : "");
    usage(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  long reads = 1000000;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) usage(0);
    if (!std::strcmp(argv[i], "--reads")) {
      reads = positive("--reads", i + 1 < argc ? argv[++i] : nullptr);
    } else if (!std::strcmp(argv[i], "--rounds")) {
      rounds = static_cast<int>(std::min(positive("--rounds", i + 1 < argc ? argv[++i] : nullptr), 1000L));
    } else {
      std::fprintf(stderr, "clock_cost: unknown argument '%s'\n", argv[i]);
      usage(2);
    }
  }
  std::uint64_t sink = 0;
  const Result mono = per_read_ns([] { return tnbc::util::now_ns(); }, reads, rounds, sink);
  const Result cpu = per_read_ns([] { return tnbc::util::thread_cpu_ns(); }, reads, rounds, sink);
  std::printf("clock                     ns per read: median (lowest-highest) of %d rounds of %ld reads\n", rounds, reads);
  std::printf("CLOCK_MONOTONIC           %.1f (%.1f-%.1f)\n", mono.median, mono.low, mono.high);
  std::printf("CLOCK_THREAD_CPUTIME_ID   %.1f (%.1f-%.1f)\n", cpu.median, cpu.low, cpu.high);
  std::printf("(checksum %llu)\n", static_cast<unsigned long long>(sink % 1000));
  return 0;
}
