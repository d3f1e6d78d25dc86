#include "barrier_shim.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <sched.h>
#include <span>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "barrier/barrier.hpp"
#include "shim/comm_attr.hpp"
#include "shim/fence.hpp"
#include "shim/log.hpp"
#include "shim/node.hpp"
#include "barrier/min_numa_dist.hpp"
#include "shim/runtime.hpp"
#include "shim/watchdog.hpp"
#include "shim/shm_segment.hpp"
#include "barrier/topology.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {
namespace {

/// The barrier of one communicator.
struct CommBarrier {
  bool passthrough = true;
  bool built = false;          ///< setup() ran (passthrough stays true where it failed)
  std::uint32_t mpi_calls = 0;  ///< MPI_Barrier calls passed to MPICH before it was built
  bool multi_node = false;
  barrier::Algorithm algorithm = barrier::Algorithm::dissemination;
  barrier::Participant self{barrier::Segment(nullptr, 0), 0, 1, 0, 0, {}};
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm leaders = MPI_COMM_NULL;
  void* base = nullptr;
  std::size_t bytes = 0;
  int leaders_rc = MPI_SUCCESS;
  int root_in_comm = 0;  ///< the node root as a rank of the communicator
  MPI_Comm comm = MPI_COMM_NULL;  ///< the program's communicator (the watchdog names its ranks)
  std::uint32_t told_episode = 0;  ///< the barrier the watchdog last reported (0: none)
  // Before the build, under TNBC_BARRIER_AFTER=auto (rent): every rank holds the same figures.
  double rent_paid_ns = 0;     ///< the latencies of its MPICH barriers so far, as agreed
  std::uint64_t last_ns = 0;   ///< this rank's time in the communicator's previous barrier
  bool buy = false;            ///< the next call builds it
};

struct State {
  int keyval = MPI_KEYVAL_INVALID;
  bool mpich = false;                        // TNBC_BARRIER_ALGO=mpich
  std::optional<barrier::Algorithm> fixed;   // nullopt: auto
  int root = config::kBarrierRootAuto;
  int split = 0;  // TNBC_BARRIER_SPLIT
  int after = -1;  // TNBC_BARRIER_AFTER (-1: auto)
  std::atomic<std::uint64_t> build_ns{0};  // the longest build this rank measured
  std::unique_ptr<barrier::Topology> topology;
  int world_rank = 0;
  std::uint64_t watchdog_ns = 0;  // TNBC_WATCHDOG (0: off)
  std::atomic<bool> stopped{false};
  std::atomic<bool> warned{false};
};
State g_state;

/// The tags of the MPI_Comm_create_group calls that make a barrier's node and leaders
/// communicators, on the program's communicator: near the least MPI_TAG_UB the standard allows
/// (32767), away from the small tags a program's own MPI_Comm_create_group calls use (another
/// thread may make one on the same communicator while MPI_COMM_WORLD's barrier is built at its
/// first MPI_Barrier).  The engine's per-node turns use 0 on its own shadow communicators.
constexpr int kNodeCommTag = 32766;
constexpr int kLeadersCommTag = 32765;

/// One message per process about a failed setup, from the communicator's rank 0.
void warn_setup(int comm_rank, const std::string& what) {
  if (comm_rank != 0 || g_state.warned.exchange(true)) return;
  log::warn("shared-memory barrier unavailable ({}); MPI_Barrier passes through to MPICH", what);
}

void release(CommBarrier* cb, bool call_mpi) {
  if (cb->base) munmap(cb->base, cb->bytes);
  cb->base = nullptr;
  if (call_mpi) {
    if (cb->leaders != MPI_COMM_NULL) PMPI_Comm_free(&cb->leaders);
    if (cb->node != MPI_COMM_NULL) PMPI_Comm_free(&cb->node);
  }
}

int delete_attr(MPI_Comm, int, void* value, void*) {
  auto* cb = static_cast<CommBarrier*>(value);
  // After barrier_stop MPI may be finalising: unmap, but call no MPI.
  release(cb, !g_state.stopped.load());
  delete cb;
  return MPI_SUCCESS;
}

/// Lets MPI act while a rank waits in the shared-memory barrier (barrier::WaitPolicy::progress):
/// MPI's own barrier progresses every pending operation of the process while it waits, and a
/// program may count on it (a peer's MPI_Ssend to a receive this rank posted, a passive-target
/// unlock of this rank's window).  An MPI_Iprobe on MPI_COMM_WORLD runs MPICH's progress engine
/// once and consumes nothing.
void drive_mpi_progress() {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

/// Ranks `node_ranks` of the barrier's node communicator as ranks of the program's `comm`.
void node_to_comm(const CommBarrier& cb, MPI_Comm comm, int n, const int* node_ranks, int* comm_ranks) {
  MPI_Group node_group, comm_group;
  PMPI_Comm_group(cb.node, &node_group);
  PMPI_Comm_group(comm, &comm_group);
  PMPI_Group_translate_ranks(node_group, n, node_ranks, comm_group, comm_ranks);
  PMPI_Group_free(&node_group);
  PMPI_Group_free(&comm_group);
}

/// The watchdog (barrier::WaitPolicy::stalled): a barrier of `context` (its CommBarrier) that
/// has waited TNBC_WATCHDOG seconds says so once, and which ranks it waits for: those of this
/// node that have not entered it (barrier::absent), or, where every one has, another node.
void barrier_stalled(void* context, std::uint64_t waited_ns) {
  auto* cb = static_cast<CommBarrier*>(context);
  const std::uint32_t episode = cb->self.episode;  // the algorithm counted this barrier already
  if (cb->told_episode == episode) return;  // one report per barrier, however many waits it has
  cb->told_episode = episode;
  const std::vector<int> local = barrier::absent(cb->self, episode);
  std::vector<int> missing(local.size(), MPI_UNDEFINED);  // as ranks of the program's communicator
  if (!local.empty()) node_to_comm(*cb, cb->comm, static_cast<int>(local.size()), local.data(), missing.data());
  int size = 0;
  PMPI_Comm_size(cb->comm, &size);
  log::warn("watchdog: MPI_Barrier on a communicator of {} ranks (the shared-memory barrier's call {} on a node "
            "of {} of them) has waited {:.0f} s: {}.  A rank not in it may be stopped, or may not have called "
            "MPI_Barrier on this communicator {}",
            size, episode, cb->self.size, static_cast<double>(waited_ns) / 1e9,
            !missing.empty() ? fmt::format("not yet in it on this node: {}", named_ranks(cb->comm, missing))
            : cb->multi_node ? std::string("every rank of this node is in it; it waits for another node's ranks")
                             : std::string("every rank of this node is in it"),
            kWatchdogHint);
}

/// The members of `comm` on this rank's node, as a communicator of their own (node.hpp);
/// without a node map, MPI_Comm_split_type.
void node_communicator(MPI_Comm comm, MPI_Comm* out) {
  if (node::known()) node::communicator(comm, kNodeCommTag, out);
  else PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, out);
}

/// The node's barrier root: MinNumaDist over the NUMA nodes of the node's ranks, unless fixed.
/// On a machine of one NUMA node every rank is on node 0 and MinNumaDist picks rank 0: no
/// allgather (the same answer on every rank of the node, which share the machine and the
/// agreed settings).  `numa`: space for node_size entries.
int node_root(MPI_Comm node, int node_size, std::vector<int>& numa) {
  const bool fixed_root = g_state.root != config::kBarrierRootAuto && g_state.root < node_size;
  if (fixed_root) return g_state.root;
  if (g_state.topology->node_count() <= 1) return 0;
  int my_numa = std::max(0, g_state.topology->node_of_self(g_state.world_rank));
  PMPI_Allgather(&my_numa, 1, MPI_INT, numa.data(), 1, MPI_INT, node);
  return barrier::min_numa_dist(*g_state.topology, std::span<const int>(numa.data(), static_cast<std::size_t>(node_size)));
}

/// The segment: created and placed by the root, mapped and placed by the others.  Returns this
/// rank's error (empty: none) and in `node_ok` whether every rank of the node mapped it.
std::string map_segment(CommBarrier* cb, int node_rank, int node_size, int root, int& node_ok) {
  cb->bytes = barrier::Segment::bytes(node_size);
  char name[shm::kNameBytes] = {};
  std::string err;
  if (node_size > barrier::kMaxLocalSize) err = "too many ranks on one node";
  else if (node_rank == root) err = shm::create(shm::kBarrier, cb->bytes, name, &cb->base);
  if (node_rank == root && err.empty())
    barrier::Segment(cb->base, node_size).place_global();
  PMPI_Bcast(name, shm::kNameBytes, MPI_CHAR, root, cb->node);
  if (node_rank != root && err.empty()) {
    if (name[0] == '\0') err = "the node root could not create the segment";
    else err = shm::open(name, cb->bytes, &cb->base);
  }
  if (err.empty()) barrier::Segment(cb->base, node_size).place_rank(node_rank, root);
  // Every rank of the node has mapped it (or given up): the name is no longer needed.  Agreed
  // on the node first, so that the name lives only while the node's ranks open it, not while
  // other nodes set up; then on the communicator.
  int ok = err.empty() ? 1 : 0;
  node_ok = 0;
  PMPI_Allreduce(&ok, &node_ok, 1, MPI_INT, MPI_MIN, cb->node);
  if (node_rank == root && name[0] != '\0') shm_unlink(name);
  return err;
}

/// Whether every node of `comm` mapped its segment.  With several nodes one allgather over the
/// communicator makes the outcome common and names each node's root in `leaders`; the roots
/// alone then make their communicator (an MPI_Comm_split of the whole communicator cost about
/// 25 ms more at 2 emulated nodes x 2 ranks).  `all`: space for 2 x size entries.
bool agree_setup(CommBarrier* cb, MPI_Comm comm, int size, int node_ok, bool is_root, std::vector<int>& all,
                 std::vector<int>& leaders) {
  if (!cb->multi_node) return node_ok != 0;
  const int mine[2] = {node_ok, is_root ? 1 : 0};
  PMPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm);
  int all_ok = 1;
  for (int r = 0; r < size; ++r) {
    all_ok = std::min(all_ok, all[2 * static_cast<std::size_t>(r)]);
    if (all[2 * static_cast<std::size_t>(r) + 1]) leaders.push_back(r);
  }
  return all_ok != 0;
}

/// This rank's part in the node's barrier, and the root's rank in `comm`.
void join(CommBarrier* cb, MPI_Comm comm, int node_rank, int node_size, int root) {
  cb->algorithm = g_state.fixed ? *g_state.fixed : barrier::choose_auto(node_size);
  cpu_set_t cpus;
  bool oversubscribed = sched_getaffinity(0, sizeof cpus, &cpus) == 0 &&
                        node_size > CPU_COUNT(&cpus);
  barrier::WaitPolicy wait = oversubscribed ? barrier::kOversubscribed : barrier::WaitPolicy{};
  wait.progress = drive_mpi_progress;
  if (g_state.watchdog_ns != 0) {
    wait.stalled = barrier_stalled;
    wait.stall_context = cb;
    wait.stall_ns = g_state.watchdog_ns;
  }
  cb->comm = comm;
  cb->self = barrier::Participant{barrier::Segment(cb->base, node_size), node_rank, node_size,
                                  root, 0, wait};
  node_to_comm(*cb, comm, 1, &root, &cb->root_in_comm);
}

/// Collective over `comm`: builds its barrier into `cb` (see the header); where that fails on
/// any rank, `cb` stays a passthrough on every rank.
void setup(CommBarrier* cb, MPI_Comm comm) {
  cb->built = true;
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  // Everything allocated before the first collective: a std::bad_alloc after it would leave the
  // other ranks waiting in it (lookup's caller falls back to MPI's barrier on this rank alone).
  std::vector<int> all(2 * static_cast<std::size_t>(size)), leaders, numa(static_cast<std::size_t>(size));
  leaders.reserve(static_cast<std::size_t>(size));
  node_communicator(comm, &cb->node);
  int node_rank = 0, node_size = 1;
  PMPI_Comm_rank(cb->node, &node_rank);
  if (g_state.split > 0) {  // emulated nodes of `split` ranks (testing)
    MPI_Comm part;
    PMPI_Comm_split(cb->node, node_rank / g_state.split, node_rank, &part);
    PMPI_Comm_free(&cb->node);
    cb->node = part;
    PMPI_Comm_rank(cb->node, &node_rank);
  }
  PMPI_Comm_size(cb->node, &node_size);
  const int root = node_root(cb->node, node_size, numa);
  int node_ok = 0;
  const std::string err = map_segment(cb, node_rank, node_size, root, node_ok);
  cb->multi_node = node_size < size;
  if (!agree_setup(cb, comm, size, node_ok, node_rank == root, all, leaders)) {
    warn_setup(rank, err.empty() ? "failed on another rank" : err);
    release(cb, true);
    return;
  }
  if (cb->multi_node && node_rank == root) node::group_communicator(comm, leaders, kLeadersCommTag, &cb->leaders);
  join(cb, comm, node_rank, node_size, root);
  cb->passthrough = false;
}

/// The world's statistics: the algorithm and root of its barrier, or MPICH's before it is built.
void world_statistics(const CommBarrier& cb) {
  Stats& stats = runtime().stats();
  stats.barrier_algo = cb.passthrough ? "mpich" : std::string(barrier::to_string(cb.algorithm));
  stats.barrier_root = cb.passthrough ? 0 : cb.root_in_comm;
}

/// Under TNBC_BARRIER_AFTER=auto, the MPICH barriers a communicator runs at most before its own
/// is built.  The latency that rent() weighs against a build is what the last rank to arrive
/// spends in MPICH's barrier; on a full node the others' wait for a core after the release is
/// not in it, and that wait is where the shared-memory barrier's naps gain (docs/barrier.md):
/// a communicator that synchronises often gets it whatever its latencies.
constexpr std::uint32_t kMostRented = 8;

/// Collective over `comm`: builds its barrier (setup), and keeps the time it took when it is
/// the longest this rank has measured (rent's prediction of a build).
void build(CommBarrier* cb, MPI_Comm comm) {
  const std::uint64_t t0 = util::now_ns();
  setup(cb, comm);
  const std::uint64_t took = util::now_ns() - t0;
  std::uint64_t longest = g_state.build_ns.load(std::memory_order_relaxed);
  while (took > longest && !g_state.build_ns.compare_exchange_weak(longest, took, std::memory_order_relaxed)) {
  }
  log::debug("MPI_Barrier: a communicator's shared-memory barrier built at its call {} in {:.2f} ms{}",
             cb->mpi_calls + 1, static_cast<double>(took) / 1e6, cb->passthrough ? " (failed: MPICH's)" : "");
}

/// The cached barrier of `comm`, built at its call TNBC_BARRIER_AFTER + 1, or under auto at the
/// call after the one whose agreement decided it (rent): every rank of `comm` makes the same
/// calls and holds the same figures, so all build it at the same one; nullptr for
/// inter-communicators.
CommBarrier* lookup(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return nullptr;  // MPICH reports the error
  // The cached state first: one call on every barrier after the first.  Inter-communicators
  // never get it, so they pay for the second look.
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_state.keyval, &value, &found);
  CommBarrier* cb = static_cast<CommBarrier*>(value);
  if (!found) {
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return nullptr;
    cb = new CommBarrier;
    PMPI_Comm_set_attr(comm, g_state.keyval, cb);
  }
  if (cb->built) return cb;
  const bool now = g_state.after < 0 ? cb->buy : cb->mpi_calls >= static_cast<std::uint32_t>(g_state.after);
  if (now) build(cb, comm);
  else ++cb->mpi_calls;  // passthrough: MPICH's barrier (rent's allreduce under auto)
  if (comm == MPI_COMM_WORLD) world_statistics(*cb);
  return cb;
}

/// MPICH's barrier before the build under TNBC_BARRIER_AFTER=auto, run as an MPI_Allreduce over
/// `comm` (as with MPI_Barrier, no rank leaves it before every rank has entered) that agrees, at
/// no synchronisation of its own, on what the communicator's barriers have cost: the least time
/// a rank spent in the previous one (the last rank to arrive waits for nobody: what it spent is
/// the barrier's own latency, which the shared-memory barrier would save) and the longest build
/// any rank has measured.  Once the latencies add up to that build (rent or buy: the barriers of
/// a communicator then cost at most twice what the better choice, made knowing its future
/// calls, would have cost, where the shared-memory barrier saves the whole latency), or after
/// kMostRented of them, the next call builds it.
int rent(CommBarrier* cb, MPI_Comm comm) {
  const double none = std::numeric_limits<double>::infinity();
  const double mine[2] = {cb->mpi_calls > 1 ? static_cast<double>(cb->last_ns) : none,
                          -static_cast<double>(g_state.build_ns.load(std::memory_order_relaxed))};
  double agreed[2] = {none, 0};
  const std::uint64_t t0 = util::now_ns();
  const int rc = PMPI_Allreduce(mine, agreed, 2, MPI_DOUBLE, MPI_MIN, comm);
  cb->last_ns = util::now_ns() - t0;
  if (rc != MPI_SUCCESS || !std::isfinite(agreed[0])) return rc;  // the first call: nothing before it
  cb->rent_paid_ns += agreed[0];
  const std::uint32_t paid_calls = cb->mpi_calls - 1;  // the barriers whose latency is in
  const bool measured = agreed[1] < 0;
  cb->buy = paid_calls >= kMostRented || (measured && cb->rent_paid_ns >= -agreed[1]);
  if (cb->buy)
    log::debug("MPI_Barrier: a communicator's MPICH barriers cost {:.2f} ms in {} calls (a build: {}): its "
               "shared-memory barrier is built at the next call",
               cb->rent_paid_ns / 1e6, paid_calls,
               measured ? fmt::format("{:.2f} ms", -agreed[1] / 1e6) : std::string("none measured yet"));
  return rc;
}

void leaders_sync(void* context) {
  // Always the same (blocking) collective on every leader: a blocking and a non-blocking
  // barrier do not match each other, so choosing by the local number of collectives in flight
  // hangs as soon as two leaders see different numbers (measured on the emulated cluster).
  // Blocking is safe with collectives in flight: the engine's progress thread calls MPI
  // concurrently (MPI_THREAD_MULTIPLE) and holds no lock this thread needs.
  auto* cb = static_cast<CommBarrier*>(context);
  cb->leaders_rc = PMPI_Barrier(cb->leaders);
}

void start_barrier(Runtime& rt) {
  const config::Config& cfg = rt.config();
  g_state.world_rank = rt.world_rank();
  g_state.mpich = cfg.barrier_algo == "mpich";
  g_state.fixed = barrier::parse_algorithm(cfg.barrier_algo);
  g_state.root = cfg.barrier_root;
  g_state.split = cfg.barrier_split;
  g_state.after = cfg.barrier_after;
  g_state.watchdog_ns = static_cast<std::uint64_t>(cfg.watchdog) * 1000000000ull;
  g_state.topology = std::make_unique<barrier::NumaTopology>();
  if (g_state.mpich) {
    rt.stats().barrier_algo = "mpich";
    return;
  }
  if (!cfg.numa_topology.empty()) {
    barrier::TopologyParse parsed = barrier::load_topology(cfg.numa_topology);
    if (parsed.topology && static_cast<int>(parsed.topology->rank_nodes().size()) < rt.world_size())
      parsed.error = fmt::format("{}: lists {} ranks, MPI_COMM_WORLD has {}", cfg.numa_topology,
                                 parsed.topology->rank_nodes().size(), rt.world_size());
    if (parsed.error.empty())
      g_state.topology = std::make_unique<barrier::MatrixTopology>(std::move(*parsed.topology));
    else
      log::warn_rank0("TNBC_NUMA_TOPOLOGY={}; using the host topology (libnuma)", parsed.error);
  }
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &g_state.keyval, nullptr);
  // MPI_COMM_WORLD's barrier is built at its first MPI_Barrier, as every other communicator's:
  // built here it cost 50-80 ms of every run's MPI_Init at 2 emulated nodes x 2 ranks, for
  // programs that never call MPI_Barrier too (NAS IS).  lookup() fills in the statistics.
  rt.stats().barrier_algo = "unused";
}

}  // namespace

void barrier_start(Runtime& rt) {
  try {
    start_barrier(rt);
  } catch (const std::exception& e) {  // no exception into MPI_Init's C caller
    log::warn("shared-memory barrier not started ({}); MPI_Barrier passes through", e.what());
    g_state.mpich = true;
    rt.stats().barrier_algo = "mpich";
  }
}

void barrier_stop(Runtime&) {
  if (g_state.keyval == MPI_KEYVAL_INVALID) return;
  delete_attr_if_set(MPI_COMM_WORLD, g_state.keyval);
  g_state.stopped.store(true);
  PMPI_Comm_free_keyval(&g_state.keyval);
}

int barrier(MPI_Comm comm) {
  if (g_state.mpich || g_state.keyval == MPI_KEYVAL_INVALID || g_state.stopped.load())
    return PMPI_Barrier(comm);
  CommBarrier* cb = nullptr;
  try {
    cb = lookup(comm);
  } catch (const std::exception& e) {  // std::bad_alloc in setup; no exception into C callers
    warn_setup(0, e.what());
    return PMPI_Barrier(comm);
  }
  if (cb && !cb->built && g_state.after < 0) return rent(cb, comm);
  if (!cb || cb->passthrough) return PMPI_Barrier(comm);
  barrier::enter(cb->self);
  if (!cb->multi_node) {
    barrier::run(cb->algorithm, cb->self);
    return MPI_SUCCESS;
  }
  barrier::hierarchical(cb->algorithm, cb->self, leaders_sync, cb);
  return cb->self.rank == cb->self.root ? cb->leaders_rc : MPI_SUCCESS;
}

}  // namespace tnbc::shim::replay
