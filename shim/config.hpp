// Configuration: one table of TNBC_* settings, read once at MPI initialisation into Config.
//
// The table (settings()) is the single source for the library, `tnbc-order config` and
// docs/config.md.  Nothing reads the environment on a hot path: the shim calls load() once.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tnbc::config {

/// TNBC_CHUNK_BYTES=auto (the default): the engine's Alltoall(v) bodies travel in chunks of
/// kChunkBytesAcrossNodes in a job that spans nodes, where a reader starts on a block's first
/// pages before the rest is in and the links stay busy, and of kChunkBytesOneNode in a job on one
/// node, where each message costs the progress thread a round of its own and a larger one costs
/// little more (docs/measurements/chunks-one-node.md).
inline constexpr std::uint64_t kChunkBytesAuto = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::uint64_t kChunkBytesAcrossNodes = 64 * 1024;
inline constexpr std::uint64_t kChunkBytesOneNode = 1024 * 1024;

/// The chunk size in effect for a TNBC_CHUNK_BYTES setting: `setting` as it is, or where it is
/// auto, the size for a job that spans nodes or not.
constexpr std::uint64_t chunk_bytes_for(std::uint64_t setting, bool job_spans_nodes) {
  if (setting != kChunkBytesAuto) return setting;
  return job_spans_nodes ? kChunkBytesAcrossNodes : kChunkBytesOneNode;
}

/// How much the library says on standard error.
enum class LogLevel {
  quiet,  ///< nothing but errors that change behaviour (fallback to pass-through)
  info,   ///< also one line per notable event (plan loaded, trace written)
  debug,  ///< also per-call detail; slow, for diagnosis only
};

/// TNBC_ADAPT: how libtnbc.so decides between returning early and the blocking call.
enum class Adapt {
  off,      ///< return early wherever the engine can (experiments, comparisons)
  on,       ///< blocking on one node; elsewhere measured per key (shim/replay/adapt/policy.hpp)
  measure,  ///< measured per key everywhere, one node included
};

/// TNBC_BLOCKING: what runs the blocking calls of a key of 2 ranks or more.
enum class Blocking {
  automatic,  ///< MPI's algorithms and the engine's exchange are the candidates of the trial
  mpi,        ///< MPI's blocking call, with the algorithm chosen per key (TNBC_ALGORITHMS)
  engine,     ///< the engine's exchange, completed before returning (received in place)
};

/// TNBC_BARRIER_ROOT=auto: the root is chosen by MinNumaDist.
inline constexpr int kBarrierRootAuto = -1;

/// Every setting, typed.  Defaults here are the documented defaults.
struct Config {
  bool disable = false;           ///< TNBC_DISABLE: pure pass-through
  LogLevel log = LogLevel::info;  ///< TNBC_LOG
  std::string stats_prefix;       ///< TNBC_STATS: empty = no statistics files
  std::string trace_dir;          ///< TNBC_TRACE_DIR: empty = a new tnbc-trace-* folder in the cwd
  int trace_bcast_units = 16;     ///< TNBC_TRACE_BCAST_UNITS: sub-messages of a traced MPI_Bcast
  std::string plan;                ///< TNBC_PLAN: plan file from `tnbc-order plan`; empty = defaults
  std::uint64_t min_bytes = 64 * 1024;  ///< TNBC_MIN_BYTES: smaller collectives run blocking
  int bcast_segments = 0;  ///< TNBC_BCAST_SEGMENTS: pipeline segments of a replayed Bcast, 0 = auto
  int bcast_chains = -1;   ///< TNBC_BCAST_CHAINS: 0 = binomial tree, k = k chains, -1 = auto
  Adapt adapt = Adapt::on;        ///< TNBC_ADAPT: decide per call whether returning early pays
  int adapt_warmup = 6;           ///< TNBC_ADAPT_WARMUP: blocking calls of a key before early is tried
  int adapt_warmup_room = 4;      ///< TNBC_ADAPT_WARMUP_ROOM: ... where its observed reads leave room; 0 = never
  int adapt_wide = 10;            ///< TNBC_ADAPT_WIDE: % saved that makes a decision count twice; 0 = never
  double explore = 1.0;           ///< TNBC_EXPLORE: % of the run exploring may cost; < 0 = off (no bound)
  Blocking blocking = Blocking::automatic;  ///< TNBC_BLOCKING: what runs a key's blocking calls
  bool algorithms = true;         ///< TNBC_ALGORITHMS: choose MPI's own blocking algorithm per key
  int algorithms_after = 0;       ///< TNBC_ALGORITHMS_AFTER: blocking calls of a key before they are tried (0: auto)
  bool learn = true;              ///< TNBC_LEARN: learn each call site's read order while running
  bool learn_per_node = true;     ///< TNBC_LEARN_PER_NODE: ... and decide per-node turns from measurements
  std::string plan_out;           ///< TNBC_PLAN_OUT: write the learned orders as a plan (rank 0)
  int progress_sleep_us = 20;     ///< TNBC_PROGRESS_SLEEP_US: progress thread's first nap when idle
  int progress_max_sleep_us = 1000;  ///< TNBC_PROGRESS_MAX_SLEEP_US: its longest nap
  std::uint64_t chunk_bytes = kChunkBytesAuto;  ///< TNBC_CHUNK_BYTES: body chunks, 0 = whole (chunk_bytes_for)
  std::uint64_t max_memory = 0;  ///< TNBC_MAX_MEMORY: engine memory held by calls in flight, 0 = auto
  int chunk_window = 2;                   ///< TNBC_CHUNK_WINDOW: body chunks in flight, in order
  /// TNBC_BARRIER_ALGO: "auto", "mpich" or a barrier algorithm name (barrier/barrier.hpp).
  std::string barrier_algo = "auto";
  std::string publish = "auto";   ///< TNBC_PUBLISH: how received pages are published
  int barrier_root = kBarrierRootAuto;  ///< TNBC_BARRIER_ROOT: local rank, or auto (MinNumaDist)
  std::string numa_topology;            ///< TNBC_NUMA_TOPOLOGY: empty = the host (libnuma)
  int barrier_split = 0;  ///< TNBC_BARRIER_SPLIT: testing, ranks per emulated node (0 = off)
  int watchdog = 30;  ///< TNBC_WATCHDOG: seconds without progress before a call in flight is reported (0 = off)
  int barrier_after = -1;  ///< TNBC_BARRIER_AFTER: MPI_Barrier calls per communicator before its own is built (-1: auto)

  bool operator==(const Config&) const = default;
};

/// Whether a setting must be the same on every rank of a job.  Runtime::start() checks every
/// setting that must, on every rank, with one reduction; when one differs, every rank passes
/// every call straight to MPI (docs/config.md, "Settings that differ between ranks").
enum class Agree {
  no,       ///< rank-local by nature: its description says why it may differ
  value,    ///< the value as parsed (64K and 65536 agree; a bad value is the default; auto is auto)
  content,  ///< the bytes of the file it names (unset, unreadable or not a regular file: none)
};

/// How one setting's field of Config is written from text and shown as text.
struct Field {
  /// Parses `value` into `cfg`; an error message (without the variable name) when the value is
  /// not acceptable.
  std::optional<std::string> (*apply)(Config& cfg, std::string_view value);
  /// The value in effect in `cfg`, as text (a number, a name or a path).
  std::string (*show)(const Config& cfg);
};

/// One row of the settings table.
struct Setting {
  std::string_view name;
  std::string_view type;           ///< bool, enum, int, size, path, string
  std::string_view default_value;  ///< as a user would write it; "" = unset
  Agree agree;
  std::string_view description;
  Field field;
};

/// The settings table, in documentation order.
std::span<const Setting> settings();

/// Result of reading the environment: the config and what to tell the user (once, rank 0).
struct LoadResult {
  Config config;
  std::vector<std::string> messages;
};

/// Builds a Config from `environ`-style "NAME=VALUE" entries (a null-terminated array).
/// Unknown TNBC_* names and bad values each give one message; bad values keep the default.
/// An empty value counts as unset.
LoadResult load(const char* const* envp);

// Value parsers, shared with tools.  Each returns the value or std::nullopt and sets *error.
std::optional<bool> parse_bool(std::string_view text, std::string* error);
std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t min, std::int64_t max,
                                      std::string* error);
/// Sizes accept a plain byte count or a K/M/G suffix (binary: 1K = 1024), e.g. "64K".
std::optional<std::uint64_t> parse_size(std::string_view text, std::string* error);

std::string_view to_string(LogLevel level);
/// "yes", "no" or "file contents": the "same on all ranks" column of the table.
std::string_view to_string(Agree agree);

/// A 64-bit digest of what `s` must agree on across ranks (Agree), the same on two ranks
/// exactly when they behave the same (up to hash collisions); 0 for Agree::no and for no file.
std::uint64_t agreement_digest(const Setting& s, const Config& cfg);

/// The table rendered as plain text (for `tnbc-order config`) or as Markdown (docs/config.md).
std::string render_table(bool markdown);

}  // namespace tnbc::config
