// Page guard: protect received data (PROT_NONE) and record the first touch of each sub-message.
//
// A traced collective hands the guard its receive buffer as a list of sub-messages (byte
// ranges).  The guard protects every page that lies entirely inside the union of those ranges,
// never a page that holds anything else (the first and last page of a buffer usually hold other
// data, often the stack).  The first access to a protected page raises SIGSEGV; the handler finds
// the sub-message by the exact fault address, records (stamp, thread, order) for it once, opens
// every page of that sub-message and returns, so the access is retried and succeeds.
//
//   buffer:     |..sub 0..|....sub 1....|..sub 2..|
//   pages:   [ p0  |  p1  |  p2  |  p3  |  p4  |  p5 ]
//             partial                        partial   <- never protected
//   A touch of sub 1 opens p1..p3, every protected page sub 1 overlaps.  p1 is shared with sub 0
//   and p3 with sub 2: sub 2 keeps p4 and stays observable, but sub 0 has no protected page left.
//   A sub-message whose protected pages were all opened by its neighbours before it was read (or
//   that had none to begin with) is "unobserved": we cannot see when it is first read.  That is
//   not "untouched", which means observed to the end and never read.
//
// Signal handling: the guard registers a claim with the one SIGSEGV handler of the libraries
// (segv.hpp), which installs it, chains the handler installed before it, and gives the installing
// thread an alternate signal stack.
// - install() is called at MPI initialisation, after libucs installed its own SIGSEGV handler,
//   which is kept as the handler to pass on to.  Faults that are not an access to a page we
//   protected (wrong code, unknown address, an edge page) go there.
// - The claim is async-signal-safe: no allocation, no lock.  It reads an immutable, sorted
//   snapshot of the guarded ranges (published with an atomic pointer; replaced snapshots are freed
//   only when no handler is inside one), records into per-sub-message slots allocated when the
//   call was protected, and calls mprotect.
//
// A program that installs its own SIGSEGV handler after MPI initialisation replaces ours; faults
// on guarded pages then reach its handler.  Handlers installed before MPI_Init are kept and
// chained.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tsc_clock.hpp"

namespace tnbc::shim::observe {

/// What became of one sub-message by the end of the run (the page guard decides; the trace file
/// keeps it in each sub-message's flags).
enum class Outcome : std::uint8_t {
  untouched = 0,   ///< observable to the end and never read
  touched = 1,     ///< its first touch was recorded
  unobserved = 2,  ///< its last protected page was opened by a neighbour's touch before it was read
  released = 3,    ///< overwritten or given back (new collective into it, free, munmap) unread
};

/// One sub-message: bytes [offset, offset + length) of the call's buffer.
struct SubRange {
  std::size_t offset = 0;
  std::size_t length = 0;
};

/// An MPI_Bcast buffer of `bytes` as sub-messages: at most `units` equal units of a whole number
/// of `page_size` pages, counted from the start of the buffer (unit k is bytes [k * unit,
/// (k + 1) * unit), the last one shorter).  Counting from the buffer, not from page boundaries in
/// memory, keeps the units where the program's own division of the buffer most likely is; when
/// the buffer is not page-aligned each boundary falls inside a page that two units share, which
/// costs each unit one page of observability, not its identity.  Trace mode records these units
/// and replay mode's learning observes the same ones (TNBC_TRACE_BCAST_UNITS).
inline std::vector<SubRange> bcast_units(std::size_t bytes, std::size_t units, std::size_t page_size) {
  std::vector<SubRange> subs;
  if (bytes == 0 || units == 0 || page_size == 0) return subs;
  std::size_t unit = (bytes + units - 1) / units;
  unit = (unit + page_size - 1) / page_size * page_size;
  for (std::size_t from = 0; from < bytes; from += unit) subs.push_back({from, std::min(unit, bytes - from)});
  return subs;
}

/// The first touch of a sub-message.
struct Touch {
  std::uint64_t stamp = 0;   ///< StampFn value at the fault
  std::uint64_t seq = 0;     ///< process-wide order of first touches (0, 1, 2, ...)
  std::uint32_t thread = 0;  ///< kernel thread id (gettid)
};

class PageGuard;

/// One guarded collective.  Owned by the PageGuard; valid until PageGuard::reset().
class GuardedCall {
 public:
  GuardedCall(const GuardedCall&) = delete;
  GuardedCall& operator=(const GuardedCall&) = delete;
  ~GuardedCall();

  std::uint32_t index() const { return index_; }
  std::size_t sub_count() const { return count_; }
  /// True if sub-message i had at least one protected page when the call was protected.
  bool observable(std::size_t i) const { return subs_[i].observable; }
  Outcome outcome(std::size_t i) const {
    return static_cast<Outcome>(subs_[i].outcome.load(std::memory_order_acquire));
  }
  /// The first touch of sub-message i, if outcome(i) == touched and it is fully recorded.
  std::optional<Touch> touch(std::size_t i) const;
  /// Pages protected when the call was protected.
  std::size_t protected_pages() const { return protected_pages_; }

 private:
  friend class PageGuard;
  struct Sub {
    std::uintptr_t begin = 0, end = 0;    // bytes
    std::uintptr_t pbegin = 0, pend = 0;  // its protected pages (empty if none)
    bool observable = false;
    std::atomic<std::uint32_t> remaining{0};  // protected pages not opened yet
    std::atomic<std::uint8_t> outcome{0};
    std::atomic<bool> recorded{false};  // touch fields below are written
    Touch touch;
  };
  GuardedCall() = default;

  std::uint32_t index_ = 0;
  std::size_t count_ = 0;
  std::unique_ptr<Sub[]> subs_;
  std::unique_ptr<std::uint32_t[]> by_addr_;  // sub indices sorted by address
  std::uintptr_t page0_ = 0;                  // first page of the span
  std::size_t npages_ = 0;
  std::unique_ptr<std::atomic<std::uint8_t>[]> page_state_;  // PageState per page of the span
  std::size_t protected_pages_ = 0;
  std::atomic<std::size_t> closed_pages_{0};  // protected pages not opened yet
};

class PageGuard {
 public:
  /// `stamp` dates first touches; it must be async-signal-safe (TscClock::stamp_fn()).
  /// `live`, if given, is the counter of calls with protected pages (any_guarded() reads it): an
  /// interposed system call can test it with one load without knowing the guard.  `shared`, if
  /// given, is counted alike: a counter other guards add to too (replay mode's learning counts
  /// its calls in the interposers' g_guarded_calls, beside the engine's, and in its own).
  explicit PageGuard(StampFn stamp, std::atomic<int>* live = nullptr, std::atomic<int>* shared = nullptr);
  /// Opens every page and uninstalls the handler if installed.
  ~PageGuard();
  PageGuard(const PageGuard&) = delete;
  PageGuard& operator=(const PageGuard&) = delete;

  /// Installs the SIGSEGV handler (chaining the current one) and an alternate signal stack for
  /// the calling thread if it has none.  One guard can be installed at a time.
  std::optional<std::string> install();
  /// Restores the previous handler if ours is still the installed one.
  void uninstall();

  /// Protects the pages of `subs` (relative to `base`, pairwise disjoint) and returns the call,
  /// or nullptr and *error (nothing stays protected).  A call with no protectable page is
  /// registered too (every sub-message unobservable).  Not async-signal-safe (allocates, locks).
  /// `pages_per_sub` > 0 samples: only that many of each sub-message's pages are protected, its
  /// first and last and the rest spread evenly between them.  Protecting and opening then cost
  /// that many pages per sub-message, not its length; a first touch is seen when the program
  /// reaches one of them (at once for a sub-message read from either end).
  GuardedCall* protect(std::uint32_t index, void* base, std::span<const SubRange> subs,
                       std::string* error, std::size_t pages_per_sub = 0);

  /// How release() treats the sub-messages it opens.
  enum class Release {
    touch,   ///< the memory is being read (a system call on it): record a first touch
    forget,  ///< the memory is being overwritten or given back: outcome `released` if unread
  };
  /// Opens every guarded sub-message overlapping [p, p + n).  Lock-free and async-signal-safe.
  /// Returns the number of sub-messages opened.
  std::size_t release(const void* p, std::size_t n, Release how);
  /// Opens every page of every call.  Outcomes stay as they are (the end of the run), unless
  /// `lose_untouched`: then every sub-message still observable and untouched becomes unobserved
  /// (the memory is handed to something that could read it without faulting).
  void release_all(bool lose_untouched = false);
  /// True if some page is still protected.  One atomic load: the fast path of the interposed
  /// system calls.
  bool any_guarded() const { return live_calls_->load(std::memory_order_acquire) != 0; }
  /// Every call registered so far, in protect() order.
  std::vector<const GuardedCall*> calls() const;
  /// Forgets every call (after release_all()).
  void reset();

  std::size_t page_size() const { return page_size_; }

  /// Called by the SIGSEGV handler (async-signal-safe): true when `addr` is on a page this
  /// guard protected, which is then opened and its first touch recorded.
  bool handle_fault(std::uintptr_t addr);

 private:
  struct Entry {
    std::uintptr_t begin, end;
    GuardedCall* call;
    std::uint32_t sub;
  };
  struct Snapshot {
    std::size_t count = 0;
    std::unique_ptr<Entry[]> entries;
  };

  void open_sub(GuardedCall& call, std::uint32_t sub, Release how, std::uint64_t stamp);
  void page_opened(GuardedCall& call, std::size_t page);
  void publish_locked();  // rebuilds the snapshot from calls_
  // The parts of protect(): the call's sub-messages and which of its pages are protected
  // (false: overlapping sub-messages); the pages sampled of each sub-message; the mprotect of
  // its pages under mutex_ (false, everything undone: mprotect failed).
  bool lay_out(GuardedCall& call, void* base, std::span<const SubRange> subs, std::string* error,
               std::size_t pages_per_sub) const;
  std::vector<bool> sampled_pages(const GuardedCall& call, const std::vector<std::size_t>& covered,
                                  std::size_t pages_per_sub) const;
  bool protect_pages_locked(GuardedCall& call, std::string* error);
  const Entry* find(const Snapshot* snap, std::uintptr_t addr) const;

  StampFn stamp_;
  std::size_t page_size_;
  bool installed_ = false;

  mutable std::mutex mutex_;  // writers only; never taken by the handler or release()
  std::vector<std::unique_ptr<GuardedCall>> calls_;
  std::vector<GuardedCall*> live_;  // calls that had protected pages at the last publish
  std::atomic<Snapshot*> snapshot_{nullptr};
  std::vector<std::unique_ptr<Snapshot>> retired_;
  std::unique_ptr<Snapshot> current_;
  std::atomic<int> readers_{0};
  std::atomic<int> own_live_{0};
  std::atomic<int>* live_calls_;
  std::atomic<int>* shared_calls_;  // null: none
  /// A call gained (+1) or lost (-1) its last protected page.
  void count_live(int delta) {
    live_calls_->fetch_add(delta, std::memory_order_acq_rel);
    if (shared_calls_ != nullptr) shared_calls_->fetch_add(delta, std::memory_order_acq_rel);
  }
  std::atomic<std::uint64_t> seq_{0};
};

}  // namespace tnbc::shim::observe
