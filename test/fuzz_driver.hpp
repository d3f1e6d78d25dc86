// The plain fuzz driver both fuzz targets share, for builds without libFuzzer (the unit tests
// run it):
//   NAME [--iterations N | --seconds S] [--seed S] [FILE...]
// With files: runs the target on each (replays a libFuzzer corpus or crash file).  Without:
// runs it on every seed (each must be accepted), then on N inputs made by mutating the seeds
// with the target's deterministic generator, a quarter of them mutated twice (deeper changes);
// with --seconds, on as many as S seconds allow (the long test mode).
// Too few accepted inputs would mean the mutations only ever reach the first error, so the
// driver fails when fewer than 1 in 200 are accepted.  No input may take more than
// kMaxInputSeconds: one that does fails the run, and one that hangs is ended by an alarm
// (SIGALRM) a second later; both name the input (iteration i of seed s: rerun with
// `--seed s --iterations i+1`).
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "util/file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace tnbc::fuzz {

/// One change at the byte level, the part of every target's mutations they share: flip a bit,
/// insert a few random bytes, delete a range, or cut the input short.
inline void mutate_bytes(std::string& s, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  switch (rng() % 4) {
    case 0:
      if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:
      s.insert(pick(s.size() + 1), std::string(1 + pick(8), static_cast<char>(rng() & 0xff)));
      break;
    case 2:
      s.erase(pick(s.size() + 1), 1 + pick(16));
      break;
    default:
      s.resize(pick(s.size() + 1));
      break;
  }
}

/// Largest corpus or crash file the driver reads (libFuzzer's inputs are far smaller).
inline constexpr std::uint64_t kMaxInputBytes = 64ull << 20;
/// Longest time one input may take (the parsers bound every loop by the input's size).
inline constexpr double kMaxInputSeconds = 2.0;
/// Whole seconds after which an input that has not returned is taken for a hang.
inline constexpr unsigned kHangAlarmSeconds = 3;

/// The input being run, for the alarm's message ("iteration" -1: a seed or a file).
inline volatile long g_iteration = -1;
inline volatile unsigned long g_seed = 0;

inline void on_hang(int) {
  char msg[160];
  int n = std::snprintf(msg, sizeof msg, "fuzz driver: an input ran over %u s (iteration %ld of seed %lu)\n",
                        kHangAlarmSeconds, g_iteration, g_seed);
  if (n > 0) (void)!write(2, msg, static_cast<std::size_t>(n));
  _exit(1);
}

struct Target {
  const char* name;                 ///< the driver's name, for messages
  const char* accepted_as;          ///< what an accepted input is ("plans", "traces")
  std::vector<std::string> seeds;   ///< valid inputs
  std::string (*mutate)(std::string, std::mt19937_64&);
  bool (*accepts)(const std::string&);  ///< does the parser accept the input?
};

inline int driver_main(int argc, char** argv, const Target& t) {
  long iterations = 20000;
  double seconds = 0;  // > 0: run for this long instead of `iterations`
  unsigned long seed = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::strtol(argv[++i], nullptr, 10);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::strtod(argv[++i], nullptr);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoul(argv[++i], nullptr, 10);
    } else {
      files.emplace_back(arg);
    }
  }
  long accepted = 0;
  double slowest = 0;
  bool too_slow = false;
  std::signal(SIGALRM, on_hang);
  using clock = std::chrono::steady_clock;
  auto run = [&](const std::string& input) {
    alarm(kHangAlarmSeconds);
    auto start = clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    if (t.accepts(input)) ++accepted;
    double took = std::chrono::duration<double>(clock::now() - start).count();
    alarm(0);
    slowest = std::max(slowest, took);
    if (took > kMaxInputSeconds) {
      std::fprintf(stderr, "%s: an input took %.2f s, over %.0f s (iteration %ld of seed %lu)\n", t.name, took,
                   kMaxInputSeconds, g_iteration, g_seed);
      too_slow = true;
    }
  };
  if (!files.empty()) {
    for (const auto& f : files) {
      std::string input;
      if (auto err = util::read_file(f, kMaxInputBytes, input)) {
        std::fprintf(stderr, "%s: %s\n", t.name, err->c_str());
        return 2;
      }
      run(input);
    }
    std::printf("%zu file(s) ran clean\n", files.size());
    return too_slow ? 1 : 0;
  }
  for (const auto& s : t.seeds) run(s);
  if (accepted != static_cast<long>(t.seeds.size())) {
    std::fprintf(stderr, "%s: a seed was refused by the parser\n", t.name);
    return 1;
  }
  accepted = 0;
  std::mt19937_64 rng(seed);
  g_seed = seed;
  const auto end = clock::now() + std::chrono::duration<double>(seconds);
  long i = 0;
  for (; seconds > 0 ? clock::now() < end : i < iterations; ++i) {
    g_iteration = i;
    std::string input = t.mutate(t.seeds[rng() % t.seeds.size()], rng);
    if (rng() % 4 == 0) input = t.mutate(std::move(input), rng);
    run(input);
    if (too_slow) return 1;
  }
  iterations = i;
  std::printf("%ld mutated inputs ran clean (seed %lu), %ld parsed as %s, slowest %.3f s\n", iterations,
              seed, accepted, t.accepted_as, slowest);
  if (iterations >= 1000 && accepted * 200 < iterations) {
    std::fprintf(stderr, "%s: only %ld inputs parsed; mutations too destructive\n", t.name,
                 accepted);
    return 1;
  }
  return 0;
}

}  // namespace tnbc::fuzz
