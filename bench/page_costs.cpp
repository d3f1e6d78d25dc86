// page_costs: what the page-table work of an early return costs on this machine, per 4 KiB page,
// and what it adds up to for one call (docs/measurements/page-costs.md).
//
//   page_costs [--pages N] [--run PAGES] [--rounds R]
//
// Measures each operation the ways of publishing use (receive_mirror.hpp) on N pages (default
// 1024: 4 MiB received), whole runs at once and in runs of PAGES (default 16: a 64 KiB chunk,
// TNBC_CHUNK_BYTES in a job across nodes, published as it completes), with a second thread of the process running on
// another core (as the program's thread does while the progress thread publishes: a page-table
// change then interrupts it to flush its TLB, which a single-threaded measurement never pays).
// The median of R rounds (default 7).  Then the model of one call: for each way, the pages
// times the cost of each step it takes.
//
// Needs Linux 6.8 or later for the "move" rows (UFFDIO_MOVE); prints "n/a" where the kernel
// refuses.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "shim/replay/engine/page_move.hpp"
#include "util/clock.hpp"

namespace move = tnbc::shim::replay::engine::page_move;

namespace {

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
std::size_t g_pages = 1024, g_run = 16;
int g_rounds = 7;

char* fresh_map(std::size_t pages) {
  void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("page_costs: mmap");
    std::exit(1);
  }
  return static_cast<char*>(p);
}
void touch(char* p, std::size_t pages) {
  for (std::size_t i = 0; i < pages; ++i) p[i * kPage] = static_cast<char>(i);
}

/// Runs `f` over [0, pages) in runs of `run` pages: f(first page, pages in the run).
void in_runs(std::size_t pages, std::size_t run, const std::function<void(std::size_t, std::size_t)>& f) {
  for (std::size_t i = 0; i < pages; i += run) f(i, std::min(run, pages - i));
}

struct Row {
  std::string what;
  double whole = -1, runs = -1;  // microseconds per page; -1: n/a
};

/// Median over the rounds of what `once` returns (nanoseconds for g_pages pages), per page.
double median_us(const std::function<double()>& once) {
  std::vector<double> v;
  for (int r = 0; r < g_rounds; ++r) v.push_back(once());
  std::sort(v.begin(), v.end());
  const double ns = v[v.size() / 2];
  return ns < 0 ? -1 : ns / 1e3 / static_cast<double>(g_pages);
}

/// One operation timed on g_pages prepared pages, whole and in runs.  `prepare` maps and sets
/// up (untimed) and returns the areas; `op(a, b, first, n)` does the operation on pages
/// [first, first + n); `done` unmaps.
struct Areas {
  char* a = nullptr;
  char* b = nullptr;
};
Row measure(const std::string& what, const std::function<Areas()>& prepare,
            const std::function<bool(Areas, std::size_t, std::size_t)>& op, const std::function<void(Areas)>& done) {
  Row row{what};
  for (std::size_t run : {g_pages, g_run}) {
    const double us = median_us([&] {
      Areas ar = prepare();
      const std::uint64_t t0 = tnbc::util::now_ns();
      bool ok = true;
      in_runs(g_pages, run, [&](std::size_t i, std::size_t n) { ok = op(ar, i, n) && ok; });
      const std::uint64_t t1 = tnbc::util::now_ns();
      done(ar);
      return ok ? static_cast<double>(t1 - t0) : -1.0;
    });
    (run == g_pages ? row.whole : row.runs) = us;
  }
  return row;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: page_costs [--pages N] [--run PAGES] [--rounds R]\n"
               "  per-page costs of the page-table work of an early return on this machine, and\n"
               "  the model of one call that receives N pages (default 1024), published in runs of\n"
               "  PAGES (default 16); medians of R rounds (default 7)\n");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "page_costs: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0) {
        std::fprintf(stderr, "page_costs: %s: expected a positive integer, got '%s'\n", a.c_str(), argv[i]);
        std::exit(2);
      }
      return v;
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--pages") {
      g_pages = static_cast<std::size_t>(value());
    } else if (a == "--run") {
      g_run = static_cast<std::size_t>(value());
    } else if (a == "--rounds") {
      g_rounds = static_cast<int>(value());
    } else {
      std::fprintf(stderr, "page_costs: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  // A second thread of this process on the other core, as the program's is while publishing.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    volatile unsigned long x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
  });
  const int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  const std::string no_move = move::start();
  const std::size_t n = g_pages;
  std::vector<Row> rows;
  auto one = [&] { return Areas{fresh_map(n), nullptr}; };
  auto two = [&] { return Areas{fresh_map(n), fresh_map(n)}; };
  auto unmap = [&](Areas ar) {
    munmap(ar.a, n * kPage);
    if (ar.b) munmap(ar.b, n * kPage);
  };
  auto pg = [&](char* base, std::size_t i) { return base + i * kPage; };
  rows.push_back(measure("first touch of a fresh page", one, [&](Areas ar, std::size_t i, std::size_t k) {
    touch(pg(ar.a, i), k);
    return true;
  }, unmap));
  rows.push_back(measure("copy a page (memcpy)", [&] { Areas ar = two(); touch(ar.a, n); touch(ar.b, n); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { std::memcpy(pg(ar.b, i), pg(ar.a, i), k * kPage); return true; }, unmap));
  rows.push_back(measure("populate a present page (MADV_POPULATE_WRITE)", [&] { Areas ar = one(); touch(ar.a, n); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { return madvise(pg(ar.a, i), k * kPage, 23) == 0; }, unmap));
  rows.push_back(measure("protect (mprotect PROT_NONE)", [&] { Areas ar = one(); touch(ar.a, n); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { return mprotect(pg(ar.a, i), k * kPage, PROT_NONE) == 0; }, unmap));
  rows.push_back(measure("write through /proc/self/mem into a protected page", [&] {
    Areas ar = two(); touch(ar.a, n); touch(ar.b, n); mprotect(ar.a, n * kPage, PROT_NONE); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) {
    return mem >= 0 && pwrite(mem, pg(ar.b, i), k * kPage, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(pg(ar.a, i)))) ==
                           static_cast<ssize_t>(k * kPage); }, unmap));
  rows.push_back(measure("open a protected page (mprotect read-write)", [&] {
    Areas ar = one(); touch(ar.a, n); mprotect(ar.a, n * kPage, PROT_NONE); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { return mprotect(pg(ar.a, i), k * kPage, PROT_READ | PROT_WRITE) == 0; }, unmap));
  rows.push_back(measure("first touch of a page opened again", [&] {
    Areas ar = one(); touch(ar.a, n); mprotect(ar.a, n * kPage, PROT_NONE); mprotect(ar.a, n * kPage, PROT_READ | PROT_WRITE); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { touch(pg(ar.a, i), k); return true; }, unmap));
  rows.push_back(measure("move a page over another (mremap)", [&] { Areas ar = two(); touch(ar.a, n); touch(ar.b, n); return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) {
    return mremap(pg(ar.b, i), k * kPage, k * kPage, MREMAP_MAYMOVE | MREMAP_FIXED, pg(ar.a, i)) != MAP_FAILED; },
                         [&](Areas ar) { munmap(ar.a, n * kPage); munmap(ar.b, n * kPage); }));
  rows.push_back(measure("move a page to a missing one (UFFDIO_MOVE)", [&] {
    Areas ar = two(); touch(ar.a, n);  // b never touched: its pages are missing
    if (no_move.empty()) move::register_range(reinterpret_cast<std::uintptr_t>(ar.b), n * kPage);
    return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) {
    return no_move.empty() && move::move(reinterpret_cast<std::uintptr_t>(pg(ar.b, i)), reinterpret_cast<std::uintptr_t>(pg(ar.a, i)), k * kPage, true) == k * kPage; },
                         unmap));
  rows.push_back(measure("first touch of a page moved in", [&] {
    Areas ar = two(); touch(ar.a, n);  // b never touched: its pages are missing
    if (no_move.empty()) {
      move::register_range(reinterpret_cast<std::uintptr_t>(ar.b), n * kPage);
      move::move(reinterpret_cast<std::uintptr_t>(ar.b), reinterpret_cast<std::uintptr_t>(ar.a), n * kPage, true);
    }
    return ar; },
                         [&](Areas ar, std::size_t i, std::size_t k) { if (!no_move.empty()) return false; touch(pg(ar.b, i), k); return true; }, unmap));
  stop = true;
  busy.join();

  std::printf("page costs on this machine: %zu pages of %zu bytes, whole and in runs of %zu pages, "
              "median of %d rounds, with a second thread running\n\n", n, kPage, g_run, g_rounds);
  std::printf("| operation | us per page, whole run | us per page, runs of %zu |\n|---|---|---|\n", g_run);
  auto cell = [](double v) { return v < 0 ? std::string("n/a") : std::to_string(v).substr(0, std::to_string(v).find('.') + 3); };
  for (const auto& r : rows) std::printf("| %s | %s | %s |\n", r.what.c_str(), cell(r.whole).c_str(), cell(r.runs).c_str());
  if (!no_move.empty()) std::printf("\nmoving pages: %s\n", no_move.c_str());

  // The model of one call of n pages: the steps each way takes, page by page.
  auto get = [&](const char* prefix, bool runs) {
    for (const auto& r : rows)
      if (r.what.rfind(prefix, 0) == 0) return runs ? r.runs : r.whole;
    return -1.0;
  };
  const double protect = get("protect", false), write = get("write through", true), open = get("open a", true),
               touch_after = get("first touch of a page opened", true), copy = get("copy", false),
               remap = get("move a page over", true), fresh = get("first touch of a fresh", false),
               move_in = get("move a page to", false), move_out = get("move a page to", true),
               touch_moved = get("first touch of a page moved", true);
  const double k = static_cast<double>(n) / 1e3;  // us per page x pages = ms
  std::printf("\none call receiving %zu pages, ms of CPU for its pages (calling thread + progress thread):\n\n", n);
  std::printf("| way | steps per page | ms |\n|---|---|---|\n");
  std::printf("| write | protect + write + open + touch after | %.2f |\n", k * (protect + write + open + touch_after));
  std::printf("| mremap | protect + mremap + fresh mirror page next call | %.2f |\n", k * (protect + remap + fresh));
  if (move_in >= 0)
    std::printf("| move | move in (whole) + move out (runs) + touch after | %.2f |\n",
                k * (move_in + move_out + std::max(touch_moved, 0.0)));
  std::printf("| (for scale) copying the bytes once | memcpy | %.2f |\n", k * copy);
  if (mem >= 0) close(mem);
  return 0;
}
