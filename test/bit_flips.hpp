// Every single bit flip of a file's bytes, for the tests that require each one to be refused
// (trace and plan files carry a checksum for that).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tnbc::test {

/// The flips that `accepts` took: bit `bit` of byte `byte` of `good`.
struct Flip {
  std::size_t byte;
  int bit;
};
template <typename Accepts>
std::vector<Flip> accepted_bit_flips(const std::string& good, Accepts accepts) {
  std::vector<Flip> accepted;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = good;
      b[i] = static_cast<char>(b[i] ^ (1 << bit));
      if (accepts(b)) accepted.push_back({i, bit});
    }
  return accepted;
}

}  // namespace tnbc::test
