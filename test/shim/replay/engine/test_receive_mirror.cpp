// The receive mirror of the replay engine (shim/replay/engine/receive_mirror.hpp) below MPI: plain
// memory, and a "transport" that writes each receive step's bytes into the mirror as MPI would.
// Partial first and last pages, a gap between sub-messages (Alltoallv), runs of pages published
// together, the three ways of publishing (moving the user's own pages out and back with
// userfaultfd, a thread touching one sleeping until it is back; writing through /proc/self/mem,
// the mirror kept whole for the pool; moving pages with mremap, retire() unmapping only the
// mirror pages that did not move), the fall back from moving where the kernel refuses, and the
// pool itself.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <sys/syscall.h>

#include <atomic>
#include <functional>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shim/replay/engine/buffer_pool.hpp"
#include "shim/replay/engine/op.hpp"
#include "shim/replay/engine/page_move.hpp"
#include "shim/replay/engine/receive_mirror.hpp"
#include "shim/io_interpose.hpp"
#include "util/raw.hpp"

using tnbc::shim::replay::engine::BufferPool;
using tnbc::shim::replay::engine::Op;
using tnbc::shim::replay::engine::Publisher;
using tnbc::shim::replay::engine::schedule::Kind;
using tnbc::shim::replay::engine::schedule::Step;
namespace engine = tnbc::shim::replay::engine;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

/// The protection of the mapping holding `p` as /proc/self/maps prints it ("rw-p", "---p"), or
/// "" when nothing is mapped there.
std::string protection(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  FILE* f = std::fopen("/proc/self/maps", "r");
  REQUIRE(f != nullptr);
  char line[512];
  std::string out;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) {
      out = perms;
      break;
    }
  }
  std::fclose(f);
  return out;
}

bool mapped(const void* p) {
  return msync(const_cast<void*>(p), 1, MS_ASYNC) == 0 || errno != ENOMEM;
}

/// Whether the page holding `p` has a page in memory (a page moved out is missing).
bool resident(const void* p) {
  unsigned char v = 0;
  void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1));
  REQUIRE(mincore(page, kPage, &v) == 0);
  return (v & 1) != 0;
}

const char* name_of(Publisher p) {
  return p == Publisher::move ? "moving pages" : p == Publisher::write ? "writing" : "mremap";
}

char byte_of(int sub, std::size_t i) { return static_cast<char>('A' + sub * 7 + static_cast<int>(i % 13)); }

/// Seven pages filled with 'u', and an op receiving three sub-messages into the buffer that
/// starts 100 bytes into the first page: [0, 5000), a gap of 3000 bytes the receive does not
/// write, [8000, 14000) and [14000, 6 * page - 200).  The span [area + 100, area + 6 pages - 100)
/// has four full pages (area + 1..4 pages, indices 0..3) and a partial page at each end.
struct Fixture {
  char* area = nullptr;
  char* buf = nullptr;
  std::size_t span = 0;
  Op op;

  /// Publishes the way `how` says (this kernel has all three); `shared`: the buffer is shared
  /// memory, whose pages the kernel does not move.
  explicit Fixture(Publisher how = Publisher::mremap, bool shared = false) {
    REQUIRE(engine::start_publishing() == "move");  // this kernel moves pages, and writes
    engine::force_publisher(how);
    REQUIRE(kPage == 4096);  // the layout below is drawn for 4 KiB pages
    void* m = mmap(nullptr, 7 * kPage, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    area = static_cast<char*>(m);
    std::memset(area, 'u', 7 * kPage);
    buf = area + 100;
    span = 6 * kPage - 200;
    op.recv.recv_base = buf;
    op.steps = {Step{Kind::recv, 1, 0, 5000, 0}, Step{Kind::recv, 2, 8000, 6000, 1},
                Step{Kind::recv, 3, 14000, span - 14000, 2}};
  }
  ~Fixture() {
    munmap(area, 7 * kPage);
    engine::force_publisher(Publisher::move);
  }
  bool prepare() { return engine::reserve_mirror(op, kPage) && engine::prepare_receive(op, kPage); }

  /// What MPI does for each receive step: its bytes land in the mirror.
  void arrive() {
    for (const auto& s : op.steps)
      for (std::size_t i = 0; i < s.bytes; ++i) op.recv.mirror_at(s.offset)[i] = byte_of(s.sub, i);
  }
  /// Bytes of the span that differ from what blocking MPI would have left.
  std::size_t wrong() const {
    std::size_t n = 0;
    for (std::size_t off = 0; off < span; ++off) n += buf[off] != expected(off);
    return n;
  }
  /// Publishes `pages`, copies the edges and checks every byte of the span.
  void publish_and_check(std::vector<std::size_t> pages) {
    engine::publish(op, pages, kPage);
    engine::copy_edges(op, kPage);
    CHECK(wrong() == 0);
  }
  /// The byte blocking MPI would have left at buffer offset `off`.
  char expected(std::size_t off) const {
    for (const auto& s : op.steps)
      if (off >= s.offset && off < s.offset + s.bytes) return byte_of(s.sub, off - s.offset);
    return 'u';
  }
};

}  // namespace

TEST_CASE("receive mirror: full pages guarded, partial edges copied, gaps carried over, pages published in runs",
          "[receive_mirror]") {
  const Publisher how = GENERATE(Publisher::move, Publisher::write, Publisher::mremap);
  INFO("published by " << name_of(how));
  BufferPool::instance().trim();  // an earlier case's kept buffer would be taken here
  const std::size_t kept_before = BufferPool::instance().kept();
  Fixture f(how);
  REQUIRE(f.prepare());
  const auto& r = f.op.recv;
  CHECK(r.by_move == (how == Publisher::move));
  CHECK(r.guard_lo == reinterpret_cast<std::uintptr_t>(f.area + kPage));
  CHECK(r.guard_pages == 4);
  CHECK(r.slot >= 0);
  CHECK(tnbc::shim::g_guarded_calls.load() == 1);
  for (std::size_t p = 1; p <= 4; ++p) {
    if (how == Publisher::move) {
      // The user's pages moved into the mirror: missing here, open, and the gap's 'u' bytes
      // travelled with them.
      CHECK_FALSE(resident(f.area + p * kPage));
      CHECK(protection(f.area + p * kPage) == "rw-p");
      CHECK(r.mirror[p * kPage + 10] == 'u');
    } else {
      CHECK(protection(f.area + p * kPage) == "---p");
    }
  }
  CHECK(protection(f.area) == "rw-p");              // the partial first page stays open
  CHECK(protection(f.area + 5 * kPage) == "rw-p");  // and the partial last one
  // Steps touching a partial page are edge steps: the first and the last sub-message.
  CHECK(f.op.edges.edge_step == std::vector<char>{1, 0, 1});
  CHECK(f.op.edges.edge_pending.load() == 2);

  f.arrive();
  std::vector<std::size_t> first{2, 0, 1};  // pages 0-2: one run, given out of order
  engine::publish(f.op, first, kPage);
  CHECK(first.empty());
  for (std::size_t p = 0; p < 3; ++p) CHECK(r.published[p].load() == 1);
  CHECK(r.published[3].load() == 0);
  if (how == Publisher::move) {
    for (std::size_t p = 1; p <= 3; ++p) CHECK(resident(f.area + p * kPage));
    CHECK_FALSE(resident(f.area + 4 * kPage));  // page 3 not yet
  } else {
    CHECK(protection(f.area + 4 * kPage) == "---p");  // page 3 not yet
  }
  std::vector<std::size_t> rest{3};
  engine::publish(f.op, rest, kPage);
  engine::copy_edges(f.op, kPage);

  // Every byte is what blocking MPI gives: received bytes, the gap's and the edges' user bytes
  // kept, and nothing outside the span touched.
  CHECK(f.wrong() == 0);
  for (std::size_t i = 0; i < 100; ++i) {
    CHECK(f.area[i] == 'u');
    CHECK(f.area[7 * kPage - 1 - i] == 'u');
  }
  for (std::size_t p = 1; p <= 4; ++p) CHECK(protection(f.area + p * kPage) == "rw-p");
  char* mirror = r.mirror;
  const std::size_t cover = r.cover_hi - r.cover_lo;
  engine::retire(f.op, kPage);
  CHECK(f.op.done.load());
  CHECK(tnbc::shim::g_guarded_calls.load() == 0);
  for (std::size_t p = 0; p < 7; ++p) CHECK(mapped(f.area + p * kPage));
  if (how == Publisher::move) {
    // The pages went back where they came from; the mirror mapping is gone, the pool untouched.
    for (std::size_t p = 0; p < cover / kPage; ++p) CHECK_FALSE(mapped(mirror + p * kPage));
    CHECK_FALSE(f.op.recv.mirror_buf);
    CHECK(BufferPool::instance().kept() == kept_before);
  } else if (how == Publisher::write) {
    // Nothing moved: the mirror is whole, and goes back to the pool with its op.
    for (std::size_t p = 0; p < cover / kPage; ++p) CHECK(mapped(mirror + p * kPage));
    f.op.recv.mirror_buf.reset();
    CHECK(BufferPool::instance().kept() == kept_before + 1);
  } else {
    // The user's pages (moved from the mirror) stay; the mirror's own pages are all unmapped,
    // and the pool forgot the buffer.
    for (std::size_t p = 0; p < cover / kPage; ++p) CHECK_FALSE(mapped(mirror + p * kPage));
    CHECK_FALSE(f.op.recv.mirror_buf);
    CHECK(BufferPool::instance().kept() == kept_before);
  }
  CHECK(f.wrong() == 0);
}

TEST_CASE("receive mirror: a reused mirror shows no byte of the call before", "[receive_mirror]") {
  // One call fills a pool buffer with 'z'; the next call takes the same buffer and receives
  // only into parts of its pages: the user must see its own bytes around them, never a 'z'.
  BufferPool::instance().trim();
  {
    Fixture first(Publisher::write);
    REQUIRE(first.prepare());
    std::memset(first.op.recv.mirror, 'z', first.op.recv.mirror_buf.bytes());
    std::vector<std::size_t> all{0, 1, 2, 3};
    engine::publish(first.op, all, kPage);
    engine::retire(first.op, kPage);
  }
  REQUIRE(BufferPool::instance().kept() == 1);
  Fixture f(Publisher::write);
  f.op.steps = {Step{Kind::recv, 1, 0, 5000, 0}, Step{Kind::recv, 3, 20000, f.span - 20000, 2}};
  REQUIRE(f.prepare());
  CHECK(BufferPool::instance().kept() == 0);  // it took the kept buffer
  f.arrive();
  f.publish_and_check({0, 3});
  engine::retire(f.op, kPage);
}

TEST_CASE("buffer pool: reuse, the bound, kept buffers unmapped to free memory", "[buffer_pool]") {
  BufferPool& pool = BufferPool::instance();
  pool.trim();
  const std::size_t base = pool.mapped();
  pool.set_bound(base + 8 * kPage);
  auto a = pool.acquire(3 * kPage + 1);  // rounded up to 4 pages
  REQUIRE(a.p != nullptr);
  CHECK(a.bytes == 4 * kPage);
  CHECK(pool.mapped() == base + 4 * kPage);
  std::memset(a.p, 1, a.bytes);
  pool.release(a);
  CHECK(pool.kept() == 1);
  // The kept buffer comes back for a request that fits it, even a smaller one down to half.
  auto b = pool.acquire(2 * kPage);
  CHECK(b.p == a.p);
  CHECK(pool.kept() == 0);
  // Within the bound with b in use: 4 more pages fit, 5 do not.
  auto c = pool.acquire(5 * kPage);
  CHECK(c.p == nullptr);
  auto d = pool.acquire(4 * kPage);
  REQUIRE(d.p != nullptr);
  CHECK(pool.mapped() == base + 8 * kPage);
  pool.release(b);
  pool.release(d);
  // Both kept; 8 pages for a new buffer of 8 pages: the kept ones are unmapped to free memory.
  CHECK(pool.kept() == 2);
  auto e = pool.acquire(8 * kPage);
  REQUIRE(e.p != nullptr);
  CHECK(pool.kept() == 0);
  CHECK(pool.mapped() == base + 8 * kPage);
  pool.release(e);
  // No more than kKeep buffers are kept.
  pool.set_bound(0);
  pool.trim();
  std::vector<BufferPool::Buffer> many;
  for (std::size_t i = 0; i < BufferPool::kKeep + 2; ++i) many.push_back(pool.acquire(kPage));
  for (auto& m : many) pool.release(m);
  CHECK(pool.kept() == BufferPool::kKeep);
  pool.trim();
  CHECK(pool.mapped() == base);
  // Kept buffers idle longer than asked go back to the system; fresher ones stay.
  pool.release(pool.acquire(kPage));
  pool.trim_idle(60ull * 1000000000ull);
  CHECK(pool.kept() == 1);
  usleep(20000);
  pool.trim_idle(10ull * 1000000ull);
  CHECK(pool.kept() == 0);
  CHECK(pool.mapped() == base);
}

TEST_CASE("receive mirror: a page nobody receives into is never guarded; retire unmaps unmoved pages only",
          "[receive_mirror]") {
  Fixture f;  // published by mremap
  // Only the first sub-message and the last: full pages 0 and 3 are partly written, pages 1 and
  // 2 (area + 2 and 3 pages) not at all.
  f.op.steps = {Step{Kind::recv, 1, 0, 5000, 0}, Step{Kind::recv, 3, 20000, f.span - 20000, 2}};
  REQUIRE(f.prepare());
  const auto& r = f.op.recv;
  REQUIRE(r.guard_pages == 4);
  // Pages holding no received byte are published from the start and never protected.
  CHECK(r.published[1].load() == 1);
  CHECK(r.published[2].load() == 1);
  CHECK(protection(f.area + 2 * kPage) == "rw-p");
  CHECK(protection(f.area + 3 * kPage) == "rw-p");
  CHECK(protection(f.area + 4 * kPage) == "---p");
  f.arrive();
  std::vector<std::size_t> pages;
  for (std::size_t p = 0; p < r.guard_pages; ++p)
    if (r.published[p].load() == 0) pages.push_back(p);
  CHECK(pages == std::vector<std::size_t>{0, 3});
  engine::publish(f.op, pages, kPage);
  engine::copy_edges(f.op, kPage);
  char* mirror = r.mirror;
  const std::size_t first_full = (r.guard_lo - r.cover_lo) / kPage;
  engine::retire(f.op, kPage);
  // The mirror pages of the untouched pages 1 and 2 did not move: retire unmapped them, with
  // the edge pages; the user's pages there are their own, untouched.
  CHECK_FALSE(mapped(mirror + (first_full + 1) * kPage));
  CHECK_FALSE(mapped(mirror + (first_full + 2) * kPage));
  CHECK_FALSE(mapped(mirror));
  CHECK(f.wrong() == 0);
}

TEST_CASE("receive mirror: a span without a full page is not mirrored", "[receive_mirror]") {
  Fixture f;
  f.op.steps = {Step{Kind::recv, 1, 0, 3000, 0}};
  CHECK_FALSE(f.prepare());
  CHECK(f.op.recv.mirror == nullptr);
  CHECK(tnbc::shim::g_guarded_calls.load() == 0);
}

TEST_CASE("receive mirror: a thread touching a page moved out sleeps until it is back", "[receive_mirror]") {
  Fixture f(Publisher::move);
  REQUIRE(f.prepare());
  REQUIRE(f.op.recv.by_move);
  // A user-mode read of full page 0, and a system call writing into the gap on full page 1
  // (bytes the receive leaves alone: the program's own write must survive publishing).
  std::atomic<int> seen{-1};
  std::thread reader([&] { seen.store(static_cast<unsigned char>(f.area[kPage + 5])); });
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  REQUIRE(write(pipe_fds[1], "KERNEL", 6) == 6);
  std::atomic<long> got{-2};
  std::atomic<int> error{0};
  char* gap = f.buf + 6000;  // in [5000, 8000), on full page 1
  std::thread kernel([&] {
    const long rc = tnbc::util::raw::syscall(SYS_read, pipe_fds[0], gap, 6);
    error.store(errno);
    got.store(rc);
  });
  usleep(100000);
  CHECK(seen.load() == -1);  // still asleep in the kernel, not faulted
  const bool kernel_waits = tnbc::shim::replay::engine::page_move::kernel_faults_wait();
  if (kernel_waits) CHECK(got.load() == -2);
  f.arrive();
  std::vector<std::size_t> pages{0, 1, 2, 3};
  engine::publish(f.op, pages, kPage);
  reader.join();
  kernel.join();
  CHECK(seen.load() == static_cast<unsigned char>(f.expected(kPage + 5 - 100)));
  if (kernel_waits) {
    CHECK(got.load() == 6);
    CHECK(std::memcmp(gap, "KERNEL", 6) == 0);
  } else {
    // As on a protected page (the interposers wait before such a call): not root here.
    CHECK(got.load() == -1);
    CHECK(error.load() == EFAULT);
  }
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  engine::copy_edges(f.op, kPage);
  engine::retire(f.op, kPage);
}

TEST_CASE("receive mirror: a page published twice neither blocks nor changes", "[receive_mirror]") {
  // The second publish finds the mirror's page gone (moved back by the first) and the user's
  // there.  Reading the missing mirror page, which is registered with the userfaultfd, would
  // wait for this thread itself: the test would hang (a heFFTe run's progress thread did).
  Fixture f(Publisher::move);
  REQUIRE(f.prepare());
  REQUIRE(f.op.recv.by_move);
  f.arrive();
  std::vector<std::size_t> pages{0, 1, 2, 3};
  engine::publish(f.op, pages, kPage);
  std::vector<char> before(f.area + kPage, f.area + 5 * kPage);
  std::vector<std::size_t> again{1, 2};
  engine::publish(f.op, again, kPage);
  CHECK(std::memcmp(before.data(), f.area + kPage, before.size()) == 0);
  CHECK(f.area[2 * kPage + 5] == f.expected(2 * kPage + 5 - 100));
  engine::copy_edges(f.op, kPage);
  engine::retire(f.op, kPage);
}

TEST_CASE("receive mirror: pages the kernel will not move are guarded and written instead", "[receive_mirror]") {
  Fixture f(Publisher::move, /*shared=*/true);
  REQUIRE(engine::reserve_mirror(f.op, kPage));
  CHECK_FALSE(f.op.recv.mirror_buf);  // moving needs no buffer ...
  REQUIRE(engine::prepare_receive(f.op, kPage));
  const auto& r = f.op.recv;
  CHECK_FALSE(r.by_move);  // ... but shared memory does not move: protected, pool mirror
  CHECK(r.mirror_buf);
  for (std::size_t p = 1; p <= 4; ++p) CHECK(protection(f.area + p * kPage) == "---s");
  f.arrive();
  f.publish_and_check({0, 1, 2, 3});
  engine::retire(f.op, kPage);
  CHECK(tnbc::shim::g_guarded_calls.load() == 0);
}

namespace {

/// Reads the byte at `p` on a thread of its own and waits up to `seconds` for it: the byte, or
/// -1 where the read still waits in the kernel (it is then released by ending the registration of
/// the page, `release`, before the thread is joined).
int read_within(const char* p, double seconds, const std::function<void()>& release) {
  std::atomic<int> seen{-1};
  std::thread reader([&] { seen.store(static_cast<unsigned char>(*static_cast<const volatile char*>(p))); });
  for (int i = 0; i < static_cast<int>(seconds * 100) && seen.load() == -1; ++i) usleep(10000);
  const int got = seen.load();
  if (got == -1) release();
  reader.join();
  return got;
}

}  // namespace

TEST_CASE("receive mirror: with pages moved, the mirror's missing pages read as zeros at once",
          "[receive_mirror]") {
  // Full pages 1 and 2 hold no received byte: nothing moves into their mirror pages.  Were the
  // mirror still registered with the userfaultfd, a read there would wait for a move that never
  // comes (on the progress thread, for itself).
  Fixture f(Publisher::move);
  f.op.steps = {Step{Kind::recv, 1, 0, 5000, 0}, Step{Kind::recv, 3, 20000, f.span - 20000, 2}};
  REQUIRE(f.prepare());
  const auto& r = f.op.recv;
  REQUIRE(r.by_move);
  const std::size_t first_full = (r.guard_lo - r.cover_lo) / kPage;
  const char* hole = r.mirror + (first_full + 1) * kPage;
  CHECK(read_within(hole, 2.0, [&] {
          tnbc::shim::replay::engine::page_move::unregister_range(reinterpret_cast<std::uintptr_t>(hole), kPage);
        }) == 0);
  f.arrive();
  f.publish_and_check({0, 3});
  engine::retire(f.op, kPage);
}

TEST_CASE("receive mirror: with pages moved, a page no step holds that nobody touched reads as zeros at once",
          "[receive_mirror]") {
  // The program never touched full pages 1 and 2 (area + 2 and 3 pages): in the range registered
  // for the moves, they would be missing, and a read would wait for a move that never comes (until
  // the op retires).  The guard gives them the zero page.
  Fixture f(Publisher::move);
  f.op.steps = {Step{Kind::recv, 1, 0, 5000, 0}, Step{Kind::recv, 3, 20000, f.span - 20000, 2}};
  REQUIRE(madvise(f.area + 2 * kPage, 2 * kPage, MADV_DONTNEED) == 0);
  REQUIRE(f.prepare());
  REQUIRE(f.op.recv.by_move);
  const std::uintptr_t pages = reinterpret_cast<std::uintptr_t>(f.area + 2 * kPage);
  auto release = [&] { tnbc::shim::replay::engine::page_move::unregister_range(pages, 2 * kPage); };
  CHECK(read_within(f.area + 2 * kPage + 5, 2.0, release) == 0);
  CHECK(read_within(f.area + 3 * kPage + 5, 2.0, release) == 0);
  f.arrive();
  std::vector<std::size_t> published{0, 3};
  engine::publish(f.op, published, kPage);
  engine::copy_edges(f.op, kPage);
  for (std::size_t off = 0; off < f.span; ++off) {
    const bool untouched = f.buf + off >= f.area + 2 * kPage && f.buf + off < f.area + 4 * kPage;
    if ((untouched ? '\0' : f.expected(off)) != f.buf[off]) FAIL("byte " << off << " differs");
  }
  engine::retire(f.op, kPage);
}
