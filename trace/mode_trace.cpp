// libtnbc_trace.so: trace mode.  Every MPI_Alltoall, MPI_Alltoallv and MPI_Bcast runs as the
// blocking call, timed; then the receive buffer's pages are protected and the call returns.  The
// page guard records the first touch of each sub-message; at MPI_Finalize every rank writes
// <dir>/<rank>.tnbct (trace/trace_file.hpp, docs/trace-format.md).
//
// Sub-messages: MPI_Alltoall and MPI_Alltoallv, the block received from each source rank;
// MPI_Bcast, the buffer cut into at most TNBC_TRACE_BCAST_UNITS equal units of whole pages
// (shim::observe::bcast_units(); the root's buffer is sent, not received: its call is recorded, not protected).
//
// A call is recorded but not traced (counted as a fallback with its reason) when its receive
// type is not contiguous ("datatype"), on an inter-communicator ("intercomm"), with negative
// counts or displacements ("layout"), when the call fails ("error"), when protection fails
// ("protect"), when the handler could not be installed ("guard"), and at the root of a broadcast
// ("root").  MPI_IN_PLACE is traced: the receive buffer is laid out as usual.
//
// Before a traced call, guarded memory it will use is released: its send buffer as a touch (MPI
// reads the data), its receive buffer as overwritten.  Any other MPI call that may touch user
// memory (the generated `fence` wrappers) first opens every guarded page and marks what was not
// read yet as unobserved: MPI may hand the buffer to the kernel or to another process (UCX's CMA
// transport reads it with process_vm_readv, which fails with EFAULT on a protected page), and the
// wrappers do not know which buffers a call uses.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits.h>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

#include "shim/datatype.hpp"
#include "shim/fence.hpp"
#include "shim/io_interpose.hpp"
#include "shim/log.hpp"
#include "shim/mode.hpp"
#include "shim/node.hpp"
#include "shim/runtime.hpp"
#include "shim/observe/callsite.hpp"
#include "shim/observe/page_guard.hpp"
#include "trace_file.hpp"
#include "shim/observe/tsc_clock.hpp"
#include "util/file.hpp"

namespace tnbc::trace {
namespace {

// The trace mode stands on the interposition layer both libraries share (shim/).
using namespace tnbc::shim;


// What start() decided, the same on every rank (rank 0 decides and broadcasts it).
struct Destination {
  bool ok = false;
  std::string dir;     // absolute
  std::string job_id;  // <date>-<time>-<pid of rank 0>
  std::string error;   // rank 0's reason when !ok
};

// Rank 0: picks and creates the folder, and checks that a file can be created in it.
Destination choose_destination(const std::string& configured) {
  Destination d;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  d.job_id = std::string(stamp) + "-" + std::to_string(getpid());
  std::string dir = configured;
  if (dir.empty()) {
    // A new folder per job; the pid keeps two jobs started in the same second apart, the
    // suffix two runs that reuse a pid.
    std::string base = "tnbc-trace-" + d.job_id;
    dir = base;
    for (int k = 2; mkdir(dir.c_str(), 0755) != 0; ++k) {
      if (errno != EEXIST || k > 100) {
        d.error = "cannot create " + dir + ": " + std::strerror(errno);
        return d;
      }
      dir = base + "-" + std::to_string(k);
    }
  } else if (auto err = util::make_dirs(dir)) {
    d.error = *err;
    return d;
  }
  // A folder another user can write to could hold their files or links under our names.
  if (auto err = util::check_private_folder(dir)) {
    d.error = *err;
    return d;
  }
  std::string probe = dir + "/.tnbc-probe." + std::to_string(getpid());
  int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    d.error = "cannot create files in " + dir + ": " + std::strerror(errno);
    return d;
  }
  close(fd);
  unlink(probe.c_str());
  char resolved[PATH_MAX];
  d.dir = realpath(dir.c_str(), resolved) != nullptr ? std::string(resolved) : dir;
  d.ok = true;
  return d;
}

void bcast_string(std::string& s, int root) {
  int n = static_cast<int>(s.size());
  PMPI_Bcast(&n, 1, MPI_INT, root, MPI_COMM_WORLD);
  s.resize(static_cast<std::size_t>(n));
  if (n > 0) PMPI_Bcast(s.data(), n, MPI_CHAR, root, MPI_COMM_WORLD);
}

// Receive-type facts: contiguous types only (no gaps, no offset), so that element k of a block
// is at byte k * size.
bool contiguous(MPI_Datatype type, std::size_t* size) {
  const datatype::TypeInfo ti = datatype::info(type);
  *size = ti.size;
  return ti.valid && ti.contiguous;
}

// Bytes of a send buffer that MPI will read: an upper bound is enough (releasing too much only
// opens pages early).
std::size_t type_extent(MPI_Datatype type) { return datatype::reach(datatype::info(type)); }

class TraceMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc_trace"; }

  void start(Runtime& rt, const node::StartValues&) override {
    rank_ = rt.world_rank();
    size_ = rt.world_size();
    units_ = rt.config().trace_bcast_units;
    clock_.begin();

    Destination d;
    if (rank_ == 0) {
      try {
        d = choose_destination(rt.config().trace_dir);
      } catch (...) {
        d.ok = false;  // keep going: the other ranks wait in the broadcast below
      }
    }
    int ok = d.ok;
    PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    bcast_string(d.dir, 0);
    bcast_string(d.job_id, 0);
    node_ = node::index();  // the node map: Runtime::start
    sync_stamp_ = common_moment();
    if (!ok) {
      if (rank_ == 0) log::warn("trace disabled, the program runs untraced: {}", d.error);
      return;
    }
    dir_ = d.dir;
    job_id_ = d.job_id;
    guard_ = std::make_unique<tnbc::shim::observe::PageGuard>(clock_.stamp_fn(), &g_guarded_calls);
    if (auto err = guard_->install()) {
      log::warn("trace disabled on this rank: {}", *err);
      guard_.reset();
    }
    writing_ = true;  // every rank writes a file, traced or not, so tools see the whole job
    if (guard_) {
      if (!subscribe_memory_events())
        log::debug("libucm memory events unavailable: munmap is caught by interposition only");
      // Every fenced MPI call now calls drain(); it returns at once when nothing is guarded.
      set_drain_hook(&TraceMode::drain_hook);
      g_in_flight.store(1, std::memory_order_release);
    }
    log::info_rank0("tracing into {}", dir_);
  }

  /// This rank's stamp at one moment all ranks name (rank 0's stamp before it pings the others):
  /// the exports put every rank on one clock by it (trace-format.md, sync_stamp).  Rank 0 pings
  /// each rank a few times and keeps the round with the shortest round trip, whose midpoint is
  /// the closest to the other rank's stamp; a rank descheduled in a round (4 ranks on 2 cores)
  /// only lengthens that round.  Collective over MPI_COMM_WORLD, inside MPI_Init.
  std::uint64_t common_moment() {
    constexpr int kRounds = 8, kTag = 32761;
    PMPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
      const std::uint64_t s0 = clock_.stamp();
      for (int r = 1; r < size_; ++r) {
        std::uint64_t best_rtt = UINT64_MAX, best_mid = s0;
        int best = 0;
        for (int k = 0; k < kRounds; ++k) {
          int echo = 0;
          const std::uint64_t t1 = clock_.stamp();
          PMPI_Send(&k, 1, MPI_INT, r, kTag, MPI_COMM_WORLD);
          PMPI_Recv(&echo, 1, MPI_INT, r, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          const std::uint64_t t2 = clock_.stamp();
          if (t2 - t1 < best_rtt) best_rtt = t2 - t1, best_mid = t1 + (t2 - t1) / 2, best = k;
        }
        // The round to use, and how long after s0 its midpoint came (in ticks: one machine's
        // TSC, or nanoseconds, ticks at the same rate on every rank to well within the rounds).
        const std::uint64_t answer[2] = {static_cast<std::uint64_t>(best), best_mid - s0};
        PMPI_Send(answer, 2, MPI_UINT64_T, r, kTag, MPI_COMM_WORLD);
      }
      return s0;
    }
    std::uint64_t mine[kRounds] = {};
    for (int k = 0; k < kRounds; ++k) {
      int round = 0;  // the round's stamp stays here; rank 0 only needs the echo
      PMPI_Recv(&round, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      mine[k] = clock_.stamp();
      PMPI_Send(&round, 1, MPI_INT, 0, kTag, MPI_COMM_WORLD);
    }
    std::uint64_t answer[2] = {};
    PMPI_Recv(answer, 2, MPI_UINT64_T, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return mine[std::min<std::uint64_t>(answer[0], kRounds - 1)] - answer[1];
  }

  // The fence (see the top of the file).  At MPI_Finalize stop() handles everything: what is
  // untouched then stays "untouched".
  static void drain_hook() { static_cast<TraceMode&>(mode()).drain(); }
  void drain() {
    if (!guard_ || g_guarded_calls.load(std::memory_order_acquire) == 0 || runtime().stopping())
      return;
    try {
      guard_->release_all(/*lose_untouched=*/true);
    } catch (...) {
      internal_error();  // the pages are opened before anything that can throw
    }
  }

  void stop(Runtime&) override {
    if (!writing_) return;
    g_in_flight.store(0, std::memory_order_release);
    set_drain_hook(nullptr);
    if (auto err = clock_.end()) log::debug("{}", *err);
    if (guard_) guard_->release_all();
    std::optional<std::string> err;
    try {
      const std::string path = dir_ + "/" + std::to_string(rank_) + ".tnbct";
      err = write_trace(path, build_trace());
      // Ranks on another node may find the folder missing: create it and try once more.
      if (err && !util::make_dirs(dir_) && !util::check_private_folder(dir_))
        err = write_trace(path, build_trace());
    } catch (...) {
      err = "out of memory while encoding the trace";  // every rank must still reach the reduction
    }
    int failed = err ? 1 : 0, total = 0;
    PMPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (total == size_) {
      if (rank_ == 0) log::warn("trace not written: {}", *err);
    } else if (err) {
      log::warn("trace not written: {}", *err);
    } else {
      log::info_rank0("trace written to {} ({} files)", dir_, size_ - total);
    }
    if (guard_) {
      guard_->reset();
      guard_->uninstall();
    }
    g_guarded_calls.store(0, std::memory_order_release);
    writing_ = false;
  }

  void release_range(const void* p, std::size_t n, ReleaseReason why) override {
    // MPI reading a traced page is the program's first touch through MPI: the fault records it,
    // and its handler needs no other thread.
    if (why == ReleaseReason::mpi) return;
    if (guard_)
      guard_->release(p, n,
                      why == ReleaseReason::io ? tnbc::shim::observe::PageGuard::Release::touch
                                               : tnbc::shim::observe::PageGuard::Release::forget);
  }

  int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm) override {
    auto run = [&] {
      return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    };
    if (!writing_) return run();
    return safely(run, [&](auto& once) {
      int p = comm_size(comm);
      std::size_t elem = 0;
      Plan plan{TracedOp::alltoall, p, recvbuf, {}, nullptr};
      if (!inter(comm, plan) && type_ok(recvtype, &elem, plan)) {
        std::size_t block = static_cast<std::size_t>(std::max(recvcount, 0)) * elem;
        for (int i = 0; i < p; ++i) plan.subs.push_back({i * block, block});
        if (sendbuf != MPI_IN_PLACE)
          release(sendbuf,
                  static_cast<std::size_t>(p) * std::max(sendcount, 0) * type_extent(sendtype),
                  true);
        release(recvbuf, static_cast<std::size_t>(p) * block, false);
      }
      return traced(plan, once, runtime().stats().alltoall);
    });
  }

  int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                MPI_Datatype recvtype, MPI_Comm comm) override {
    auto run = [&] {
      return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                            recvtype, comm);
    };
    if (!writing_) return run();
    return safely(run, [&](auto& once) {
      int p = comm_size(comm);
      std::size_t elem = 0;
      Plan plan{TracedOp::alltoallv, p, recvbuf, {}, nullptr};
      if (!inter(comm, plan) && type_ok(recvtype, &elem, plan)) {
        std::size_t span = 0;
        bool bad = false;
        for (int i = 0; i < p; ++i) {
          if (recvcounts[i] < 0 || rdispls[i] < 0) bad = true;
          std::size_t off = static_cast<std::size_t>(std::max(rdispls[i], 0)) * elem;
          std::size_t len = static_cast<std::size_t>(std::max(recvcounts[i], 0)) * elem;
          plan.subs.push_back({off, len});
          span = std::max(span, off + len);
        }
        if (bad) untrace(plan, "layout");
        if (sendbuf != MPI_IN_PLACE)
          release(sendbuf, datatype::blocks_span(sendcounts, sdispls, p) * type_extent(sendtype), true);
        release(recvbuf, span, false);
      }
      return traced(plan, once, runtime().stats().alltoallv);
    });
  }

  int bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) override {
    auto run = [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); };
    if (!writing_) return run();
    return safely(run, [&](auto& once) {
      int p = comm_size(comm);
      std::size_t elem = 0;
      Plan plan{TracedOp::bcast, p, buffer, {}, nullptr};
      if (!inter(comm, plan) && type_ok(datatype, &elem, plan)) {
        std::size_t bytes = static_cast<std::size_t>(std::max(count, 0)) * elem;
        plan.subs = bcast_units(bytes);
        int me = MPI_PROC_NULL;
        PMPI_Comm_rank(comm, &me);
        if (me == root) {
          release(buffer, bytes, true);  // the root's buffer is read by MPI, not received
          untrace(plan, "root");
        } else {
          release(buffer, bytes, false);
        }
      }
      return traced(plan, once, runtime().stats().bcast);
    });
  }

 private:
  // One intercepted call on its way to the trace.
  struct Plan {
    TracedOp op;
    int comm_size;
    void* recvbuf;
    std::vector<tnbc::shim::observe::SubRange> subs;
    const char* untraced = nullptr;  // reason, if the call is not protected
  };
  struct Record {
    TraceCall call;
    const tnbc::shim::observe::GuardedCall* guarded = nullptr;
  };

  static int comm_size(MPI_Comm comm) {
    int p = 0;
    PMPI_Comm_size(comm, &p);
    return p;
  }
  static void untrace(Plan& plan, const char* reason) {
    if (plan.untraced == nullptr) plan.untraced = reason;
  }
  static bool inter(MPI_Comm comm, Plan& plan) {
    int flag = 0;
    PMPI_Comm_test_inter(comm, &flag);
    if (flag) untrace(plan, "intercomm");
    return flag != 0;
  }
  static bool type_ok(MPI_Datatype type, std::size_t* elem, Plan& plan) {
    if (contiguous(type, elem)) return true;
    untrace(plan, "datatype");
    return false;
  }
  void release(const void* p, std::size_t n, bool touch) {
    if (guard_ && p != nullptr && n != 0 && g_guarded_calls.load(std::memory_order_acquire) != 0)
      guard_->release(p, n, touch ? tnbc::shim::observe::PageGuard::Release::touch : tnbc::shim::observe::PageGuard::Release::forget);
  }

  std::vector<tnbc::shim::observe::SubRange> bcast_units(std::size_t bytes) const {
    return tnbc::shim::observe::bcast_units(bytes, static_cast<std::size_t>(units_), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  }

  // No exception may reach the C caller: if the bookkeeping fails (out of memory), the call still
  // runs exactly once and returns MPI's result; it is simply not traced.
  template <typename Run, typename Build>
  static int safely(Run run, Build build) {
    int rc = MPI_SUCCESS;
    bool ran = false;
    auto once = [&] {
      rc = run();
      ran = true;
      return rc;
    };
    try {
      return build(once);
    } catch (...) {
      internal_error();
      return ran ? rc : run();
    }
  }
  static void internal_error() noexcept {
    static std::atomic<bool> said{false};
    if (said.exchange(true)) return;
    try {
      log::warn("trace: internal error (out of memory?); calls that hit it are not traced");
    } catch (...) {}
  }

  template <typename Run>
  int traced(Plan& plan, Run& run, OpStats& stats) {
    // A call whose buffers were not worked out (inter-communicator, non-contiguous type) may use
    // any guarded memory: open it all, as the fence does.
    if (plan.untraced != nullptr && plan.subs.empty()) drain();
    std::uint32_t site = sites_.capture();
    std::uint64_t start = clock_.stamp();
    int rc = run();
    std::uint64_t end = clock_.stamp();
    if (rc != MPI_SUCCESS) untrace(plan, "error");
    if (!guard_) untrace(plan, "guard");

    Record rec;
    rec.call.op = plan.op;
    rec.call.callsite = site;
    rec.call.comm_size = plan.comm_size;
    rec.call.start_stamp = start;
    rec.call.tcomm = end - start;
    for (const auto& s : plan.subs) rec.call.subs.push_back({s.offset, s.length, 0});

    std::lock_guard lock(mutex_);
    auto index = static_cast<std::uint32_t>(records_.size());
    if (plan.untraced == nullptr) {
      std::string err;
      rec.guarded = guard_->protect(index, plan.recvbuf, plan.subs, &err);
      if (rec.guarded == nullptr) {
        log::debug("call {} not traced: {}", index, err);
        untrace(plan, "protect");
      }
    }
    if (plan.untraced != nullptr)
      stats.count_fallback(plan.untraced);
    else
      rec.call.flags = kCallTraced;
    rec.call.return_stamp = clock_.stamp();
    records_.push_back(std::move(rec));
    return rc;
  }

  Trace build_trace() {
    Trace t;
    auto& h = t.header;
    h.rank = rank_;
    h.size = size_;
    h.node_id = node_;
    h.page_size = static_cast<std::uint32_t>(sysconf(_SC_PAGESIZE));
    h.ticks_per_us = clock_.ticks_per_us() > 0 ? clock_.ticks_per_us() : 1000.0;
    h.tsc = clock_.uses_tsc();
    h.sync_stamp = sync_stamp_;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    h.hostname = host;
    h.job_id = job_id_;
    t.callsites = sites_.sites();
    std::lock_guard lock(mutex_);
    for (std::size_t ci = 0; ci < records_.size(); ++ci) {
      TraceCall call = records_[ci].call;
      if (const tnbc::shim::observe::GuardedCall* g = records_[ci].guarded) {
        for (std::size_t i = 0; i < call.subs.size(); ++i) {
          call.subs[i].flags =
              static_cast<std::uint8_t>((g->observable(i) ? kSubObservable : 0) |
                                        static_cast<std::uint8_t>(g->outcome(i)) << 1);
          if (auto touch = g->touch(i))
            t.touches.push_back({static_cast<std::uint32_t>(ci), static_cast<std::uint32_t>(i),
                                 touch->stamp, touch->seq, touch->thread});
        }
      }
      t.calls.push_back(std::move(call));
    }
    std::sort(t.touches.begin(), t.touches.end(),
              [](const auto& a, const auto& b) { return a.seq < b.seq; });
    runtime().stats().faults.store(t.touches.size(), std::memory_order_relaxed);
    return t;
  }

  int rank_ = 0, size_ = 1, units_ = 16;
  std::uint32_t node_ = 0;
  bool writing_ = false;
  std::string dir_, job_id_;
  tnbc::shim::observe::TscClock clock_;
  std::uint64_t sync_stamp_ = 0;  // left MPI_Init's barrier (TraceHeader::sync_stamp)
  tnbc::shim::observe::CallSiteTable sites_;
  std::unique_ptr<tnbc::shim::observe::PageGuard> guard_;
  std::mutex mutex_;  // records_
  std::vector<Record> records_;
};

}  // namespace
}  // namespace tnbc::trace

// The library's mode (shim/mode.hpp): one per library.
tnbc::shim::Mode& tnbc::shim::mode() {
  static tnbc::trace::TraceMode instance;
  return instance;
}
