// Plain driver of the trace fuzz target (test/fuzz_driver.hpp runs it):
//   trace_fuzz_driver [--iterations N] [--seed S] [FILE...]
// Mutates built-in valid traces (encoded by the writer) with a deterministic generator: bit
// flips, byte and word overwrites with boundary values, insertions, deletions, truncation.  Most
// mutations of a length-prefixed, checksummed binary format are refused early, so half of the
// mutations make the declared file size and the checksum right again.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "test/fuzz_driver.hpp"
#include "trace/trace_file.hpp"
#include "util/checksum.hpp"

namespace {

using namespace tnbc::trace;
using namespace tnbc::shim::observe;

std::vector<std::string> make_seeds() {
  std::vector<std::string> seeds;
  Trace t;
  t.header = {1, 4, 0, 4096, 2400.0, true, "node0", "20261121-120000-42"};
  seeds.push_back(encode_trace(t));  // no call site, no call
  t.callsites.push_back({0x1234, {{"/bin/app", 0x1a2b, "main"}, {"/lib/libc.so.6", 0x40, ""}}});
  t.callsites.push_back({0x5678, {{"/bin/app", 0x99, "solve"}}});
  TraceCall a2a{TracedOp::alltoall, kCallTraced, 0, 4, 100, 50, 160, {}};
  for (std::uint64_t i = 0; i < 4; ++i) a2a.subs.push_back({i * 65536, 65536, 1 | (1 << 1)});
  TraceCall bc{TracedOp::bcast, kCallTraced, 1, 4, 300, 20, 330, {}};
  for (std::uint64_t i = 0; i < 3; ++i) bc.subs.push_back({i * 8192, 8192, 1});
  TraceCall untraced{TracedOp::alltoallv, 0, 0, 4, 400, 10, 410, {}};
  t.calls = {a2a, bc, untraced};
  for (std::uint32_t i = 0; i < 4; ++i) t.touches.push_back({0, 3 - i, 170 + i * 10, i, 7});
  seeds.push_back(encode_trace(t));
  t.header.tsc = false;
  t.header.hostname = "";
  t.touches.clear();
  seeds.push_back(encode_trace(t));
  return seeds;
}

const std::uint64_t kValues[] = {0, 1, 2, 3, 4, 255, 256, 4096, 0x7fffffff, 0x80000000, 0xffffffff,
                                 0xffffffffffffffffull, 0x8000000000000000ull, 4097};

/// Offsets of the u64 file_size and checksum fields, and the size of the prefix the checksum
/// leaves out (docs/trace-format.md).
constexpr std::size_t kSizeField = 12;
constexpr std::size_t kChecksumField = 20;
constexpr std::size_t kPrefix = 28;

// Makes the declared size and the checksum right again, so that the mutation reaches the body.
void fix_size(std::string& s) {
  if (s.size() < kPrefix) return;
  std::uint64_t n = s.size();
  std::memcpy(&s[kSizeField], &n, 8);  // little-endian host (x86-64, the only target)
  std::uint64_t sum = tnbc::util::fnv1a64(s.data() + kPrefix, s.size() - kPrefix);
  std::memcpy(&s[kChecksumField], &sum, 8);
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  bool keep_size = rng() % 2 == 0;  // repair the declared size afterwards: reach the body
  int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 5) {
      case 0:  // a bit, inserted bytes, a deleted range, a cut (fuzz_driver.hpp)
      case 1:
        tnbc::fuzz::mutate_bytes(s, rng);
        break;
      case 2:  // overwrite a byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() & 0xff);
        break;
      case 3: {  // overwrite 1, 2, 4 or 8 bytes with a boundary value
        std::size_t width = std::size_t{1} << (rng() % 4);
        if (s.size() >= width) {
          std::uint64_t v = kValues[pick(std::size(kValues))];
          std::memcpy(&s[pick(s.size() - width + 1)], &v, width);
        }
        break;
      }
      default: {  // duplicate a range
        std::size_t at = pick(s.size() + 1);
        s.insert(pick(s.size() + 1), s.substr(at, 1 + pick(24)));
        break;
      }
    }
  }
  if (keep_size) fix_size(s);
  return s;
}

bool accepts(const std::string& input) {
  return parse_trace(std::as_bytes(std::span<const char>(input.data(), input.size())), "x").trace.has_value();
}

}  // namespace

int main(int argc, char** argv) {
  return tnbc::fuzz::driver_main(argc, argv, {"trace_fuzz_driver", "traces", make_seeds(), mutate, accepts});
}
