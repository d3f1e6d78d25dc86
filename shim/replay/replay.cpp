// Replay mode (replay.hpp): starting and stopping the engine, MPI_Alltoall and MPI_Alltoallv, and
// the exchange the engine runs for both (bcast.cpp: MPI_Bcast; call.hpp: what the handlers share).
#include "replay.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include "priority/plan.hpp"
#include "shim/datatype.hpp"
#include "shim/io_interpose.hpp"
#include "shim/log.hpp"
#include "shim/mpi_own.hpp"
#include "shim/node.hpp"
#include "shim/replay/call.hpp"
#include "shim/replay/decide/algorithm.hpp"
#include "shim/replay/engine/replay_guard.hpp"
#include "shim/replay/engine/schedule_pieces.hpp"
#include "shim/requests.hpp"
#include "shim/stats.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {
namespace {

using datatype::span_of;
using datatype::TypeInfo;

/// TNBC_MAX_MEMORY=auto: a quarter of this rank's share of the node's memory, or of what the
/// address-space or data limit (ulimit -v / -d) leaves free now, whichever is smaller.
std::size_t auto_memory_bound() {
  const auto ranks_here = static_cast<std::uint64_t>(node::world_ranks_here());
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  std::uint64_t room = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * page / ranks_here;
  std::uint64_t mapped = 0;  // this process's virtual size now (first field of statm, in pages)
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long pages = 0;
    if (std::fscanf(f, "%llu", &pages) == 1) mapped = pages * page;
    std::fclose(f);
  }
  for (int which : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl;
    if (getrlimit(which, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      room = std::min<std::uint64_t>(room, rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 0);
  }
  return static_cast<std::size_t>(std::max<std::uint64_t>(room / 4, page));
}

/// An alltoallv in elements, run by the engine in bytes.  Non-contiguous data is packed into a
/// contiguous staging buffer (send) or received into one and unpacked (receive; no early return).
/// Returns MPI_SUCCESS, or the first error of packing or unpacking.
int exchange(OpStats& st, const decide::Decision& d, const void* sendbuf, const int sendcounts[], const int sdispls[],
             MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
             MPI_Datatype recvtype, MPI_Comm comm, bool allow_early, std::span<const int> recv_order,
             bool per_node, int window = 0) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(size);
  const TypeInfo sti = datatype::info(sendtype), rti = datatype::info(recvtype);
  std::vector<std::size_t> sb(n), sd(n), rb(n), rd(n);
  std::vector<char> send_stage, recv_stage;
  const void* sptr = sendbuf;
  void* rptr = recvbuf;
  int rc = MPI_SUCCESS;

  // Receive side first: its pages may still be guarded by an earlier collective, whose mirror
  // must be published before this one can guard them again.
  std::size_t rtotal = 0;
  std::uintptr_t rlo = UINTPTR_MAX, rhi = 0;  // the bytes the receives may write
  for (std::size_t i = 0; i < n; ++i) {
    rb[i] = static_cast<std::size_t>(recvcounts[i]) * rti.size;
    rtotal += rb[i];
    auto [p, len] = span_of(recvbuf, static_cast<std::size_t>(rdispls[i]), static_cast<std::size_t>(recvcounts[i]), rti);
    engine::Engine::instance().complete_overlapping(p, len);
    if (len == 0) continue;
    rlo = std::min(rlo, reinterpret_cast<std::uintptr_t>(p));
    rhi = std::max(rhi, reinterpret_cast<std::uintptr_t>(p) + len);
  }
  // A blocking call the engine runs (Decision::engine; its callers pass allow_early false)
  // counts under the decision's reason.
  const char* why_direct = d.engine ? d.why : !allow_early ? "small" : nullptr;
  if (allow_early && rhi > rlo) {
    why_direct = receive_in_place(reinterpret_cast<void*>(rlo), rhi - rlo);
    allow_early = why_direct == nullptr;
  }
  if (rti.contiguous) {
    for (std::size_t i = 0; i < n; ++i) rd[i] = static_cast<std::size_t>(rdispls[i]) * rti.size;
  } else {
    recv_stage.resize(rtotal);
    rptr = recv_stage.data();
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i) rd[i] = off, off += rb[i];
    allow_early = false;
    why_direct = "datatype";
  }

  if (sti.contiguous) {
    for (std::size_t i = 0; i < n; ++i) {
      sb[i] = static_cast<std::size_t>(sendcounts[i]) * sti.size;
      sd[i] = static_cast<std::size_t>(sdispls[i]) * sti.size;
    }
  } else {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += static_cast<std::size_t>(sendcounts[i]) * sti.size;
    send_stage.resize(total);
    int pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
      sd[i] = static_cast<std::size_t>(pos);
      sb[i] = static_cast<std::size_t>(sendcounts[i]) * sti.size;
      auto [p, len] = span_of(sendbuf, static_cast<std::size_t>(sdispls[i]), static_cast<std::size_t>(sendcounts[i]), sti);
      engine::Engine::instance().complete_overlapping(p, len);
      keep_first_error(rc, PMPI_Pack(static_cast<const char*>(sendbuf) + static_cast<MPI_Aint>(sdispls[i]) * sti.extent,
                                     sendcounts[i], sendtype, send_stage.data(), static_cast<int>(total), &pos, comm));
    }
    sptr = send_stage.data();
  }
  // Blocks over 2 GiB travel in pieces of at most 1 GiB (schedule_pieces.hpp).  Only a block
  // beyond what the engine's pieces can hold (254 GiB) runs the blocking call, on this rank
  // alone: the others would wait for the engine's messages (one rank decides this by its own
  // sizes; no such block has been seen).
  for (std::size_t i = 0; i < n; ++i)
    if (sb[i] > engine::schedule::kMaxSubMessageBytes || rb[i] > engine::schedule::kMaxSubMessageBytes)
      return plain(st, "large_block", [&] {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
      });

  if (!d.engine) d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t t0 = util::now_ns();
  const engine::Engine::Result r = engine::Engine::instance().alltoallv(
      sptr, sb, sd, rptr, rb, rd, comm, recv_order, per_node, allow_early, d.engine ? nullptr : d.costs, window);
  const bool early = r.early;
  if (r.why != nullptr) why_direct = r.why;
  decide::say_early_path_call(d, early, why_direct, util::now_ns() - t0);
  decide::done(d, comm);
  if (!rti.contiguous) {
    for (std::size_t i = 0; i < n; ++i) {
      int pos = static_cast<int>(rd[i]);
      keep_first_error(rc, PMPI_Unpack(recv_stage.data(), static_cast<int>(rtotal), &pos,
                                       static_cast<char*>(recvbuf) + static_cast<MPI_Aint>(rdispls[i]) * rti.extent,
                                       recvcounts[i], recvtype, comm));
    }
  }
  if (early) st.count_early_return();
  else st.count_fallback(why_direct ? why_direct : "no_full_page");
  return rc;
}

}  // namespace

bool start(Runtime& rt) {
  // Every rank comes here (the settings agree), and whether the engine runs must be the same on
  // all of them: a rank running the plain collectives while the others run the engine's would
  // leave them waiting.  So the collective steps run on every rank, and what may fail on one
  // rank alone is agreed on at the end.
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
  decide::AlgorithmAgreement algorithms;
  if (!decide::start_decisions(rt.config(), plan() != nullptr, algorithms) && !err)
    err = "cannot create a communicator attribute";
  o.chunk_bytes = rt.config().chunk_bytes;
  o.chunk_window = rt.config().chunk_window;
  o.publish = rt.config().publish;
  o.max_memory_bytes = rt.config().max_memory != 0 ? rt.config().max_memory : auto_memory_bound();
  log::debug("engine memory for calls in flight: at most {} bytes", o.max_memory_bytes);
  // libucm patches munmap & co. so that our interposers never see them: take its events too.
  if (!err) subscribe_memory_events();
  bool started = false;
  if (!err) {
    err = engine::Engine::instance().start(o);
    started = !err;
  }
  int world_rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // {started here, rank 0 started}: the minimum says whether all started and whether rank 0 did.
  // The algorithms' values ride along (one collective for both).
  std::array<int, 2 + decide::AlgorithmAgreement::kValues> status{started ? 1 : 0, world_rank != 0 || started ? 1 : 0};
  std::copy(algorithms.values.begin(), algorithms.values.end(), status.begin() + 2);
  PMPI_Allreduce(MPI_IN_PLACE, status.data(), static_cast<int>(status.size()), MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  std::copy(status.begin() + 2, status.end(), algorithms.values.begin());
  decide::agreed_decisions(algorithms);
  if (!status[0]) {
    if (started) engine::Engine::instance().stop();
    // One message: rank 0's reason, or, when rank 0 could start, the reason of each rank that
    // could not (a fault of that process, not of the job).
    if (err && (world_rank == 0 || status[1]))
      log::warn("engine not started ({}): collectives run blocking on every rank", *err);
    return false;
  }
  set_running(true);
  requests::set_recording(true);
  decide::set_engine_prepare([](MPI_Comm comm) { engine::Engine::instance().prepare(comm); });
  learn::start(rt.config());
  // Per-node priority needs a node communicator and a shared-memory window per communicator:
  // collective and slow (tens of ms).  For MPI_COMM_WORLD set them up here, not inside the
  // application's first timed collective.  Every rank reads the same plan, so all come here.
  if (plan() && std::any_of(plan()->entries.begin(), plan()->entries.end(),
                            [](const priority::PlanEntry& e) { return e.per_node; }))
    engine::Engine::instance().prepare_node(MPI_COMM_WORLD);
  return true;
}

void stop(Runtime& rt) {
  decide::finish_agreements();
  decide::stop_algorithms();  // MPI's defaults back, before anything else may call a collective
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
  rt.stats().fence_wait_ns = engine::Engine::instance().fence_wait_ns();
  rt.stats().adapt_json = decide::keys_json(site_name);
  // What the run did, in one line (TNBC_STATS and tnbc-stats say where and why).
  const Stats& st = rt.stats();
  const std::uint64_t calls = st.alltoall.calls() + st.alltoallv.calls() + st.bcast.calls();
  const std::uint64_t early = st.alltoall.early_returns() + st.alltoallv.early_returns() + st.bcast.early_returns();
  // A plan that none of rank 0's calls found an entry in was of no use: most often the program
  // was rebuilt after its trace, and a plan names call sites by module and offset.
  const bool plan_unused = plan() != nullptr &&
                           st.alltoall.planned() + st.alltoallv.planned() + st.bcast.planned() == 0;
  if (calls > 0)
    log::info_rank0("summary: {} of rank 0's {} Alltoall, Alltoallv and Bcast calls returned early{}{}{}", early, calls,
                    decide::measured_saving(),
                    plan_unused ? "; none matched an entry of TNBC_PLAN (call sites are module + offset: a "
                                  "rebuilt program needs a new trace and plan)"
                                : "",
                    rt.config().stats_prefix.empty() ? "; TNBC_STATS=PREFIX and tnbc-stats PREFIX say where and why"
                                                     : "");
}

namespace {

/// The receive order of an early Alltoall(v) call, whether it takes per-node turns, and its send
/// window under them (a plan entry's `window` or the learned one; 0: TNBC_CHUNK_WINDOW).
struct CallOrder {
  std::vector<int> order;
  bool per_node = false;
  int window = 0;
};

/// Per-node turns go only in an order every rank agreed on (a rank that does not take part in
/// its node's turns stops the ranks after it for good): the plan entry of the key's first call
/// (decide.hpp, Key::shape), else the order learned for the key when measurements chose turns.
/// Without turns, the order of this call's own entry, or else the one learned for its site,
/// only says when this rank posts its messages: safe whatever the others do.
CallOrder call_order(const decide::Decision& d, const priority::PlanEntry* entry, learn::SiteLearning* ls) {
  const bool planned_turns = d.shape != nullptr && d.shape->per_node;
  const priority::PlanEntry* ordered = planned_turns ? d.shape
                                       : d.turns     ? d.turn_order
                                       : entry       ? entry
                                                     : learn::learned(ls);
  const bool learned = ordered != nullptr && !planned_turns && (d.turns || entry == nullptr);
  if (learned) ++d.key->learning.applied;
  // Where the order came from, for the statistics (tnbc-stats: "early order").
  if (ordered != nullptr) (learned ? d.costs->order_learned_calls : d.costs->order_plan_calls).fetch_add(1, std::memory_order_relaxed);
  if (planned_turns || d.turns) d.costs->turn_calls.fetch_add(1, std::memory_order_relaxed);
  // The window is a sender's own (no receiver depends on it): the planned entry's, or the one
  // learned with the turns' order (learn::KeyLearning::turn_window).
  return {ordered ? as_ints(ordered->order) : std::vector<int>{}, planned_turns || d.turns,
          planned_turns ? d.shape->window : d.turns ? d.key->learning.turn_window : 0};
}

}  // namespace

int alltoall(Runtime& rt, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  OpStats& st = rt.stats().alltoall;
  auto blocking = [&] {
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  };
  int size = 0, tsize = 0;
  PMPI_Comm_size(comm, &size);
  if (learn::guarded()) {
    const auto ranks = static_cast<std::size_t>(std::max(size, 0));
    release_guarded(sendbuf, ranks * static_cast<std::size_t>(std::max(sendcount, 0)), sendtype, true);
    release_guarded(recvbuf, ranks * static_cast<std::size_t>(std::max(recvcount, 0)), recvtype, false);
  }
  // Decided from facts every rank shares; Alltoall's message size is the same everywhere.
  if (const char* why = shared_exclusion(sendbuf, comm)) return plain(st, why, blocking);
  PMPI_Type_size(recvtype, &tsize);
  const std::size_t block = static_cast<std::size_t>(recvcount) * static_cast<std::size_t>(tsize);
  if (block == 0) return plain(st, "empty", blocking);
  if (block * static_cast<std::size_t>(size) < rt.config().min_bytes) return plain(st, "small", blocking);
  if (block > INT_MAX || static_cast<long>(recvcount) * size > INT_MAX)
    return plain(st, "large_block", blocking);
  const CallStart c = begin(st, comm, priority::Op::alltoall, block, block * static_cast<std::size_t>(size));
  const decide::Decision& d = c.d;
  learn::SiteLearning* ls = c.ls;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  for (int i = 0; i < size; ++i) decide::count_received(d, rank, i, block);
  std::vector<int> scounts(static_cast<std::size_t>(size), sendcount), sdispls(static_cast<std::size_t>(size));
  std::vector<int> rcounts(static_cast<std::size_t>(size), recvcount), rdispls(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) sdispls[i] = i * sendcount, rdispls[i] = i * recvcount;
  if (d.path == decide::Path::blocking) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = d.engine ? engine_blocking(d, comm, [&] {
      return exchange(st, d, sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                      rdispls.data(), recvtype, comm, false, {}, false);
    })
                            : plain(st, d, comm, blocking);
    if (rc == MPI_SUCCESS)
      observe_blocks(d, ls, recvbuf, rcounts.data(), rdispls.data(), size, recvtype, util::now_ns() - t0);
    return rc;
  }
  const CallOrder o = call_order(d, c.entry, ls);
  return exchange(st, d, sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                  rdispls.data(), recvtype, comm, true, o.order, o.per_node, o.window);
}

int alltoallv(Runtime& rt, const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
              MPI_Datatype recvtype, MPI_Comm comm) {
  OpStats& st = rt.stats().alltoallv;
  auto blocking = [&] {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  };
  int size = 0, tsize = 0;
  PMPI_Comm_size(comm, &size);
  if (learn::guarded()) {
    if (sendbuf != MPI_IN_PLACE)
      release_guarded(sendbuf, datatype::blocks_span(sendcounts, sdispls, size), sendtype, true);
    release_guarded(recvbuf, datatype::blocks_span(recvcounts, rdispls, size), recvtype, false);
  }
  if (const char* why = shared_exclusion(sendbuf, comm)) return plain(st, why, blocking);
  // Sizes differ between ranks: every rank runs the engine's exchange, and only the local size
  // decides whether this rank returns early.
  PMPI_Type_size(recvtype, &tsize);
  std::size_t total = 0;
  for (int i = 0; i < size; ++i) total += static_cast<std::size_t>(recvcounts[i]) * static_cast<std::size_t>(tsize);
  // The key has no size (class 0, the same everywhere); the plan entry only votes.
  const CallStart c =
      begin(st, comm, priority::Op::alltoallv, size > 0 ? total / static_cast<std::size_t>(size) : 0, 0);
  const decide::Decision& d = c.d;
  learn::SiteLearning* ls = c.ls;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  for (int i = 0; i < size; ++i)
    decide::count_received(d, rank, i, static_cast<std::uint64_t>(recvcounts[i]) * static_cast<std::uint64_t>(tsize));
  if (d.path == decide::Path::blocking) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = d.engine ? engine_blocking(d, comm, [&] {
      return exchange(st, d, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                      false, {}, false);
    })
                            : plain(st, d, comm, blocking);
    if (rc == MPI_SUCCESS) observe_blocks(d, ls, recvbuf, recvcounts, rdispls, size, recvtype, util::now_ns() - t0);
    return rc;
  }
  // Each rank finds its own entry by its own receive size, so the ranks of a node can disagree
  // on it: call_order takes turns only in the agreed order (IS-like class S hung when each rank
  // followed its own entry).  The key holds every size of the communicator's Alltoallv calls,
  // so the agreed order serves all of them.
  const CallOrder o = call_order(d, c.entry, ls);
  return exchange(st, d, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                  recvtype, comm, total >= rt.config().min_bytes, o.order, o.per_node, o.window);
}

void release_range(const void* p, std::size_t n, bool touch) {
  if (!running()) return;
  engine::ReplayGuard::instance().wait_range(p, n);
  if (p == nullptr && n == SIZE_MAX) learn::drain();
  else learn::release(p, n, touch);
}

void complete_at(const void* p) {
  if (running()) engine::Engine::instance().complete_overlapping(p, 1);
}

void drain() {
  engine::Engine::instance().drain();
  learn::drain();
}

}  // namespace tnbc::shim::replay
