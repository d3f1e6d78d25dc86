// Plan files: per call site, the order in which sub-messages should complete, and for Bcast the
// segment count and tree.  Text, versioned, checksummed, line-based so that plans diff well; the
// grammar is in docs/plan-format.md.  The parser is strict (a plan that is not exactly right is refused as
// a whole, with a line number) and meant to face arbitrary bytes: it never throws, and memory is
// bounded by a constant times the input size, itself bounded by kMaxPlanBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "consensus.hpp"
#include "cost_model.hpp"
#include "observations.hpp"

namespace tnbc::priority {

/// First line of every plan: magic, the only format version this code reads, and optionally
/// the checksum of the rest of the file ("tnbc-plan 2 checksum=<16 lowercase hex digits>",
/// util::fnv1a64 of every byte after the first line).  write_plan always writes it; a plan
/// written or edited by hand may leave it out, but one that is there must match.
inline constexpr std::string_view kPlanMagic = "tnbc-plan";
inline constexpr int kPlanVersion = 2;
inline constexpr std::string_view kPlanChecksumKey = "checksum=";
/// Bounds that keep a hostile plan from using much memory or time.
inline constexpr std::size_t kMaxPlanBytes = 16u << 20;
inline constexpr std::size_t kMaxSiteIdBytes = 4096;
inline constexpr std::size_t kMaxMessages = 1u << 20;  ///< sub-messages per entry
inline constexpr int kMaxPlanSegments = 64;            ///< Bcast segments accepted in a plan
/// Size classes: class c holds per-sub-message sizes in [2^c, 2^(c+1)) bytes (0 and 1 -> 0).
inline constexpr int kMaxSizeClass = 63;

/// The largest send window a plan entry may give (TNBC_CHUNK_WINDOW's bound too).
inline constexpr int kMaxPlanWindow = 254;

/// The size class of a per-sub-message byte count: floor(log2(bytes)), 0 for 0.
int size_class(std::uint64_t bytes);

/// Which path the library takes at a call site: decide by measurement (the default, not
/// written), or always return early, or always run the blocking call.
enum class Return { measure, early, blocking };
std::string_view to_string(Return r);

/// One plan entry: what the library does at one call site.
struct PlanEntry {
  std::string site;                 ///< call site id (printable ASCII, no space, no '#')
  Op op = Op::alltoall;
  int comm_size = 0;                ///< communicator size; 0 = any ("*")
  int size_class = -1;              ///< message size class; -1 = any ("*")
  std::vector<std::string> frames;  ///< for humans only; printable ASCII
  std::vector<std::uint32_t> order; ///< sub-messages, first to complete first (a permutation)
  int segments = 0;                 ///< Bcast: segment count (= order size); 0 otherwise
  TreeShape tree;                   ///< Bcast: tree; binomial otherwise
  bool per_node = false;            ///< per-node priority: first-ranked rank of a node sends alone
  Return ret = Return::measure;     ///< "return early|blocking": the path, forced
  /// Alltoall(v) with per-node priority: inter-node body chunks in flight per rank
  /// ("window N", 1..kMaxPlanWindow); 0 = not written: TNBC_CHUNK_WINDOW.
  int window = 0;
  std::optional<double> agreement;  ///< informational: agreement of the traced ranks
  std::optional<Verdict> verdict;   ///< informational: CURC/CRC verdict

  /// priority()[i] = place of sub-message i in `order` (0 = completes first).
  std::vector<std::uint32_t> priorities() const;
  bool operator==(const PlanEntry&) const = default;
};

/// A whole plan.
struct Plan {
  std::vector<PlanEntry> entries;

  /// The entry for a call: same site and op; comm_size equal or any; size class of
  /// `message_bytes` equal or any (an exact match beats "any", comm size first).  Alltoall(v)
  /// entries only match when their order has comm_size sub-messages.  nullptr when none.
  const PlanEntry* find(std::string_view site, Op op, int comm_size,
                        std::uint64_t message_bytes) const;
  /// As above, ignoring the size class (matches entries of any class, exact comm size first).
  const PlanEntry* find(std::string_view site, Op op, int comm_size) const;
  bool operator==(const Plan&) const = default;
};

/// Why a plan was refused.  line is 1-based; 0 when the problem concerns the whole input.
struct PlanError {
  std::size_t line = 0;
  std::string message;
  /// "line N: message" (or just the message when line is 0).
  std::string to_string() const;
  bool operator==(const PlanError&) const = default;
};

/// Checks everything parse_plan checks, on a Plan built in memory.  The first problem, or
/// std::nullopt.  write_plan output of a valid plan parses back equal (exact round trip).
std::optional<std::string> validate_plan(const Plan& plan);

/// Renders a plan (valid per validate_plan; otherwise the text will not parse).  `comments`
/// are emitted as "# " lines after the first line (one per element; for humans, not parsed).
std::string write_plan(const Plan& plan, const std::vector<std::string>& comments = {});

/// Parses a plan.  Returns the Plan, or the first error with its line number.
std::variant<Plan, PlanError> parse_plan(std::string_view text);

}  // namespace tnbc::priority
