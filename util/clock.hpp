// Clock reads: a monotonic time and the calling thread's CPU time, in nanoseconds.  Both are async-signal-safe (clock_gettime), so the fault handler may use them.
#pragma once

#include <cstdint>
#include <ctime>

namespace tnbc::util {

inline std::uint64_t ns_of(const timespec& ts) {
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

/// CLOCK_MONOTONIC.
inline std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ns_of(ts);
}

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
inline std::uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ns_of(ts);
}

}  // namespace tnbc::util
