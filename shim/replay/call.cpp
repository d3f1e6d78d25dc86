// One driver for the three collectives of replay mode, and the state it keeps (call.hpp).
#include "call.hpp"

#include <algorithm>
#include <optional>

#include "shim/datatype.hpp"
#include "shim/io_interpose.hpp"
#include "shim/log.hpp"
#include "shim/mapping.hpp"
#include "shim/observe/callsite.hpp"
#include "shim/observe/page_guard.hpp"
#include "shim/requests.hpp"
#include "util/file.hpp"

namespace tnbc::shim::replay {
namespace {

bool g_running = false;

// The plan (TNBC_PLAN) and the call sites seen, to look plan entries up by call site and to
// break the statistics down by call site (TNBC_STATS).
std::optional<priority::Plan> g_plan;
observe::CallSiteTable g_sites{1};  // the statistics show the innermost frame's function only
bool g_site_stats = false;  // TNBC_STATS is set: capture every call's site

}  // namespace

bool running() { return g_running; }
void set_running(bool on) { g_running = on; }
const priority::Plan* plan() { return g_plan ? &*g_plan : nullptr; }
void set_site_statistics(bool on) { g_site_stats = on; }
std::string site_key(std::int64_t site) { return g_sites.key(static_cast<std::uint32_t>(site)); }

adapt::SiteName site_name(std::int64_t site) {
  const observe::Frame f = g_sites.innermost(static_cast<std::uint32_t>(site));
  return {site_key(site), f.symbol, f.module};
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
void observe_blocks(const adapt::Decision& d, learn::SiteLearning* ls, void* recvbuf, const int counts[],
                    const int displs[], int size, MPI_Datatype recvtype, std::uint64_t tcomm_ns) {
  if (!d.observe || ls == nullptr) return;
  const datatype::TypeInfo ti = datatype::info(recvtype);
  if (!ti.valid || !ti.contiguous || ti.lb != 0) return;
  std::vector<observe::SubRange> subs(static_cast<std::size_t>(size));
  std::uint64_t bytes = 0;
  std::size_t end = 0;  // of the bytes the blocks occupy
  for (int i = 0; i < size; ++i) {
    if (counts[i] < 0 || displs[i] < 0) return;
    subs[static_cast<std::size_t>(i)] = {static_cast<std::size_t>(displs[i]) * ti.size,
                                         static_cast<std::size_t>(counts[i]) * ti.size};
    bytes += subs[static_cast<std::size_t>(i)].length;
    end = std::max(end, subs[static_cast<std::size_t>(i)].offset + subs[static_cast<std::size_t>(i)].length);
  }
  // Guarded pages under a pending request of the program would stop MPI's own progress.
  if (requests::overlaps(recvbuf, end)) return;
  learn::observe(d.key->learning, *ls, recvbuf, subs, tcomm_ns, size > 0 ? bytes / static_cast<std::uint64_t>(size) : 0);
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

/// Why this rank must receive [p, p + n) in place rather than return early, or nullptr: the
/// kernel may use it behind our back (io_uring), its pages must stay where they are (shared,
/// locked, hugetlb or device memory: mapping.hpp), or a pending request of the program holds
/// bytes of them (requests.hpp).  The fallback reason of the statistics.
const char* receive_in_place(const void* p, std::size_t n) {
  if (io_uring_in_use()) return "io_uring";
  if (n != 0 && !mapping::replaceable(p, n)) return "mapping";
  if (requests::overlaps(p, n)) return "pending_request";
  return nullptr;
}

namespace {

/// This call's site (an index of g_sites), or -1 when neither a plan, nor the statistics, nor
/// learning on `comm` need it (capturing the stack costs microseconds; learning is on by
/// default, and a communicator within one node, whose calls all run blocking, learns nothing).
/// Must be called on the application's call chain, from the collective's handler.
std::int64_t call_site(MPI_Comm comm) {
  const bool wanted = g_plan || g_site_stats || (learn::wants_sites() && adapt::measured(comm));
  return wanted ? static_cast<std::int64_t>(g_sites.capture()) : -1;
}

/// The learning of this call's site (learn.hpp), or nullptr: for an early call (which may use
/// a learned order) and for a blocking call designated for observation.  A site is only known to
/// learning once one of these reaches it (a communicator within one node never learns).
learn::SiteLearning* learning_site(const adapt::Decision& d, std::int64_t site) {
  if (site < 0 || !learn::enabled() || (d.path == adapt::Path::blocking && !d.observe)) return nullptr;
  return learn::site_of(d.key->learning, site, g_sites.key(static_cast<std::uint32_t>(site)));
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

/// The reasons every rank shares for running the plain call (MPI_IN_PLACE is given by all ranks
/// or none; a communicator is an inter-communicator for all), or nullptr.
const char* shared_exclusion(const void* sendbuf, MPI_Comm comm) {
  if (!g_running) return "engine_off";
  if (sendbuf == MPI_IN_PLACE) return "in_place";
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return inter ? "intercomm" : nullptr;
}

/// Step 3: where the call was made, its plan entry (counted in `st`), its decision and learning.
CallStart begin(OpStats& st, MPI_Comm comm, priority::Op op, std::uint64_t plan_bytes, std::uint64_t key_bytes) {
  CallStart c;
  c.site = call_site(comm);
  c.entry = plan_entry(op, comm, plan_bytes, c.site);
  if (c.entry) st.count_planned();
  c.d = adapt::for_call(comm, op, key_bytes, c.entry, c.site);
  c.ls = learning_site(c.d, c.site);
  return c;
}

/// MPI's blocking call on the path a decision chose, with the MPI algorithm its key chose
/// (adapt/algorithm.hpp); its time (after the drain, which is charged to the early calls it
/// waited for) is the blocking cost of the key.
int mpi_blocking(Collective& c, const adapt::Decision& d) {
  const int rc = plain(c.stats(), d.why, [&] {
    const adapt::BlockingRun run = adapt::before_blocking(d, c.comm());
    // The thread's CPU clock is a system call (about a microsecond here): read only where the
    // trial uses it.
    const bool cpu = run.wants_cpu;
    const std::uint64_t t0 = util::now_ns(), c0 = cpu ? util::thread_cpu_ns() : 0;
    const int r = c.blocking();
    const std::uint64_t ns = util::now_ns() - t0;
    adapt::after_blocking(d, run, ns, cpu ? util::thread_cpu_ns() - c0 : adapt::kCpuUnmeasured, c.comm());
    d.costs->blocking_ns.fetch_add(ns, std::memory_order_relaxed);
    return r;
  });
  d.costs->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  adapt::done(d, c.comm());
  return rc;
}

/// A blocking call that the engine's exchange runs (Decision::engine), measured as a blocking
/// call of the key by its time and the CPU of the calling and the progress thread
/// (adapt/trial.hpp; another op in flight shares the progress thread's).
int engine_blocking(Collective& c, const CallStart& s) {
  const adapt::Decision& d = s.d;
  const adapt::BlockingRun run = adapt::before_blocking(d, c.comm());
  engine::Engine& e = engine::Engine::instance();
  const bool cpu = run.wants_cpu;
  const std::uint64_t t0 = util::now_ns(), c0 = cpu ? util::thread_cpu_ns() : 0, p0 = e.progress_cpu_ns();
  const int rc = c.exchange(s, false);
  const std::uint64_t ns = util::now_ns() - t0;
  adapt::after_blocking(d, run, ns, cpu ? util::thread_cpu_ns() - c0 + (e.progress_cpu_ns() - p0) : adapt::kCpuUnmeasured,
                         c.comm());
  d.costs->blocking_calls.fetch_add(1, std::memory_order_relaxed);
  d.costs->blocking_ns.fetch_add(ns, std::memory_order_relaxed);
  d.costs->engine_blocking_calls.fetch_add(1, std::memory_order_relaxed);
  return rc;
}

}  // namespace

int run_call(Collective& c) {
  OpStats& st = c.stats();
  auto blocking = [&c] { return c.blocking(); };
  if (learn::guarded()) c.release_guarded();
  // Decided from facts every rank shares.
  if (const char* why = shared_exclusion(c.in_place_buffer(), c.comm())) return plain(st, why, blocking);
  if (const char* why = c.exclusion()) return plain(st, why, blocking);
  const CallStart s = begin(st, c.comm(), c.op(), c.plan_bytes(), c.key_bytes());
  c.count_received(s.d);
  if (s.d.path == adapt::Path::early) return c.exchange(s, true);
  const std::uint64_t t0 = util::now_ns();
  const int rc = s.d.engine ? engine_blocking(c, s) : mpi_blocking(c, s.d);
  if (rc == MPI_SUCCESS) c.observe(s, util::now_ns() - t0);
  return rc;
}

namespace {

/// The receive order of an early Alltoall(v) call.  Per-node turns go only in an order every
/// rank agreed on (a rank that does not take part in its node's turns stops the ranks after it
/// for good): the plan entry of the key's first call (decide.hpp, Key::shape), else the order
/// learned for the key when measurements chose turns.  Without turns, the order of this call's
/// own entry, or else the one learned for its site, only says when this rank posts its
/// messages: safe whatever the others do.
CallOrder exchange_order(const CallStart& s) {
  const adapt::Decision& d = s.d;
  const bool planned_turns = d.shape != nullptr && d.shape->per_node;
  const priority::PlanEntry* ordered = planned_turns ? d.shape
                                       : d.turns     ? d.turn_order
                                       : s.entry     ? s.entry
                                                     : learn::learned(s.ls);
  const bool learned = ordered != nullptr && !planned_turns && (d.turns || s.entry == nullptr);
  if (learned) ++d.key->learning.applied;
  // Where the order came from, for the statistics (tnbc-stats: "early order").
  if (ordered != nullptr) (learned ? d.costs->order_learned_calls : d.costs->order_plan_calls).fetch_add(1, std::memory_order_relaxed);
  if (planned_turns || d.turns) d.costs->turn_calls.fetch_add(1, std::memory_order_relaxed);
  // The window is a sender's own (no receiver depends on it): the planned entry's, or the one
  // learned with the turns' order (learn::KeyLearning::turn_window).
  return {ordered ? as_ints(ordered->order) : std::vector<int>{}, planned_turns || d.turns,
          planned_turns ? d.shape->window : d.turns ? d.key->learning.turn_window : 0};
}

/// The segment order of a Bcast: this call's own entry's (it only says when segments are
/// posted), if it orders as many segments as there are, else the agreed entry's, else the order
/// learned for the site, or for the key when nobody else calls from this rank's site (a Bcast
/// root whose call the compiler gave a copy of its own); the same on every rank.
CallOrder segment_order(const CallStart& s, int segments) {
  const adapt::Decision& d = s.d;
  auto orders_all = [&](const priority::PlanEntry* e) {
    return e != nullptr && e->order.size() == static_cast<std::size_t>(segments);
  };
  const priority::PlanEntry* ordered = orders_all(s.entry) ? s.entry : orders_all(d.shape) ? d.shape : nullptr;
  std::vector<int> order = ordered ? as_ints(ordered->order)
                           : s.ls  ? as_ints(learn::learned_segments(d.key->learning, s.ls, segments))
                                   : std::vector<int>{};
  // Where an early call's order came from (tnbc-stats: "early order"; learning's `applied`).  A
  // blocking call the engine runs takes the same order but counts in neither.
  if (!d.engine && ordered == nullptr && !order.empty()) ++d.key->learning.applied;
  if (!d.engine && (ordered != nullptr || !order.empty()))
    (ordered != nullptr ? d.costs->order_plan_calls : d.costs->order_learned_calls).fetch_add(1, std::memory_order_relaxed);
  return {std::move(order), false, 0};
}

}  // namespace

CallOrder call_order(const CallStart& s, int segments) {
  return s.d.key->op_kind == priority::Op::bcast ? segment_order(s, segments) : exchange_order(s);
}

}  // namespace tnbc::shim::replay
