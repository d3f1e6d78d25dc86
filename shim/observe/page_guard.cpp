#include "page_guard.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "segv.hpp"
#include "util/raw.hpp"

namespace tnbc::shim::observe {
namespace {

// State of one page of a call's span.
enum PageState : std::uint8_t {
  kProtected = 0,  // PROT_NONE, not opened yet
  kOpen = 1,       // opened (by a touch, a release or release_all)
  kNever = 2,      // partly outside the sub-messages: never protected
};

// The installed guard.  A global because a signal handler has no other way to find it; written
// only by install()/uninstall().
std::atomic<PageGuard*> g_active{nullptr};

std::uintptr_t floor_page(std::uintptr_t a, std::size_t ps) {
  return a & ~(std::uintptr_t(ps) - 1);
}
std::uintptr_t ceil_page(std::uintptr_t a, std::size_t ps) { return floor_page(a + ps - 1, ps); }

// The page guard's claim in the SIGSEGV core (segv.hpp): an access fault on a page it protected.
bool claim(const siginfo_t* info) {
  PageGuard* guard = g_active.load(std::memory_order_acquire);
  return guard != nullptr && info->si_code == SEGV_ACCERR &&
         guard->handle_fault(reinterpret_cast<std::uintptr_t>(info->si_addr));
}

}  // namespace

GuardedCall::~GuardedCall() = default;

std::optional<Touch> GuardedCall::touch(std::size_t i) const {
  const Sub& s = subs_[i];
  if (s.outcome.load(std::memory_order_acquire) != static_cast<std::uint8_t>(Outcome::touched) ||
      !s.recorded.load(std::memory_order_acquire))
    return std::nullopt;
  return s.touch;
}

PageGuard::PageGuard(StampFn stamp, std::atomic<int>* live, std::atomic<int>* shared)
    : stamp_(stamp),
      page_size_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
      live_calls_(live != nullptr ? live : &own_live_),
      shared_calls_(shared) {}

PageGuard::~PageGuard() {
  release_all();
  uninstall();
}

std::optional<std::string> PageGuard::install() {
  if (installed_) return std::nullopt;
  PageGuard* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this))
    return std::string("another page guard is already installed");
  if (auto err = segv::add(claim)) {
    g_active.store(nullptr);
    return err;
  }
  installed_ = true;
  return std::nullopt;
}

void PageGuard::uninstall() {
  if (!installed_) return;
  segv::remove(claim);
  installed_ = false;
  g_active.store(nullptr);
}

const PageGuard::Entry* PageGuard::find(const Snapshot* snap, std::uintptr_t addr) const {
  if (snap == nullptr || snap->count == 0) return nullptr;
  const Entry* first = snap->entries.get();
  const Entry* last = first + snap->count;
  // The last entry that begins at or before addr.
  const Entry* it = std::upper_bound(first, last, addr,
                                     [](std::uintptr_t a, const Entry& e) { return a < e.begin; });
  if (it == first) return nullptr;
  --it;
  return addr < it->end ? it : nullptr;
}

bool PageGuard::handle_fault(std::uintptr_t addr) {
  std::uint64_t stamp = stamp_();
  // seq_cst pairs with publish_locked(): either it sees us reading, or we see its new snapshot.
  readers_.fetch_add(1, std::memory_order_seq_cst);
  bool ours = false;
  if (const Entry* e = find(snapshot_.load(std::memory_order_seq_cst), addr)) {
    const GuardedCall::Sub& s = e->call->subs_[e->sub];
    // Only a page we protected is ours: a fault on a partial edge page belongs to someone else.
    if (addr >= s.pbegin && addr < s.pend) {
      ours = true;
      open_sub(*e->call, e->sub, Release::touch, stamp);
    }
  }
  readers_.fetch_sub(1, std::memory_order_seq_cst);
  return ours;
}

void PageGuard::open_sub(GuardedCall& call, std::uint32_t i, Release how, std::uint64_t stamp) {
  GuardedCall::Sub& s = call.subs_[i];
  std::uint8_t expected = static_cast<std::uint8_t>(Outcome::untouched);
  if (how == Release::touch) {
    if (s.outcome.compare_exchange_strong(expected, static_cast<std::uint8_t>(Outcome::touched))) {
      s.touch.stamp = stamp;
      s.touch.seq = seq_.fetch_add(1, std::memory_order_relaxed);
      s.touch.thread = static_cast<std::uint32_t>(util::raw::syscall(SYS_gettid));
      s.recorded.store(true, std::memory_order_release);
    }
  } else {
    s.outcome.compare_exchange_strong(expected, static_cast<std::uint8_t>(Outcome::released));
  }
  if (s.pbegin >= s.pend) return;
  // Open first, then mark: a page marked open is open, so a thread that faulted on it while we
  // were opening it finds it marked and simply retries its access.  Every page of the sub-message
  // is protected unless the call was sampled: one mprotect per run of protected pages.
  for (std::uintptr_t p = s.pbegin; p < s.pend;) {
    auto closed = [&](std::uintptr_t q) {
      return call.page_state_[(q - call.page0_) / page_size_].load(std::memory_order_acquire) == kProtected;
    };
    if (!closed(p)) {
      p += page_size_;
      continue;
    }
    std::uintptr_t q = p + page_size_;
    while (q < s.pend && closed(q)) q += page_size_;
    util::raw::mprotect(reinterpret_cast<void*>(p), q - p, PROT_READ | PROT_WRITE);
    p = q;
  }
  // Only the first and last page can be shared with other sub-messages; the pages between belong
  // to this one alone and are counted in one step.
  std::uint32_t interior = 0;
  for (std::uintptr_t p = s.pbegin; p < s.pend; p += page_size_) {
    std::size_t idx = (p - call.page0_) / page_size_;
    std::uint8_t closed = kProtected;
    if (!call.page_state_[idx].compare_exchange_strong(closed, kOpen)) continue;
    if (p == s.pbegin || p + page_size_ == s.pend)
      page_opened(call, idx);
    else
      ++interior;
  }
  if (interior == 0) return;
  if (s.remaining.fetch_sub(interior, std::memory_order_acq_rel) == interior) {
    std::uint8_t untouched = static_cast<std::uint8_t>(Outcome::untouched);
    s.outcome.compare_exchange_strong(untouched, static_cast<std::uint8_t>(Outcome::unobserved));
  }
  if (call.closed_pages_.fetch_sub(interior, std::memory_order_acq_rel) == interior)
    count_live(-1);
}

void PageGuard::page_opened(GuardedCall& call, std::size_t idx) {
  // Every sub-message overlapping the page loses one protected page; one that loses its last
  // before being read becomes unobserved.
  std::uintptr_t pb = call.page0_ + idx * page_size_, pe = pb + page_size_;
  const std::uint32_t* order = call.by_addr_.get();
  const std::uint32_t* end = order + call.count_;
  const std::uint32_t* it =
      std::partition_point(order, end, [&](std::uint32_t k) { return call.subs_[k].end <= pb; });
  for (; it != end && call.subs_[*it].begin < pe; ++it) {
    GuardedCall::Sub& s = call.subs_[*it];
    if (s.pbegin >= s.pend || pb < s.pbegin || pb >= s.pend) continue;
    if (s.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::uint8_t expected = static_cast<std::uint8_t>(Outcome::untouched);
      s.outcome.compare_exchange_strong(expected, static_cast<std::uint8_t>(Outcome::unobserved));
    }
  }
  if (call.closed_pages_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    count_live(-1);
}

GuardedCall* PageGuard::protect(std::uint32_t index, void* base, std::span<const SubRange> subs,
                                std::string* error, std::size_t pages_per_sub) {
  std::unique_ptr<GuardedCall> call(new GuardedCall());
  call->index_ = index;
  call->count_ = subs.size();
  if (!lay_out(*call, base, subs, error, pages_per_sub)) return nullptr;
  for (std::size_t i = 0; i < subs.size(); ++i)
    if (!call->subs_[i].observable)
      call->subs_[i].outcome.store(static_cast<std::uint8_t>(Outcome::unobserved),
                                   std::memory_order_relaxed);
  call->closed_pages_.store(call->protected_pages_, std::memory_order_relaxed);

  std::lock_guard lock(mutex_);
  GuardedCall* raw = call.get();
  calls_.push_back(std::move(call));
  if (raw->protected_pages_ == 0) return raw;
  count_live(+1);
  // Publish before protecting: a page must never be protected while the handler cannot find it.
  publish_locked();
  return protect_pages_locked(*raw, error) ? raw : nullptr;
}

bool PageGuard::lay_out(GuardedCall& call, void* base, std::span<const SubRange> subs, std::string* error,
                        std::size_t pages_per_sub) const {
  const std::size_t ps = page_size_;
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  call.subs_.reset(new GuardedCall::Sub[subs.size()]);
  call.by_addr_.reset(new std::uint32_t[subs.size()]);
  for (std::size_t i = 0; i < subs.size(); ++i) {
    call.subs_[i].begin = b + subs[i].offset;
    call.subs_[i].end = b + subs[i].offset + subs[i].length;
    call.by_addr_[i] = static_cast<std::uint32_t>(i);
  }
  auto* order = call.by_addr_.get();
  std::sort(order, order + subs.size(), [&](std::uint32_t x, std::uint32_t y) {
    return call.subs_[x].begin < call.subs_[y].begin;
  });
  // Empty sub-messages take no bytes and can never be read: they are simply unobservable.
  std::uintptr_t lo = UINTPTR_MAX, hi = 0, prev_end = 0;
  for (std::size_t k = 0; k < subs.size(); ++k) {
    const auto& s = call.subs_[order[k]];
    if (s.begin == s.end) continue;
    if (s.begin < prev_end) {
      *error = "overlapping sub-messages";
      return false;
    }
    prev_end = s.end;
    lo = std::min(lo, s.begin);
    hi = std::max(hi, s.end);
  }
  if (lo >= hi) return true;
  call.page0_ = floor_page(lo, ps);
  call.npages_ = (ceil_page(hi, ps) - call.page0_) / ps;
  call.page_state_.reset(new std::atomic<std::uint8_t>[call.npages_]);
  // A page is protected iff every byte of it belongs to some sub-message: count covered bytes.
  std::vector<std::size_t> covered(call.npages_, 0);
  for (std::size_t i = 0; i < call.count_; ++i) {
    const auto& s = call.subs_[i];
    if (s.begin == s.end) continue;  // may lie outside [lo, hi): no page of its own
    for (std::uintptr_t p = floor_page(s.begin, ps); p < s.end; p += ps) {
      std::uintptr_t from = std::max(p, s.begin), to = std::min(p + ps, s.end);
      covered[(p - call.page0_) / ps] += to - from;
    }
  }
  const std::vector<bool> keep = sampled_pages(call, covered, pages_per_sub);
  for (std::size_t k = 0; k < call.npages_; ++k) {
    bool on = covered[k] == ps && keep[k];
    call.page_state_[k].store(on ? kProtected : kNever, std::memory_order_relaxed);
    call.protected_pages_ += on;
  }
  for (std::size_t i = 0; i < call.count_; ++i) {
    auto& s = call.subs_[i];
    if (s.begin == s.end) continue;
    // [pbegin, pend): from its first protected page to its last; `remaining` counts them.
    std::uint32_t count = 0;
    s.pbegin = s.pend = 0;
    for (std::uintptr_t p = floor_page(s.begin, ps); p < s.end; p += ps) {
      if (call.page_state_[(p - call.page0_) / ps].load(std::memory_order_relaxed) != kProtected) continue;
      if (count++ == 0) s.pbegin = p;
      s.pend = p + ps;
    }
    if (count > 0) {
      s.observable = true;
      s.remaining.store(count, std::memory_order_relaxed);
    }
  }
  return true;
}

std::vector<bool> PageGuard::sampled_pages(const GuardedCall& call, const std::vector<std::size_t>& covered,
                                           std::size_t pages_per_sub) const {
  // Sampled: of each sub-message's full pages, only pages_per_sub spread evenly from its first
  // to its last are protected (a page shared by two sub-messages stays if either keeps it).
  const std::size_t ps = page_size_;
  std::vector<bool> keep(call.npages_, pages_per_sub == 0);
  if (pages_per_sub == 0) return keep;
  for (std::size_t i = 0; i < call.count_; ++i) {
    const auto& s = call.subs_[i];
    if (s.begin == s.end) continue;
    std::vector<std::size_t> full;
    for (std::uintptr_t p = floor_page(s.begin, ps); p < s.end; p += ps)
      if (covered[(p - call.page0_) / ps] == ps) full.push_back((p - call.page0_) / ps);
    const std::size_t n = std::min(full.size(), pages_per_sub);
    if (n == 1) keep[full[0]] = true;
    for (std::size_t j = 0; n > 1 && j < n; ++j) keep[full[j * (full.size() - 1) / (n - 1)]] = true;
  }
  return keep;
}

bool PageGuard::protect_pages_locked(GuardedCall& call, std::string* error) {
  const std::size_t ps = page_size_;
  // Protect each run of consecutive protectable pages with one call.
  for (std::size_t k = 0; k < call.npages_;) {
    if (call.page_state_[k].load(std::memory_order_relaxed) != kProtected) {
      ++k;
      continue;
    }
    std::size_t run = k;
    while (run < call.npages_ && call.page_state_[run].load(std::memory_order_relaxed) == kProtected) ++run;
    if (util::raw::mprotect(reinterpret_cast<void*>(call.page0_ + k * ps), (run - k) * ps, PROT_NONE) != 0) {
      int e = errno;
      // Undo: open what this call protected (never the partial pages, which are not ours), and
      // make the call unobservable.  It stays registered: a handler may still be reading it.
      // The failed call may have changed part of its range before it failed: include it.
      for (std::size_t j = 0; j < run; ++j)
        if (call.page_state_[j].load(std::memory_order_relaxed) == kProtected)
          util::raw::mprotect(reinterpret_cast<void*>(call.page0_ + j * ps), ps, PROT_READ | PROT_WRITE);
      for (std::size_t j = 0; j < call.npages_; ++j)
        if (call.page_state_[j].load(std::memory_order_relaxed) == kProtected) call.page_state_[j].store(kOpen);
      for (std::size_t i = 0; i < call.count_; ++i) {
        call.subs_[i].observable = false;
        call.subs_[i].remaining.store(0);
        call.subs_[i].outcome.store(static_cast<std::uint8_t>(Outcome::unobserved));
      }
      call.closed_pages_.store(0);
      count_live(-1);
      publish_locked();
      *error = std::string("mprotect failed: ") + std::strerror(e);
      return false;
    }
    k = run;
  }
  return true;
}

void PageGuard::publish_locked() {
  // Only calls with protected pages take part: the cost follows what is guarded now, not the
  // length of the run.
  std::erase_if(live_, [](const GuardedCall* c) {
    return c->closed_pages_.load(std::memory_order_acquire) == 0;
  });
  if (!calls_.empty() && calls_.back()->closed_pages_.load(std::memory_order_acquire) != 0 &&
      std::find(live_.begin(), live_.end(), calls_.back().get()) == live_.end())
    live_.push_back(calls_.back().get());
  auto snap = std::make_unique<Snapshot>();
  std::size_t n = 0;
  for (const GuardedCall* c : live_)
    for (std::size_t i = 0; i < c->count_; ++i)
      n += c->subs_[i].remaining.load(std::memory_order_acquire) != 0;
  snap->entries.reset(new Entry[n]);
  for (GuardedCall* c : live_)
    for (std::size_t i = 0; i < c->count_; ++i)
      if (c->subs_[i].remaining.load(std::memory_order_acquire) != 0 && snap->count < n)
        snap->entries[snap->count++] =
            Entry{c->subs_[i].begin, c->subs_[i].end, c, static_cast<std::uint32_t>(i)};
  std::sort(snap->entries.get(), snap->entries.get() + snap->count,
            [](const Entry& x, const Entry& y) { return x.begin < y.begin; });
  snapshot_.store(snap.get(), std::memory_order_seq_cst);
  if (current_) retired_.push_back(std::move(current_));
  current_ = std::move(snap);
  // A reader that entered before the store may still hold a retired snapshot.
  if (readers_.load(std::memory_order_seq_cst) == 0) retired_.clear();
}

std::size_t PageGuard::release(const void* p, std::size_t n, Release how) {
  if (!any_guarded() || n == 0) return 0;
  std::uint64_t stamp = stamp_();
  auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + n;
  std::size_t opened = 0;
  readers_.fetch_add(1, std::memory_order_seq_cst);
  if (const Snapshot* snap = snapshot_.load(std::memory_order_seq_cst)) {
    const Entry* first = snap->entries.get();
    const Entry* last = first + snap->count;
    const Entry* it =
        std::partition_point(first, last, [&](const Entry& e) { return e.end <= lo; });
    for (; it != last && it->begin < hi; ++it) {
      const GuardedCall::Sub& s = it->call->subs_[it->sub];
      if (s.remaining.load(std::memory_order_acquire) == 0 &&
          s.outcome.load(std::memory_order_acquire) !=
              static_cast<std::uint8_t>(Outcome::untouched))
        continue;
      open_sub(*it->call, it->sub, how, stamp);
      ++opened;
    }
  }
  readers_.fetch_sub(1, std::memory_order_seq_cst);
  return opened;
}

void PageGuard::release_all(bool lose_untouched) {
  std::lock_guard lock(mutex_);
  for (GuardedCall* c : live_) {
    if (c->closed_pages_.load(std::memory_order_acquire) == 0) continue;
    if (lose_untouched)
      for (std::size_t i = 0; i < c->count_; ++i) {
        if (c->subs_[i].remaining.load(std::memory_order_acquire) == 0) continue;
        std::uint8_t expected = static_cast<std::uint8_t>(Outcome::untouched);
        c->subs_[i].outcome.compare_exchange_strong(expected,
                                                    static_cast<std::uint8_t>(Outcome::unobserved));
      }
    // Open each run of protected pages with one call, then mark it (open before marked).
    for (std::size_t k = 0; k < c->npages_;) {
      if (c->page_state_[k].load(std::memory_order_acquire) != kProtected) {
        ++k;
        continue;
      }
      std::size_t run = k;
      while (run < c->npages_ && c->page_state_[run].load(std::memory_order_acquire) == kProtected)
        ++run;
      util::raw::mprotect(reinterpret_cast<void*>(c->page0_ + k * page_size_), (run - k) * page_size_,
               PROT_READ | PROT_WRITE);
      // A handler may open some of these pages at the same time: whoever marks a page counts it.
      for (; k < run; ++k) {
        std::uint8_t closed = kProtected;
        if (c->page_state_[k].compare_exchange_strong(closed, kOpen) &&
            c->closed_pages_.fetch_sub(1, std::memory_order_acq_rel) == 1)
          count_live(-1);
      }
    }
  }
  publish_locked();
}

std::vector<const GuardedCall*> PageGuard::calls() const {
  std::lock_guard lock(mutex_);
  std::vector<const GuardedCall*> out;
  out.reserve(calls_.size());
  for (const auto& c : calls_) out.push_back(c.get());
  return out;
}

void PageGuard::reset() {
  release_all();
  std::lock_guard lock(mutex_);
  // A handler could still be reading the last snapshot; wait for it to leave (it never blocks).
  while (readers_.load(std::memory_order_seq_cst) != 0) {}
  snapshot_.store(nullptr, std::memory_order_seq_cst);
  while (readers_.load(std::memory_order_seq_cst) != 0) {}
  retired_.clear();
  current_.reset();
  live_.clear();
  calls_.clear();
}

}  // namespace tnbc::shim::observe
