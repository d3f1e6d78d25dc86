#include "replay.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include "shim/observe/callsite.hpp"
#include "shim/observe/page_guard.hpp"
#include "util/clock.hpp"
#include "util/file.hpp"
#include "shim/datatype.hpp"
#include "shim/replay/decide/decide.hpp"
#include "shim/replay/engine/schedule_pieces.hpp"
#include "shim/fence.hpp"
#include "shim/io_interpose.hpp"
#include "shim/replay/learn/learn.hpp"
#include "shim/log.hpp"
#include "shim/mapping.hpp"
#include "shim/node.hpp"
#include "priority/cost_model.hpp"
#include "priority/observations.hpp"
#include "priority/plan.hpp"
#include "shim/replay/engine/replay_guard.hpp"
#include "shim/stats.hpp"

namespace tnbc::shim::replay {
namespace {

bool g_running = false;

// The plan (TNBC_PLAN) and the call sites seen, to look plan entries up by call site and to
// break the statistics down by call site (TNBC_STATS).
std::optional<priority::Plan> g_plan;
trace::CallSiteTable g_sites;
bool g_site_stats = false;  // TNBC_STATS is set: capture every call's site

/// This call's site (an index of g_sites), or -1 when neither a plan, nor the statistics, nor
/// learning on `comm` need it (capturing the stack costs microseconds; learning is on by
/// default, and a communicator within one node, whose calls all run blocking, learns nothing).
/// Must be called on the application's call chain, from the collective's handler.
std::int64_t call_site(MPI_Comm comm) {
  const bool wanted = g_plan || g_site_stats || (learn::wants_sites() && measured(comm));
  return wanted ? static_cast<std::int64_t>(g_sites.capture()) : -1;
}

/// The learning of this call's site (learn.hpp), or nullptr: for an early call (which may use
/// a learned order) and for a blocking call designated for observation.  A site is only known to
/// learning once one of these reaches it (a communicator within one node never learns).
learn::SiteLearning* learning_site(const Decision& d, std::int64_t site) {
  if (site < 0 || !learn::enabled() || (d.path == adapt::Path::blocking && !d.observe)) return nullptr;
  return learn::site_of(d.key->learning, site, g_sites.key(static_cast<std::uint32_t>(site)));
}

/// Before a collective uses a buffer that an observed call may still guard: opens it (`touch`:
/// MPI reads it, which counts as the program's first touch; else it is overwritten).
/// `elements` of `type` from `p`; nothing when nothing is guarded.
void release_guarded(const void* p, std::size_t elements, MPI_Datatype type, bool touch) {
  if (!learn::guarded() || p == nullptr || p == MPI_IN_PLACE || elements == 0) return;
  const datatype::TypeInfo ti = datatype::info(type);
  if (!ti.valid) return learn::drain();  // cannot tell where it lies: open everything
  learn::release(p, elements * std::max<std::size_t>(datatype::reach(ti), 1), touch);
}

/// A designated blocking call of `ls` returned: watch the blocks of its receive buffer
/// (contiguous receive types only, as trace mode watches them).
void observe_blocks(const Decision& d, learn::SiteLearning* ls, void* recvbuf, const int counts[],
                    const int displs[], int size, MPI_Datatype recvtype, std::uint64_t tcomm_ns) {
  if (!d.observe || ls == nullptr) return;
  const datatype::TypeInfo ti = datatype::info(recvtype);
  if (!ti.valid || !ti.contiguous || ti.lb != 0) return;
  std::vector<trace::SubRange> subs(static_cast<std::size_t>(size));
  std::uint64_t bytes = 0;
  for (int i = 0; i < size; ++i) {
    if (counts[i] < 0 || displs[i] < 0) return;
    subs[static_cast<std::size_t>(i)] = {static_cast<std::size_t>(displs[i]) * ti.size,
                                         static_cast<std::size_t>(counts[i]) * ti.size};
    bytes += subs[static_cast<std::size_t>(i)].length;
  }
  learn::observe(d.key->learning, *ls, recvbuf, subs, tcomm_ns, size > 0 ? bytes / static_cast<std::uint64_t>(size) : 0);
}

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

/// Reads TNBC_PLAN.  Any problem: one message from rank 0, and default priorities.
void load_plan(const std::string& path) {
  if (path.empty()) return;
  std::string text;
  if (auto err = util::read_file(path, priority::kMaxPlanBytes, text)) {
    log::warn_rank0("TNBC_PLAN={}; using default priorities", *err);
    return;
  }
  auto parsed = priority::parse_plan(text);
  if (auto* err = std::get_if<priority::PlanError>(&parsed)) {
    log::warn_rank0("TNBC_PLAN={}: {}; using default priorities", path, err->to_string());
    return;
  }
  g_plan = std::move(std::get<priority::Plan>(parsed));
  log::info_rank0("plan {} loaded: {} call sites", path, g_plan->entries.size());
}

/// The plan entry for this call from `site` (call_site), or nullptr.
const priority::PlanEntry* plan_entry(priority::Op op, MPI_Comm comm, std::uint64_t message_bytes, std::int64_t site) {
  if (!g_plan || site < 0) return nullptr;
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const std::string key = g_sites.key(static_cast<std::uint32_t>(site));
  return g_plan->find(key, op, size, message_bytes);
}

/// A plan order as the engine takes it.
std::vector<int> as_ints(const std::vector<std::uint32_t>& order) {
  return {order.begin(), order.end()};
}

using datatype::span_of;
using datatype::TypeInfo;

/// Why this rank must receive [p, p + n) in place rather than return early, or nullptr: the
/// kernel may use it behind our back (io_uring), or its pages must stay where they are (shared,
/// locked, hugetlb or device memory: mapping.hpp).  The fallback reason of the statistics.
const char* receive_in_place(const void* p, std::size_t n) {
  if (io_uring_in_use()) return "io_uring";
  if (n != 0 && !mapping::replaceable(p, n)) return "mapping";
  return nullptr;
}

/// The blocking call, after completing what is in flight (its buffers may be guarded, and MPI
/// must never meet a guarded page while it holds its own locks).
template <typename F>
int plain(OpStats& st, std::string_view why, F&& call) {
  st.count_fallback(why);
  if (g_in_flight.load(std::memory_order_acquire) != 0) Engine::instance().drain();
  return call();
}

/// The blocking call on the path a decision chose; its time (after the drain, which is charged
/// to the early calls it waited for) is the blocking cost of the key.
template <typename F>
int plain(OpStats& st, const Decision& d, F&& call) {
  const int rc = plain(st, d.why, [&] {
    const std::uint64_t t0 = util::now_ns();
    const int r = call();
    d.costs->blocking_ns.fetch_add(util::now_ns() - t0, std::memory_order_relaxed);
    return r;
  });
  d.costs->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  done(d);
  return rc;
}

/// The reasons every rank shares for running the plain call (MPI_IN_PLACE is given by all ranks
/// or none; a communicator is an inter-communicator for all), or nullptr.
const char* shared_exclusion(const void* sendbuf, MPI_Comm comm) {
  if (!g_running) return "engine_off";
  if (sendbuf == MPI_IN_PLACE) return "in_place";
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return inter ? "intercomm" : nullptr;
}

/// An alltoallv in elements, run by the engine in bytes.  Non-contiguous data is packed into a
/// contiguous staging buffer (send) or received into one and unpacked (receive; no early return).
int exchange(OpStats& st, const Decision& d, const void* sendbuf, const int sendcounts[], const int sdispls[],
             MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
             MPI_Datatype recvtype, MPI_Comm comm, bool allow_early, std::span<const int> recv_order,
             bool per_node) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(size);
  const TypeInfo sti = datatype::info(sendtype), rti = datatype::info(recvtype);
  std::vector<std::size_t> sb(n), sd(n), rb(n), rd(n);
  std::vector<char> send_stage, recv_stage;
  const void* sptr = sendbuf;
  void* rptr = recvbuf;

  // Receive side first: its pages may still be guarded by an earlier collective, whose mirror
  // must be published before this one can guard them again.
  std::size_t rtotal = 0;
  std::uintptr_t rlo = UINTPTR_MAX, rhi = 0;  // the bytes the receives may write
  for (std::size_t i = 0; i < n; ++i) {
    rb[i] = static_cast<std::size_t>(recvcounts[i]) * rti.size;
    rtotal += rb[i];
    auto [p, len] = span_of(recvbuf, static_cast<std::size_t>(rdispls[i]), static_cast<std::size_t>(recvcounts[i]), rti);
    Engine::instance().complete_overlapping(p, len);
    if (len == 0) continue;
    rlo = std::min(rlo, reinterpret_cast<std::uintptr_t>(p));
    rhi = std::max(rhi, reinterpret_cast<std::uintptr_t>(p) + len);
  }
  const char* why_direct = !allow_early ? "small" : nullptr;
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
      Engine::instance().complete_overlapping(p, len);
      PMPI_Pack(static_cast<const char*>(sendbuf) + static_cast<MPI_Aint>(sdispls[i]) * sti.extent,
                sendcounts[i], sendtype, send_stage.data(), static_cast<int>(total), &pos, comm);
    }
    sptr = send_stage.data();
  }
  // Blocks over 2 GiB travel in pieces of at most 1 GiB (schedule_pieces.hpp).  Only a block
  // beyond what the engine's pieces can hold (254 GiB) runs the blocking call, on this rank
  // alone: the others would wait for the engine's messages (one rank decides this by its own
  // sizes; no such block has been seen).
  for (std::size_t i = 0; i < n; ++i)
    if (sb[i] > schedule::kMaxSubMessageBytes || rb[i] > schedule::kMaxSubMessageBytes)
      return plain(st, "large_block", [&] {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
      });

  d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
  const Engine::Result r = Engine::instance().alltoallv(sptr, sb, sd, rptr, rb, rd, comm, recv_order, per_node,
                                                       allow_early, d.costs);
  const bool early = r.early;
  if (r.why != nullptr) why_direct = r.why;
  done(d);
  if (!rti.contiguous) {
    for (std::size_t i = 0; i < n; ++i) {
      int pos = static_cast<int>(rd[i]);
      PMPI_Unpack(recv_stage.data(), static_cast<int>(rtotal), &pos,
                  static_cast<char*>(recvbuf) + static_cast<MPI_Aint>(rdispls[i]) * rti.extent,
                  recvcounts[i], recvtype, comm);
    }
  }
  if (early) st.count_early_return();
  else st.count_fallback(why_direct ? why_direct : "no_full_page");
  return MPI_SUCCESS;
}

}  // namespace

bool start(Runtime& rt) {
  // Every rank comes here (the settings agree), and whether the engine runs must be the same on
  // all of them: a rank running the plain collectives while the others run the engine's would
  // leave them waiting.  So the collective steps run on every rank, and what may fail on one
  // rank alone is agreed on at the end.
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  std::optional<std::string> err;
  if (provided < MPI_THREAD_MULTIPLE)
    err = fmt::format("MPI gave thread level {}, the engine needs MPI_THREAD_MULTIPLE", provided);
  EngineOptions o;
  o.progress_sleep_us = static_cast<unsigned>(rt.config().progress_sleep_us);
  o.progress_max_sleep_us = static_cast<unsigned>(rt.config().progress_max_sleep_us);
  load_plan(rt.config().plan);
  g_site_stats = !rt.config().stats_prefix.empty();
  if (!start_decisions(rt.config(), g_plan.has_value()) && !err) err = "cannot create a communicator attribute";
  o.chunk_bytes = rt.config().chunk_bytes;
  o.chunk_window = rt.config().chunk_window;
  o.max_memory_bytes = rt.config().max_memory != 0 ? rt.config().max_memory : auto_memory_bound();
  log::debug("engine memory for calls in flight: at most {} bytes", o.max_memory_bytes);
  // libucm patches munmap & co. so that our interposers never see them: take its events too.
  if (!err) subscribe_memory_events();
  bool started = false;
  if (!err) {
    err = Engine::instance().start(o);
    started = !err;
  }
  int world_rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // {started here, rank 0 started}: the minimum says whether all started and whether rank 0 did.
  int status[2] = {started ? 1 : 0, world_rank != 0 || started ? 1 : 0};
  PMPI_Allreduce(MPI_IN_PLACE, status, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!status[0]) {
    if (started) Engine::instance().stop();
    // One message: rank 0's reason, or, when rank 0 could start, the reason of each rank that
    // could not (a fault of that process, not of the job).
    if (err && (world_rank == 0 || status[1]))
      log::warn("engine not started ({}): collectives run blocking on every rank", *err);
    return false;
  }
  g_running = true;
  learn::start(rt.config());
  // Per-node priority needs a node communicator and a shared-memory window per communicator:
  // collective and slow (tens of ms).  For MPI_COMM_WORLD set them up here, not inside the
  // application's first timed collective.  Every rank reads the same plan, so all come here.
  if (g_plan && std::any_of(g_plan->entries.begin(), g_plan->entries.end(),
                            [](const priority::PlanEntry& e) { return e.per_node; }))
    Engine::instance().prepare_node(MPI_COMM_WORLD);
  return true;
}

void stop(Runtime& rt) {
  if (!g_running) return;
  learn::stop();
  Engine::instance().stop();
  g_running = false;
  rt.stats().faults = engine::ReplayGuard::instance().faults();
  rt.stats().fault_wait_ns = engine::ReplayGuard::instance().fault_wait_ns();
  rt.stats().init_ns = Engine::instance().init_ns();
  rt.stats().turn_calls = Engine::instance().turn_calls();
  rt.stats().gated_sends = Engine::instance().gated_sends();
  rt.stats().turn_wait_ns = Engine::instance().turn_wait_ns();
  rt.stats().progress_cpu_ns = Engine::instance().progress_cpu_ns();
  rt.stats().progress_rounds = Engine::instance().progress_rounds();
  rt.stats().progress_user_ns = Engine::instance().progress_user_ns();
  rt.stats().progress_system_ns = Engine::instance().progress_system_ns();
  rt.stats().fence_wait_ns = Engine::instance().fence_wait_ns();
  rt.stats().adapt_json = keys_json([](std::int64_t site) { return g_sites.key(static_cast<std::uint32_t>(site)); });
}

namespace {

/// The receive order of an early Alltoall(v) call, and whether it takes per-node turns.
struct CallOrder {
  std::vector<int> order;
  bool per_node = false;
};

/// Per-node turns go only in an order every rank agreed on (a rank that does not take part in
/// its node's turns stops the ranks after it for good): the plan entry of the key's first call
/// (decide.hpp, Key::shape), else the order learned for the key when measurements chose turns.
/// Without turns, the order of this call's own entry, or else the one learned for its site,
/// only says when this rank posts its messages: safe whatever the others do.
CallOrder call_order(const Decision& d, const priority::PlanEntry* entry, learn::SiteLearning* ls) {
  const bool planned_turns = d.shape != nullptr && d.shape->per_node;
  const priority::PlanEntry* ordered = planned_turns ? d.shape
                                       : d.turns     ? d.turn_order
                                       : entry       ? entry
                                                     : learn::learned(ls);
  if (ordered != nullptr && !planned_turns && (d.turns || entry == nullptr)) ++d.key->learning.applied;
  return {ordered ? as_ints(ordered->order) : std::vector<int>{}, planned_turns || d.turns};
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
  const std::int64_t site = call_site(comm);
  const auto* entry = plan_entry(priority::Op::alltoall, comm, block, site);
  const Decision d = decide(comm, priority::Op::alltoall, block * static_cast<std::size_t>(size), entry, site);
  learn::SiteLearning* ls = learning_site(d, site);
  if (entry) st.count_planned();
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  for (int i = 0; i < size; ++i) count_received(d, rank, i, block);
  std::vector<int> scounts(static_cast<std::size_t>(size), sendcount), sdispls(static_cast<std::size_t>(size));
  std::vector<int> rcounts(static_cast<std::size_t>(size), recvcount), rdispls(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) sdispls[i] = i * sendcount, rdispls[i] = i * recvcount;
  if (d.path == adapt::Path::blocking) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = plain(st, d, blocking);
    if (rc == MPI_SUCCESS)
      observe_blocks(d, ls, recvbuf, rcounts.data(), rdispls.data(), size, recvtype, util::now_ns() - t0);
    return rc;
  }
  const CallOrder o = call_order(d, entry, ls);
  return exchange(st, d, sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                  rdispls.data(), recvtype, comm, true, o.order, o.per_node);
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
    // Upper bounds of what each buffer spans, in elements.
    std::size_t send_span = 0, recv_span = 0;
    for (int i = 0; i < size; ++i) {
      send_span = std::max<std::size_t>(send_span, static_cast<std::size_t>(std::max(sdispls[i], 0)) +
                                                       static_cast<std::size_t>(std::max(sendcounts[i], 0)));
      recv_span = std::max<std::size_t>(recv_span, static_cast<std::size_t>(std::max(rdispls[i], 0)) +
                                                       static_cast<std::size_t>(std::max(recvcounts[i], 0)));
    }
    release_guarded(sendbuf, send_span, sendtype, true);
    release_guarded(recvbuf, recv_span, recvtype, false);
  }
  if (const char* why = shared_exclusion(sendbuf, comm)) return plain(st, why, blocking);
  // Sizes differ between ranks: every rank runs the engine's exchange, and only the local size
  // decides whether this rank returns early.
  PMPI_Type_size(recvtype, &tsize);
  std::size_t total = 0;
  for (int i = 0; i < size; ++i) total += static_cast<std::size_t>(recvcounts[i]) * static_cast<std::size_t>(tsize);
  const std::int64_t site = call_site(comm);
  const auto* entry = plan_entry(priority::Op::alltoallv, comm, size > 0 ? total / static_cast<std::size_t>(size) : 0, site);
  // The key has no size (class 0, the same everywhere); the plan entry only votes.
  const Decision d = decide(comm, priority::Op::alltoallv, 0, entry, site);
  learn::SiteLearning* ls = learning_site(d, site);
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  for (int i = 0; i < size; ++i)
    count_received(d, rank, i, static_cast<std::uint64_t>(recvcounts[i]) * static_cast<std::uint64_t>(tsize));
  if (entry) st.count_planned();
  if (d.path == adapt::Path::blocking) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = plain(st, d, blocking);
    if (rc == MPI_SUCCESS) observe_blocks(d, ls, recvbuf, recvcounts, rdispls, size, recvtype, util::now_ns() - t0);
    return rc;
  }
  // Each rank finds its own entry by its own receive size, so the ranks of a node can disagree
  // on it: call_order takes turns only in the agreed order (IS-like class S hung when each rank
  // followed its own entry).  The key holds every size of the communicator's Alltoallv calls,
  // so the agreed order serves all of them.
  const CallOrder o = call_order(d, entry, ls);
  return exchange(st, d, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                  recvtype, comm, total >= rt.config().min_bytes, o.order, o.per_node);
}

namespace {

struct BcastShape {
  int segments = 1;
  int chains = 0;  // 0 = binomial
};

/// Segments and tree of a replayed Bcast: the plan's, else the settings', else the LogGP
/// model's choice (priority/cost_model.hpp, default parameters).  Every input is the same on every
/// rank (plan file and call site, environment, communicator size, byte count), so every rank
/// builds the same messages.
BcastShape bcast_shape(const config::Config& cfg, const priority::PlanEntry* entry, int size, std::size_t bytes) {
  BcastShape out;
  // The LogGP model decides only what neither the plan nor a setting fixes.
  std::optional<priority::BcastChoice> model;
  auto modelled = [&]() -> const priority::BcastChoice& {
    if (!model) model = priority::choose_bcast(priority::LogGP{}, size, bytes, priority::BcastLimits{});
    return *model;
  };
  if (entry && entry->segments > 0) out.segments = entry->segments;
  else if (cfg.bcast_segments > 0) out.segments = cfg.bcast_segments;
  else out.segments = modelled().segments;
  if (entry) out.chains = entry->tree.kind == priority::TreeKind::chains ? entry->tree.chains : 0;
  else if (cfg.bcast_chains >= 0) out.chains = cfg.bcast_chains;
  else out.chains = modelled().shape.kind == priority::TreeKind::chains ? modelled().shape.chains : 0;
  return out;
}

}  // namespace

int bcast(Runtime& rt, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  OpStats& st = rt.stats().bcast;
  auto blocking = [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); };
  if (learn::guarded()) {
    int me = 0;
    PMPI_Comm_rank(comm, &me);
    release_guarded(buffer, static_cast<std::size_t>(std::max(count, 0)), datatype, me == root);
  }
  if (const char* why = shared_exclusion(buffer, comm)) return plain(st, why, blocking);
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  const TypeInfo ti = datatype::info(datatype);
  const std::size_t bytes = static_cast<std::size_t>(count) * ti.size;
  if (bytes == 0) return plain(st, "empty", blocking);
  if (bytes < rt.config().min_bytes) return plain(st, "small", blocking);
  if (bytes > INT_MAX) return plain(st, "large_block", blocking);
  const std::int64_t site = call_site(comm);
  const auto* entry = plan_entry(priority::Op::bcast, comm, bytes, site);
  if (entry) st.count_planned();
  const Decision d = decide(comm, priority::Op::bcast, bytes, entry, site);
  learn::SiteLearning* ls = learning_site(d, site);
  // Whatever the tree, the data comes from the root: counted by where the root is.
  count_received(d, rank, root, bytes);
  int size = 1;
  PMPI_Comm_size(comm, &size);
  // Segment count and tree change the messages: they come from the plan entry every rank agreed
  // on (decide.hpp) or from the settings, never from anything rank-local.  A site that learns
  // keeps them: a learned plan of it is written with them (TNBC_PLAN_OUT).
  auto shape_of_call = [&] {
    const BcastShape shape = bcast_shape(rt.config(), d.shape, size, bytes);
    if (ls != nullptr) ls->bcast_segments = shape.segments, ls->bcast_chains = shape.chains, ls->total_bytes = bytes;
    return shape;
  };
  if (d.path == adapt::Path::blocking) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = plain(st, d, blocking);
    if (rc == MPI_SUCCESS && d.observe && ls != nullptr) shape_of_call();
    // The root sends its buffer: only the others have something to read.
    if (rc == MPI_SUCCESS && rank != root && d.observe && ls != nullptr && ti.contiguous) {
      const auto units = trace::bcast_units(bytes, static_cast<std::size_t>(rt.config().trace_bcast_units),
                                            static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
      learn::observe(d.key->learning, *ls, buffer, units, util::now_ns() - t0,
                     units.empty() ? 0 : bytes / units.size());
    }
    return rc;
  }
  const BcastShape shape = shape_of_call();
  const int segments = shape.segments, chains = shape.chains;
  // The segment order may be this call's own (it only says when segments are posted), if it
  // orders as many segments as there are, else the agreed entry's, else the order learned for
  // the site, or for the key when nobody else calls from this rank's site (a Bcast root whose
  // call the compiler gave a copy of its own); the same on every rank.
  auto orders_all = [&](const priority::PlanEntry* e) {
    return e != nullptr && e->order.size() == static_cast<std::size_t>(segments);
  };
  const priority::PlanEntry* ordered = orders_all(entry) ? entry : orders_all(d.shape) ? d.shape : nullptr;
  const std::vector<int> order =
      ordered ? as_ints(ordered->order) : ls ? as_ints(learn::learned_segments(d.key->learning, ls, segments)) : std::vector<int>{};
  if (ordered == nullptr && !order.empty()) ++d.key->learning.applied;

  auto [lo, len] = span_of(buffer, 0, static_cast<std::size_t>(count), ti);
  Engine::instance().complete_overlapping(lo, len);
  bool early = false;
  const char* in_place = rank != root ? receive_in_place(lo, len) : nullptr;
  const char* why_direct = !ti.contiguous ? "datatype" : in_place ? in_place : "no_full_page";
  d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
  if (ti.contiguous) {
    const Engine::Result r =
        Engine::instance().bcast(buffer, bytes, root, comm, segments, chains, order, in_place == nullptr, d.costs);
    early = r.early;
    if (r.why != nullptr) why_direct = r.why;
  } else {
    std::vector<char> stage(bytes);
    int pos = 0;
    if (rank == root) PMPI_Pack(buffer, count, datatype, stage.data(), static_cast<int>(bytes), &pos, comm);
    Engine::instance().bcast(stage.data(), bytes, root, comm, segments, chains, order, false, d.costs);
    if (rank != root) PMPI_Unpack(stage.data(), static_cast<int>(bytes), &pos, buffer, count, datatype, comm);
  }
  done(d);
  if (early) st.count_early_return();
  else st.count_fallback(why_direct);
  return MPI_SUCCESS;
}

void release_range(const void* p, std::size_t n, bool touch) {
  if (!g_running) return;
  engine::ReplayGuard::instance().wait_range(p, n);
  if (p == nullptr && n == SIZE_MAX) learn::drain();
  else learn::release(p, n, touch);
}

void drain() {
  Engine::instance().drain();
  learn::drain();
}

}  // namespace tnbc::shim::replay
