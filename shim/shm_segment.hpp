// Shared-memory segments that the ranks of one node map together: the shared-memory barrier's
// (barrier_shim.hpp) and the engine's per-node turn counters (engine/shadow.hpp).
//
// One rank creates a segment under an unpredictable name and passes the name to the others of
// its node (an MPI message), they open and map it, and once all have (an agreement on the
// node) the creator unlinks the name: from then on the segment lives as long as its mappings.
//
//   name: /tnbc-<kind>-<pid namespace>-<creator pid>-<16 hex digits from getrandom>
//
// A rank killed between shm_open and shm_unlink (or a creator killed while it waits for one)
// leaves the name behind; the pid namespace (the inode of /proc/self/ns/pid, 0 if unknown) and
// the pid let a later run on the node find it: create() first removes, once per process, the
// names of this user whose creator no longer exists in this pid namespace (docs/barrier.md,
// "Segments of killed jobs").  Names from other namespaces (another container sharing
// /dev/shm: its pids mean other processes), of other users, or of a live process (perhaps a
// reused pid) are left alone.
//
// A new segment reads as zeros (ftruncate), so counters in it need no initialisation.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tnbc::shim::shm {

inline constexpr int kNameBytes = 64;

/// The kinds of segment, each a prefix of its names ("tnbc-<kind>-").
inline constexpr std::string_view kBarrier = "barrier";
inline constexpr std::string_view kTurns = "turns";

/// Creates and maps a fresh segment of `bytes` bytes of `kind` (kBarrier or kTurns): its name
/// goes to `name`, its address to `*base`.  Returns an error, or "".
std::string create(std::string_view kind, std::size_t bytes, char (&name)[kNameBytes], void** base);

/// Opens and maps the segment `name` made by create() on another rank of the node; it must
/// belong to this user and be `bytes` long.  Returns an error, or "".
std::string open(const char* name, std::size_t bytes, void** base);

/// The creator pid of a segment name `entry` (as /dev/shm lists it: without the leading '/')
/// made in pid namespace `ns`, or 0 when it is not one of ours or comes from another namespace.
pid_t creator_in(std::string_view entry, std::uint64_t ns);

}  // namespace tnbc::shim::shm
