// FNV-1a, 64 bits: a cheap, stable hash of bytes (call-site ids, digests of settings).  Not for
// anything an adversary chooses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tnbc::util {

inline constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;

/// Continues the hash `h` (start with kFnvOffset) over `n` bytes at `data`.
inline std::uint64_t fnv(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace tnbc::util
