// The per-rank trace file (<dir>/<rank>.tnbct): what the trace mode recorded, read back by
// tnbc-order.  docs/trace-format.md is the byte-level specification; this header is the API.
//
// write_trace() never leaves a half-written file under the final name (temporary name, fsync,
// rename).  read_trace()/parse_trace() check the checksum and validate every field against the
// bytes actually present before using or allocating for it, so corrupt or hostile input yields
// an error message naming the file and the problem, never a crash or an allocation larger than
// the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shim/observe/callsite.hpp"
#include "shim/observe/page_guard.hpp"  // Outcome

namespace tnbc::trace {

// The file keeps what shim/observe/ captured: call sites and the page guard's outcomes.
using shim::observe::CallSite;
using shim::observe::Frame;
using shim::observe::Outcome;

inline constexpr char kTraceMagic[8] = {'T', 'N', 'B', 'C', 'T', 'R', 'C', '\0'};
/// Version 2 added the checksum (util::fnv1a64 of every byte after the 28-byte prefix).
inline constexpr std::uint32_t kTraceVersion = 3;
/// Most ranks a job (and so a communicator) may have in a trace: a sane bound, equal to the
/// plan format's largest communicator, so that a corrupt size cannot make tools loop for ever.
inline constexpr std::int32_t kMaxRanks = 1 << 24;
/// Longest string (module path, symbol, hostname, job id) a file may hold.
inline constexpr std::uint32_t kMaxString = 4096;

/// The traced operation.
enum class TracedOp : std::uint8_t {
  alltoall = 1,   ///< sub-message i = block received from rank i
  alltoallv = 2,  ///< sub-message i = block received from rank i (by rdispls/recvcounts)
  bcast = 3,      ///< sub-message i = i-th of the equal page-aligned units of the buffer
};
std::string_view to_string(TracedOp op);

/// Per-sub-message flags.
enum SubFlag : std::uint8_t {
  kSubObservable = 1,  ///< had a protected page when the call returned
  // Bits 1-2: the Outcome at the end of the run.
};

struct TraceHeader {
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::uint32_t node_id = 0;  ///< index of the node (shared-memory domain) in the job
  std::uint32_t page_size = 0;
  double ticks_per_us = 0.0;  ///< stamps per microsecond
  bool tsc = false;           ///< stamps are TSC ticks (else CLOCK_MONOTONIC ns)
  std::string hostname;
  std::string job_id;
  /// This rank's stamp at a moment every rank names (rank 0's stamp before it pings the others in
  /// MPI_Init): stamps of different ranks compare after subtracting it (trace-format.md).
  std::uint64_t sync_stamp = 0;
};

struct TraceSub {
  std::uint64_t offset = 0;  ///< bytes from the start of the receive buffer
  std::uint64_t size = 0;    ///< bytes
  std::uint8_t flags = 0;    ///< kSubObservable | outcome << 1
  bool observable() const { return flags & kSubObservable; }
  std::uint8_t outcome() const { return (flags >> 1) & 3u; }
};

/// Per-call flags.
enum CallFlag : std::uint8_t {
  kCallTraced = 1,  ///< the receive buffer was protected (else: recorded for alignment only)
};

struct TraceCall {
  TracedOp op = TracedOp::alltoall;
  std::uint8_t flags = 0;      ///< CallFlag bits
  std::uint32_t callsite = 0;  ///< index into Trace::callsites
  std::int32_t comm_size = 0;
  std::uint64_t start_stamp = 0;   ///< stamp before the blocking call
  std::uint64_t tcomm = 0;         ///< duration of the blocking call, in stamps
  std::uint64_t return_stamp = 0;  ///< stamp when the call returned to the application
  std::vector<TraceSub> subs;
};

struct TraceTouch {
  std::uint32_t call = 0;  ///< index into Trace::calls
  std::uint32_t sub = 0;
  std::uint64_t stamp = 0;
  std::uint64_t seq = 0;  ///< order of first touches in the process
  std::uint32_t thread = 0;
};

struct Trace {
  TraceHeader header;
  std::vector<CallSite> callsites;
  std::vector<TraceCall> calls;
  std::vector<TraceTouch> touches;
};

/// The file's bytes.
std::string encode_trace(const Trace& trace);
/// Writes atomically; returns an error message naming the file, or nullopt.
std::optional<std::string> write_trace(const std::string& path, const Trace& trace);

/// A trace or the reason there is none.
struct ReadResult {
  std::optional<Trace> trace;
  std::string error;  ///< "<name>: <problem>" when !trace
};
/// Parses bytes that came from `name` (used in messages only).
ReadResult parse_trace(std::span<const std::byte> bytes, std::string_view name);
/// Largest trace file read_trace accepts by default (4 GiB; a run's traces are typically a few
/// megabytes per rank).
inline constexpr std::uint64_t kMaxTraceBytes = 1ull << 32;
/// Reads and parses a file (util::InputFile: a regular file, opened without blocking).  Files
/// larger than `max_bytes` are refused before anything is read, files that are not traces (bad
/// magic number, other version, declared size other than the real one) after reading only the
/// fixed-size prefix.
ReadResult read_trace(const std::string& path, std::uint64_t max_bytes = kMaxTraceBytes);

}  // namespace tnbc::trace
