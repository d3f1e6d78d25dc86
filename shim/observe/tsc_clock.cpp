#include "tsc_clock.hpp"

#include <ctime>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace tnbc::shim::observe {
namespace {

class HostTickSource final : public TickSource {
 public:
  bool invariant_tsc() const override { return cpu_has_invariant_tsc(); }
  std::uint64_t ticks() const override { return read_tsc(); }
  std::uint64_t monotonic_ns() const override { return read_monotonic_ns(); }
};

std::uint64_t stamp_monotonic() { return read_monotonic_ns(); }
std::uint64_t stamp_tsc() { return read_tsc(); }

}  // namespace

const TickSource& host_tick_source() {
  static const HostTickSource source;
  return source;
}

bool cpu_has_invariant_tsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000007u) return false;
  __cpuid(0x80000007u, a, b, c, d);
  bool invariant = (d >> 8) & 1u;
  // rdtscp itself: CPUID 0x80000001 EDX bit 27.
  __cpuid(0x80000001u, a, b, c, d);
  return invariant && ((d >> 27) & 1u);
#else
  return false;
#endif
}

std::uint64_t read_tsc() {
#if defined(__x86_64__)
  unsigned aux;
  return __rdtscp(&aux);
#else
  return 0;
#endif
}

std::uint64_t read_monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void TscClock::begin() {
  uses_tsc_ = source_->invariant_tsc();
  // Nominal rate until end() measures one; the monotonic fallback is exact.
  if (!uses_tsc_) ticks_per_us_ = 1000.0;
  begin_ns_ = source_->monotonic_ns();
  begin_ticks_ = uses_tsc_ ? source_->ticks() : begin_ns_;
}

std::optional<std::string> TscClock::end() {
  if (!uses_tsc_) return std::nullopt;
  std::uint64_t ticks = source_->ticks();
  std::uint64_t ns = source_->monotonic_ns();
  if (ns <= begin_ns_ || ticks <= begin_ticks_)
    return std::string("TSC calibration interval is empty or the counters went backwards");
  ticks_per_us_ =
      static_cast<double>(ticks - begin_ticks_) * 1000.0 / static_cast<double>(ns - begin_ns_);
  return std::nullopt;
}

std::uint64_t TscClock::stamp() const {
  return uses_tsc_ ? source_->ticks() : source_->monotonic_ns();
}

StampFn TscClock::stamp_fn() const { return uses_tsc_ ? stamp_tsc : stamp_monotonic; }

}  // namespace tnbc::shim::observe
