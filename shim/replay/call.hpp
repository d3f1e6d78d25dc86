// What the three collectives' handlers share (replay.cpp: Alltoall and Alltoallv; bcast.cpp:
// Bcast): the state replay mode keeps between calls (whether the engine runs, the plan, the call
// sites), and the steps of one call, which every handler takes in this order:
//   1. release_guarded: what learning still guards of the call's buffers is opened;
//   2. the exclusions every rank shares (shared_exclusion), then the handler's own (sizes);
//   3. begin(): the call site, the plan entry, the agreed decision (decide/), the site's learning;
//   4. the blocking path (plain(), then observe_blocks for learning) or the engine.
// Internal to shim/replay/.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "priority/plan.hpp"
#include "shim/fence.hpp"
#include "shim/replay/decide/decide.hpp"
#include "shim/replay/engine/engine.hpp"
#include "shim/replay/learn/learn.hpp"
#include "shim/stats.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {

/// Whether the engine runs (start() to stop()): every call's first shared exclusion.
bool running();
void set_running(bool on);

/// Reads TNBC_PLAN.  Any problem: one message from rank 0, and default priorities.
void load_plan(const std::string& path);
/// The plan read, or nullptr.
const priority::Plan* plan();
/// With TNBC_STATS set every call's site is captured, for the statistics per call site.
void set_site_statistics(bool on);
/// The key of a call site (an index of the call-site table) as plans spell it.
std::string site_key(std::int64_t site);
/// The statistics' name of a call site: its key, and its innermost frame's function and module.
decide::SiteName site_name(std::int64_t site);

/// This call's site (an index of the call-site table), or -1 when neither a plan, nor the
/// statistics, nor learning on `comm` need it.  Must be called on the application's call chain.
std::int64_t call_site(MPI_Comm comm);
/// The plan entry for this call from `site`, or nullptr.
const priority::PlanEntry* plan_entry(priority::Op op, MPI_Comm comm, std::uint64_t message_bytes,
                                      std::int64_t site);
/// The learning of this call's site, or nullptr (learn.hpp).
learn::SiteLearning* learning_site(const decide::Decision& d, std::int64_t site);

/// One call's start, after its exclusions: where it was called from, what the plan says of it,
/// the path every rank agreed on, and what learning keeps of its site.
struct CallStart {
  std::int64_t site = -1;
  const priority::PlanEntry* entry = nullptr;
  decide::Decision d;
  learn::SiteLearning* ls = nullptr;
};
/// Step 3 of every call: `plan_bytes` find the plan entry (per-block bytes of an Alltoall, the
/// buffer of a Bcast, the mean block of an Alltoallv), `key_bytes` the decision's key (the same
/// on every rank: 0 for Alltoallv).  Counts a planned call in `st`.
CallStart begin(OpStats& st, MPI_Comm comm, priority::Op op, std::uint64_t plan_bytes, std::uint64_t key_bytes);

/// Before a collective uses a buffer that an observed call may still guard: opens it (`touch`:
/// MPI reads it, which counts as the program's first touch; else it is overwritten).
void release_guarded(const void* p, std::size_t elements, MPI_Datatype type, bool touch);
/// A designated blocking call of `ls` returned: watch the blocks of its receive buffer
/// (contiguous receive types only, as trace mode watches them).
void observe_blocks(const decide::Decision& d, learn::SiteLearning* ls, void* recvbuf, const int counts[],
                    const int displs[], int size, MPI_Datatype recvtype, std::uint64_t tcomm_ns);
/// The reasons every rank shares for running the plain call, or nullptr.
const char* shared_exclusion(const void* sendbuf, MPI_Comm comm);
/// Why this rank must receive [p, p + n) in place rather than return early, or nullptr.
const char* receive_in_place(const void* p, std::size_t n);
/// A plan order as the engine takes it.
std::vector<int> as_ints(const std::vector<std::uint32_t>& order);

/// `rc` keeps the first error of a call's steps: the exchange still runs (the other ranks wait
/// for its messages), and the program gets the error MPI gave.
inline void keep_first_error(int& rc, int step) {
  if (rc == MPI_SUCCESS) rc = step;
}

/// The blocking call, after completing what is in flight (its buffers may be guarded, and MPI
/// must never meet a guarded page while it holds its own locks).
template <typename F>
int plain(OpStats& st, std::string_view why, F&& call) {
  st.count_fallback(why);
  if (g_in_flight.load(std::memory_order_acquire) != 0) engine::Engine::instance().drain();
  return call();
}

/// The blocking call on the path a decision chose, with the MPI algorithm its key chose
/// (decide/algorithm.hpp); its time (after the drain, which is charged to the early calls it
/// waited for) is the blocking cost of the key.
template <typename F>
int plain(OpStats& st, const decide::Decision& d, MPI_Comm comm, F&& call) {
  const int rc = plain(st, d.why, [&] {
    const decide::BlockingRun run = decide::before_blocking(d, comm);
    // The thread's CPU clock is a system call (about a microsecond here): read only where the
    // trial uses it.
    const bool cpu = run.wants_cpu;
    const std::uint64_t t0 = util::now_ns(), c0 = cpu ? util::thread_cpu_ns() : 0;
    const int r = call();
    const std::uint64_t ns = util::now_ns() - t0;
    decide::after_blocking(d, run, ns, cpu ? util::thread_cpu_ns() - c0 : decide::kCpuUnmeasured, comm);
    d.costs->blocking_ns.fetch_add(ns, std::memory_order_relaxed);
    return r;
  });
  d.costs->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  decide::done(d, comm);
  return rc;
}

/// A blocking call that the engine's exchange runs (decide.hpp, Decision::engine): `exchange`
/// completes it before returning (and counts the call on the decision's key, done()).  It is
/// measured as a blocking call of the key, by its time and the CPU of the calling and the
/// progress thread (decide/algorithm.hpp's trial; another op in flight shares the progress
/// thread's).
template <typename F>
int engine_blocking(const decide::Decision& d, MPI_Comm comm, F&& exchange) {
  const decide::BlockingRun run = decide::before_blocking(d, comm);
  engine::Engine& e = engine::Engine::instance();
  const bool cpu = run.wants_cpu;
  const std::uint64_t t0 = util::now_ns(), c0 = cpu ? util::thread_cpu_ns() : 0, p0 = e.progress_cpu_ns();
  const int rc = exchange();
  const std::uint64_t ns = util::now_ns() - t0;
  decide::after_blocking(d, run, ns, cpu ? util::thread_cpu_ns() - c0 + (e.progress_cpu_ns() - p0) : decide::kCpuUnmeasured,
                         comm);
  d.costs->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  d.costs->blocking_ns.fetch_add(ns, std::memory_order_relaxed);
  d.costs->engine_blocking_calls.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

}  // namespace tnbc::shim::replay
