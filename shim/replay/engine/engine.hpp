// The replay engine: collectives that return early and finish in the background.
//
// For a qualifying call the calling thread (1) builds the schedule (schedule.hpp) with the
// plan's priorities, (2) copies the send side into engine memory, (3) maps a mirror of the
// receive span, pre-copies the user bytes of pages the receive does not cover completely,
// (4) protects the full receive pages and registers them with the ReplayGuard, (5) hands the
// operation to the progress thread, (6) waits only for the sub-messages that touch the partial
// first and last pages, copies their bytes into place, and returns.
//
// The progress thread posts every receive at once into the mirror and the sends in schedule
// order (a bcast forward after its receive), tests them, and publishes each page as soon as
// every step that writes or reads it completed: it writes the mirror page into the user page
// while that is still inaccessible, then opens it (no thread can see half a page; where the
// kernel refuses such writes, mremap moves the mirror page over instead) and marks it
// published, which releases any thread waiting in the fault handler.  When every step is done
// the operation is retired.
//
// No lock is held across an MPI call: the progress thread and the application call PMPI
// concurrently (MPI_THREAD_MULTIPLE), so an application blocked in MPI cannot stop our progress.
//
// The files of shim/replay/engine/, in the order a call goes through them:
//   engine.cpp          this interface: start and stop; one call from its entry to its return
//   shadow.*            shadow communicators, sequence numbers and tags, the node's turn counters
//   node_turn.*         per-node priority (the gate, passing the turn) and the send window
//   buffer_pool.*       engine memory: send copies and mirrors, kept for reuse, bounded
//   send_copy.*         the send side copied into engine memory
//   receive_mirror.*    the mirror, guarded and edge pages, publishing
//   op.hpp              one collective in flight, built from the parts above
//   progress.*          the progress thread, and callers' and fences' waits for it
//   background.hpp      requests the progress thread completes between calls (the decision's sums)
//   waker.*             the progress thread's nap and wake-up (futex)
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "costs.hpp"

namespace tnbc::shim::replay::engine {

struct Op;
class Progress;
class BackgroundRequest;

struct EngineOptions {
  /// The progress thread's nap after a round that moved nothing starts at progress_sleep_us
  /// and doubles with every further such round up to progress_max_sleep_us; any round that
  /// moves something, and any thread that starts waiting for the engine (a fault, a fence, a
  /// call waiting for its edge pages), brings it back to progress_sleep_us at once.
  unsigned progress_sleep_us = 20;
  unsigned progress_max_sleep_us = 1000;
  std::size_t chunk_bytes = 64 * 1024;  ///< alltoall(v) body chunk size, 0 = whole bodies
  int chunk_window = 2;                 ///< inter-node body chunks in flight under per-node priority, 0 = all
  /// Send copies and mirrors held by calls in flight at most (0 = no bound, TNBC_MAX_MEMORY).
  std::size_t max_memory_bytes = 0;
  /// How received pages are published: auto, move, write or mremap (receive_mirror.hpp).
  std::string publish = "auto";
  /// A call in flight none of whose steps completed for this long is reported once on stderr
  /// (TNBC_WATCHDOG; 0: never): what it still waits for, and from which ranks.
  unsigned watchdog_s = 30;
};

class Engine {
 public:
  /// What a call did: returned early, or completed (`why` names the engine's own reason when
  /// the caller allowed an early return and it did not: "memory"; else null).
  struct Result {
    bool early = false;
    const char* why = nullptr;
  };

  /// Installs the fault handler and readies the progress thread, which starts at the first
  /// op (run) or the first sum that wakes it (progress.hpp).
  std::optional<std::string> start(const EngineOptions& options);
  /// Sets EngineOptions::max_memory_bytes after start (the replay mode knows the node's ranks,
  /// which TNBC_MAX_MEMORY=auto divides by, only after the start's collective); before any call.
  void set_max_memory(std::size_t bytes);
  /// Sets EngineOptions::chunk_bytes after start (TNBC_CHUNK_BYTES=auto depends on whether the
  /// job spans nodes, known after the start's collective); before any call.
  void set_chunk_bytes(std::size_t bytes) { options_.chunk_bytes = bytes; }
  /// How received pages are published, as start_publishing said (receive_mirror.hpp).
  const std::string& publishing() const { return publishing_; }
  /// Completes everything in flight, stops the thread, uninstalls the handler.  The other
  /// calls below are made only between a successful start() and stop() (mode_replay.cpp).
  void stop();

  /// Alltoallv on bytes (counts and displacements in bytes; the caller packed non-contiguous
  /// data).  recv_order: plan priorities (source ranks, read first first) or empty.  per_node:
  /// the ranks of a node inject their inter-node sends one after the other, in recv_order
  /// (the same on every rank: it comes from the plan).  Every rank
  /// of `comm` must come here for this call (the messages are the engine's own); each decides
  /// alone whether to return early: with allow_early, at least one full receive page and its
  /// memory within max_memory_bytes it returns early (before completion), else it completes
  /// the exchange first.
  /// `costs` (may be null) receives what the call costs: time inside it, what the program
  /// later waits for it (faults, fences, system calls) and its share of the progress thread's
  /// CPU time; it must outlive the operation.  `window`: the inter-node body chunks in flight
  /// under per-node priority (a plan entry's `window`), 0 = the options' chunk_window.
  Result alltoallv(const void* sendbuf, std::span<const std::size_t> send_bytes,
                 std::span<const std::size_t> send_displs, void* recvbuf,
                 std::span<const std::size_t> recv_bytes, std::span<const std::size_t> recv_displs,
                 MPI_Comm comm, std::span<const int> recv_order, bool per_node, bool allow_early,
                 engine::Costs* costs, int window = 0);

  /// Pipelined bcast of `bytes` contiguous bytes in `segments` segments down a tree of `chains`
  /// chains (0 = binomial), segments in `segment_order`.  Same contract as alltoallv(); the
  /// root returns early as soon as its buffer is copied.
  Result bcast(void* buffer, std::size_t bytes, int root, MPI_Comm comm, int segments, int chains,
             std::span<const int> segment_order, bool allow_early, engine::Costs* costs);

  /// Starts the engine's own communicator of `comm` now (collective over `comm`, nonblocking: an
  /// MPI_Comm_idup, completed by its first collective on `comm`), rather than in that collective,
  /// whose time then is the exchange's alone (adapt/blocking.cpp's sample of the engine: 25 ms of a first
  /// 27 ms call of heFFTe's on one node was a blocking dup).
  void prepare(MPI_Comm comm);
  /// Sets up per-node priority for `comm` now (collective over `comm`) instead of at the first
  /// collective that asks for it.
  void prepare_node(MPI_Comm comm);

  /// Completes every operation in flight (the fence).
  void drain();
  /// Completes every operation whose receive span overlaps [p, p + n).
  void complete_overlapping(const void* p, std::size_t n);

  std::uint64_t init_ns() const;
  /// Per-node priority: collectives that took turns on their node, inter-node sends that had
  /// to wait for this rank's turn, and the time collectives spent waiting for it.
  std::uint64_t turn_calls() const;
  std::uint64_t gated_sends() const;
  std::uint64_t send_window_max() const;
  std::uint64_t turn_wait_ns() const;
  /// CPU time of the progress thread (CLOCK_THREAD_CPUTIME_ID) and its rounds.
  std::uint64_t progress_cpu_ns() const;
  std::uint64_t progress_rounds() const;
  /// The progress thread's CPU time in user space and in the kernel, and its wake-ups (voluntary
  /// context switches), once stopped.
  std::uint64_t progress_user_ns() const;
  std::uint64_t progress_system_ns() const;
  std::uint64_t progress_wakeups() const;
  /// Whether the progress thread started (the engine had work for it: Progress::start), and
  /// the times it did (it ends after a second with nothing to do: Progress::hold).
  bool progress_started() const;
  std::uint64_t progress_starts() const;
  /// Time threads waited for the engine in fences (drain, complete_overlapping).
  std::uint64_t fence_wait_ns() const;

  static Engine& instance();

 private:
  Engine();
  ~Engine();
  /// Runs `op` (steps set): copies the send side, sets up the receive side, hands it to the
  /// progress thread; returns once it may return early, or after it completed.
  Result run(std::shared_ptr<engine::Op> op, const void* sendbuf, bool allow_early);
  /// Takes the buffers of an early return of `op` from the pool (within max_memory_bytes, after
  /// draining what is in flight if need be): its mirror and its send copy; false if they do
  /// not fit.
  bool reserve(engine::Op& op, const void* sendbuf, bool receives);

  EngineOptions options_;
  std::size_t page_size_ = 4096;
  std::atomic<std::uint64_t> init_ns_{0};
  std::string publishing_;
  std::unique_ptr<engine::Progress> progress_;
  friend class BackgroundRequest;  // hands requests to progress_
};

}  // namespace tnbc::shim::replay::engine
