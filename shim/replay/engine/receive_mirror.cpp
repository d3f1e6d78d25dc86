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
#include "page_move.hpp"
#include "replay_guard.hpp"
#include "util/raw.hpp"

namespace tnbc::shim::replay::engine {

namespace {

// /proc/self/mem, open for writing, or -1: publishing moves pages instead.  A fork()ed child
// closes it: the file reaches the memory of the process that opened it, the parent's.
int g_mem_fd = -1;
Publisher g_publisher = Publisher::mremap;

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

namespace {

/// Opens /proc/self/mem for writing and checks that the kernel writes through it into a page
/// of this process that is PROT_NONE.  Returns "" when it does, else why not.
const char* open_mem() {
  static const char* why = [] {
    const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (fd < 0) return "cannot open /proc/self/mem";
    // The check: a forced write into a page nobody may access, then read back.
    const std::size_t ps = system_page_size();
    void* p = util::raw::mmap(nullptr, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return "cannot map a page to check";
    }
    const char probe[] = "tnbc";
    g_mem_fd = fd;
    bool ok = write_through_mem(probe, sizeof probe, reinterpret_cast<std::uintptr_t>(p));
    ok = ok && util::raw::mprotect(p, ps, PROT_READ) == 0 && std::memcmp(p, probe, sizeof probe) == 0;
    util::raw::munmap(p, ps);
    if (!ok) {
      ::close(fd);
      g_mem_fd = -1;
      return "the kernel refuses writes through /proc/self/mem";
    }
    pthread_atfork(nullptr, nullptr, close_mem_in_child);
    return "";
  }();
  return why;
}

}  // namespace

std::string start_publishing(std::string_view want) {
  // Writing is also how an op publishes whose pages the kernel will not move.
  const char* no_write = want == "mremap" ? "not asked for" : open_mem();
  std::string why;
  if (want == "auto" || want == "move") {
    const std::string& no_move = page_move::start();
    if (no_move.empty()) {
      g_publisher = Publisher::move;
      return "move";
    }
    why = "move: " + no_move;
  }
  if (want != "mremap") {
    if (*no_write == '\0') {
      g_publisher = Publisher::write;
      return why.empty() ? std::string("write") : "write (" + why + ")";
    }
    why += (why.empty() ? "" : "; ") + std::string("write: ") + no_write;
  }
  g_publisher = Publisher::mremap;
  return why.empty() ? std::string("mremap") : "mremap (" + why + ")";
}

Publisher publisher() { return g_publisher; }
void force_publisher(Publisher p) { g_publisher = p; }

bool reserve_mirror(Op& op, std::size_t ps) {
  const std::size_t bytes = receive_cover_bytes(op, ps);
  if (bytes == 0 || g_publisher == Publisher::move) return true;
  op.recv.mirror_buf = PoolBuffer(BufferPool::instance().acquire(bytes));
  return static_cast<bool>(op.recv.mirror_buf);
}

namespace {

using Runs = std::vector<std::pair<std::uintptr_t, std::size_t>>;  // page runs: address, bytes

/// Marks the pages no step holds published (they are never guarded) and the others not yet.
void init_published(ReceiveMirror& r) {
  r.published.reset(new std::atomic<std::uint8_t>[r.guard_pages]);
  for (std::size_t idx = 0; idx < r.guard_pages; ++idx)
    r.published[idx].store(r.holders[idx] == 0 ? 1 : 0, std::memory_order_relaxed);
}

/// Forgets the guard of an op that will receive in place after all.
void drop_guard(Op& op) {
  op.recv.guard_pages = 0;
  op.recv.mirror = nullptr;
  op.edges.edge_step.clear();
  op.edges.edge_pending.store(0, std::memory_order_relaxed);
}

/// Moves the mirror's bytes [src, src + n) back into the user's missing pages at `user`, waking
/// whoever waits there: moved, or copied where the kernel will not move a page (one shared
/// with a fork()ed child since the call).
void put_back(std::uintptr_t user, std::uintptr_t src, std::size_t n) {
  const std::size_t ps = system_page_size();
  // The rest page by page.  A copy that fails finds no missing page there: the program replaced
  // that memory during the call by a path no interposer sees, and nothing of ours belongs there
  // any more.  A missing mirror page is not copied (move() gave the user page zeros): until
  // guard_by_move's moves are done the mirror is registered with the userfaultfd, and reading
  // a missing page of it waits for this thread itself (a heFFTe run's progress thread hung so,
  // asleep in UFFDIO_COPY's read of the source).
  for (std::size_t done = page_move::move(user, src, n, true); done < n; done += ps)
    if (page_move::move(user + done, src + done, ps, true) < ps && page_move::populated(src + done))
      page_move::copy(user + done, reinterpret_cast<const void*>(src + done), ps);
}

/// The "move" way (receive_mirror.hpp): the user's pages of `runs` move into a mirror mapping of
/// their own.  False, with everything as it was, when the kernel refuses any of it.
bool guard_by_move(Op& op, const Runs& runs, std::size_t ps) {
  ReceiveMirror& r = op.recv;
  const std::size_t cover = r.cover_hi - r.cover_lo, full = r.guard_pages * ps;
  void* m = util::raw::mmap(nullptr, cover, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* mirror = static_cast<char*>(m);
  auto in_mirror = [&](std::uintptr_t user) { return reinterpret_cast<std::uintptr_t>(mirror) + (user - r.cover_lo); };
  // The kernel refuses the user's range where it is not anonymous or shared memory, or belongs
  // to another userfaultfd (the program's own).
  if (!page_move::register_range(in_mirror(r.guard_lo), full) || !page_move::register_range(r.guard_lo, full)) {
    util::raw::munmap(m, cover);
    return false;
  }
  // The pages between the runs, which no step holds and nothing moves: registered, one the
  // program never touched would be missing, and a touch would wait for a move that never comes
  // (until the op retires).  They get the zero page now, as a first read would have given.
  std::uintptr_t from = r.guard_lo;
  for (const auto& [pg, len] : runs) {
    if (pg > from) page_move::zero_missing(from, pg - from);
    from = pg + len;
  }
  if (r.guard_lo + full > from) page_move::zero_missing(from, r.guard_lo + full - from);
  // Register before moving: a system call that meets a missing page must find its slot.
  r.slot = engine::ReplayGuard::instance().add(r.guard_lo, r.guard_lo + full, r.published.get(),
                                               op.costs ? &op.costs->wait_ns : nullptr);
  std::size_t k = 0, moved = 0;
  if (r.slot >= 0)
    for (; k < runs.size(); ++k)
      if ((moved = page_move::move(in_mirror(runs[k].first), runs[k].first, runs[k].second, false)) < runs[k].second) break;
  if (r.slot >= 0 && k == runs.size()) {
    // Moves back need only the user's pages registered.  The mirror's registration ends here,
    // so that nothing reading a missing page of it (one no step holds) can wait for the thread
    // that would publish it: it reads zeros.
    page_move::unregister_range(in_mirror(r.guard_lo), full);
    r.mirror = mirror;
    r.by_move = true;
    g_guarded_calls.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  // Undo: every page back where it was, the registrations and the mirror gone.
  for (std::size_t j = 0; j < k; ++j) put_back(runs[j].first, in_mirror(runs[j].first), runs[j].second);
  if (k < runs.size() && moved > 0) put_back(runs[k].first, in_mirror(runs[k].first), moved);
  if (r.slot >= 0) {
    for (std::size_t idx = 0; idx < r.guard_pages; ++idx) r.published[idx].store(1, std::memory_order_release);
    engine::ReplayGuard::instance().retire(r.slot, std::move(r.published));
    r.slot = -1;
    init_published(r);
  }
  page_move::unregister_range(r.guard_lo, full);
  util::raw::munmap(m, cover);
  return false;
}

}  // namespace

bool prepare_receive(Op& op, std::size_t ps) {
  const auto [lo, hi] = receive_span(op);
  if (hi <= lo) return false;
  auto base = reinterpret_cast<std::uintptr_t>(op.recv.recv_base);
  std::uintptr_t full_lo = page_ceil(lo, ps), full_hi = page_floor(hi, ps);
  if (full_hi <= full_lo) return false;
  ReceiveMirror& r = op.recv;
  r.cover_lo = page_floor(lo, ps);
  r.cover_hi = page_ceil(hi, ps);
  const std::size_t cover = r.cover_hi - r.cover_lo;
  const bool by_move = g_publisher == Publisher::move && !r.mirror_buf;
  if (!by_move && (!r.mirror_buf || r.mirror_buf.bytes() < cover)) return false;
  r.guard_lo = full_lo;
  r.guard_pages = (full_hi - full_lo) / ps;
  r.holders.assign(r.guard_pages, 0);
  r.moved.assign(r.guard_pages, 0);
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
  init_published(r);
  Runs runs;  // guarded page runs
  for (std::size_t idx = 0; idx < r.guard_pages; ++idx) {
    if (r.holders[idx] == 0) continue;
    const std::uintptr_t pg = full_lo + idx * ps;
    if (!runs.empty() && runs.back().first + runs.back().second == pg) runs.back().second += ps;
    else runs.emplace_back(pg, ps);
  }
  if (by_move && guard_by_move(op, runs, ps)) return true;
  if (by_move) {
    // Not movable (a file's private pages, pages shared with a fork()ed child or pinned): this
    // op protects and writes (or moves with mremap), as the next way does.
    r.mirror_buf = PoolBuffer(BufferPool::instance().acquire(cover));
    if (!r.mirror_buf) {
      drop_guard(op);
      return false;
    }
  }
  // A buffer of an earlier call: every byte the user can see from it is either received now or
  // copied from the user's page below, never left over.
  r.mirror = r.mirror_buf.get();
  for (std::size_t idx = 0; idx < r.guard_pages; ++idx) {
    const std::uintptr_t pg = full_lo + idx * ps;
    if (r.holders[idx] != 0 && covered[idx] < ps)
      std::memcpy(r.mirror + (pg - r.cover_lo), reinterpret_cast<void*>(pg), ps);
  }
  // Register before protecting: a thread that faults in between must find its page.
  r.slot = engine::ReplayGuard::instance().add(full_lo, full_hi, r.published.get(),
                                       op.costs ? &op.costs->wait_ns : nullptr);
  if (r.slot < 0) {
    drop_guard(op);
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
    if (r.by_move) {
      put_back(user, reinterpret_cast<std::uintptr_t>(src), len);
    } else if (g_mem_fd >= 0 && g_publisher != Publisher::mremap && write_through_mem(src, len, user)) {
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
  if (r.by_move) {
    // Every page is back in the user's buffer: the registration ends (a page the program frees
    // and the C library returns to the kernel must fault in as zeros again, not wait for us),
    // and the mirror holds only the edge pages.
    page_move::unregister_range(r.guard_lo, r.guard_pages * ps);
    util::raw::munmap(r.mirror, r.cover_hi - r.cover_lo);
    r.mirror = nullptr;
  } else if (r.mirror != nullptr && std::find(r.moved.begin(), r.moved.end(), 1) != r.moved.end()) {
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
