// The progress loop (run, post, progress, step_done) and the waits on it (progress.hpp).
#include "progress.hpp"

#include <pthread.h>
#include <unistd.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>

#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "shim/log.hpp"
#include "util/clock.hpp"
#include "buffer_pool.hpp"
#include "page_move.hpp"
#include "replay_guard.hpp"
#include "shim/fence.hpp"
#include "shim/watchdog.hpp"
#include "waker.hpp"

namespace tnbc::shim::replay::engine {

std::optional<std::string> Progress::start(const EngineOptions& options, std::size_t page_size) {
  pid_ = getpid();
  sleep_us_ = options.progress_sleep_us;
  max_sleep_us_ = options.progress_max_sleep_us;
  watchdog_s_ = options.watchdog_s;
  page_size_ = page_size;
  stopping_ = false;
  // The thread gets the CPUs of the thread that starts MPI, not those of whichever thread makes
  // the engine's first call (an OpenMP program may have pinned that one to a single core).
  has_cpus_ = pthread_getaffinity_np(pthread_self(), sizeof cpus_, &cpus_) == 0;
  // A system that refuses threads says so here, where the ranks agree on whether the engine
  // runs (mode_replay.cpp), not at a collective that one rank alone could not run.  A thread
  // started and joined costs a rank nothing afterwards (docs/measurements/idle-thread.md); a
  // small stack, because glibc keeps a joined thread's stack mapped for reuse (a default 8 MiB
  // one broke test_promises' address-space limit).
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t probe;
  const int rc = pthread_create(&probe, &attr, [](void*) -> void* { return nullptr; }, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) return fmt::format("cannot start a thread: {}", std::strerror(rc));
  pthread_join(probe, nullptr);
  return std::nullopt;
}

bool Progress::launch_locked() {
  // A fork()ed child holds the object, not the thread (its running_ may be the parent's): it
  // starts none (nor after a stop).
  if (pid_ < 0 || getpid() != pid_) return false;
  if (running_) return true;
  if (stopping_) return false;
  // A thread that ended after idling has left the lock and only records its figures: joined
  // here, before the next one starts.
  if (thread_.joinable()) thread_.join();
  // The progress thread starts with every asynchronous signal blocked: a signal sent to the
  // process (a timer, SIGTERM, SIGUSR1) goes to one of the program's threads, never to this one,
  // whose handler could read a receive page that only this thread can publish.
  sigset_t all, before;
  sigfillset(&all);
  for (int sync : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, sync);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  struct Restore {  // the caller's mask back on every way out, an exception's too
    const sigset_t& mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{before};
  try {
    // The progress thread lives inside MPI (fence.hpp): the interposed C library functions that
    // MPI calls on it never wait for guarded pages, which only this thread can publish.
    thread_ = std::thread([this] {
      if (has_cpus_) pthread_setaffinity_np(pthread_self(), sizeof cpus_, &cpus_);
      MpiScope inside;
      run();
    });
  } catch (const std::system_error& e) {
    launch_error_ = e.what();
    return false;
  }
  launch_error_.clear();
  running_ = true;
  starts_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Progress::Hold Progress::hold() {
  // A fork()ed child holds no thread, and perhaps the lock as the parent's thread held it.
  if (pid_ < 0 || getpid() != pid_) return Hold(nullptr);
  std::lock_guard lock(mutex_);
  if (!launch_locked()) {
    // Only a refusal sets launch_error_ (a fork()ed child or a stopping engine just has none).
    if (!launch_error_.empty() && !told_refusal_) {
      told_refusal_ = true;
      log::warn("cannot start the engine's progress thread ({}): its calls complete on the calling thread, "
                "without returning early, until a start succeeds", launch_error_);
    }
    return Hold(nullptr);
  }
  holds_.fetch_add(1, std::memory_order_relaxed);  // seen by the thread under mutex_
  return Hold(this);
}

unsigned Progress::waited_nap_us() const {
  // Ten times the shortest: a wait that lasts (a peer that has not entered the collective yet)
  // must not cost a fifth of a core in rounds that find nothing (measured with 20 us naps:
  // 18-21%), and one that ends soon is noticed within this much.
  return std::min(std::max(max_sleep_us_, sleep_us_), std::max(10 * sleep_us_, 1u));
}

void Progress::complete_here(Op& op) {
  // Naps as the progress thread's while somebody waits for it (waited_nap_us).
  const unsigned shortest = std::max(sleep_us_, 1u), longest = std::max(shortest, waited_nap_us());
  unsigned nap = shortest;
  op.last_moved_ns = util::now_ns();
  while (op.remaining > 0) {
    if (progress(op)) {
      op.last_moved_ns = util::now_ns();
      nap = shortest;
      continue;
    }
    if (watchdog_s_ != 0) watch(op, util::now_ns());
    std::this_thread::sleep_for(std::chrono::microseconds(nap));
    nap = std::min(longest, nap * 2);
  }
  retire(op, page_size_);
}

void Progress::stop() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  g_waker.kick();
  if (thread_.joinable()) thread_.join();
}

void Progress::submit(std::shared_ptr<Op> op) {
  {
    std::lock_guard lock(mutex_);  // Engine::run holds the thread (hold) from before setting `op` up
    all_.push_back(op.get());
    g_in_flight.fetch_add(1, std::memory_order_acq_rel);
    incoming_.push_back(std::move(op));
  }
  work_cv_.notify_one();
  g_waker.kick();  // a new op: the progress thread may be on a long nap
}

template <typename Pred>
std::uint64_t Progress::watched_wait(std::unique_lock<std::mutex>& lock, Pred pred) {
  if (pred()) return 0;
  const std::uint64_t t0 = util::now_ns(), bound = std::uint64_t{watchdog_s_} * 1000000000ull;
  g_waker.begin_wait();
  bool told = bound == 0;
  // Looked at once a second: a wait that ends sooner costs one timed condition wait.
  while (!done_cv_.wait_for(lock, std::chrono::seconds(1), pred)) {
    if (told) continue;
    const std::uint64_t now = util::now_ns(), from = round_from_ns_.load(std::memory_order_relaxed);
    if (from == 0 || now - from < bound || now - t0 < bound) continue;
    told = true;
    static constexpr const char* kDoing[] = {"posting and testing the MPI requests of the collectives in flight",
                                             "reading the page faults", "testing the decision's sums",
                                             "retiring finished collectives"};
    log::warn("watchdog: this rank's progress thread has been in one round for {:.0f} s ({}), and the program's "
              "thread waits for it to complete a collective: it is blocked, in an MPI call or in a fault on a "
              "page only it can publish, and no collective in flight on this rank can finish {}",
              static_cast<double>(now - from) / 1e9,
              kDoing[static_cast<std::size_t>(doing_.load(std::memory_order_relaxed))], kWatchdogHint);
  }
  g_waker.end_wait();
  return util::now_ns() - t0;
}

void Progress::wait_edges(Op& op) {
  std::unique_lock lock(mutex_);
  watched_wait(lock, [&] { return op.edges.edge_pending.load(std::memory_order_acquire) == 0; });
}

void Progress::wait_done(Op& op) {
  std::unique_lock lock(mutex_);
  watched_wait(lock, [&] { return op.done.load(std::memory_order_acquire); });
}

void Progress::drain() { fence([](const Op&) { return true; }); }

bool Progress::adopt(BackgroundRequest& r, bool wake) {
  // A fork()ed child holds the object, not the thread (nor, perhaps, the locks it held).
  if (getpid() != pid_) return false;
  {
    std::lock_guard lock(mutex_);  // pairs with the idle wait's predicate
    // A sum that needs the thread soon starts it; one it would only take at its next look is
    // left to its owner where no thread runs yet (progress.hpp: why the thread waits for work).
    if (stopping_ || !(wake ? launch_locked() : running_)) return false;
    std::lock_guard bg(background_mutex_);
    background_.push_back(&r);
    has_background_.store(true, std::memory_order_release);
  }
  if (wake) work_cv_.notify_one();
  return true;
}

void Progress::take_back(BackgroundRequest& r) {
  // A fork()ed child that exits destroys the keys it inherited, and with them their adopted
  // requests; the lock may have been the parent's progress thread's at the fork, and no thread
  // tests the child's copy of the list: nothing to take back.
  if (getpid() != pid_) return;
  std::lock_guard bg(background_mutex_);
  std::erase(background_, &r);
  has_background_.store(!background_.empty(), std::memory_order_release);
}

bool Progress::test_background() {
  std::lock_guard bg(background_mutex_);
  std::erase_if(background_, [](BackgroundRequest* r) {
    int flag = 0;
    // An error is MPI's to report (its error handler, fatal by default); the request is let go.
    return PMPI_Test(&r->request_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0;
  });
  has_background_.store(!background_.empty(), std::memory_order_release);
  return !background_.empty();
}

void Progress::complete_overlapping(std::uintptr_t p, std::size_t n) {
  fence([&](const Op& op) { return op.recv.overlaps(p, n); });
}

template <typename Which>
void Progress::fence(Which which) {
  std::unique_lock lock(mutex_);
  // The keys of the ops waited for, each once: the program waited for all of them, whichever
  // finished last, so each is charged the whole wait.
  std::vector<engine::Costs*> keys;
  for (const Op* op : all_)
    if (which(*op) && std::find(keys.begin(), keys.end(), op->costs) == keys.end()) keys.push_back(op->costs);
  if (keys.empty()) return;
  const std::uint64_t ns = watched_wait(lock, [&] {
    return std::none_of(all_.begin(), all_.end(), [&](const Op* op) { return which(*op); });
  });
  fence_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  for (engine::Costs* k : keys)
    if (k != nullptr) k->add_wait(ns);
}

void Progress::record_rusage() {
  struct rusage ru {};
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return;
  auto ns = [](const timeval& tv) {
    return static_cast<std::uint64_t>(tv.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(tv.tv_usec) * 1000ull;
  };
  user_ns_.fetch_add(ns(ru.ru_utime), std::memory_order_relaxed);
  system_ns_.fetch_add(ns(ru.ru_stime), std::memory_order_relaxed);
  wakeups_.fetch_add(static_cast<std::uint64_t>(ru.ru_nvcsw), std::memory_order_relaxed);
}

// Kept buffers idle this long are unmapped while no operation is in flight.
constexpr unsigned kIdleTrimMs = 1000;
// Idle, the thread looks this often, trims the pool and takes up the sums posted without waking
// it (background.hpp: how late such a sum is taken up at most).
constexpr unsigned kIdleLookMs = 500;
// After this many looks in a row with nothing to do (a second) the thread ends; the engine's
// next work starts another (hold, adopt).  A live thread that only sleeps cost fftMPI's
// pencils on unshaped links 3% (docs/measurements/idle-thread.md); a thread started and joined
// takes 15-70 us on this VM.
constexpr unsigned kIdleLooksToEnd = 2;

void Progress::run() {
  std::vector<std::shared_ptr<Op>> active;
  const unsigned min_nap = sleep_us_;
  const unsigned max_nap = std::max(max_sleep_us_, min_nap);
  const unsigned waited_nap = waited_nap_us();
  unsigned nap = min_nap;
  std::uint64_t cpu_mark = util::thread_cpu_ns();
  auto has_background = [this] { return has_background_.load(std::memory_order_acquire); };
  // Tests the adopted requests; their CPU counts as the thread's (cpu_ns), never an op's (the
  // ops' keys compare theirs).  True while any is left.
  auto test_adopted = [&] {
    const bool left = test_background();
    const std::uint64_t now = util::thread_cpu_ns();
    cpu_ns_.fetch_add(now - cpu_mark, std::memory_order_relaxed);
    cpu_mark = now;
    return left;
  };
  while (true) {
    const std::uint32_t seen = g_waker.word();
    {
      std::unique_lock lock(mutex_);
      // Idle: adopted requests are tested after naps that grow as for ops; kept engine buffers
      // that no call has taken for a while go back to the system, so a program that stopped
      // calling collectives does not keep their memory.
      unsigned background_nap = min_nap, idle_looks = 0;
      while (active.empty() && !stopping_ && incoming_.empty()) {
        if (has_background()) {
          idle_looks = 0;
          lock.unlock();
          cpu_mark = util::thread_cpu_ns();  // the idle time before is nobody's
          const bool left = test_adopted();
          lock.lock();
          if (left) {
            work_cv_.wait_for(lock, std::chrono::microseconds(background_nap),
                              [&] { return stopping_ || !incoming_.empty(); });
            background_nap = std::min(max_nap, std::max(background_nap, 1u) * 2);
          } else {
            background_nap = min_nap;  // the next adopted request starts from the shortest nap
          }
          continue;
        }
        if (work_cv_.wait_for(lock, std::chrono::milliseconds(kIdleLookMs),
                              [&] { return stopping_ || !incoming_.empty() || has_background(); }))
          continue;
        BufferPool::instance().trim_idle(kIdleTrimMs * 1000000ull);
        // Ends where nobody holds it: an engine call between hold() and submit() counts on it.
        // An adopted sum or an op comes in under this lock, so neither is left without a thread.
        if (++idle_looks >= kIdleLooksToEnd && holds_.load(std::memory_order_acquire) == 0) {
          running_ = false;
          lock.unlock();
          record_rusage();
          return;
        }
      }
      if (stopping_ && active.empty() && incoming_.empty()) {
        running_ = false;
        record_rusage();
        return;
      }
      if (active.empty()) cpu_mark = util::thread_cpu_ns();  // idle time between ops is nobody's
      while (!incoming_.empty()) {
        active.push_back(std::move(incoming_.front()));
        active.back()->last_moved_ns = util::now_ns();
        incoming_.pop_front();
      }
    }
    bool moved = false;
    const std::uint64_t round_ns = util::now_ns();
    round_from_ns_.store(round_ns, std::memory_order_relaxed);
    doing_.store(Doing::ops, std::memory_order_relaxed);
    for (auto& op : active) {
      if (progress(*op)) {
        moved = true;
        op->last_moved_ns = round_ns;
      } else if (watchdog_s_ != 0) {
        watch(*op, round_ns);
      }
    }
    doing_.store(Doing::faults, std::memory_order_relaxed);
    const bool held = page_move::available() && see_faults(active);
    // This round's CPU time, shared by the ops it served (adapt/policy.hpp counts it as their cost).
    const std::uint64_t cpu_now = util::thread_cpu_ns(), cpu = cpu_now - cpu_mark;
    cpu_mark = cpu_now;
    cpu_ns_.fetch_add(cpu, std::memory_order_relaxed);
    rounds_.fetch_add(1, std::memory_order_relaxed);
    for (auto& op : active)
      if (op->costs) op->costs->progress_cpu_ns.fetch_add(cpu / active.size(), std::memory_order_relaxed);
    doing_.store(Doing::sums, std::memory_order_relaxed);
    if (has_background()) test_adopted();
    doing_.store(Doing::retiring, std::memory_order_relaxed);
    const bool retired = retire_finished(active);
    round_from_ns_.store(0, std::memory_order_relaxed);
    if (retired || moved) {
      std::lock_guard lock(mutex_);  // pairs with the predicate checks of the waiters
      done_cv_.notify_all();
    }
    if (!moved && !retired && !active.empty()) {
      // Nothing moved: nap instead of spinning, the application may need this core; longer
      // each time nothing moves, unless somebody waits for us.
      nap = std::min(g_waker.waited_for() || held ? waited_nap : max_nap, nap == 0 ? 1u : nap * 2);
      // Where an op's pages are moved out, a thread touching one sleeps in the kernel, and the
      // userfaultfd becoming readable ends the nap as a fault handler's kick does.
      const bool moving = std::any_of(active.begin(), active.end(), [](const auto& op) { return op->recv.by_move; });
      g_waker.nap(nap, seen, moving ? page_move::fd() : -1);
    } else {
      nap = min_nap;
    }
  }
}

bool Progress::retire_finished(std::vector<std::shared_ptr<Op>>& active) {
  bool retired = false;
  for (auto it = active.begin(); it != active.end();) {
    if ((*it)->remaining == 0 && (*it)->caller_released.load(std::memory_order_acquire)) {
      retire(**it, page_size_);
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
  return retired;
}

bool Progress::see_faults(const std::vector<std::shared_ptr<Op>>& active) {
  std::uintptr_t addrs[64];
  const std::size_t n = page_move::take_faults(addrs, 64);
  const std::uint64_t now = util::now_ns();
  for (std::size_t k = 0; k < n; ++k) held_.push_back({addrs[k], now});
  for (auto it = held_.begin(); it != held_.end();) {
    // The op whose moved-out page it is; none (retired, or not ours): released by now.
    const Op* owner = nullptr;
    std::size_t idx = 0;
    for (const auto& op : active) {
      const ReceiveMirror& r = op->recv;
      if (r.by_move && it->addr >= r.guard_lo && it->addr < r.guard_lo + r.guard_pages * page_size_) {
        owner = op.get();
        idx = (it->addr - r.guard_lo) / page_size_;
        break;
      }
    }
    if (owner != nullptr && owner->recv.published[idx].load(std::memory_order_acquire) == 0) {
      ++it;
      continue;
    }
    // Published (its publish woke the thread), or no op in flight moved it out (an op not yet
    // taken up, or one retired): a wake is always safe, the thread touches the page again and
    // reads it or faults anew.  (A page no step holds is never missing: the guard gave it the
    // zero page, receive_mirror.cpp.)
    page_move::wake(it->addr / page_size_ * page_size_);
    const std::uint64_t waited = now - it->seen_ns;
    ReplayGuard::instance().add_fault(waited);
    if (owner != nullptr && owner->costs != nullptr) owner->costs->add_wait(waited);
    it = held_.erase(it);
  }
  return !held_.empty();
}

void Progress::post(Op& op, std::size_t i) {
  const Step& s = op.steps[i];
  const int tag = op.tag | (s.piece & 0xff);
  const int count = static_cast<int>(s.bytes);
  if (s.kind == Kind::recv) {
    PMPI_Irecv(op.recv.mirror_at(s.offset), count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
  } else {
    const char* src = op.sends_from_mirror ? op.recv.mirror_at(s.offset) : op.send.base + s.offset;
    // Windowed sends (inter-node bodies under per-node priority) are synchronous: they
    // complete when the receiver has matched them, not when the transport has taken a local
    // copy (eager), so the window and the per-node turn bound what is really on the way
    // instead of what sits in socket buffers.
    if (op.window.windowed(s, op.turn)) PMPI_Issend(src, count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
    else PMPI_Isend(src, count, MPI_BYTE, s.peer, tag, op.comm, &op.reqs[i]);
  }
  op.state[i] = 1;
}

bool Progress::progress(Op& op) {
  bool moved = false;
  std::vector<std::size_t> ready;
  if (op.turn.pass_if_nothing_to_send()) moved = true;  // nothing to send off the node
  // Post what may go: everything without a pending dependency, in schedule order.  Windowed
  // sends (inter-node bodies under per-node priority) go strictly in order, at most `window`
  // unfinished.
  std::size_t unfinished = 0;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    if (op.state[i] == 2) continue;
    const Step& s = op.steps[i];
    if (op.window.windowed(s, op.turn) && unfinished++ >= op.window.window) continue;
    if (op.state[i] != 0) continue;
    if (s.kind != Kind::recv && !op.send.step_copied(i)) continue;  // the caller is still copying
    if (op.edges.held_for_edges(s)) continue;
    if (s.kind == Kind::copy) {  // the caller copied the own block into place
      step_done(op, i, ready);
      moved = true;
    } else if (s.after < 0 || op.state[static_cast<std::size_t>(s.after)] == 2) {
      if (op.turn.remote(s) && !op.turn.may_send()) continue;  // not this rank's turn on the node yet
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
    // CPU time, not wall time: on a full node the thread may lose its core in the middle, and
    // that is the scheduler's cost, not publishing's.
    const std::uint64_t t0 = util::thread_cpu_ns();
    publish(op, ready, page_size_);
    if (op.costs) op.costs->publish_ns.fetch_add(util::thread_cpu_ns() - t0, std::memory_order_relaxed);
  }
  return moved;
}

void Progress::step_done(Op& op, std::size_t i, std::vector<std::size_t>& ready) {
  op.state[i] = 2;
  --op.remaining;
  const Step& s = op.steps[i];
  op.turn.step_done(s);  // the last inter-node send: the next rank of the node may inject
  if (s.kind == Kind::recv && s.edge && op.edges.edge_recvs_left > 0) --op.edges.edge_recvs_left;
  bool touches_recv = s.kind != Kind::send || op.sends_from_mirror;
  const ReceiveMirror& r = op.recv;
  if (touches_recv && r.guard_pages > 0) {
    auto b = reinterpret_cast<std::uintptr_t>(r.recv_base) + s.offset;
    auto e = b + s.bytes;
    for (std::uintptr_t pg = std::max(page_floor(b, page_size_), r.guard_lo);
         pg < e && pg < r.guard_lo + r.guard_pages * page_size_; pg += page_size_) {
      std::size_t idx = (pg - r.guard_lo) / page_size_;
      if (--op.recv.holders[idx] == 0) ready.push_back(idx);
    }
  }
  if (!op.edges.edge_step.empty() && op.edges.edge_step[i])
    op.edges.edge_pending.fetch_sub(1, std::memory_order_acq_rel);
}

void Progress::watch(Op& op, std::uint64_t now_ns) {
  if (op.watchdog_told || now_ns - op.last_moved_ns < std::uint64_t{watchdog_s_} * 1000000000ull) return;
  op.watchdog_told = true;
  // The peers (ranks of the communicator) it still waits for: those it has received nothing
  // from yet (a stopped rank, or one not in the call yet, is among them), and the others.
  std::vector<int> silent, partly, to;
  std::size_t recv_bytes = 0, send_bytes = 0, unposted = 0;
  auto add = [](std::vector<int>& v, int r) {
    if (std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
  };
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    const Step& s = op.steps[i];
    if (op.state[i] == 2 || s.kind == Kind::copy) continue;
    if (op.state[i] == 0) ++unposted;
    if (s.kind == Kind::send) {
      send_bytes += s.bytes;
      add(to, s.peer);
      continue;
    }
    recv_bytes += s.bytes;
    const bool heard = std::any_of(op.steps.begin(), op.steps.end(), [&](const Step& t) {
      return t.kind == Kind::recv && t.peer == s.peer && op.state[static_cast<std::size_t>(&t - op.steps.data())] == 2;
    });
    add(heard ? partly : silent, s.peer);
  }
  for (auto* v : {&silent, &partly, &to}) std::sort(v->begin(), v->end());
  auto ranks = [&](const std::vector<int>& v) { return named_ranks(op.comm, v); };
  int size = 0;
  PMPI_Comm_size(op.comm, &size);
  log::warn("watchdog: an {} run by the engine (call {} on a communicator of {} ranks) has made no progress for "
            "{:.0f} s: {} bytes still to receive, nothing yet from {}, the rest from {}; {} bytes still to "
            "send, to {}; {} of its {} messages not yet posted{}; {} edge pieces missing; the calling thread {}.  "
            "A rank that sent nothing may be stopped, or may not have entered this collective {}",
            op.what, op.seq, size, static_cast<double>(now_ns - op.last_moved_ns) / 1e9, recv_bytes, ranks(silent),
            ranks(partly), send_bytes, ranks(to), unposted, op.steps.size(),
            op.turn.remote_peers > 0 ? " (per-node turns)" : "", op.edges.edge_recvs_left,
            op.caller_released.load(std::memory_order_acquire) ? "has returned" : "is still inside the call",
            kWatchdogHint);
}

}  // namespace tnbc::shim::replay::engine
