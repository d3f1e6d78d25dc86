// The Engine (engine.hpp): starting and stopping it, and one collective from the call's entry
// to its return (build the op, set up both sides, hand it over, wait for the edges).
#include "engine.hpp"

#include <unistd.h>

#include <algorithm>

#include "shim/log.hpp"
#include "util/clock.hpp"
#include "node_turn.hpp"
#include "schedule_pieces.hpp"
#include "op.hpp"
#include "progress.hpp"
#include "receive_mirror.hpp"
#include "replay_guard.hpp"
#include "buffer_pool.hpp"
#include "send_copy.hpp"
#include "shadow.hpp"
#include "waker.hpp"

namespace tnbc::shim::replay::engine {

using engine::Op;
using schedule::Kind;
using schedule::Step;

Engine::Engine() : progress_(std::make_unique<engine::Progress>()) {}
Engine::~Engine() = default;

Engine& Engine::instance() {
  // Never destroyed: at exit its progress thread may still run (a program that ends without
  // MPI_Finalize) or not exist at all (a fork()ed child inherits the object, not the thread),
  // and destroying a std::thread that was never joined terminates the process.
  static Engine* e = new Engine;
  return *e;
}

std::optional<std::string> Engine::start(const EngineOptions& options) {
  options_ = options;
  page_size_ = engine::system_page_size();
  // First: where the system gives no thread, nothing else is set up.
  if (auto err = progress_->start(options_, page_size_)) return err;
  engine::BufferPool::instance().set_bound(options_.max_memory_bytes);
  publishing_ = engine::start_publishing(options_.publish);
  if (options_.publish != "auto" && publishing_.rfind(options_.publish, 0) != 0)
    log::info_rank0("TNBC_PUBLISH={}: received pages are published by {}", options_.publish, publishing_);
  else
    log::debug("engine: received pages are published by {}", publishing_);
  if (auto err = engine::start_shadows()) return err;
  if (auto err = engine::ReplayGuard::instance().install()) return err;
  engine::ReplayGuard::instance().set_wait_hooks(engine::waker_begin_wait, engine::waker_end_wait);
  return std::nullopt;
}

void Engine::set_max_memory(std::size_t bytes) {
  options_.max_memory_bytes = bytes;
  engine::BufferPool::instance().set_bound(bytes);
}

void Engine::stop() {
  progress_->stop();
  engine::stop_shadows();
  engine::ReplayGuard::instance().uninstall();
}

void Engine::drain() { progress_->drain(); }

bool BackgroundRequest::start(MPI_Request request, bool wake) {
  request_ = request;
  started_ = true;
  adopted_ = Engine::instance().progress_->adopt(*this, wake);
  return adopted_;
}

void BackgroundRequest::take_back() {
  if (adopted_) Engine::instance().progress_->take_back(*this);
  adopted_ = false;
}

BackgroundRequest::~BackgroundRequest() { take_back(); }

bool BackgroundRequest::wait() {
  if (!started_) return false;
  started_ = false;
  take_back();
  if (request_ == MPI_REQUEST_NULL) return true;
  // Moved by the program's own MPI calls before the progress thread looked.
  int flag = 0;
  if (PMPI_Test(&request_, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) return true;
  PMPI_Wait(&request_, MPI_STATUS_IGNORE);  // an error shows in the sums' use, as before
  return false;
}

void Engine::prepare(MPI_Comm comm) { engine::shadow_start(comm); }

void Engine::prepare_node(MPI_Comm comm) { engine::prepare_node(*engine::shadow(comm)); }

void Engine::complete_overlapping(const void* p, std::size_t n) {
  progress_->complete_overlapping(reinterpret_cast<std::uintptr_t>(p), n);
}

std::uint64_t Engine::init_ns() const { return init_ns_.load(); }
std::uint64_t Engine::turn_calls() const { return engine::g_turn_calls.load(); }
std::uint64_t Engine::gated_sends() const { return engine::g_gated_sends.load(); }
std::uint64_t Engine::send_window_max() const { return engine::g_send_window_max.load(); }
std::uint64_t Engine::turn_wait_ns() const { return engine::g_turn_wait_ns.load(); }
std::uint64_t Engine::progress_cpu_ns() const { return progress_->cpu_ns(); }
std::uint64_t Engine::progress_rounds() const { return progress_->rounds(); }
std::uint64_t Engine::progress_user_ns() const { return progress_->user_ns(); }
std::uint64_t Engine::progress_system_ns() const { return progress_->system_ns(); }
std::uint64_t Engine::progress_wakeups() const { return progress_->wakeups(); }
bool Engine::progress_started() const { return progress_->launched(); }
std::uint64_t Engine::progress_starts() const { return progress_->starts(); }
std::uint64_t Engine::fence_wait_ns() const { return progress_->fence_wait_ns(); }

bool Engine::reserve(Op& op, const void* sendbuf, bool receives) {
  // The pool maps at most max_memory_bytes; what is in flight gives its buffers back when it
  // completes, so a call that finds no free memory drains and tries once more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt == 1) drain();
    if (receives && !engine::reserve_mirror(op, page_size_)) continue;
    if (sendbuf != nullptr && !engine::prepare_send_side(op, sendbuf, true)) {
      op.recv.mirror_buf.reset();
      continue;
    }
    return true;
  }
  return false;
}

Engine::Result Engine::run(std::shared_ptr<Op> op, const void* sendbuf, bool allow_early) {
  // Started where none runs (the first op, or the first after it ended idle), and held until
  // the call returns; before anything is set up, so that where no thread may run (the system
  // refused one) the op is set up to complete on this thread: the same messages, no early return.
  const auto hold = progress_->hold();
  const bool here = !hold.held();
  const char* no_thread = here && allow_early ? "no_thread" : nullptr;  // else the caller's reason stands
  if (here) allow_early = false;
  const std::uint64_t t0 = util::now_ns();  // after it: a thread's start is no call's cost
  const std::size_t n = op->steps.size();
  op->reqs.assign(n, MPI_REQUEST_NULL);
  op->state.assign(n, 0);
  op->remaining = n;
  const bool receives = std::any_of(op->steps.begin(), op->steps.end(),
                                    [](const Step& s) { return s.kind != Kind::send; });
  if (sendbuf != nullptr && op->recv.recv_base != nullptr && engine::send_meets_receive(*op, sendbuf, page_size_)) {
    // The send side is copied after the receive pages are protected: a send byte on a guarded
    // page would fault on our own op and wait for it forever.  Such a call completes instead.
    allow_early = false;
  }
  // An early return holds a send copy and a mirror until the op completes: within the bound,
  // or the call waits, sending from the caller's buffer and receiving in place.
  const char* why = nullptr;
  if (allow_early && !reserve(*op, sendbuf, receives)) {
    allow_early = false;
    why = "memory";
  }
  if (!allow_early && sendbuf != nullptr) {
    // Not staged, the sends are read from the caller's buffer by the progress thread.  Bytes of
    // it that an op in flight still receives (a buffer an early call returned, passed on at once
    // as this call's send buffer) would fault there, on the one thread that could publish them,
    // and hang the rank: those ops complete first, as the receive side's do (a staged send side
    // is copied by this thread, which waits in such a fault until the page is published).
    const auto [lo, hi] = engine::send_span(*op);
    if (hi > lo) progress_->complete_overlapping(reinterpret_cast<std::uintptr_t>(sendbuf) + lo, hi - lo);
    engine::prepare_send_side(*op, sendbuf, false);
  }
  bool early = false;
  if (!receives) {
    early = allow_early;  // e.g. the bcast root: nothing to guard once the send side is copied
  } else if (allow_early && engine::prepare_receive(*op, page_size_)) {
    early = true;
  } else {
    engine::receive_direct(*op);
  }
  // (Run here, the op's watchdog says the calling thread is still inside the call: it is.)
  if (!early && !here) op->caller_released.store(true, std::memory_order_release);
  Op& ref = *op;
  engine::Costs* costs = ref.costs;  // `ref` may be retired and gone once released
  const std::uint64_t t1 = util::now_ns();
  // `op` keeps it alive here: the progress thread drops its reference at retire.
  if (!here) progress_->submit(op);
  if (sendbuf != nullptr) engine::fill_send_side(ref, sendbuf);
  const std::uint64_t t2 = util::now_ns();
  // What the call cost before returning, by stage (statistics, adapt/policy.hpp).
  auto charge = [&](std::uint64_t end) {
    if (!costs) return;
    costs->init_ns.fetch_add(end - t0, std::memory_order_relaxed);
    costs->setup_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    costs->send_copy_ns.fetch_add(t2 - t1, std::memory_order_relaxed);
    costs->inside_wait_ns.fetch_add(end - t2, std::memory_order_relaxed);
  };
  if (here) {
    progress_->complete_here(ref);
    charge(util::now_ns());
    return {false, no_thread};
  }
  if (!early) {
    progress_->wait_done(ref);
    charge(util::now_ns());
    return {false, why};
  }
  if (ref.edges.edge_pending.load(std::memory_order_acquire) != 0) progress_->wait_edges(ref);
  if (!ref.edges.edge_step.empty()) engine::copy_edges(ref, page_size_);
  const std::uint64_t end = util::now_ns();
  ref.caller_released.store(true, std::memory_order_release);
  init_ns_.fetch_add(end - t0, std::memory_order_relaxed);
  charge(end);
  return {true, nullptr};
}

namespace {

/// A new operation on `comm`'s shadow communicator with the next sequence number, and the
/// caller's rank and size.
struct NewOp {
  std::shared_ptr<Op> op = std::make_shared<Op>();
  engine::Shadow* shadow = nullptr;
  std::uint32_t seq = 0;
  int rank = 0, size = 0;
};
NewOp new_op(MPI_Comm comm) {
  NewOp n;
  PMPI_Comm_rank(comm, &n.rank);
  PMPI_Comm_size(comm, &n.size);
  n.shadow = engine::shadow(comm);
  n.seq = n.shadow->seq++;
  n.op->comm = n.shadow->comm;
  n.op->tag = engine::tag_of(n.seq);
  n.op->seq = n.seq;
  return n;
}

}  // namespace

Engine::Result Engine::alltoallv(const void* sendbuf, std::span<const std::size_t> send_bytes,
                       std::span<const std::size_t> send_displs, void* recvbuf,
                       std::span<const std::size_t> recv_bytes,
                       std::span<const std::size_t> recv_displs, MPI_Comm comm,
                       std::span<const int> recv_order, bool per_node, bool allow_early,
                       engine::Costs* costs, int window) {
  NewOp n = new_op(comm);
  n.op->what = "alltoall(v)";
  n.op->costs = costs;
  n.op->steps = schedule::alltoallv(n.rank, n.size, send_bytes, send_displs, recv_bytes,
                                    recv_displs, recv_order, {options_.chunk_bytes}).steps;
  n.op->window.window = static_cast<std::size_t>(window > 0 ? window : options_.chunk_window);
  n.op->edges.edge_recvs_left = static_cast<std::size_t>(std::count_if(
      n.op->steps.begin(), n.op->steps.end(), [](const Step& s) { return s.kind == Kind::recv && s.edge; }));
  if (per_node) {
    engine::gate(n.op->turn, n.op->steps, *n.shadow, n.seq, n.rank, recv_order);
    n.op->window.window = schedule::send_window(n.op->window.window, n.op->turn.remote_peers);
    // Threads of the program may call at once: keep the largest (of calls with a window at all).
    std::uint64_t seen = engine::g_send_window_max.load(std::memory_order_relaxed);
    while (n.op->turn.remote_peers > 0 && n.op->window.window > seen &&
           !engine::g_send_window_max.compare_exchange_weak(seen, n.op->window.window, std::memory_order_relaxed)) {
    }
  }
  n.op->recv.recv_base = static_cast<char*>(recvbuf);
  return run(std::move(n.op), sendbuf, allow_early);
}

Engine::Result Engine::bcast(void* buffer, std::size_t bytes, int root, MPI_Comm comm, int segments,
                   int chains, std::span<const int> segment_order, bool allow_early,
                   engine::Costs* costs) {
  NewOp n = new_op(comm);
  n.op->what = "bcast";
  n.op->costs = costs;
  n.op->steps = schedule::bcast(n.rank, n.size, root, bytes, std::min(segments, 253), chains,
                                segment_order).steps;
  if (n.rank == root) return run(std::move(n.op), buffer, allow_early);
  // Forwards read the segments just received, from the mirror (or the buffer when direct).
  n.op->sends_from_mirror = true;
  n.op->recv.recv_base = static_cast<char*>(buffer);
  return run(std::move(n.op), nullptr, allow_early);
}

}  // namespace tnbc::shim::replay::engine
