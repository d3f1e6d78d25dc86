// The fence: before an MPI call that may block or touch user memory, complete every
// collective that is still in flight (docs/design.md, "The fence").
//
// Generated wrappers of class `fence` open a FenceScope.  Its fast path is one thread-local
// increment and one atomic load; the slow path calls the drain hook the active mode installed.
// The scope also marks the thread as "inside MPI", so MPI calls that MPI itself makes (ROMIO
// calls MPI_Alltoallv inside collective I/O) pass straight through instead of starting an
// early-returning collective nobody will wait for.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "shim/io_interpose.hpp"

namespace tnbc::shim {

/// Collectives started and not yet complete, across all communicators.  The engine owns it.
extern std::atomic<int> g_in_flight;

/// Depth of MPI wrappers on this thread.  initial-exec: the library is loaded at start-up
/// (LD_PRELOAD), so its TLS is static and access costs no __tls_get_addr call.
extern thread_local int t_mpi_depth __attribute__((tls_model("initial-exec")));

/// Installs the function that completes all in-flight work (nullptr: none).
void set_drain_hook(void (*hook)());
/// Calls the drain hook, if any, and counts the call.  Out of line: the slow path.
void drain_in_flight();
/// Slow paths taken (drain_in_flight calls): fenced MPI calls and interposed system calls that
/// found something in flight (TNBC_STATS: `fence_drains`).
extern std::atomic<std::uint64_t> g_fence_drains;

/// True while this thread is already inside an intercepted MPI call.
inline bool nested_in_mpi() { return t_mpi_depth > 0; }

/// Marks the thread as inside MPI for the scope's lifetime.
class MpiScope {
 public:
  MpiScope() noexcept { ++t_mpi_depth; }
  ~MpiScope() { --t_mpi_depth; }
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;
};

/// MpiScope that first completes in-flight collectives (outermost scope only).
class FenceScope : public MpiScope {
 public:
  FenceScope() noexcept {
    if (t_mpi_depth == 1 && g_in_flight.load(std::memory_order_acquire) != 0) drain_in_flight();
  }
};

/// Slow path of release_pointer_arguments (io_interpose.cpp, beside the interposers' releases).
void release_pointers(std::initializer_list<const void*> pointers);

/// Generated wrappers of class `local` that take pointers call this first: where pages are in
/// flight, the collectives whose receive pages hold any of them complete before MPI is entered
/// (Mode::release_range, ReleaseReason::mpi).  Fast path: one atomic load.  A pointer is taken
/// as its own byte: an array that starts outside every receive buffer and runs into one is not
/// covered.
inline void release_pointer_arguments(std::initializer_list<const void*> pointers) {
  if (g_guarded_calls.load(std::memory_order_acquire) != 0) release_pointers(pointers);
}

}  // namespace tnbc::shim
