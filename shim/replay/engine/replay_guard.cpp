#include "replay_guard.hpp"

#include "util/clock.hpp"
#include "shim/observe/segv.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <sched.h>
#include <unistd.h>

namespace tnbc::shim::replay::engine {
namespace {

std::atomic<bool> g_active{false};

// The replay guard's claim in the SIGSEGV core (segv.hpp): a fault on a page it guards,
// after waiting for that page to be published.
bool claim(const siginfo_t* info) {
  return g_active.load(std::memory_order_acquire) &&
         ReplayGuard::instance().wait_published(reinterpret_cast<std::uintptr_t>(info->si_addr));
}

}  // namespace

ReplayGuard& ReplayGuard::instance() {
  static ReplayGuard guard;
  return guard;
}

std::optional<std::string> ReplayGuard::install() {
  if (installed_) return std::nullopt;
  page_size_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (auto err = observe::segv::add(claim)) return err;
  g_active.store(true, std::memory_order_release);
  installed_ = true;
  return std::nullopt;
}

void ReplayGuard::uninstall() {
  if (!installed_) return;
  g_active.store(false, std::memory_order_release);
  observe::segv::remove(claim);
  installed_ = false;
}

void ReplayGuard::clear(Slot& s) {
  s.end.store(0, std::memory_order_release);  // no new reader matches
  s.begin.store(0, std::memory_order_release);
  while (s.readers.load(std::memory_order_acquire) != 0) sched_yield();
  s.state.store(nullptr, std::memory_order_release);
  s.wait_sink.store(nullptr, std::memory_order_release);
  s.retired.store(false, std::memory_order_release);
  s.owned.reset();
}

int ReplayGuard::add(std::uintptr_t begin, std::uintptr_t end, std::atomic<std::uint8_t>* state,
                     std::atomic<std::uint64_t>* wait_sink) {
  std::lock_guard lock(mutex_);
  int pick = -1;
  for (int i = 0; i < kSlots && pick < 0; ++i)
    if (slots_[i].state.load(std::memory_order_relaxed) == nullptr) pick = i;
  for (int k = 0; k < kSlots && pick < 0; ++k) {  // else the next retired slot, round robin
    int i = (next_victim_ + k) % kSlots;
    if (slots_[i].retired.load(std::memory_order_relaxed)) {
      clear(slots_[i]);
      pick = i;
      next_victim_ = (i + 1) % kSlots;
    }
  }
  if (pick < 0) return -1;
  Slot& s = slots_[pick];
  s.wait_sink.store(wait_sink, std::memory_order_relaxed);
  s.serial.store(++next_serial_, std::memory_order_relaxed);
  s.state.store(state, std::memory_order_relaxed);
  s.begin.store(begin, std::memory_order_relaxed);
  s.end.store(end, std::memory_order_release);
  return pick;
}

void ReplayGuard::retire(int slot, std::unique_ptr<std::atomic<std::uint8_t>[]> state) {
  std::lock_guard lock(mutex_);
  slots_[slot].owned = std::move(state);
  slots_[slot].retired.store(true, std::memory_order_release);
}

void ReplayGuard::wait_range(const void* p, std::size_t n) {
  if (n == 0) return;
  const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + n;
  for (auto& s : slots_) {
    std::uintptr_t b = s.begin.load(std::memory_order_acquire), e = s.end.load(std::memory_order_acquire);
    if (hi <= b || lo >= e) continue;
    for (std::uintptr_t pg = std::max(lo, b) & ~(page_size_ - 1); pg < std::min(hi, e); pg += page_size_)
      wait_page(std::max(pg, b), false);
  }
}

bool ReplayGuard::wait_published(std::uintptr_t addr) { return wait_page(addr, true); }

bool ReplayGuard::wait_page(std::uintptr_t addr, bool fault) {
  // Live slots first: a retired slot may cover the same memory (the buffer of an earlier
  // collective), and only the live one knows whether the page is there yet.
  for (auto& s : slots_) {
    if (s.retired.load(std::memory_order_acquire)) continue;
    if (addr < s.begin.load(std::memory_order_acquire) || addr >= s.end.load(std::memory_order_acquire))
      continue;
    s.readers.fetch_add(1, std::memory_order_acq_rel);
    // Re-check under the reader count: clear() empties the range before waiting for readers.
    std::uintptr_t b = s.begin.load(std::memory_order_acquire);
    std::uintptr_t e = s.end.load(std::memory_order_acquire);
    std::atomic<std::uint8_t>* state = s.state.load(std::memory_order_acquire);
    if (addr < b || addr >= e || state == nullptr) {
      s.readers.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    auto& page = state[(addr - b) / page_size_];
    if (page.load(std::memory_order_acquire) == 0) {
      if (fault) faults_.fetch_add(1, std::memory_order_relaxed);
      std::uint64_t t0 = util::now_ns();
      if (auto hook = wait_begin_.load(std::memory_order_acquire)) hook();
      for (int spin = 0; page.load(std::memory_order_acquire) == 0; ++spin) {
        if (spin < 64) {
          sched_yield();
        } else {
          timespec ts{0, 20000};
          nanosleep(&ts, nullptr);
        }
      }
      if (auto hook = wait_end_.load(std::memory_order_acquire)) hook();
      const std::uint64_t waited = util::now_ns() - t0;
      if (fault) fault_wait_ns_.fetch_add(waited, std::memory_order_relaxed);
      if (auto* sink = s.wait_sink.load(std::memory_order_acquire)) sink->fetch_add(waited, std::memory_order_relaxed);
    }
    s.readers.fetch_sub(1, std::memory_order_acq_rel);
    return true;
  }
  if (!fault) return false;  // retired slots hold published pages: nothing to wait for
  // A fault on a retired slot raced with the publication of its page: retry the access.  One
  // that keeps coming back on the same address of the same collective is not such a race (the
  // memory changed hands).  The collective is the newest retired one covering the address: a
  // program that reads the same buffer after every call may lose that race at the same address
  // in many calls, each time once, and must not be counted as repeating (older retired slots of
  // the same buffer stay until reused, so the first one found would be the same for 64 calls).
  static thread_local std::uintptr_t last_addr __attribute__((tls_model("initial-exec"))) = 0;
  static thread_local std::uint64_t last_serial __attribute__((tls_model("initial-exec"))) = 0;
  static thread_local int repeats __attribute__((tls_model("initial-exec"))) = 0;
  std::uint64_t newest = 0;
  for (auto& s : slots_) {
    if (!s.retired.load(std::memory_order_acquire)) continue;
    if (addr < s.begin.load(std::memory_order_acquire) || addr >= s.end.load(std::memory_order_acquire))
      continue;
    newest = std::max(newest, s.serial.load(std::memory_order_acquire));
  }
  if (newest == 0) return false;
  repeats = addr == last_addr && newest == last_serial ? repeats + 1 : 1;
  last_addr = addr;
  last_serial = newest;
  return repeats <= 3;
}

}  // namespace tnbc::shim::replay::engine
