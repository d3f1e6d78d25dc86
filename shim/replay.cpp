#include "replay.hpp"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include "trace/callsite.hpp"
#include "util/clock.hpp"
#include "util/file.hpp"
#include "datatype.hpp"
#include "fence.hpp"
#include "io_interpose.hpp"
#include "log.hpp"
#include "mapping.hpp"
#include "priority/cost_model.hpp"
#include "priority/observations.hpp"
#include "priority/plan.hpp"
#include "trace/replay_guard.hpp"
#include "stats.hpp"

namespace tnbc::shim::replay {
namespace {

bool g_running = false;

// The plan (TNBC_PLAN) and the call sites seen, to look plan entries up by call site.
std::optional<priority::Plan> g_plan;
trace::CallSiteTable g_sites;

// ---- Deciding per call (adapt.hpp) ------------------------------------------------------------

/// One (communicator, operation, size class): its decision state and what its calls cost.
struct Key {
  Key(const adapt::Policy& p, bool decide_first) : state(p, decide_first) {}
  adapt::KeyState state;
  adapt::Costs costs;
  std::string_view op;
  std::uint32_t size_class = 0;
  std::uint64_t comm_id = 0;
  int comm_size = 0;
  bool one_node = false;
  std::uint64_t last_entry_ns = 0;  // entry of the key's previous call (0: none yet)
  adapt::Path last_path = adapt::Path::blocking;
};

/// Every key ever made.  Never shrinks: operations in flight and guard slots point at the
/// costs inside, and a deque keeps its elements where they are when it grows.
std::mutex g_keys_mutex;
std::deque<Key> g_keys;
adapt::Policy g_policy;
bool g_adapt = true;      // TNBC_ADAPT is not off
bool g_one_node = true;   // ... and a communicator on one node runs blocking without measuring

/// Per user communicator (an attribute, so a dup or a split starts afresh and a freed
/// communicator's handle, when MPI reuses it, does not inherit its decisions).
struct CommState {
  std::uint64_t id = 0;
  bool one_node = false;
  std::map<std::uint32_t, Key*> keys;  // (operation << 8 | size class) -> key
};
int g_comm_keyval = MPI_KEYVAL_INVALID;
std::uint64_t g_next_comm_id = 0;
std::vector<char> g_world_on_node;  // rank r of MPI_COMM_WORLD shares this rank's node
MPI_Group g_world_group = MPI_GROUP_NULL;

/// A key that runs blocking without measuring: its communicator lies within one node and
/// TNBC_ADAPT=on (not measure).
bool one_node_rule(const Key& k) { return k.one_node && g_one_node; }

int delete_comm_state(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommState*>(value);
  return MPI_SUCCESS;
}

/// The MPI_COMM_WORLD rank of each member of `g` (MPI_UNDEFINED for a process outside it).
std::vector<int> world_ranks(MPI_Group g) {
  int n = 0;
  PMPI_Group_size(g, &n);
  std::vector<int> local(static_cast<std::size_t>(n)), in_world(static_cast<std::size_t>(n));
  std::iota(local.begin(), local.end(), 0);
  PMPI_Group_translate_ranks(g, n, local.data(), g_world_group, in_world.data());
  return in_world;
}

/// Which ranks of MPI_COMM_WORLD share this rank's node (collective over MPI_COMM_WORLD).
void learn_node() {
  int world = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  g_world_on_node.assign(static_cast<std::size_t>(world), 0);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  MPI_Comm node = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return;  // nobody shares a node: every communicator spans nodes, and is measured
  MPI_Group g = MPI_GROUP_NULL;
  PMPI_Comm_group(node, &g);
  for (int r : world_ranks(g))
    if (r >= 0 && r < world) g_world_on_node[static_cast<std::size_t>(r)] = 1;
  PMPI_Group_free(&g);
  PMPI_Comm_free(&node);
}

/// True when every rank of `comm` shares this rank's node.  Local (no message), and the same
/// answer on every rank of `comm`: if all of them share one rank's node, they share each
/// other's.
bool on_one_node(MPI_Comm comm) {
  if (g_world_group == MPI_GROUP_NULL) return false;
  MPI_Group g = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &g);
  const std::vector<int> in_world = world_ranks(g);
  PMPI_Group_free(&g);
  return std::all_of(in_world.begin(), in_world.end(), [](int r) {
    return r >= 0 && static_cast<std::size_t>(r) < g_world_on_node.size() && g_world_on_node[static_cast<std::size_t>(r)];
  });
}

CommState& comm_state(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, g_comm_keyval, &value, &flag);
  if (flag) return *static_cast<CommState*>(value);
  auto* cs = new CommState;
  cs->one_node = on_one_node(comm);
  {
    std::lock_guard lock(g_keys_mutex);
    cs->id = g_next_comm_id++;
  }
  PMPI_Comm_set_attr(comm, g_comm_keyval, cs);
  return *cs;
}

/// The path of one call and the key it belongs to.  `why` names the reason of a blocking path
/// (a fallback reason of the statistics).
struct Decision {
  adapt::Path path = adapt::Path::early;
  Key* key = nullptr;
  const char* why = nullptr;
};

/// Decides the path of this call.  Called by every rank of `comm` for the same collective,
/// after the checks every rank shares and before anything rank-local: at a decision point it
/// is collective over `comm` (one MPI_Allreduce of five doubles).  `bytes` must be the same
/// on every rank (0 for Alltoallv, whose sizes differ).  `entry`: this rank's plan entry for
/// the call, whose "return" is this rank's vote (ranks may find different entries: the votes
/// are summed, and "blocking" from any rank wins).
Decision decide(MPI_Comm comm, priority::Op op, std::uint64_t bytes, const priority::PlanEntry* entry) {
  CommState& cs = comm_state(comm);
  const std::uint32_t cls = adapt::size_class(bytes);
  const std::uint32_t id = static_cast<std::uint32_t>(op) << 8 | cls;
  Key*& key = cs.keys[id];
  if (key == nullptr) {
    std::lock_guard lock(g_keys_mutex);
    // With a plan, the first call of a key asks every rank's plan before taking a path.
    key = &g_keys.emplace_back(g_policy, g_plan.has_value());
    key->op = priority::to_string(op);
    key->size_class = cls;
    key->comm_id = cs.id;
    PMPI_Comm_size(comm, &key->comm_size);
    key->one_node = cs.one_node;
  }
  Decision d{adapt::Path::early, key, nullptr};
  if (!g_adapt) return d;
  if (one_node_rule(*key)) return {adapt::Path::blocking, key, "one_node"};
  // The previous call's interval ends here: it is what that call's path cost the program.
  const std::uint64_t entered = util::now_ns();
  if (key->last_entry_ns != 0) key->costs.add_interval(key->last_path, entered - key->last_entry_ns);
  key->last_entry_ns = entered;
  if (key->state.decision_due()) {
    double mine[adapt::Vote::kFields], sum[adapt::Vote::kFields];
    adapt::Vote vote = key->state.measure(key->costs);
    if (entry && entry->ret == priority::Return::blocking) vote.force_blocking = 1;
    if (entry && entry->ret == priority::Return::early) vote.force_early = 1;
    vote.to_array(mine);
    PMPI_Allreduce(mine, sum, adapt::Vote::kFields, MPI_DOUBLE, MPI_SUM, comm);
    const auto summed = adapt::Vote::from_array(sum);
    const adapt::Path p = key->state.decide(summed, key->costs);
    log::debug("{} of {} bytes on communicator {}: mean interval after an early call {:.0f} us, "
               "after a blocking call {:.0f} us (sums over {:.0f} ranks): {}",
               key->op, bytes, cs.id, summed.early_ns / 1e3, summed.blocking_ns / 1e3,
               summed.ranks_measured, p == adapt::Path::early ? "early" : "blocking");
  }
  d.path = key->state.path();
  key->last_path = d.path;
  if (d.path == adapt::Path::blocking)
    d.why = key->state.forced() ? "plan" : key->state.probing() ? "adapt_probe" : "adapt";
  return d;
}

/// Counts the call just made on the decision's path.
void done(const Decision& d) {
  if (g_adapt && d.key != nullptr && !one_node_rule(*d.key)) d.key->state.advance(d.key->costs);
}


/// TNBC_MAX_MEMORY=auto: a quarter of this rank's share of the node's memory, or of what the
/// address-space or data limit (ulimit -v / -d) leaves free now, whichever is smaller.
std::size_t auto_memory_bound() {
  const auto ranks_here = static_cast<std::uint64_t>(
      std::max<std::ptrdiff_t>(1, std::count(g_world_on_node.begin(), g_world_on_node.end(), 1)));
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

/// The plan entry for this call (captures the caller's stack), or nullptr.  Must be called on
/// the application's call chain, from the collective's handler.
const priority::PlanEntry* plan_entry(priority::Op op, MPI_Comm comm, std::uint64_t message_bytes) {
  if (!g_plan) return nullptr;
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const std::string key = g_sites.key(g_sites.capture());
  return g_plan->find(key, op, size, message_bytes);
}

/// A plan order as the engine takes it.
std::vector<int> as_ints(const std::vector<std::uint32_t>& order) {
  return {order.begin(), order.end()};
}

using datatype::span_of;
using datatype::TypeInfo;
TypeInfo type_info(MPI_Datatype t) { return datatype::info(t); }

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
    d.key->costs.blocking_ns.fetch_add(util::now_ns() - t0, std::memory_order_relaxed);
    return r;
  });
  d.key->costs.blocking_calls.fetch_add(1, std::memory_order_relaxed);
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
  const TypeInfo sti = type_info(sendtype), rti = type_info(recvtype);
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
  // Shared, locked, hugetlb or device memory: its pages must stay where they are (mapping.hpp).
  if (allow_early && rhi > rlo && !mapping::replaceable(reinterpret_cast<void*>(rlo), rhi - rlo)) {
    allow_early = false;
    why_direct = "mapping";
  }
  if (allow_early && io_uring_in_use()) {  // the kernel may read the buffer behind our back
    allow_early = false;
    why_direct = "io_uring";
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
  for (std::size_t i = 0; i < n; ++i)
    if (sb[i] > INT_MAX || rb[i] > INT_MAX) return plain(st, "large_block", [&] {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
      });

  d.key->costs.early_calls.fetch_add(1, std::memory_order_relaxed);
  const Engine::Result r = Engine::instance().alltoallv(sptr, sb, sd, rptr, rb, rd, comm, recv_order, per_node,
                                                       allow_early, &d.key->costs);
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

/// The statistics of every key, as the "keys" array of docs/config.md.
std::string keys_json() {
  std::lock_guard lock(g_keys_mutex);
  std::string out = fmt::format(R"({{"enabled":{},"keys":[)", g_adapt ? "true" : "false");
  bool first = true;
  for (const Key& k : g_keys) {
    const auto& c = k.costs;
    auto us = [](std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
    auto mean_us = [](std::uint64_t ns, std::uint64_t n) { return n ? static_cast<double>(ns) / 1000.0 / n : 0.0; };
    const char* path = g_adapt && one_node_rule(k) ? "blocking"
                       : !g_adapt || !k.state.decided() ? "undecided"
                       : k.state.chosen() == adapt::Path::early ? "early" : "blocking";
    out += fmt::format(
        R"({}{{"comm":{},"comm_size":{},"op":"{}","size_class":{},"one_node":{},"path":"{}",)"
        R"("decisions":{},"switches":{},"early_calls":{},"blocking_calls":{},"init_us":{:.3f},)"
        R"("setup_us":{:.3f},"send_copy_us":{:.3f},"inside_wait_us":{:.3f},"publish_us":{:.3f},)"
        R"("wait_us":{:.3f},"progress_cpu_us":{:.3f},"blocking_us":{:.3f},)"
        R"("early_interval_us":{:.3f},"blocking_interval_us":{:.3f}}})",
        first ? "" : ",", k.comm_id, k.comm_size, k.op, k.size_class, k.one_node ? "true" : "false", path,
        k.state.decisions(), k.state.switches(), c.early_calls.load(), c.blocking_calls.load(), us(c.init_ns.load()),
        us(c.setup_ns.load()), us(c.send_copy_ns.load()), us(c.inside_wait_ns.load()), us(c.publish_ns.load()),
        us(c.wait_ns.load()), us(c.progress_cpu_ns.load()), us(c.blocking_ns.load()),
        mean_us(c.early_interval_ns.load(), c.early_intervals.load()),
        mean_us(c.blocking_interval_ns.load(), c.blocking_intervals.load()));
    first = false;
  }
  return out + "]}";
}

}  // namespace

bool start(Runtime& rt) {
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    log::warn_rank0("MPI gave thread level {} (the engine needs MPI_THREAD_MULTIPLE): collectives "
                    "run blocking", provided);
    return false;
  }
  EngineOptions o;
  o.progress_sleep_us = static_cast<unsigned>(rt.config().progress_sleep_us);
  o.progress_max_sleep_us = static_cast<unsigned>(rt.config().progress_max_sleep_us);
  g_adapt = rt.config().adapt != config::Adapt::off;
  g_policy.warmup_calls = static_cast<std::uint32_t>(rt.config().adapt_warmup);
  g_one_node = rt.config().adapt == config::Adapt::on;
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm_state, &g_comm_keyval, nullptr) != MPI_SUCCESS) {
    log::warn_rank0("cannot create a communicator attribute: collectives run blocking");
    return false;
  }
  learn_node();
  o.chunk_bytes = rt.config().chunk_bytes;
  o.chunk_window = rt.config().chunk_window;
  o.max_memory_bytes = rt.config().max_memory != 0 ? rt.config().max_memory : auto_memory_bound();
  log::debug("engine memory for calls in flight: at most {} bytes", o.max_memory_bytes);
  load_plan(rt.config().plan);
  // libucm patches munmap & co. so that our interposers never see them: take its events too.
  subscribe_memory_events();
  if (auto err = Engine::instance().start(o)) {
    log::warn_rank0("engine not started ({}): collectives run blocking", *err);
    return false;
  }
  g_running = true;
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
  Engine::instance().stop();
  g_running = false;
  rt.stats().faults = trace::ReplayGuard::instance().faults();
  rt.stats().fault_wait_ns = trace::ReplayGuard::instance().fault_wait_ns();
  rt.stats().init_ns = Engine::instance().init_ns();
  rt.stats().gated_sends = Engine::instance().gated_sends();
  rt.stats().turn_wait_ns = Engine::instance().turn_wait_ns();
  rt.stats().progress_cpu_ns = Engine::instance().progress_cpu_ns();
  rt.stats().progress_rounds = Engine::instance().progress_rounds();
  rt.stats().fence_wait_ns = Engine::instance().fence_wait_ns();
  rt.stats().adapt_json = keys_json();
}

int alltoall(Runtime& rt, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  OpStats& st = rt.stats().alltoall;
  auto blocking = [&] {
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  };
  // Decided from facts every rank shares; Alltoall's message size is the same everywhere.
  if (const char* why = shared_exclusion(sendbuf, comm)) return plain(st, why, blocking);
  int size = 0, tsize = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Type_size(recvtype, &tsize);
  const std::size_t block = static_cast<std::size_t>(recvcount) * static_cast<std::size_t>(tsize);
  if (block == 0) return plain(st, "empty", blocking);
  if (block * static_cast<std::size_t>(size) < rt.config().min_bytes) return plain(st, "small", blocking);
  if (block > INT_MAX || static_cast<long>(recvcount) * size > INT_MAX)
    return plain(st, "large_block", blocking);
  const auto* entry = plan_entry(priority::Op::alltoall, comm, block);
  const Decision d = decide(comm, priority::Op::alltoall, block * static_cast<std::size_t>(size), entry);
  if (entry) st.count_planned();
  if (d.path == adapt::Path::blocking) return plain(st, d, blocking);
  std::vector<int> scounts(static_cast<std::size_t>(size), sendcount), sdispls(static_cast<std::size_t>(size));
  std::vector<int> rcounts(static_cast<std::size_t>(size), recvcount), rdispls(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) sdispls[i] = i * sendcount, rdispls[i] = i * recvcount;
  const std::vector<int> order = entry ? as_ints(entry->order) : std::vector<int>{};
  return exchange(st, d, sendbuf, scounts.data(), sdispls.data(), sendtype, recvbuf, rcounts.data(),
                  rdispls.data(), recvtype, comm, true, order, entry && entry->per_node);
}

int alltoallv(Runtime& rt, const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
              MPI_Datatype recvtype, MPI_Comm comm) {
  OpStats& st = rt.stats().alltoallv;
  auto blocking = [&] {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  };
  if (const char* why = shared_exclusion(sendbuf, comm)) return plain(st, why, blocking);
  int size = 0, tsize = 0;
  // Sizes differ between ranks: every rank runs the engine's exchange, and only the local size
  // decides whether this rank returns early.
  PMPI_Comm_size(comm, &size);
  PMPI_Type_size(recvtype, &tsize);
  std::size_t total = 0;
  for (int i = 0; i < size; ++i) total += static_cast<std::size_t>(recvcounts[i]) * static_cast<std::size_t>(tsize);
  const auto* entry = plan_entry(priority::Op::alltoallv, comm, size > 0 ? total / static_cast<std::size_t>(size) : 0);
  // The key has no size (class 0, the same everywhere); the plan entry only votes.
  const Decision d = decide(comm, priority::Op::alltoallv, 0, entry);
  if (entry) st.count_planned();
  if (d.path == adapt::Path::blocking) return plain(st, d, blocking);
  const std::vector<int> order = entry ? as_ints(entry->order) : std::vector<int>{};
  // No per-node priority for Alltoallv: the plan entry is found by this rank's own receive size,
  // so ranks of one node can disagree on it, and a rank that does not take part in its node's
  // turns stops the ranks after it for good (measured: IS-like class S hung).  The order alone
  // is safe: it changes when messages are posted, not which messages there are.
  return exchange(st, d, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                  recvtype, comm, total >= rt.config().min_bytes, order, false);
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
  if (const char* why = shared_exclusion(buffer, comm)) return plain(st, why, blocking);
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  const TypeInfo ti = type_info(datatype);
  const std::size_t bytes = static_cast<std::size_t>(count) * ti.size;
  if (bytes == 0) return plain(st, "empty", blocking);
  if (bytes < rt.config().min_bytes) return plain(st, "small", blocking);
  // Segment count and tree change the messages: they come from the plan (the same file and call
  // site on every rank) or from the settings, never from anything rank-local.
  const auto* entry = plan_entry(priority::Op::bcast, comm, bytes);
  if (entry) st.count_planned();
  int size = 1;
  PMPI_Comm_size(comm, &size);
  const BcastShape shape = bcast_shape(rt.config(), entry, size, bytes);
  const int segments = shape.segments, chains = shape.chains;
  const std::vector<int> order = entry ? as_ints(entry->order) : std::vector<int>{};
  if (bytes / static_cast<std::size_t>(segments) >= INT_MAX || bytes > INT_MAX)
    return plain(st, "large_block", blocking);
  const Decision d = decide(comm, priority::Op::bcast, bytes, entry);
  if (d.path == adapt::Path::blocking) return plain(st, d, blocking);

  auto [lo, len] = span_of(buffer, 0, static_cast<std::size_t>(count), ti);
  Engine::instance().complete_overlapping(lo, len);
  bool early = false;
  // Shared, locked, hugetlb or device memory receives in place (mapping.hpp).
  const bool uring = rank != root && io_uring_in_use();
  const bool in_place = rank != root && (uring || !mapping::replaceable(lo, len));
  const char* why_direct = !ti.contiguous ? "datatype" : uring ? "io_uring" : in_place ? "mapping" : "no_full_page";
  d.key->costs.early_calls.fetch_add(1, std::memory_order_relaxed);
  if (ti.contiguous) {
    const Engine::Result r =
        Engine::instance().bcast(buffer, bytes, root, comm, segments, chains, order, !in_place, &d.key->costs);
    early = r.early;
    if (r.why != nullptr) why_direct = r.why;
  } else {
    std::vector<char> stage(bytes);
    int pos = 0;
    if (rank == root) PMPI_Pack(buffer, count, datatype, stage.data(), static_cast<int>(bytes), &pos, comm);
    Engine::instance().bcast(stage.data(), bytes, root, comm, segments, chains, order, false, &d.key->costs);
    if (rank != root) PMPI_Unpack(stage.data(), static_cast<int>(bytes), &pos, buffer, count, datatype, comm);
  }
  done(d);
  if (early) st.count_early_return();
  else st.count_fallback(why_direct);
  return MPI_SUCCESS;
}

void release_range(const void* p, std::size_t n) {
  if (g_running) trace::ReplayGuard::instance().wait_range(p, n);
}

}  // namespace tnbc::shim::replay
