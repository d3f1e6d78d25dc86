// libtnbc.so: replay mode, its start (the engine, the decision, learning, the plan) and its stop
// (the statistics).  Alltoall, Alltoallv and Bcast return early and finish in the background
// (collectives.hpp, engine/engine.hpp); MPI_Barrier runs on shared memory (barrier_shim.hpp).
//
// Errors: no exception reaches the C caller.  One that escapes a collective (memory exhausted
// beyond what TNBC_MAX_MEMORY bounds: the schedule's own vectors, an MPI object) is reported
// through the communicator's error handler, as MPICH reports its own failures: fatal by
// default, an error code under MPI_ERRORS_RETURN.  It is not turned into the blocking call:
// the other ranks may already exchange the engine's messages for this call, and a rank that
// ran the plain collective instead would leave them waiting for good.
#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include "barrier_shim.hpp"
#include "shim/fence.hpp"
#include "shim/log.hpp"
#include "shim/mode.hpp"
#include "collectives.hpp"
#include "shim/mpi_own.hpp"
#include "shim/node.hpp"
#include "shim/replay/call.hpp"
#include "shim/replay/adapt/algorithm.hpp"
#include "shim/replay/adapt/decide.hpp"
#include "shim/replay/engine/replay_guard.hpp"
#include "shim/requests.hpp"
#include "shim/io_interpose.hpp"

namespace tnbc::shim::replay {
namespace {

/// TNBC_MAX_MEMORY=auto: a quarter of this rank's share of the node's memory, or of what the
/// address-space or data limit (ulimit -v / -d) leaves free now, whichever is smaller.
std::size_t auto_memory_bound() {
  const auto ranks_here = static_cast<std::uint64_t>(node::world_ranks_here());
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  std::uint64_t free_bytes = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * page / ranks_here;
  std::uint64_t mapped = 0;  // this process's virtual size now (first field of statm, in pages)
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long pages = 0;
    if (std::fscanf(f, "%llu", &pages) == 1) mapped = pages * page;
    std::fclose(f);
  }
  for (int which : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl;
    if (getrlimit(which, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      free_bytes = std::min<std::uint64_t>(free_bytes, rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 0);
  }
  return static_cast<std::size_t>(std::max<std::uint64_t>(free_bytes / 4, page));
}


/// What the start's one collective agrees on for the engine (node::StartValues): whether it
/// started on every rank, whether it started on rank 0, then MPI's algorithm values.
constexpr std::size_t kStarted = 0, kRank0Started = 1, kAlgorithms = 2;
static_assert(kAlgorithms + adapt::AlgorithmValues::kValues <= std::tuple_size_v<node::StartValues>);

std::optional<std::string> g_engine_error;  // why this rank's engine did not start
bool g_engine_started = false;                // it started on this rank (prepare_engine)

/// Stops the engine where prepare_engine started it on this rank (the others could not, or the
/// settings differ between ranks).
void abandon_engine() {
  if (g_engine_started) engine::Engine::instance().stop();
  g_engine_started = false;
}

/// The settings differ between ranks: the engine stopped, and MPI's algorithm variables, which
/// start_decisions opened through MPI_T, put back and closed (the runtime stays passive, and its
/// stop, which would do it, does not run).
void abandon_start() {
  abandon_engine();
  adapt::stop_algorithms();
}

/// Starts the engine on this rank if the MPI thread level allows it (prepare_engine), before the
/// start's one collective, which agrees on whether it started everywhere (finish_engine).
/// Whether the engine runs must be the same on all ranks: a rank running the plain collectives
/// while the others run the engine's would leave them waiting.  So what may fail on one rank
/// alone is agreed on by that collective (Runtime::start, node::learn).
void prepare_engine(Runtime& rt, node::StartValues& agree) {
  int provided = MPI_THREAD_SINGLE;
  mpi_own::Query_thread(&provided);
  std::optional<std::string> err;
  if (provided < MPI_THREAD_MULTIPLE)
    err = fmt::format("MPI gave thread level {}, the engine needs MPI_THREAD_MULTIPLE", provided);
  engine::EngineOptions o;
  o.progress_sleep_us = static_cast<unsigned>(rt.config().progress_sleep_us);
  o.progress_max_sleep_us = static_cast<unsigned>(rt.config().progress_max_sleep_us);
  load_plan(rt.config().plan);
  set_site_statistics(!rt.config().stats_prefix.empty());
  adapt::AlgorithmValues algorithms;
  if (!adapt::start_decisions(rt.config(), plan() != nullptr, algorithms) && !err)
    err = "cannot create a communicator attribute";
  // o.chunk_bytes: set by finish_engine, which knows whether the job spans nodes.
  o.chunk_window = rt.config().chunk_window;
  o.publish = rt.config().publish;
  o.watchdog_s = static_cast<unsigned>(rt.config().watchdog);
  // The node's ranks are not known yet (auto_memory_bound): finish_engine sets the bound.
  o.max_memory_bytes = rt.config().max_memory;
  // libucm patches munmap & co. so that our interposers never see them: take its events too.
  if (!err) subscribe_memory_events();
  bool started = false;
  if (!err) {
    err = engine::Engine::instance().start(o);
    started = !err;
  }
  g_engine_error = err;
  g_engine_started = started;
  // {started here, rank 0 started}: the minimum says whether all started and whether rank 0 did.
  agree[kStarted] = started ? 1 : 0;
  agree[kRank0Started] = rt.world_rank() != 0 || started ? 1 : 0;
  std::copy(algorithms.values.begin(), algorithms.values.end(), agree.begin() + kAlgorithms);
}

/// After the start's collective: the engine runs where it started on every rank (true), else it
/// stops where it started, with a message (false).
bool finish_engine(Runtime& rt, const node::StartValues& agreed) {
  adapt::AlgorithmValues algorithms;
  std::copy_n(agreed.begin() + kAlgorithms, algorithms.values.size(), algorithms.values.begin());
  adapt::agreed_decisions(algorithms);
  if (!agreed[kStarted]) {
    abandon_engine();
    // One message: rank 0's reason, or, when rank 0 could start, the reason of each rank that
    // could not (a fault of that process, not of the job).
    if (g_engine_error && (rt.world_rank() == 0 || agreed[kRank0Started]))
      log::warn("engine not started ({}): collectives run blocking on every rank", *g_engine_error);
    return false;
  }
  const std::size_t bound = rt.config().max_memory != 0 ? rt.config().max_memory : auto_memory_bound();
  engine::Engine::instance().set_max_memory(bound);
  log::debug("engine memory for calls in flight: at most {} bytes", bound);
  const bool spans = node::job_spans_nodes();
  const std::uint64_t chunk = config::chunk_bytes_for(rt.config().chunk_bytes, spans);
  engine::Engine::instance().set_chunk_bytes(chunk);
  log::debug("engine's Alltoall(v) bodies in chunks of {} bytes (0: whole){}", chunk,
             rt.config().chunk_bytes != config::kChunkBytesAuto ? ""
             : spans                                            ? " (auto: a job across nodes)"
                                                                : " (auto: a job on one node)");
  set_running(true);
  requests::set_recording(true);
  adapt::set_engine_prepare([](MPI_Comm comm) { engine::Engine::instance().prepare(comm); });
  learn::start(rt.config());
  // Per-node priority needs a node communicator and a shared-memory window per communicator:
  // collective and slow (tens of ms).  For MPI_COMM_WORLD set them up here, not inside the
  // application's first timed collective.  Every rank reads the same plan, so all come here.
  if (plan() && std::any_of(plan()->entries.begin(), plan()->entries.end(),
                            [](const priority::PlanEntry& e) { return e.per_node; }))
    engine::Engine::instance().prepare_node(MPI_COMM_WORLD);
  return true;
}

void stop_engine(Runtime& rt) {
  adapt::finish_tallies();
  adapt::stop_algorithms();  // MPI's defaults back, before anything else may call a collective
  if (!running()) return;
  learn::stop();
  engine::Engine::instance().stop();
  requests::set_recording(false);
  set_running(false);
  rt.stats().publish = engine::Engine::instance().publishing();
  rt.stats().faults = engine::ReplayGuard::instance().faults();
  rt.stats().fault_wait_ns = engine::ReplayGuard::instance().fault_wait_ns();
  rt.stats().init_ns = engine::Engine::instance().init_ns();
  rt.stats().turn_calls = engine::Engine::instance().turn_calls();
  rt.stats().gated_sends = engine::Engine::instance().gated_sends();
  rt.stats().send_window_max = engine::Engine::instance().send_window_max();
  rt.stats().turn_wait_ns = engine::Engine::instance().turn_wait_ns();
  rt.stats().progress_cpu_ns = engine::Engine::instance().progress_cpu_ns();
  rt.stats().progress_rounds = engine::Engine::instance().progress_rounds();
  rt.stats().progress_user_ns = engine::Engine::instance().progress_user_ns();
  rt.stats().progress_system_ns = engine::Engine::instance().progress_system_ns();
  rt.stats().progress_wakeups = engine::Engine::instance().progress_wakeups();
  rt.stats().progress_started = engine::Engine::instance().progress_started();
  rt.stats().progress_starts = engine::Engine::instance().progress_starts();
  rt.stats().fence_wait_ns = engine::Engine::instance().fence_wait_ns();
  rt.stats().fence_drains = g_fence_drains.load(std::memory_order_relaxed);
  rt.stats().adapt_json = adapt::keys_json(site_name);
  // What the run did, in one line (TNBC_STATS and tnbc-stats say where and why).
  const Stats& st = rt.stats();
  const std::uint64_t calls = st.alltoall.calls() + st.alltoallv.calls() + st.bcast.calls();
  const std::uint64_t early = st.alltoall.early_returns() + st.alltoallv.early_returns() + st.bcast.early_returns();
  // A plan that none of rank 0's calls found an entry in was of no use: most often the program
  // was rebuilt after its trace, and a plan names call sites by module and offset.
  const bool plan_unused = plan() != nullptr &&
                           st.alltoall.planned() + st.alltoallv.planned() + st.bcast.planned() == 0;
  if (calls > 0)
    log::info_rank0("summary: {} of rank 0's {} Alltoall, Alltoallv and Bcast calls returned early{}{}{}{}", early,
                    calls, adapt::measured_saving(), adapt::exploration_summary(),
                    plan_unused ? "; none matched an entry of TNBC_PLAN (call sites are module + offset: a "
                                  "rebuilt program needs a new trace and plan)"
                                : "",
                    rt.config().stats_prefix.empty() ? "; TNBC_STATS=PREFIX and tnbc-stats PREFIX say where and why"
                                                     : "");
}


/// Completes in-flight operations overlapping [p, p + n) (interposed system calls, free, …)
/// and opens what an observed call guards there (`touch`: the bytes are being read).
/// (nullptr, SIZE_MAX): everything.
void release_range(const void* p, std::size_t n, bool touch) {
  if (!running()) return;
  engine::ReplayGuard::instance().wait_range(p, n);
  if (p == nullptr && n == SIZE_MAX) learn::drain();
  else learn::release(p, n, touch);
}

/// Completes every early-returned collective whose receive pages hold `p` (ReleaseReason::mpi).
void complete_at(const void* p) {
  if (running()) engine::Engine::instance().complete_overlapping(p, 1);
}

/// The fence of every MPI call that may touch user memory: completes every operation in
/// flight and opens every page an observed call guards.
void drain_engine() {
  engine::Engine::instance().drain();
  learn::drain();
}

/// Runs `call`; an exception becomes the communicator's error handler and an MPI error code.
template <typename F>
int reported(const char* what, MPI_Comm comm, F&& call) noexcept {
  int code = MPI_ERR_INTERN;
  char detail[160] = "unknown exception";  // a copy: the exception is gone after its handler
  try {
    return call();
  } catch (const std::bad_alloc&) {
    code = MPI_ERR_NO_MEM;
    std::snprintf(detail, sizeof detail, "out of memory");
  } catch (const std::exception& e) {
    std::snprintf(detail, sizeof detail, "%s", e.what());
  } catch (...) {
  }
  try {  // the message itself may not find memory
    log::warn("{}: the replay engine failed ({}); reported to the communicator's error handler", what,
              static_cast<const char*>(detail));
  } catch (...) {
  }
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

class ReplayMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc"; }
  int thread_level() const override { return MPI_THREAD_MULTIPLE; }

  void prepare(Runtime& rt, node::StartValues& agree) override { prepare_engine(rt, agree); }
  void abandon(Runtime&) override { abandon_start(); }
  void start(Runtime& rt, const node::StartValues& agreed) override {
    if (finish_engine(rt, agreed)) set_drain_hook(drain_engine);
    barrier_start(rt);
    adapt::set_trial_barrier(replay::barrier);
  }
  void stop(Runtime& rt) override {
    barrier_stop(rt);
    stop_engine(rt);
    set_drain_hook(nullptr);
  }

  int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm) override {
    return reported("MPI_Alltoall", comm, [&] {
      return replay::alltoall(runtime(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    });
  }
  int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                MPI_Datatype recvtype, MPI_Comm comm) override {
    return reported("MPI_Alltoallv", comm, [&] {
      return replay::alltoallv(runtime(), sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                               rdispls, recvtype, comm);
    });
  }
  int bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) override {
    return reported("MPI_Bcast", comm, [&] { return replay::bcast(runtime(), buffer, count, datatype, root, comm); });
  }
  int barrier(MPI_Comm comm) override { return replay::barrier(comm); }
  void release_range(const void* p, std::size_t n, ReleaseReason why) override {
    if (why == ReleaseReason::mpi) complete_at(p);
    else replay::release_range(p, n, why == ReleaseReason::io);
  }
};

}  // namespace
}  // namespace tnbc::shim::replay

// The library's mode (shim/mode.hpp): one per library.
tnbc::shim::Mode& tnbc::shim::mode() {
  static tnbc::shim::replay::ReplayMode instance;
  return instance;
}
