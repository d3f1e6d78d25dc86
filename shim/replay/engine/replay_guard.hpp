// Replay guard: receive pages that stay PROT_NONE until their data is there.
//
// The engine receives a collective into mirror pages and publishes each completed page run by
// moving the mirror over the user pages (mremap).  Until then the user pages are PROT_NONE; a
// thread that touches one faults, and the handler waits until that page is published, then
// returns so the access is retried on the new mapping.
//
//   slots[kSlots]   one per collective in flight with guarded pages
//   +--------------------------------------------------------------+
//   | begin, end (page aligned, atomics)  readers (atomic)         |
//   | state -> uint8_t[pages]: 0 guarded, 1 published              |
//   +--------------------------------------------------------------+
//
// The guard is a claim of the libraries' one SIGSEGV handler (segv.hpp).  The claim is
// async-signal-safe: it scans the slots (lock-free), announces itself in the slot's reader count
// before trusting the slot, and waits on the page state with sched_yield/nanosleep.  Faults
// outside every slot go to the handler that was installed before ours (chained), so a real
// crash still crashes.
//
// A finished collective's slot is *retired*, not cleared: a thread may have faulted on a page
// just before it was published and reach the handler only after the collective finished.  The
// handler must then recognise the address and return so the access is retried.  A retired slot
// (and its state array, which the guard takes over) stays until add() needs the slot again.  A
// fault that repeats on the same address of the same retired collective (the newest retired slot
// covering it) is not ours (the memory changed hands) and is chained after a few retries.  Late
// faults on that address in later collectives on the same buffer are new races, counted anew.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace tnbc::shim::replay::engine {

class ReplayGuard {
 public:
  static constexpr int kSlots = 64;

  /// Registers the guard's claim with the SIGSEGV handler (segv.hpp), which installs it,
  /// chains the current one and gives the calling thread an alternate signal stack.
  std::optional<std::string> install();
  void uninstall();

  /// Registers the page range [begin, end) whose pages are (or are about to be) PROT_NONE;
  /// `state[i]` tells whether page i is published.  Time threads wait for these pages is added
  /// to `*wait_sink` (may be null; must outlive the slot, retired or not).  Returns the slot, or
  /// -1 when all slots are taken (the caller then falls back to blocking).
  int add(std::uintptr_t begin, std::uintptr_t end, std::atomic<std::uint8_t>* state,
          std::atomic<std::uint64_t>* wait_sink = nullptr);

  /// Called (async-signal-safe) when a thread starts and stops waiting for a page: the engine
  /// wakes its progress thread.
  void set_wait_hooks(void (*begin)(), void (*end)()) {
    wait_begin_.store(begin, std::memory_order_release);
    wait_end_.store(end, std::memory_order_release);
  }
  /// Retires a slot whose pages are all published; the guard keeps `state` until the slot is
  /// reused.
  void retire(int slot, std::unique_ptr<std::atomic<std::uint8_t>[]> state);

  /// Waits until the page holding `addr` is published, if a slot covers it; true if so.
  /// Async-signal-safe.  Also used by the system-call interposers.
  bool wait_published(std::uintptr_t addr);

  /// Waits until every guarded page overlapping [p, p + n) is published.  Lock-free and
  /// async-signal-safe: the interposed system calls and free/munmap use it.
  void wait_range(const void* p, std::size_t n);

  /// A fault the kernel held instead (a missing page of a call published by moving pages,
  /// receive_mirror.hpp): counted with the faults, its wait as the progress thread saw it.
  void add_fault(std::uint64_t wait_ns) {
    faults_.fetch_add(1, std::memory_order_relaxed);
    fault_wait_ns_.fetch_add(wait_ns, std::memory_order_relaxed);
  }

  /// Faults handled and nanoseconds spent waiting in them (statistics).
  std::uint64_t faults() const { return faults_.load(std::memory_order_relaxed); }
  std::uint64_t fault_wait_ns() const { return fault_wait_ns_.load(std::memory_order_relaxed); }

  static ReplayGuard& instance();

 private:
  bool wait_page(std::uintptr_t addr, bool fault);

  struct alignas(64) Slot {
    std::atomic<std::uintptr_t> begin{0}, end{0};
    std::atomic<std::atomic<std::uint8_t>*> state{nullptr};
    std::atomic<std::atomic<std::uint64_t>*> wait_sink{nullptr};
    std::atomic<int> readers{0};
    std::atomic<bool> retired{false};
    std::atomic<std::uint64_t> serial{0};  // the collective's number, from add(): newer is larger
    std::unique_ptr<std::atomic<std::uint8_t>[]> owned;  // writers only, under mutex_
  };
  void clear(Slot& s);  // under mutex_

  Slot slots_[kSlots];
  std::mutex mutex_;  // add() and retire(); never taken by the handler
  int next_victim_ = 0;
  std::uint64_t next_serial_ = 0;  // under mutex_
  std::atomic<std::uint64_t> faults_{0}, fault_wait_ns_{0};
  std::atomic<void (*)()> wait_begin_{nullptr}, wait_end_{nullptr};
  std::size_t page_size_ = 4096;
  bool installed_ = false;
};

}  // namespace tnbc::shim::replay::engine
