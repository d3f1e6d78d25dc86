// The progress thread and its hand-over with the calling threads: ops come in (submit), the
// loop posts every receive at once into the mirror and the sends in schedule order (gated by
// the node's turn and the send window), tests them, publishes each page once every step that
// uses it completed, and retires finished ops; callers wait for an op's edges or its end, and
// fences for every op, or every op overlapping a range.  It changes g_in_flight (fence.hpp):
// one per op submitted and not yet retired.
#pragma once

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "background.hpp"
#include "engine.hpp"
#include "op.hpp"

namespace tnbc::shim::replay::engine {

class Progress {
 public:
  /// Takes the settings and checks that the system gives this process a thread (one started
  /// and joined): the error where it does not.  The thread itself starts only once the engine
  /// has work for it: its first op (hold) or the first sum its owner needs soon (adopt).  A
  /// program whose calls all run MPI's blocking calls never has it, and it ends after a second
  /// with nothing to do: an idle thread that merely exists cost fftMPI's pencils on unshaped
  /// links 3% (a live thread of the process, not its wake-ups; docs/measurements/idle-thread.md).
  std::optional<std::string> start(const EngineOptions& options, std::size_t page_size);

  /// Keeps the thread running while it is held: an engine call holds it from before its op is
  /// set up until the call returns, so that the thread cannot end, idle, before the op is in.
  class Hold {
   public:
    explicit Hold(Progress* p) : p_(p) {}
    Hold(Hold&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Hold& operator=(Hold&&) = delete;
    ~Hold() {
      if (p_ != nullptr) p_->holds_.fetch_sub(1, std::memory_order_release);
    }
    /// Whether a thread runs and is held; false where none may run (complete_here).
    bool held() const { return p_ != nullptr; }

   private:
    Progress* p_;
  };
  /// Starts the thread where none runs (never started, or ended after idling) and holds it.
  /// Holds nothing where no thread may run: the system refused one (said once on stderr; the
  /// next call tries again), a fork()ed child, a stopping engine.  Called before an op is set
  /// up, so that such a call is set up to complete on the calling thread (complete_here).
  [[nodiscard]] Hold hold();
  /// Runs `op` (set up not to return early: received in place, nothing guarded) to completion on
  /// the calling thread, as the progress thread would, napping while nothing moves; for a call
  /// that holds no thread.  The ranks' messages are the same as with the thread, so a rank
  /// whose system refused one still meets its peers in the exchange.
  void complete_here(Op& op);
  /// Completes everything in flight and stops the thread.
  void stop();

  /// Hands `op` (set up by the calling thread) to the progress thread.
  void submit(std::shared_ptr<Op> op);
  void wait_edges(Op& op);
  void wait_done(Op& op);
  /// Completes every operation in flight (the fence).
  void drain();
  /// Completes every operation whose receive span overlaps [p, p + n).
  void complete_overlapping(std::uintptr_t p, std::size_t n);
  /// Tests `r` between the thread's rounds and naps until it completes or take_back(r) (the
  /// owner waits for it), from now where `wake`, else from the thread's next look (its next
  /// round, or its idle wake-up: background.hpp); `wake` starts the thread where it does not
  /// run yet.  False where no thread takes it (stopping, a fork()ed child, the system refused
  /// the thread, or none started yet and `wake` false): the owner keeps it.
  bool adopt(BackgroundRequest& r, bool wake);
  /// Ends the testing of `r`: afterwards only the caller uses it (its request is
  /// MPI_REQUEST_NULL where the thread completed it).
  void take_back(BackgroundRequest& r);

  std::uint64_t cpu_ns() const { return cpu_ns_.load(); }
  std::uint64_t rounds() const { return rounds_.load(); }
  std::uint64_t fence_wait_ns() const { return fence_wait_ns_.load(); }
  /// The thread's CPU time in user space and in the kernel (getrusage, RUSAGE_THREAD), known
  /// once it stopped: the kernel's share is mostly the network stack's work for the transfers.
  std::uint64_t user_ns() const { return user_ns_.load(); }
  std::uint64_t system_ns() const { return system_ns_.load(); }
  /// The times the thread gave up its core and was woken again (getrusage's voluntary context
  /// switches), known once it stopped.
  std::uint64_t wakeups() const { return wakeups_.load(); }
  /// Whether the thread started (it may have stopped since).
  bool launched() const { return starts_.load() > 0; }
  /// The times it started: after a second with no work it ends (an idle thread that merely
  /// exists costs a full node's ranks), and the next work starts it again.
  std::uint64_t starts() const { return starts_.load(); }

 private:
  void run();
  /// Starts the thread where none runs, under mutex_: false where none may (refused, stopping,
  /// or a fork()ed child).
  bool launch_locked();
  /// Adds the ending thread's getrusage figures to the totals (each thread started adds its own).
  void record_rusage();
  /// The longest nap while a thread waits for the engine: the progress thread's naps stop
  /// growing there, and complete_here's.
  unsigned waited_nap_us() const;
  bool progress(Op& op);
  /// The watchdog: reports `op` once on stderr where none of its steps completed for
  /// watchdog_s_ seconds (what it still waits for, and from which ranks).
  void watch(Op& op, std::uint64_t now_ns);
  void post(Op& op, std::size_t i);
  void step_done(Op& op, std::size_t i, std::vector<std::size_t>& ready);
  /// Threads the kernel holds on missing pages of ops published by moving pages: noted when
  /// the userfaultfd reports them, counted (with the time until their page is published) once
  /// it is, and woken once published (or where no op in flight holds the page).  Returns
  /// whether any is still waiting.
  bool see_faults(const std::vector<std::shared_ptr<Op>>& active);
  /// Tests every adopted request once and lets go of the completed ones; true while any is left.
  bool test_background();
  /// Retires the ops that are complete and released by their caller; true if any was.
  bool retire_finished(std::vector<std::shared_ptr<Op>>& active);
  /// Waits until no op for which which(op) holds is left, and charges the wait to the fence
  /// counter and to each of their keys.
  template <typename Which>
  void fence(Which which);
  /// Waits on done_cv_ for `pred` as a calling thread (an op's completion or edges, a fence),
  /// with the progress thread kept awake (g_waker), and returns the time waited (0 where `pred`
  /// held at once: no wake-up, no clock reads).  It has a watchdog of its own: the progress
  /// thread's runs in its rounds, so a round that never ends (the thread blocked in an MPI call,
  /// or in a fault on a page only it can publish) is said here, once per wait, where the wait and
  /// that round have both lasted watchdog_s_.
  template <typename Pred>
  std::uint64_t watched_wait(std::unique_lock<std::mutex>& lock, Pred pred);

  /// What the progress thread does, for watched_wait: the part of its round, and when the
  /// round began (0: between rounds, napping or idle).  Stored relaxed, a few times a round.
  enum class Doing : std::uint8_t { ops, faults, sums, retiring };
  std::atomic<std::uint64_t> round_from_ns_{0};
  std::atomic<Doing> doing_{Doing::ops};

  unsigned sleep_us_ = 20, max_sleep_us_ = 1000, watchdog_s_ = 30;
  std::size_t page_size_ = 4096;
  std::atomic<std::uint64_t> cpu_ns_{0}, rounds_{0}, fence_wait_ns_{0}, user_ns_{0}, system_ns_{0}, wakeups_{0};
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<Op>> incoming_;
  std::vector<Op*> all_;  // every op not yet retired, for drain/overlap checks (under mutex_)
  struct HeldFault {
    std::uintptr_t addr;
    std::uint64_t seen_ns;
  };
  std::vector<HeldFault> held_;  // progress thread only
  bool stopping_ = false;
  std::thread thread_;
  // Adopted requests (adopt): background_mutex_ is held while the thread tests them, so
  // take_back never returns while one is being tested.
  std::mutex background_mutex_;
  std::vector<BackgroundRequest*> background_;
  std::atomic<bool> has_background_{false};
  bool running_ = false;                // a thread runs and has not decided to end (under mutex_)
  std::atomic<std::size_t> holds_{0};   // Holds alive (raised under mutex_ with running_ set)
  std::atomic<std::uint64_t> starts_{0};
  int pid_ = -1;  // the process whose engine started (its thread, once launched)
  std::string launch_error_;  // why the system refused the thread at the last try (under mutex_)
  bool told_refusal_ = false;  // a refusal was said on stderr (under mutex_)
  cpu_set_t cpus_{};          // the CPUs of the thread that started the engine (start)
  bool has_cpus_ = false;
};

}  // namespace tnbc::shim::replay::engine
