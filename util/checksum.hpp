// The checksum of trace and plan files: FNV-1a, 64 bits.  Not a defence against someone who
// writes a file on purpose (they can compute it too), but every change of a single byte, and so
// every single bit flip, changes it: each step (xor a byte, multiply by an odd prime modulo
// 2^64) is a bijection of the state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tnbc::util {

inline constexpr std::uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
inline constexpr std::uint64_t kFnv1a64Prime = 0x100000001b3ull;

/// FNV-1a 64 of `n` bytes at `data`, continuing from `h` (the basis for a fresh sum).
inline std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnv1a64Prime;
  return h;
}
inline std::uint64_t fnv1a64(std::string_view s) { return fnv1a64(s.data(), s.size()); }

}  // namespace tnbc::util
