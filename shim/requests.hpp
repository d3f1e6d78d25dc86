// Requests that hold the program's memory: nonblocking and persistent operations whose buffers
// MPI may read or write at any moment of its progress until they complete (an MPI_Irecv posted
// before a collective, a persistent send, a nonblocking collective...).
//
// A collective whose receive pages hold bytes of such a request must not return early: MPI's
// own progress would meet a page moved out or protected while it holds MPI's lock, and the page
// cannot come back without MPI's progress (it hangs).  So the generated wrappers (gen_wrappers.py)
// record each request that names memory when it is created, and forget it when a wait, a test or
// MPI_Request_free hands back MPI_REQUEST_NULL in its place; the collectives' handlers ask
// `overlaps` and receive in place (fallback reason `pending_request`).  A persistent request
// is held from its init to its MPI_Request_free and counts while active: from MPI_Start until a
// wait or test finds it complete.
//
// Off (nothing recorded) until replay mode's engine starts: trace mode guards nothing in flight.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>

namespace tnbc::shim::requests {

/// Requests recorded now (the completions' fast path: nothing to look for when 0).
extern std::atomic<int> g_recorded;
/// Whether creations are recorded (replay mode's engine runs).
extern std::atomic<bool> g_on;

/// Starts recording (replay mode, once the engine runs).
void set_recording(bool on);
/// Persistent requests count as active from their init on: the program's MPI_Start passes
/// unseen (a Fortran `use mpi_f08` program calls PMPI_Start).
void assume_started();

/// Whether a request is active when created: a persistent one (MPI_Send_init...) waits for
/// MPI_Start.
enum class Kind { started, persistent };

/// A request `r` whose memory is the bytes `count` elements of `type` from `buf` may occupy.
void record(MPI_Request r, Kind kind, const void* buf, MPI_Count count, MPI_Datatype type);
/// A request whose memory cannot be bounded from its arguments (a nonblocking collective, a
/// one-sided or partitioned operation...): it counts as holding every page.
void record_anywhere(MPI_Request r, Kind kind);

/// For the generated wrappers of functions that create `*request` (rc: what MPI returned).
inline void created(int rc, Kind kind, const MPI_Request* request, const void* buf, MPI_Count count,
                    MPI_Datatype type) {
  if (rc == MPI_SUCCESS && g_on.load(std::memory_order_relaxed)) record(*request, kind, buf, count, type);
}
inline void created_anywhere(int rc, Kind kind, const MPI_Request* request) {
  if (rc == MPI_SUCCESS && g_on.load(std::memory_order_relaxed)) record_anywhere(*request, kind);
}

/// Marks the recorded ones of `n` persistent requests active (MPI_Start, MPI_Startall).
void activate(const MPI_Request* handles, int n);
/// For the generated wrappers of MPI_Start and MPI_Startall.
inline void started(int rc, const MPI_Request* handles, int n) {
  if (rc == MPI_SUCCESS && g_recorded.load(std::memory_order_acquire) != 0 && handles != nullptr) activate(handles, n);
}

/// Forgets the requests of `before` (their handles before a wait or test) whose slot in `after`
/// now holds MPI_REQUEST_NULL (complete, or freed), and marks the persistent ones among the
/// others inactive that are complete.
void forget_completed(const MPI_Request* before, const MPI_Request* after, int n);

/// Runs `call`, a wait, a test or MPI_Request_free on the `n` handles at `handles`, and forgets
/// the recorded requests it completed.  Fast path while nothing is recorded: the call alone.
template <class Call>
int completing(MPI_Request* handles, int n, Call&& call) {
  if (g_recorded.load(std::memory_order_acquire) == 0 || handles == nullptr || n <= 0) return call();
  constexpr int kOnStack = 32;
  MPI_Request small[kOnStack];
  MPI_Request* before = n <= kOnStack ? small : new MPI_Request[static_cast<std::size_t>(n)];
  for (int i = 0; i < n; ++i) before[i] = handles[i];
  const int rc = call();
  forget_completed(before, handles, n);
  if (before != small) delete[] before;
  return rc;
}

/// Whether a recorded request's memory meets the pages of [p, p + n).
bool overlaps(const void* p, std::size_t n);

}  // namespace tnbc::shim::requests
