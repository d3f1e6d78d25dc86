// Observations: what traces say about each collective call site, independent of the trace file
// format.  The trace reader fills these structs; everything in priority/ reads only them, so the
// ordering and prediction rules can be tested with synthetic data and survive format changes.
//
// Units: times in microseconds (double), measured from the moment the blocking collective
// returned to the application.  Sub-messages are numbered as the operation numbers its receive
// blocks: for Alltoall/Alltoallv sub-message i is the block received from rank i (so there are as
// many as the communicator has ranks); for Bcast it is segment i of the receive buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tnbc::priority {

/// The collective operations that T-NBC makes early-returning.
enum class Op {
  alltoall,   ///< MPI_Alltoall: one equal-sized block from every rank
  alltoallv,  ///< MPI_Alltoallv: one block of its own size from every rank
  bcast,      ///< MPI_Bcast: the buffer, cut into segments
};

/// The name used in plans and tools ("alltoall", "alltoallv", "bcast").
std::string_view to_string(Op op);
/// Inverse of to_string(Op); std::nullopt for any other text (case-sensitive).
std::optional<Op> parse_op(std::string_view text);

/// What the trace knows about the first touch of one sub-message in one call.
enum class TouchState {
  touched,     ///< the application read or wrote it; delay_us holds when (after return)
  untouched,   ///< it was protected and watched, but the application never touched it before the
               ///< next call on this site or the end of the run
  unobserved,  ///< it could not be watched (e.g. it lies on a partial edge page, or the tracer
               ///< skipped it); says nothing about the application's order
};

/// First touch of one sub-message in one call.
struct FirstTouch {
  TouchState state = TouchState::unobserved;
  double delay_us = 0;  ///< time from return to first touch; meaningful only when touched

  static FirstTouch at(double delay_us) { return {TouchState::touched, delay_us}; }
  static FirstTouch untouched() { return {TouchState::untouched, 0}; }
  static FirstTouch unobserved() { return {TouchState::unobserved, 0}; }
};

/// One traced call of a call site on one rank.
struct CallRecord {
  double tcomm_us = 0;              ///< duration of the blocking collective itself
  std::vector<FirstTouch> touches;  ///< one per sub-message, indexed by sub-message number
  /// Time from the return to the rank's next traced or recorded collective call (any site): the
  /// work after this call.  NaN for the rank's last call.  The ordering rules do not use it
  /// (tnbc-sim --trace does).
  double next_call_us = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t recv_bytes = 0;  ///< bytes this call received, over all its sub-messages
};

/// All traced calls of one call site on one rank, in call order.
struct RankRecord {
  int rank = 0;  ///< rank in the communicator of the call site
  std::vector<CallRecord> calls;
};

/// One call site: the same return-address chain, operation and communicator size.
struct CallSite {
  std::string id;                   ///< stable identity (module+offset chain), the plan key
  Op op = Op::alltoall;
  std::vector<std::string> frames;  ///< symbols, innermost application frame first (for humans)
  std::size_t messages = 0;         ///< number of sub-messages per call
  int comm_size = 0;                ///< ranks in the communicator
  std::uint64_t message_bytes = 0;  ///< bytes per sub-message (Alltoallv: the mean)
  std::vector<RankRecord> ranks;    ///< ranks that traced this site (possibly a subset)
};

/// Everything read from one trace directory.
struct Observations {
  std::vector<CallSite> sites;
};

}  // namespace tnbc::priority
