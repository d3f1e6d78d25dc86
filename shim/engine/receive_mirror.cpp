// Mapping the mirror, guarding, copying the edges, publishing and unmapping
// (receive_mirror.hpp).
#include "receive_mirror.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "io_interpose.hpp"
#include "op.hpp"
#include "trace/replay_guard.hpp"
#include "util/raw.hpp"

namespace tnbc::shim::engine {

namespace {

/// The addresses [lo, hi) the op's recv and copy steps write (lo = UINTPTR_MAX, hi = 0: none).
std::pair<std::uintptr_t, std::uintptr_t> receive_span(const Op& op) {
  std::uintptr_t lo = UINTPTR_MAX, hi = 0;
  auto base = reinterpret_cast<std::uintptr_t>(op.recv.recv_base);
  for (const auto& s : op.steps)
    if (s.kind != Kind::send) {
      lo = std::min(lo, base + s.offset);
      hi = std::max(hi, base + s.offset + s.bytes);
    }
  return {lo, hi};
}

}  // namespace

std::size_t receive_cover_bytes(const Op& op, std::size_t ps) {
  const auto [lo, hi] = receive_span(op);
  return hi > lo ? page_ceil(hi, ps) - page_floor(lo, ps) : 0;
}

bool prepare_receive(Op& op, std::size_t ps) {
  const auto [lo, hi] = receive_span(op);
  if (hi <= lo) return false;
  auto base = reinterpret_cast<std::uintptr_t>(op.recv.recv_base);
  std::uintptr_t full_lo = page_ceil(lo, ps), full_hi = page_floor(hi, ps);
  if (full_hi <= full_lo) return false;
  ReceiveMirror& r = op.recv;
  r.cover_lo = page_floor(lo, ps);
  r.cover_hi = page_ceil(hi, ps);
  void* m = util::raw::mmap(nullptr, r.cover_hi - r.cover_lo, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  r.mirror = static_cast<char*>(m);
  r.guard_lo = full_lo;
  r.guard_pages = (full_hi - full_lo) / ps;
  r.holders.assign(r.guard_pages, 0);
  r.moved.assign(r.guard_pages, 0);
  r.published.reset(new std::atomic<std::uint8_t>[r.guard_pages]);
  // Which bytes of each full page the receive writes: a page not written completely keeps user
  // bytes the mirror must carry over (alltoallv gaps).
  std::vector<std::size_t> covered(r.guard_pages, 0);
  op.edges.edge_step.assign(op.steps.size(), 0);
  int edges = 0;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    const auto& s = op.steps[i];
    bool recv_side = s.kind != Kind::send || op.sends_from_mirror;
    if (!recv_side || s.bytes == 0) continue;
    std::uintptr_t b = base + s.offset, e = b + s.bytes;
    if (b < full_lo || e > full_hi) {
      if (s.kind != Kind::send) {
        op.edges.edge_step[i] = 1;
        ++edges;
      }
    }
    for (std::uintptr_t pg = std::max(page_floor(b, ps), full_lo); pg < e && pg < full_hi; pg += ps) {
      std::size_t idx = (pg - full_lo) / ps;
      ++r.holders[idx];
      if (s.kind != Kind::send)
        covered[idx] += std::min<std::uintptr_t>(e, pg + ps) - std::max<std::uintptr_t>(b, pg);
    }
  }
  op.edges.edge_pending.store(edges, std::memory_order_relaxed);
  std::vector<std::pair<std::uintptr_t, std::size_t>> runs;  // protected page runs
  for (std::size_t idx = 0; idx < r.guard_pages; ++idx) {
    std::uintptr_t pg = full_lo + idx * ps;
    if (r.holders[idx] == 0) {
      r.published[idx].store(1, std::memory_order_relaxed);  // never protected
      continue;
    }
    r.published[idx].store(0, std::memory_order_relaxed);
    if (covered[idx] < ps) std::memcpy(r.mirror + (pg - r.cover_lo), reinterpret_cast<void*>(pg), ps);
    if (!runs.empty() && runs.back().first + runs.back().second == pg) runs.back().second += ps;
    else runs.emplace_back(pg, ps);
  }
  // Register before protecting: a thread that faults in between must find its page.
  r.slot = trace::ReplayGuard::instance().add(full_lo, full_hi, r.published.get(),
                                       op.costs ? &op.costs->wait_ns : nullptr);
  if (r.slot < 0) {
    util::raw::munmap(r.mirror, r.cover_hi - r.cover_lo);
    r.mirror = nullptr;
    return false;
  }
  g_guarded_calls.fetch_add(1, std::memory_order_acq_rel);
  for (auto [pg, len] : runs) util::raw::mprotect(reinterpret_cast<void*>(pg), len, PROT_NONE);
  return true;
}

void receive_direct(Op& op) {
  op.recv.direct = true;
  std::tie(op.recv.cover_lo, op.recv.cover_hi) = receive_span(op);
}

void copy_edges(const Op& op, std::size_t ps) {
  const ReceiveMirror& r = op.recv;
  auto base = reinterpret_cast<std::uintptr_t>(r.recv_base);
  const std::uintptr_t full_lo = r.guard_lo, full_hi = r.guard_lo + r.guard_pages * ps;
  for (std::size_t i = 0; i < op.steps.size(); ++i) {
    if (!op.edges.edge_step[i]) continue;
    const auto& s = op.steps[i];
    std::uintptr_t b = base + s.offset, e = b + s.bytes;
    if (b < full_lo) {
      std::uintptr_t stop = std::min(e, full_lo);
      std::memcpy(reinterpret_cast<void*>(b), r.mirror + (b - r.cover_lo), stop - b);
    }
    if (e > full_hi) {
      std::uintptr_t from = std::max(b, full_hi);
      std::memcpy(reinterpret_cast<void*>(from), r.mirror + (from - r.cover_lo), e - from);
    }
  }
}

void publish(Op& op, std::vector<std::size_t>& pages, std::size_t ps) {
  ReceiveMirror& r = op.recv;
  std::sort(pages.begin(), pages.end());
  for (std::size_t a = 0; a < pages.size();) {
    std::size_t b = a + 1;
    while (b < pages.size() && pages[b] == pages[b - 1] + 1) ++b;
    std::uintptr_t user = r.guard_lo + pages[a] * ps;
    std::size_t len = (b - a) * ps;
    char* src = r.mirror + (user - r.cover_lo);
    // The raw system call: UCX's libucm patches libc's mremap with a four-argument version
    // that drops the new address of MREMAP_FIXED (measured: it returns NULL and moves nothing).
    auto res = reinterpret_cast<void*>(util::raw::syscall(SYS_mremap, src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
                                               reinterpret_cast<void*>(user)));
    if (res == MAP_FAILED) {
      // Cannot happen for ranges we mapped and protected ourselves; keep the data right anyway.
      util::raw::mprotect(reinterpret_cast<void*>(user), len, PROT_READ | PROT_WRITE);
      std::memcpy(reinterpret_cast<void*>(user), src, len);
    } else {
      for (std::size_t k = a; k < b; ++k) r.moved[pages[k]] = 1;
    }
    for (std::size_t k = a; k < b; ++k) r.published[pages[k]].store(1, std::memory_order_release);
    a = b;
  }
  pages.clear();
}

void retire(Op& op, std::size_t ps) {
  ReceiveMirror& r = op.recv;
  if (r.slot >= 0) {
    trace::ReplayGuard::instance().retire(r.slot, std::move(r.published));
    g_guarded_calls.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (r.mirror != nullptr) {
    // Unmap exactly the mirror pages still ours: the ones moved to the user are gone, and their
    // old addresses may already hold somebody else's mapping.
    const std::size_t total = (r.cover_hi - r.cover_lo) / ps;
    const std::size_t first_full = (r.guard_lo - r.cover_lo) / ps;
    for (std::size_t pg = 0; pg < total;) {
      auto is_moved = [&](std::size_t p) {
        return p >= first_full && p < first_full + r.guard_pages && r.moved[p - first_full];
      };
      if (is_moved(pg)) {
        ++pg;
        continue;
      }
      std::size_t end = pg + 1;
      while (end < total && !is_moved(end)) ++end;
      util::raw::munmap(r.mirror + pg * ps, (end - pg) * ps);
      pg = end;
    }
  }
  op.done.store(true, std::memory_order_release);
}

}  // namespace tnbc::shim::engine
