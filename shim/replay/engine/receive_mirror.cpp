// Mapping the mirror, guarding, copying the edges, publishing and unmapping
// (receive_mirror.hpp).
#include "receive_mirror.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <utility>

#include "shim/io_interpose.hpp"
#include "op.hpp"
#include "replay_guard.hpp"
#include "util/raw.hpp"

namespace tnbc::shim::replay::engine {

namespace {

// /proc/self/mem, open for writing, or -1: publishing moves pages instead.  A fork()ed child
// closes it: the file reaches the memory of the process that opened it, the parent's.
int g_mem_fd = -1;
bool g_force_mremap = false;  // unit tests

void close_mem_in_child() {
  if (g_mem_fd >= 0) ::close(g_mem_fd);
  g_mem_fd = -1;
}

/// Writes [src, src + len) at `user` through /proc/self/mem; false unless every byte went.
bool write_through_mem(const char* src, std::size_t len, std::uintptr_t user) {
  while (len > 0) {
    const long n = util::raw::syscall(SYS_pwrite64, g_mem_fd, src, len, static_cast<off_t>(user));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    src += n, user += static_cast<std::uintptr_t>(n), len -= static_cast<std::size_t>(n);
  }
  return true;
}

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

const char* start_publishing() {
  static const char* how = [] {
    const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (fd < 0) return "mremap: cannot open /proc/self/mem";
    // The check: a forced write into a page nobody may access, then read back.
    const std::size_t ps = system_page_size();
    void* p = util::raw::mmap(nullptr, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return "mremap: cannot map a page to check";
    }
    const char probe[] = "tnbc";
    g_mem_fd = fd;
    bool ok = write_through_mem(probe, sizeof probe, reinterpret_cast<std::uintptr_t>(p));
    ok = ok && util::raw::mprotect(p, ps, PROT_READ) == 0 && std::memcmp(p, probe, sizeof probe) == 0;
    util::raw::munmap(p, ps);
    if (!ok) {
      ::close(fd);
      g_mem_fd = -1;
      return "mremap: the kernel refuses writes through /proc/self/mem";
    }
    pthread_atfork(nullptr, nullptr, close_mem_in_child);
    return "write";
  }();
  return how;
}

bool publishing_by_write() { return g_mem_fd >= 0 && !g_force_mremap; }
void force_mremap_publishing(bool on) { g_force_mremap = on; }

bool reserve_mirror(Op& op, std::size_t ps) {
  const std::size_t bytes = receive_cover_bytes(op, ps);
  if (bytes == 0) return true;
  op.recv.mirror_buf = PoolBuffer(BufferPool::instance().acquire(bytes));
  return static_cast<bool>(op.recv.mirror_buf);
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
  if (!r.mirror_buf || r.mirror_buf.bytes() < r.cover_hi - r.cover_lo) return false;
  // A buffer of an earlier call: every byte the user can see from it is either received now
  // or copied from the user's page below, never left over.
  r.mirror = r.mirror_buf.get();
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
  r.slot = engine::ReplayGuard::instance().add(full_lo, full_hi, r.published.get(),
                                       op.costs ? &op.costs->wait_ns : nullptr);
  if (r.slot < 0) {
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
    if (publishing_by_write() && write_through_mem(src, len, user)) {
      // The bytes are in place while nobody can see them; now open the pages.
      util::raw::mprotect(reinterpret_cast<void*>(user), len, PROT_READ | PROT_WRITE);
    } else {
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
    }
    for (std::size_t k = a; k < b; ++k) r.published[pages[k]].store(1, std::memory_order_release);
    a = b;
  }
  pages.clear();
}

void retire(Op& op, std::size_t ps) {
  ReceiveMirror& r = op.recv;
  if (r.slot >= 0) {
    engine::ReplayGuard::instance().retire(r.slot, std::move(r.published));
    g_guarded_calls.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (r.mirror != nullptr && std::find(r.moved.begin(), r.moved.end(), 1) != r.moved.end()) {
    // A mirror publishing moved pages out of is used up: unmap exactly the pages still ours
    // (the ones moved to the user are gone, and their old addresses may already hold somebody
    // else's mapping), and the pool forgets it.  An intact mirror goes back to the pool when
    // the op is destroyed.
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
    // The pool's buffer may be longer than the cover: its tail is still ours too.
    const std::size_t cover = r.cover_hi - r.cover_lo;
    if (r.mirror_buf.bytes() > cover) util::raw::munmap(r.mirror + cover, r.mirror_buf.bytes() - cover);
    r.mirror_buf.forget();
  }
  op.done.store(true, std::memory_order_release);
}

}  // namespace tnbc::shim::replay::engine
