// Plain driver of the plan fuzz target (test/fuzz_driver.hpp runs it):
//   plan_fuzz_driver [--iterations N] [--seed S] [FILE...]
// Mutates built-in valid plans with a deterministic generator (byte flips, insertions,
// deletions, truncation, line duplication and swaps, number and keyword splices), so that both
// the error paths and the accepting paths are exercised.
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "priority/plan.hpp"
#include "test/fuzz_driver.hpp"

namespace {

// Without a checksum, as plans written by hand are, so that mutations reach the parser; the
// target's round trip through write_plan checks the checksum it writes.
const std::vector<std::string> kSeeds = {
    "tnbc-plan 2\nend-of-plan 0\n",
    "tnbc-plan 2\n# comment\n\nsite app+0x1a2b alltoall comm=4 class=16\n  frame fft(double*)\n"
    "  order 2 0 3 1\n  per-node on\n  agreement 0.9375\n  verdict crc\nend\n\nend-of-plan 1\n",
    "tnbc-plan 2\nsite s bcast comm=* class=*\n  order 3 1 2 0\n  segments 4\n  tree chains 3\n"
    "  per-node off\nend\nsite s alltoallv comm=* class=3\n  order 1 0\n  per-node off\n"
    "  verdict unread\nend\nend-of-plan 2\n",
};

const char* const kSplices[] = {
    "site ",  "end\n",    "order ",     "segments ", "tree binomial", "tree chains ",
    "per-node on", "agreement ", "verdict curc", "end-of-plan ", "comm=*", "class=",
    "4294967296", "18446744073709551616", "0", "1", "-1", "1e308", "nan", "#", "\n", " ", "\t",
    "\r", "\x80", "alltoall", "bcast",
};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 6) {
      case 0:  // a bit, inserted bytes, a deleted range, a cut (fuzz_driver.hpp)
      case 1:
      case 2:
        tnbc::fuzz::mutate_bytes(s, rng);
        break;
      case 3: {  // duplicate a line
        std::size_t at = pick(s.size() + 1);
        std::size_t begin = s.rfind('\n', at == 0 ? 0 : at - 1);
        begin = begin == std::string::npos ? 0 : begin + 1;
        std::size_t end = s.find('\n', begin);
        if (end != std::string::npos) s.insert(begin, s.substr(begin, end - begin + 1));
        break;
      }
      case 4: {  // swap two characters
        if (s.size() > 1) std::swap(s[pick(s.size())], s[pick(s.size())]);
        break;
      }
      default: {  // splice a keyword or number
        const char* piece = kSplices[pick(std::size(kSplices))];
        s.insert(pick(s.size() + 1), piece);
        break;
      }
    }
  }
  return s;
}

bool accepts(const std::string& input) {
  return std::holds_alternative<tnbc::priority::Plan>(tnbc::priority::parse_plan(input));
}

}  // namespace

int main(int argc, char** argv) {
  return tnbc::fuzz::driver_main(argc, argv, {"plan_fuzz_driver", "plans", kSeeds, mutate, accepts});
}
