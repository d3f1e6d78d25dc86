#include "engine.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "clock.hpp"
#include "fence.hpp"
#include "io_interpose.hpp"
#include "replay_guard.hpp"
#include "schedule.hpp"

namespace tnbc::shim {
namespace {

using schedule::Kind;
using schedule::Step;

/// The progress thread naps between rounds that moved nothing, longer and longer while nothing
/// happens (a thread that wakes every few microseconds takes a real share of a core the
/// program computes on).  Whoever starts waiting for the engine -- a fault handler, a fence,
/// a call waiting for its edge pages -- wakes it at once and keeps its naps short until the
/// wait ends.  Async-signal-safe (atomics and the futex system call): the fault handler uses it.
class Waker {
 public:
  std::uint32_t word() const { return word_.load(std::memory_order_acquire); }
  void kick() {
    word_.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, &word_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  void begin_wait() {
    waiters_.fetch_add(1, std::memory_order_acq_rel);
    kick();
  }
  void end_wait() { waiters_.fetch_sub(1, std::memory_order_acq_rel); }
  bool waited_for() const { return waiters_.load(std::memory_order_acquire) > 0; }
  /// Sleeps `us` microseconds unless kicked since word() returned `seen`.
  void nap(unsigned us, std::uint32_t seen) {
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
    syscall(SYS_futex, &word_, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  }

 private:
  std::atomic<std::uint32_t> word_{0};
  std::atomic<int> waiters_{0};
};

Waker g_waker;
void waker_begin_wait() { g_waker.begin_wait(); }
void waker_end_wait() { g_waker.end_wait(); }

/// Waits on `cv` for `pred` with the progress thread kept awake, and returns the time waited
/// (0 when `pred` already held: no wake-up, no clock reads).
template <typename Pred>
std::uint64_t timed_wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Pred pred) {
  if (pred()) return 0;
  const std::uint64_t t0 = now_ns();
  g_waker.begin_wait();
  cv.wait(lock, pred);
  g_waker.end_wait();
  return now_ns() - t0;
}

std::uintptr_t page_floor(std::uintptr_t a, std::size_t ps) { return a & ~(ps - 1); }
std::uintptr_t page_ceil(std::uintptr_t a, std::size_t ps) { return (a + ps - 1) & ~(ps - 1); }

/// Per user communicator: the shadow communicator our messages travel on (so they never match
/// the application's) and the sequence number of the next collective, which goes into the tags
/// so several collectives can be in flight on one communicator.  Cached as an attribute and
/// freed with the communicator.
struct Shadow {
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint32_t seq = 0;
  // Per-node priority (created the first time a plan asks for it, on every rank at once):
  // which ranks of `comm` share this node, and the node's turn counters in shared memory.
  bool node_ready = false;
  std::vector<char> on_node;  // on_node[r]: rank r of comm is on this node
  std::vector<int> node_members;
  MPI_Comm node_comm = MPI_COMM_NULL;
  MPI_Win turn_win = MPI_WIN_NULL;
  std::atomic<std::uint64_t>* turns = nullptr;  // kTurnSlots counters, one per recent collective
};

/// Turn counters per node and communicator: slot seq % kTurnSlots holds seq * kTurnStride + k
/// once the first k ranks (in plan order) of the node have injected their inter-node sends.
constexpr std::uint32_t kTurnSlots = 256;
constexpr std::uint64_t kTurnStride = 1u << 16;

int g_keyval = MPI_KEYVAL_INVALID;
int g_seq_mask = 0;  // sequence bits that fit in a tag next to the 8 segment bits

int delete_shadow(MPI_Comm, int, void* value, void*) {
  auto* s = static_cast<Shadow*>(value);
  if (s->turn_win != MPI_WIN_NULL) PMPI_Win_free(&s->turn_win);
  if (s->node_comm != MPI_COMM_NULL) PMPI_Comm_free(&s->node_comm);
  PMPI_Comm_free(&s->comm);
  delete s;
  return MPI_SUCCESS;
}

/// One collective in flight.  Built by the calling thread, then owned by the progress thread;
/// afterwards the calling thread only fills the send copy (and the own block in the mirror),
/// marking `copied`, and reads edge_pending and done.
struct Op {
  MPI_Comm comm = MPI_COMM_NULL;
  int tag = 0;
  std::vector<Step> steps;
  std::vector<MPI_Request> reqs;
  std::vector<std::uint8_t> state;  // 0 waiting, 1 posted, 2 done
  std::size_t remaining = 0;

  // Send side: a copy, so the caller may reuse its buffer at once.  The caller fills it after
  // handing the op over, step by step in priority order, and marks each step it has copied:
  // the progress thread posts a send (or counts a local copy as done) only once it is marked,
  // so the first sends leave while the rest is still being copied.
  std::unique_ptr<char[]> send_copy;
  std::size_t send_lo = 0;  // step offsets minus send_lo index send_copy
  std::unique_ptr<std::atomic<std::uint8_t>[]> copied;  // per step; null: nothing to copy
  bool step_copied(std::size_t i) const {
    return !copied || copied[i].load(std::memory_order_acquire) != 0;
  }
  bool sends_from_mirror = false;  // bcast forwards read what they received

  // Receive side.  All offsets are relative to recv_base (the user's buffer).
  char* recv_base = nullptr;
  std::uintptr_t cover_lo = 0, cover_hi = 0;  // page-aligned cover of the receive span
  char* mirror = nullptr;                     // same layout as the cover
  std::uintptr_t guard_lo = 0;                // first full page; pages indexed from here
  std::size_t guard_pages = 0;
  std::unique_ptr<std::atomic<std::uint8_t>[]> published;  // per full page
  std::vector<int> holders;                                // steps still using each full page
  std::vector<std::uint8_t> moved;                         // mirror page moved to the user
  int slot = -1;

  // Edge pages: sub-messages that touch them complete before the call returns.
  std::vector<char> edge_step;
  std::atomic<int> edge_pending{0};
  // The calling thread is done with the op (edges copied): only then may it be retired, since
  // retiring unmaps the mirror the edges are copied from.
  std::atomic<bool> caller_released{false};
  std::atomic<bool> done{false};
  // Per-node priority: sends to other nodes wait until the ranks of this node that come
  // earlier in the plan's order have injected theirs (turn == gate_value), then this rank's
  // turn ends when its own inter-node sends completed (turn = gate_value + 1).
  std::atomic<std::uint64_t>* turn = nullptr;
  std::uint64_t gate_value = 0;
  bool first_on_node = false;
  bool turn_passed = false;
  // When a send first found the gate closed (0: never), and how many inter-node sends were
  // held then: all of them, since the gate only ever opens and none could be posted before.
  std::uint64_t held_since = 0;
  std::size_t held_sends = 0;
  const std::vector<char>* on_node = nullptr;
  std::size_t remote_sends_left = 0;
  bool gate_open() const {
    return turn == nullptr || first_on_node || turn->load(std::memory_order_acquire) >= gate_value;
  }
  void pass_turn() {
    // Never lower the counter: a later collective may already have moved it on.
    std::uint64_t cur = turn->load(std::memory_order_acquire);
    while (cur < gate_value + 1 && !turn->compare_exchange_weak(cur, gate_value + 1, std::memory_order_acq_rel)) {
    }
    turn_passed = true;
  }
  /// A send the node's turn gates: a body chunk to another node.  Heads and tails are exempt:
  /// receivers wait for them before returning, and they are small.
  bool remote(const Step& s) const {
    return s.kind == Kind::send && !s.edge && on_node != nullptr &&
           !(*on_node)[static_cast<std::size_t>(s.peer)];
  }
  std::size_t window = 0;  // windowed sends in flight (0: no window), see progress()
  /// A send the window orders and bounds, posted as a synchronous send (see post()): an
  /// inter-node body chunk under per-node priority.  The window makes a turn end when the data
  /// has reached the other node, not when it sits in this rank's socket buffers, and keeps
  /// every rank's share of the link's queue short, so that the acknowledgements of synchronous
  /// sends, which travel behind the other node's data, come back soon.  Without per-node
  /// priority there are no turns, and sends within a node have no link to share: they all go
  /// at once as standard sends (each destination's messages still travel in schedule order).
  bool windowed(const Step& s) const { return window > 0 && remote(s); }
  // Alltoall(v): body sends wait until this rank has received all its head and tail pieces.
  // By then every peer has entered the collective and posted its own heads and tails, so they
  // are on the way ahead of this rank's bulk data instead of queued behind it in the link's
  // queue, and the calls return sooner (docs/replay.md, "Bodies after the edges").  Heads and
  // tails are never held, so this cannot wait in a circle.  (Bcast counts none: 0.)
  std::size_t edge_recvs_left = 0;
  bool held_for_edges(const Step& s) const {
    return edge_recvs_left > 0 && s.kind == Kind::send && !s.edge;
  }
  // Direct: no mirror, no guard; receives land in the user's buffer and the caller waits for
  // the whole operation (the call does not return early, but speaks the same protocol).
  bool direct = false;
  // Where this call's costs go (adapt.hpp), or null.
  adapt::Costs* costs = nullptr;

  bool overlaps(std::uintptr_t p, std::size_t n) const {
    return cover_hi > cover_lo && p < cover_hi && p + n > cover_lo;
  }
  char* mirror_at(std::size_t offset) const {
    if (direct) return recv_base + offset;
    return mirror + (reinterpret_cast<std::uintptr_t>(recv_base) + offset - cover_lo);
  }
};

class EngineImpl {
 public:
  std::optional<std::string> start(const EngineOptions& options);
  void stop();
  /// Runs `op` (steps set): copies the send side, sets up the receive side, hands it to the
  /// progress thread; returns true once it may return early, false after it completed.
  bool run_op(std::shared_ptr<Op> op, const void* sendbuf, bool allow_early);
  void submit(std::shared_ptr<Op> op);
  void wait_edges(Op& op);
  void wait_done(Op& op);
  void drain();
  void complete_overlapping(std::uintptr_t p, std::size_t n);
  Shadow* shadow(MPI_Comm comm);

  EngineOptions options_;
  std::size_t page_size_ = 4096;
  std::atomic<std::uint64_t> init_ns_{0};
  std::atomic<std::uint64_t> gated_sends_{0};   // inter-node sends held for the node's turn
  std::atomic<std::uint64_t> turn_wait_ns_{0};  // time collectives waited for the node's turn
  std::atomic<std::uint64_t> progress_cpu_ns_{0}, progress_rounds_{0}, fence_wait_ns_{0};

 private:
  void run();
  bool progress(Op& op);
  void post(Op& op, std::size_t i);
  void step_done(Op& op, std::size_t i, std::vector<std::size_t>& ready);
  void publish(Op& op, std::vector<std::size_t>& pages);
  void retire(Op& op);

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<Op>> incoming_;
  std::vector<Op*> all_;  // every op not yet retired, for drain/overlap checks (under mutex_)
  bool stopping_ = false;
  std::thread thread_;
};

EngineImpl& impl() {
  static EngineImpl e;
  return e;
}

std::optional<std::string> EngineImpl::start(const EngineOptions& options) {
  options_ = options;
  page_size_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* tag_ub = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  int ub = flag ? *static_cast<int*>(tag_ub) : 32767;
  g_seq_mask = 1;
  while ((static_cast<long>(g_seq_mask) << 9) - 1 <= ub) g_seq_mask <<= 1;
  g_seq_mask -= 1;  // seq bits: (seq & mask) << 8 | segment stays <= ub
  if (g_seq_mask < 15) return std::string("MPI_TAG_UB is too small for the engine's tags");
  if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_shadow, &g_keyval, nullptr) != MPI_SUCCESS)
    return std::string("cannot create the communicator attribute");
  if (auto err = ReplayGuard::instance().install()) return err;
  ReplayGuard::instance().set_wait_hooks(waker_begin_wait, waker_end_wait);
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
  return std::nullopt;
}

void EngineImpl::stop() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  g_waker.kick();
  if (thread_.joinable()) thread_.join();
  ReplayGuard::instance().uninstall();
}

/// Sets up per-node priority for `sh` (collective over the communicator: every rank calls it
/// for the same collective, because the plan says so at the same call site everywhere).
bool prepare_node(Shadow& sh) {
  if (sh.node_ready) return sh.turns != nullptr;
  sh.node_ready = true;
  int rank = 0, size = 0, node_rank = 0, node_size = 0;
  PMPI_Comm_rank(sh.comm, &rank);
  PMPI_Comm_size(sh.comm, &size);
  if (PMPI_Comm_split_type(sh.comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &sh.node_comm) != MPI_SUCCESS)
    return false;
  PMPI_Comm_rank(sh.node_comm, &node_rank);
  PMPI_Comm_size(sh.node_comm, &node_size);
  sh.node_members.resize(static_cast<std::size_t>(node_size));
  PMPI_Allgather(&rank, 1, MPI_INT, sh.node_members.data(), 1, MPI_INT, sh.node_comm);
  sh.on_node.assign(static_cast<std::size_t>(size), 0);
  for (int m : sh.node_members) sh.on_node[static_cast<std::size_t>(m)] = 1;
  void* base = nullptr;
  const MPI_Aint bytes = node_rank == 0 ? static_cast<MPI_Aint>(kTurnSlots * sizeof(std::uint64_t)) : 0;
  if (PMPI_Win_allocate_shared(bytes, sizeof(std::uint64_t), MPI_INFO_NULL, sh.node_comm, &base,
                               &sh.turn_win) != MPI_SUCCESS)
    return false;
  MPI_Aint qsize = 0;
  int disp = 0;
  PMPI_Win_shared_query(sh.turn_win, 0, &qsize, &disp, &base);
  auto* turns = static_cast<std::atomic<std::uint64_t>*>(base);
  if (node_rank == 0)
    for (std::uint32_t i = 0; i < kTurnSlots; ++i) new (&turns[i]) std::atomic<std::uint64_t>(0);
  PMPI_Barrier(sh.node_comm);  // initialised before anybody reads
  sh.turns = turns;
  return true;
}

/// Gates `op`'s inter-node sends behind the ranks of this node that come earlier in `order`.
void gate(Op& op, Shadow& sh, std::uint32_t seq, int rank, std::span<const int> order) {
  if (!prepare_node(sh)) return;
  // Position of each node member in the plan's order (members the order does not list last).
  auto pos = [&](int r) {
    auto it = std::find(order.begin(), order.end(), r);
    return it == order.end() ? static_cast<long>(order.size()) + r : static_cast<long>(it - order.begin());
  };
  std::vector<int> members = sh.node_members;
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return pos(a) < pos(b); });
  const auto k = static_cast<std::uint64_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  op.turn = &sh.turns[seq % kTurnSlots];
  op.gate_value = static_cast<std::uint64_t>(seq) * kTurnStride + k;
  op.first_on_node = k == 0;
  op.on_node = &sh.on_node;
  op.remote_sends_left = static_cast<std::size_t>(
      std::count_if(op.steps.begin(), op.steps.end(), [&](const Step& s) { return op.remote(s); }));
}

Shadow* EngineImpl::shadow(MPI_Comm comm) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &flag);
  if (flag) return static_cast<Shadow*>(value);
  auto* s = new Shadow;
  // Every rank of `comm` is in this same collective, so the (collective) dup cannot mismatch.
  if (PMPI_Comm_dup(comm, &s->comm) != MPI_SUCCESS) {
    delete s;
    PMPI_Abort(comm, 1);  // MPI itself is broken; nothing sensible is left to do
  }
  PMPI_Comm_set_attr(comm, g_keyval, s);
  return s;
}

void EngineImpl::submit(std::shared_ptr<Op> op) {
  {
    std::lock_guard lock(mutex_);
    all_.push_back(op.get());
    g_in_flight.fetch_add(1, std::memory_order_acq_rel);
    incoming_.push_back(std::move(op));
  }
  work_cv_.notify_one();
  g_waker.kick();  // a new op: the progress thread may be on a long nap
}

void EngineImpl::wait_edges(Op& op) {
  std::unique_lock lock(mutex_);
  timed_wait(done_cv_, lock, [&] { return op.edge_pending.load(std::memory_order_acquire) == 0; });
}

void EngineImpl::wait_done(Op& op) {
  std::unique_lock lock(mutex_);
  timed_wait(done_cv_, lock, [&] { return op.done.load(std::memory_order_acquire); });
}

/// Adds a fence's wait to every key whose operation it waited for (each once): the program
/// waited for them, whichever finished last.
void charge_fence(const std::vector<adapt::Costs*>& waited_for, std::uint64_t ns) {
  for (std::size_t i = 0; i < waited_for.size(); ++i)
    if (waited_for[i] != nullptr &&
        std::find(waited_for.begin(), waited_for.begin() + static_cast<long>(i), waited_for[i]) ==
            waited_for.begin() + static_cast<long>(i))
      waited_for[i]->add_wait(ns);
}

void EngineImpl::drain() {
  std::unique_lock lock(mutex_);
  if (all_.empty()) return;
  std::vector<adapt::Costs*> keys;
  for (const Op* op : all_) keys.push_back(op->costs);
  const std::uint64_t ns = timed_wait(done_cv_, lock, [&] { return all_.empty(); });
  fence_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  charge_fence(keys, ns);
}

void EngineImpl::complete_overlapping(std::uintptr_t p, std::size_t n) {
  std::unique_lock lock(mutex_);
  auto none = [&] {
    return std::none_of(all_.begin(), all_.end(), [&](const Op* op) { return op->overlaps(p, n); });
  };
  if (none()) return;
  std::vector<adapt::Costs*> keys;
  for (const Op* op : all_)
    if (op->overlaps(p, n)) keys.push_back(op->costs);
  const std::uint64_t ns = timed_wait(done_cv_, lock, none);
  fence_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  charge_fence(keys, ns);
}

void EngineImpl::run() {
  std::vector<std::shared_ptr<Op>> active;
  const unsigned min_nap = options_.progress_sleep_us;
  const unsigned max_nap = std::max(options_.progress_max_sleep_us, min_nap);
  // While somebody waits for the engine the naps stop growing at ten times the shortest: a
  // wait that lasts (a peer that has not entered the collective yet) must not cost a fifth of
  // a core in rounds that find nothing (measured with 20 us naps: 18-21%), and one that ends
  // soon is noticed within this much.
  const unsigned waited_nap = std::min(max_nap, std::max(10 * min_nap, 1u));
  unsigned nap = min_nap;
  std::uint64_t cpu_mark = thread_cpu_ns();
  while (true) {
    const std::uint32_t seen = g_waker.word();
    {
      std::unique_lock lock(mutex_);
      if (active.empty())
        work_cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
      if (stopping_ && active.empty() && incoming_.empty()) return;
      if (active.empty()) cpu_mark = thread_cpu_ns();  // idle time between ops is nobody's
      while (!incoming_.empty()) {
        active.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    bool moved = false;
    for (auto& op : active) moved |= progress(*op);
    // This round's CPU time, shared by the ops it served (adapt.hpp counts it as their cost).
    const std::uint64_t cpu_now = thread_cpu_ns(), cpu = cpu_now - cpu_mark;
    cpu_mark = cpu_now;
    progress_cpu_ns_.fetch_add(cpu, std::memory_order_relaxed);
    progress_rounds_.fetch_add(1, std::memory_order_relaxed);
    for (auto& op : active)
      if (op->costs) op->costs->progress_cpu_ns.fetch_add(cpu / active.size(), std::memory_order_relaxed);
    bool retired = false;
    for (auto it = active.begin(); it != active.end();) {
      if ((*it)->remaining == 0 && (*it)->caller_released.load(std::memory_order_acquire)) {
        retire(**it);
        {
          std::lock_guard lock(mutex_);
          all_.erase(std::find(all_.begin(), all_.end(), it->get()));
        }
        g_in_flight.fetch_sub(1, std::memory_order_acq_rel);
        it = active.erase(it);
        retired = true;
      } else {
        ++it;
      }
    }
    if (retired || moved) {
      std::lock_guard lock(mutex_);  // pairs with the predicate checks of the waiters
      done_cv_.notify_all();
    }
    if (!moved && !retired && !active.empty()) {
      // Nothing moved: nap instead of spinning, the application may need this core; longer
      // each time nothing moves, unless somebody waits for us.
      nap = std::min(g_waker.waited_for() ? waited_nap : max_nap, nap == 0 ? 1u : nap * 2);
      g_waker.nap(nap, seen);
    } else {
      nap = min_nap;
    }
  }
}

void EngineImpl::post(Op& op, std::size_t i) {
  const Step& s = op.steps[i];
  const int tag = op.tag | (s.piece & 0xff);
  const int count = static_cast<int>(s.bytes);
  if (s.kind == Kind::recv) {
    PMPI_Irecv(op.mirror_at(s.offset), count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
  } else {
    const char* src = op.sends_from_mirror ? op.mirror_at(s.offset)
                                           : op.send_copy.get() + (s.offset - op.send_lo);
    // Windowed sends (inter-node bodies under per-node priority) are synchronous: they
    // complete when the receiver has matched them, not when the transport has taken a local
    // copy (eager), so the window and the per-node turn bound what is really on the way
    // instead of what sits in socket buffers.
    if (op.windowed(s)) PMPI_Issend(src, count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
    else PMPI_Isend(src, count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
  }
  op.state[i] = 1;
}

bool EngineImpl::progress(Op& op) {
  bool moved = false;
  std::vector<std::size_t> ready;
  if (op.turn != nullptr && !op.turn_passed && op.remote_sends_left == 0 && op.gate_open()) {
    op.pass_turn();  // nothing to send off the node: hand the turn on at once
    moved = true;
  }
  // Post what may go: everything without a pending dependency, in schedule order.  Windowed
  // sends (inter-node bodies under per-node priority) go strictly in order, at most `window`
  // unfinished.
  std::size_t unfinished = 0;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    if (op.state[i] == 2) continue;
    const Step& s = op.steps[i];
    if (op.windowed(s) && unfinished++ >= op.window) continue;
    if (op.state[i] != 0) continue;
    if (s.kind != Kind::recv && !op.step_copied(i)) continue;  // the caller is still copying
    if (op.held_for_edges(s)) continue;
    if (s.kind == Kind::copy) {  // the caller copied the own block into place
      step_done(op, i, ready);
      moved = true;
    } else if (s.after < 0 || op.state[static_cast<std::size_t>(s.after)] == 2) {
      if (op.remote(s)) {
        if (!op.gate_open()) {  // not this rank's turn on the node yet
          if (op.held_since == 0) op.held_since = now_ns(), op.held_sends = op.remote_sends_left;
          continue;
        }
        if (op.held_since != 0) {  // the turn came: account for the wait once
          turn_wait_ns_.fetch_add(now_ns() - op.held_since, std::memory_order_relaxed);
          gated_sends_.fetch_add(op.held_sends, std::memory_order_relaxed);
          op.held_since = 0;
          op.held_sends = 0;
        }
      }
      post(op, i);
      moved = true;
    }
  }
  // Test what is posted.
  std::vector<MPI_Request> reqs;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < op.steps.size(); ++i)
    if (op.state[i] == 1) {
      reqs.push_back(op.reqs[i]);
      which.push_back(i);
    }
  if (!reqs.empty()) {
    std::vector<int> indices(reqs.size());
    int outcount = 0;
    PMPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, indices.data(),
                  MPI_STATUSES_IGNORE);
    for (int k = 0; k < outcount && outcount != MPI_UNDEFINED; ++k) {
      std::size_t i = which[static_cast<std::size_t>(indices[static_cast<std::size_t>(k)])];
      op.reqs[i] = MPI_REQUEST_NULL;
      step_done(op, i, ready);
      moved = true;
    }
  }
  if (!ready.empty()) {
    const std::uint64_t t0 = now_ns();
    publish(op, ready);
    if (op.costs) op.costs->publish_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
  }
  return moved;
}

void EngineImpl::step_done(Op& op, std::size_t i, std::vector<std::size_t>& ready) {
  op.state[i] = 2;
  --op.remaining;
  const Step& s = op.steps[i];
  if (op.remote(s) && --op.remote_sends_left == 0) op.pass_turn();  // the next rank may inject
  if (s.kind == Kind::recv && s.edge && op.edge_recvs_left > 0) --op.edge_recvs_left;
  bool touches_recv = s.kind != Kind::send || op.sends_from_mirror;
  if (touches_recv && op.guard_pages > 0) {
    auto b = reinterpret_cast<std::uintptr_t>(op.recv_base) + s.offset;
    auto e = b + s.bytes;
    for (std::uintptr_t pg = std::max(page_floor(b, page_size_), op.guard_lo);
         pg < e && pg < op.guard_lo + op.guard_pages * page_size_; pg += page_size_) {
      std::size_t idx = (pg - op.guard_lo) / page_size_;
      if (--op.holders[idx] == 0) ready.push_back(idx);
    }
  }
  if (!op.edge_step.empty() && op.edge_step[i]) op.edge_pending.fetch_sub(1, std::memory_order_acq_rel);
}

void EngineImpl::publish(Op& op, std::vector<std::size_t>& pages) {
  std::sort(pages.begin(), pages.end());
  for (std::size_t a = 0; a < pages.size();) {
    std::size_t b = a + 1;
    while (b < pages.size() && pages[b] == pages[b - 1] + 1) ++b;
    std::uintptr_t user = op.guard_lo + pages[a] * page_size_;
    std::size_t len = (b - a) * page_size_;
    char* src = op.mirror + (user - op.cover_lo);
    // The raw system call: UCX's libucm patches libc's mremap with a four-argument version
    // that drops the new address of MREMAP_FIXED (measured: it returns NULL and moves nothing).
    auto r = reinterpret_cast<void*>(syscall(SYS_mremap, src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
                                             reinterpret_cast<void*>(user)));
    if (r == MAP_FAILED) {
      // Cannot happen for ranges we mapped and protected ourselves; keep the data right anyway.
      mprotect(reinterpret_cast<void*>(user), len, PROT_READ | PROT_WRITE);
      std::memcpy(reinterpret_cast<void*>(user), src, len);
    } else {
      for (std::size_t k = a; k < b; ++k) op.moved[pages[k]] = 1;
    }
    for (std::size_t k = a; k < b; ++k) op.published[pages[k]].store(1, std::memory_order_release);
    a = b;
  }
  pages.clear();
}

void EngineImpl::retire(Op& op) {
  if (op.slot >= 0) {
    ReplayGuard::instance().retire(op.slot, std::move(op.published));
    g_guarded_calls.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (op.mirror != nullptr) {
    // Unmap exactly the mirror pages still ours: the ones moved to the user are gone, and their
    // old addresses may already hold somebody else's mapping.
    const std::size_t total = (op.cover_hi - op.cover_lo) / page_size_;
    const std::size_t first_full = (op.guard_lo - op.cover_lo) / page_size_;
    for (std::size_t pg = 0; pg < total;) {
      auto is_moved = [&](std::size_t p) {
        return p >= first_full && p < first_full + op.guard_pages && op.moved[p - first_full];
      };
      if (is_moved(pg)) {
        ++pg;
        continue;
      }
      std::size_t end = pg + 1;
      while (end < total && !is_moved(end)) ++end;
      munmap(op.mirror + pg * page_size_, (end - pg) * page_size_);
      pg = end;
    }
  }
  op.done.store(true, std::memory_order_release);
}

/// Sets up the receive side of `op` for the byte ranges its recv/copy steps write, relative to
/// recv_base.  Returns false (nothing mapped) when no full page lies inside the span.
bool prepare_receive(Op& op, std::size_t ps) {
  std::uintptr_t lo = UINTPTR_MAX, hi = 0;
  auto base = reinterpret_cast<std::uintptr_t>(op.recv_base);
  for (const auto& s : op.steps)
    if (s.kind != Kind::send) {
      lo = std::min(lo, base + s.offset);
      hi = std::max(hi, base + s.offset + s.bytes);
    }
  if (hi <= lo) return false;
  std::uintptr_t full_lo = page_ceil(lo, ps), full_hi = page_floor(hi, ps);
  if (full_hi <= full_lo) return false;
  op.cover_lo = page_floor(lo, ps);
  op.cover_hi = page_ceil(hi, ps);
  void* m = mmap(nullptr, op.cover_hi - op.cover_lo, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  op.mirror = static_cast<char*>(m);
  op.guard_lo = full_lo;
  op.guard_pages = (full_hi - full_lo) / ps;
  op.holders.assign(op.guard_pages, 0);
  op.moved.assign(op.guard_pages, 0);
  op.published.reset(new std::atomic<std::uint8_t>[op.guard_pages]);
  // Which bytes of each full page the receive writes: a page not written completely keeps user
  // bytes the mirror must carry over (alltoallv gaps).
  std::vector<std::size_t> covered(op.guard_pages, 0);
  op.edge_step.assign(op.steps.size(), 0);
  int edges = 0;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    const auto& s = op.steps[i];
    bool recv_side = s.kind != Kind::send || op.sends_from_mirror;
    if (!recv_side || s.bytes == 0) continue;
    std::uintptr_t b = base + s.offset, e = b + s.bytes;
    if (b < full_lo || e > full_hi) {
      if (s.kind != Kind::send) {
        op.edge_step[i] = 1;
        ++edges;
      }
    }
    for (std::uintptr_t pg = std::max(page_floor(b, ps), full_lo); pg < e && pg < full_hi; pg += ps) {
      std::size_t idx = (pg - full_lo) / ps;
      ++op.holders[idx];
      if (s.kind != Kind::send)
        covered[idx] += std::min<std::uintptr_t>(e, pg + ps) - std::max<std::uintptr_t>(b, pg);
    }
  }
  op.edge_pending.store(edges, std::memory_order_relaxed);
  std::vector<std::pair<std::uintptr_t, std::size_t>> runs;  // protected page runs
  for (std::size_t idx = 0; idx < op.guard_pages; ++idx) {
    std::uintptr_t pg = full_lo + idx * ps;
    if (op.holders[idx] == 0) {
      op.published[idx].store(1, std::memory_order_relaxed);  // never protected
      continue;
    }
    op.published[idx].store(0, std::memory_order_relaxed);
    if (covered[idx] < ps) std::memcpy(op.mirror + (pg - op.cover_lo), reinterpret_cast<void*>(pg), ps);
    if (!runs.empty() && runs.back().first + runs.back().second == pg) runs.back().second += ps;
    else runs.emplace_back(pg, ps);
  }
  // Register before protecting: a thread that faults in between must find its page.
  op.slot = ReplayGuard::instance().add(full_lo, full_hi, op.published.get(),
                                        op.costs ? &op.costs->wait_ns : nullptr);
  if (op.slot < 0) {
    munmap(op.mirror, op.cover_hi - op.cover_lo);
    op.mirror = nullptr;
    return false;
  }
  g_guarded_calls.fetch_add(1, std::memory_order_acq_rel);
  for (auto [pg, len] : runs) mprotect(reinterpret_cast<void*>(pg), len, PROT_NONE);
  return true;
}

/// Copies the bytes of edge sub-messages (partial first and last pages) from the mirror.
void copy_edges(const Op& op, std::size_t ps) {
  auto base = reinterpret_cast<std::uintptr_t>(op.recv_base);
  const std::uintptr_t full_lo = op.guard_lo, full_hi = op.guard_lo + op.guard_pages * ps;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    if (!op.edge_step[i]) continue;
    const auto& s = op.steps[i];
    std::uintptr_t b = base + s.offset, e = b + s.bytes;
    if (b < full_lo) {
      std::uintptr_t stop = std::min(e, full_lo);
      std::memcpy(reinterpret_cast<void*>(b), op.mirror + (b - op.cover_lo), stop - b);
    }
    if (e > full_hi) {
      std::uintptr_t from = std::max(b, full_hi);
      std::memcpy(reinterpret_cast<void*>(from), op.mirror + (from - op.cover_lo), e - from);
    }
  }
}

/// Allocates the send copy (not filled yet: fill_send_side does that after the op is handed
/// over).  A local copy step is not staged: the caller copies it straight into place.
void prepare_send_side(Op& op) {
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& s : op.steps)
    if (s.kind == Kind::send) lo = std::min(lo, s.offset), hi = std::max(hi, s.offset + s.bytes);
  op.copied.reset(new std::atomic<std::uint8_t>[op.steps.size()]);
  for (std::size_t i = 0; i < op.steps.size(); ++i) op.copied[i].store(0, std::memory_order_relaxed);
  if (hi <= lo) return;
  op.send_lo = lo;
  op.send_copy.reset(new char[hi - lo]);
}

/// Copies the send side step by step, edge pieces first, then in schedule order, marking each
/// step for the progress thread as soon as its bytes are in place.
/// Send steps may share bytes (Alltoallv displacements may overlap; a Bcast root sends each
/// segment to every child): each byte is copied once, since an earlier step's send may already
/// be on the wire from those bytes.
void fill_send_side(Op& op, const void* sendbuf) {
  const auto* src = static_cast<const char*>(sendbuf);
  std::map<std::size_t, std::size_t> done;  // copied send-side ranges [first, second), disjoint
  auto copy_once = [&](std::size_t a, std::size_t b) {
    auto copy = [&](std::size_t lo, std::size_t hi) {
      std::memcpy(op.send_copy.get() + (lo - op.send_lo), src + lo, hi - lo);
    };
    auto it = done.upper_bound(a);
    if (it != done.begin() && std::prev(it)->second >= a) --it;  // a range reaching a
    std::size_t cur = a, lo = a, hi = b;
    for (; it != done.end() && it->first <= b; it = done.erase(it)) {  // merge what [a, b) meets
      if (cur < it->first) copy(cur, it->first);
      cur = std::max(cur, it->second);
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
    }
    if (cur < b) copy(cur, b);
    done.emplace(lo, hi);
  };
  auto fill = [&](std::size_t i) {
    const Step& s = op.steps[i];
    if (s.kind == Kind::copy) std::memcpy(op.mirror_at(s.offset), src + s.src_offset, s.bytes);
    else if (s.kind == Kind::send) copy_once(s.offset, s.offset + s.bytes);
    op.copied[i].store(1, std::memory_order_release);
  };
  for (std::size_t i = 0; i < op.steps.size(); ++i)
    if (op.steps[i].edge) fill(i);
  for (std::size_t i = 0; i < op.steps.size(); ++i)
    if (!op.steps[i].edge) fill(i);
}

/// True when some send byte lies on a page the receive would protect (e.g. one array holding
/// both sides at disjoint displacements).
bool send_meets_receive(const Op& op, const void* sendbuf, std::uintptr_t ps) {
  const auto sb = reinterpret_cast<std::uintptr_t>(sendbuf), rb = reinterpret_cast<std::uintptr_t>(op.recv_base);
  std::uintptr_t slo = UINTPTR_MAX, shi = 0, rlo = UINTPTR_MAX, rhi = 0;
  for (const auto& s : op.steps) {
    if (s.kind == Kind::send) slo = std::min(slo, sb + s.offset), shi = std::max(shi, sb + s.offset + s.bytes);
    if (s.kind == Kind::copy) slo = std::min(slo, sb + s.src_offset), shi = std::max(shi, sb + s.src_offset + s.bytes);
    if (s.kind != Kind::send) rlo = std::min(rlo, rb + s.offset), rhi = std::max(rhi, rb + s.offset + s.bytes);
  }
  // Only the receive span's full pages get protected; its partial first and last page never do.
  return shi > slo && rhi > rlo && slo < page_floor(rhi, ps) && shi > page_ceil(rlo, ps);
}

bool EngineImpl::run_op(std::shared_ptr<Op> op, const void* sendbuf, bool allow_early) {
  const std::uint64_t t0 = now_ns();
  const std::size_t n = op->steps.size();
  op->reqs.assign(n, MPI_REQUEST_NULL);
  op->state.assign(n, 0);
  op->remaining = n;
  if (sendbuf != nullptr) prepare_send_side(*op);
  const bool receives = std::any_of(op->steps.begin(), op->steps.end(),
                                    [](const Step& s) { return s.kind != Kind::send; });
  if (sendbuf != nullptr && op->recv_base != nullptr && send_meets_receive(*op, sendbuf, page_size_)) {
    // The send side is copied after the receive pages are protected: a send byte on a guarded
    // page would fault on our own op and wait for it forever.  Such a call completes instead.
    allow_early = false;
  }
  bool early = false;
  if (!receives) {
    early = allow_early;  // e.g. the bcast root: nothing to guard once the send side is copied
  } else if (allow_early && prepare_receive(*op, page_size_)) {
    early = true;
  } else {
    op->direct = true;
    auto base = reinterpret_cast<std::uintptr_t>(op->recv_base);
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (const auto& s : op->steps)
      if (s.kind != Kind::send) lo = std::min(lo, base + s.offset), hi = std::max(hi, base + s.offset + s.bytes);
    op->cover_lo = lo;
    op->cover_hi = hi;
  }
  if (!early) op->caller_released.store(true, std::memory_order_release);
  Op& ref = *op;
  adapt::Costs* costs = ref.costs;  // `ref` may be retired and gone once released
  const std::uint64_t t1 = now_ns();
  submit(op);  // `op` keeps it alive here: the progress thread drops its reference at retire
  if (sendbuf != nullptr) fill_send_side(ref, sendbuf);
  const std::uint64_t t2 = now_ns();
  // What the call cost before returning, by stage (statistics, adapt.hpp).
  auto charge = [&](std::uint64_t end) {
    if (!costs) return;
    costs->init_ns.fetch_add(end - t0, std::memory_order_relaxed);
    costs->setup_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    costs->send_copy_ns.fetch_add(t2 - t1, std::memory_order_relaxed);
    costs->inside_wait_ns.fetch_add(end - t2, std::memory_order_relaxed);
  };
  if (!early) {
    wait_done(ref);
    charge(now_ns());
    return false;
  }
  if (ref.edge_pending.load(std::memory_order_acquire) != 0) wait_edges(ref);
  if (!ref.edge_step.empty()) copy_edges(ref, page_size_);
  const std::uint64_t end = now_ns();
  ref.caller_released.store(true, std::memory_order_release);
  init_ns_.fetch_add(end - t0, std::memory_order_relaxed);
  charge(end);
  return true;
}

}  // namespace

Engine& Engine::instance() {
  static Engine e;
  return e;
}

std::optional<std::string> Engine::start(const EngineOptions& options) { return impl().start(options); }

void Engine::stop() { impl().stop(); }

void Engine::drain() { impl().drain(); }

void Engine::prepare_node(MPI_Comm comm) { tnbc::shim::prepare_node(*impl().shadow(comm)); }

void Engine::complete_overlapping(const void* p, std::size_t n) {
  impl().complete_overlapping(reinterpret_cast<std::uintptr_t>(p), n);
}

std::uint64_t Engine::init_ns() const { return impl().init_ns_.load(); }
std::uint64_t Engine::gated_sends() const { return impl().gated_sends_.load(); }
std::uint64_t Engine::turn_wait_ns() const { return impl().turn_wait_ns_.load(); }
std::uint64_t Engine::progress_cpu_ns() const { return impl().progress_cpu_ns_.load(); }
std::uint64_t Engine::progress_rounds() const { return impl().progress_rounds_.load(); }
std::uint64_t Engine::fence_wait_ns() const { return impl().fence_wait_ns_.load(); }

namespace {

/// A new operation on `comm`'s shadow communicator with the next sequence number, and the
/// caller's rank and size.
struct NewOp {
  std::shared_ptr<Op> op = std::make_shared<Op>();
  Shadow* shadow = nullptr;
  std::uint32_t seq = 0;
  int rank = 0, size = 0;
};
NewOp new_op(MPI_Comm comm) {
  NewOp n;
  PMPI_Comm_rank(comm, &n.rank);
  PMPI_Comm_size(comm, &n.size);
  n.shadow = impl().shadow(comm);
  n.seq = n.shadow->seq++;
  n.op->comm = n.shadow->comm;
  n.op->tag = static_cast<int>((n.seq & static_cast<std::uint32_t>(g_seq_mask)) << 8);
  return n;
}

}  // namespace

bool Engine::alltoallv(const void* sendbuf, std::span<const std::size_t> send_bytes,
                       std::span<const std::size_t> send_displs, void* recvbuf,
                       std::span<const std::size_t> recv_bytes,
                       std::span<const std::size_t> recv_displs, MPI_Comm comm,
                       std::span<const int> recv_order, bool per_node, bool allow_early,
                       adapt::Costs* costs) {
  NewOp n = new_op(comm);
  n.op->costs = costs;
  n.op->steps = schedule::alltoallv(n.rank, n.size, send_bytes, send_displs, recv_bytes,
                                    recv_displs, recv_order, {impl().options_.chunk_bytes}).steps;
  n.op->window = static_cast<std::size_t>(impl().options_.chunk_window);
  n.op->edge_recvs_left = static_cast<std::size_t>(std::count_if(
      n.op->steps.begin(), n.op->steps.end(), [](const Step& s) { return s.kind == Kind::recv && s.edge; }));
  if (per_node) gate(*n.op, *n.shadow, n.seq, n.rank, recv_order);
  n.op->recv_base = static_cast<char*>(recvbuf);
  return impl().run_op(std::move(n.op), sendbuf, allow_early);
}

bool Engine::bcast(void* buffer, std::size_t bytes, int root, MPI_Comm comm, int segments,
                   int chains, std::span<const int> segment_order, bool allow_early,
                   adapt::Costs* costs) {
  NewOp n = new_op(comm);
  n.op->costs = costs;
  n.op->steps = schedule::bcast(n.rank, n.size, root, bytes, std::min(segments, 253), chains,
                                segment_order).steps;
  if (n.rank == root) return impl().run_op(std::move(n.op), buffer, allow_early);
  // Forwards read the segments just received, from the mirror (or the buffer when direct).
  n.op->sends_from_mirror = true;
  n.op->recv_base = static_cast<char*>(buffer);
  return impl().run_op(std::move(n.op), nullptr, allow_early);
}

}  // namespace tnbc::shim
