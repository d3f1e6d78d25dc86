// Time stamps for the trace: the invariant TSC where the CPU has one, CLOCK_MONOTONIC otherwise.
//
// A stamp must be cheap (the SIGSEGV handler takes one per first touch) and async-signal-safe:
// rdtscp is one instruction, clock_gettime a vDSO call; neither allocates nor locks.  Stamps are
// converted to time only after the run, with a rate calibrated against CLOCK_MONOTONIC over the
// whole traced interval (begin at MPI initialisation, end at MPI_Finalize): the longer the
// interval, the smaller the error of two clock_gettime reads.
//
// Tests substitute the hardware through TickSource.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tnbc::shim::observe {

/// Where stamps come from.  The real one reads the CPU; tests provide a fake.
class TickSource {
 public:
  virtual ~TickSource() = default;
  /// True if ticks() counts at a constant rate on every core (CPUID invariant-TSC bit).
  virtual bool invariant_tsc() const = 0;
  /// The time-stamp counter (only meaningful when invariant_tsc()).
  virtual std::uint64_t ticks() const = 0;
  /// CLOCK_MONOTONIC in nanoseconds.
  virtual std::uint64_t monotonic_ns() const = 0;
};

/// The host: CPUID leaf 0x80000007 EDX bit 8, rdtscp, clock_gettime.
const TickSource& host_tick_source();

/// True if the CPU reports an invariant TSC (always false off x86-64).
bool cpu_has_invariant_tsc();
/// rdtscp (serialising against earlier loads, so a stamp is not taken before the access it
/// dates).  Returns 0 off x86-64.
std::uint64_t read_tsc();
/// CLOCK_MONOTONIC in nanoseconds.
std::uint64_t read_monotonic_ns();

/// A stamp function usable in a signal handler: rdtscp or CLOCK_MONOTONIC ns.
using StampFn = std::uint64_t (*)();

/// The calibrated clock of one traced run.
///
/// begin() chooses the stamp source (TSC if invariant, else CLOCK_MONOTONIC ns, whose rate is
/// 1000 ticks/µs by definition) and records a (stamp, monotonic) pair; end() records a second
/// pair and computes the rate.  stamp() may be called from any thread and from signal handlers.
class TscClock {
 public:
  explicit TscClock(const TickSource& source = host_tick_source()) : source_(&source) {}

  /// Starts the calibration interval.
  void begin();
  /// Ends it and computes ticks_per_us().  Returns an error (and keeps the nominal or previous
  /// rate) if the interval is empty or the counters went backwards.
  std::optional<std::string> end();

  /// True if stamps are TSC ticks; false if they are CLOCK_MONOTONIC nanoseconds.
  bool uses_tsc() const { return uses_tsc_; }
  /// A stamp now.
  std::uint64_t stamp() const;
  /// The stamp function for signal handlers (host clock only: a fake source has none).
  StampFn stamp_fn() const;
  /// Ticks per microsecond; 1000 for the CLOCK_MONOTONIC fallback; 0 before end().
  double ticks_per_us() const { return ticks_per_us_; }

 private:
  const TickSource* source_;
  bool uses_tsc_ = false;
  std::uint64_t begin_ticks_ = 0, begin_ns_ = 0;
  double ticks_per_us_ = 0.0;
};

}  // namespace tnbc::shim::observe
