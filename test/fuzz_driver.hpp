// The plain fuzz driver both fuzz targets share, for builds without libFuzzer (the unit tests
// run it):
//   NAME [--iterations N] [--seed S] [FILE...]
// With files: runs the target on each (replays a libFuzzer corpus or crash file).  Without:
// runs it on every seed (each must be accepted), then on N inputs made by mutating the seeds
// with the target's deterministic generator, a quarter of them mutated twice (deeper changes).
// Too few accepted inputs would mean the mutations only ever reach the first error, so the
// driver fails when fewer than 1 in 200 are accepted.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "util/file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace tnbc::fuzz {

/// Largest corpus or crash file the driver reads (libFuzzer's inputs are far smaller).
inline constexpr std::uint64_t kMaxInputBytes = 64ull << 20;

struct Target {
  const char* name;                 ///< the driver's name, for messages
  const char* accepted_as;          ///< what an accepted input is ("plans", "traces")
  std::vector<std::string> seeds;   ///< valid inputs
  std::string (*mutate)(std::string, std::mt19937_64&);
  bool (*accepts)(const std::string&);  ///< does the parser accept the input?
};

inline int driver_main(int argc, char** argv, const Target& t) {
  long iterations = 20000;
  unsigned long seed = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::strtol(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoul(argv[++i], nullptr, 10);
    } else {
      files.emplace_back(arg);
    }
  }
  long accepted = 0;
  auto run = [&](const std::string& input) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    if (t.accepts(input)) ++accepted;
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
    return 0;
  }
  for (const auto& s : t.seeds) run(s);
  if (accepted != static_cast<long>(t.seeds.size())) {
    std::fprintf(stderr, "%s: a seed was refused by the parser\n", t.name);
    return 1;
  }
  accepted = 0;
  std::mt19937_64 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    std::string input = t.mutate(t.seeds[rng() % t.seeds.size()], rng);
    if (rng() % 4 == 0) input = t.mutate(std::move(input), rng);
    run(input);
  }
  std::printf("%ld mutated inputs ran clean (seed %lu), %ld parsed as %s\n", iterations, seed,
              accepted, t.accepted_as);
  if (iterations >= 1000 && accepted * 200 < iterations) {
    std::fprintf(stderr, "%s: only %ld inputs parsed; mutations too destructive\n", t.name,
                 accepted);
    return 1;
  }
  return 0;
}

}  // namespace tnbc::fuzz
