// From a trace directory (one <rank>.tnbct per rank, docs/trace-format.md) to
// priority::Observations, the input of the ordering analysis (docs/tnbc-order.md).
//
// This adapter is the only place that knows both the trace file format and priority/'s model, so
// priority/ stays free of trace/ and MPI.  Loading validates the directory as a whole: every file
// readable, one job (same job id and size), one file per rank; problems come back as one message
// naming the file (or the directory) and the problem, never as an exception or a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "priority/observations.hpp"
#include "trace/trace_file.hpp"

namespace tnbc::tools {

/// The traces of one job, indexed by rank.
struct TraceSet {
  std::string dir;
  int size = 0;                                   ///< ranks in the job (from the headers)
  std::vector<std::optional<trace::Trace>> ranks;  ///< [rank]; empty where the file is missing
  std::vector<int> missing;                        ///< ranks without a file, ascending
  std::vector<std::string> files;                  ///< [rank] path of the file ("" if missing)
};

/// A TraceSet, or why there is none.
struct LoadResult {
  std::optional<TraceSet> traces;
  std::string error;                  ///< when !traces: "<file or dir>: <problem>"
  std::vector<std::string> warnings;  ///< e.g. missing ranks accepted by `partial`
};

/// Loads every file named "<rank>.tnbct" (rank in plain decimal) in `dir`; other names are
/// ignored.  Errors: no such directory, no trace file, a file the reader refuses (its message),
/// a file whose header holds another rank than its name, files of different jobs (job id or
/// size), ranks without a file (unless `partial`: then a warning, and the others are used).
LoadResult load_trace_dir(const std::string& dir, bool partial);

/// The plan key of a call site: "<module basename>+0x<offset>" of each frame, innermost first,
/// joined by ';' (position-independent, equal on every rank that runs the same binaries).
std::string site_key(const shim::observe::CallSite& site);
/// A frame for humans: its symbol, else "<module basename>+0x<offset>".
std::string frame_label(const shim::observe::Frame& frame);

/// Converts loaded traces.  Call sites are grouped by (call-site id, operation, communicator
/// size) across ranks, in order of first appearance (lowest rank first, then call order).
/// Only traced calls count.  Per sub-message: a recorded first touch -> touched with delay
/// (touch stamp - return stamp) / ticks_per_us (never below 0); else outcome untouched or
/// released (watched, never read) -> untouched; not observable or outcome unobserved ->
/// unobserved.  Tcomm = tcomm / ticks_per_us; next_call_us from the rank's next call's start stamp (calls
/// in file order); recv_bytes the sum of the call's sub-message sizes.  Sub-messages per call = the largest count seen;
/// message_bytes = mean sub-message size.  RankRecord::rank is the world rank.
/// `detail`, when not null, receives the trace call site of each Observations site (same index).
priority::Observations to_observations(const TraceSet& traces,
                                       std::vector<shim::observe::CallSite>* detail = nullptr);

/// The same for a list of traces (null entries skipped), e.g. in tests.
priority::Observations to_observations(const std::vector<const trace::Trace*>& traces,
                                       std::vector<shim::observe::CallSite>* detail = nullptr);

}  // namespace tnbc::tools
