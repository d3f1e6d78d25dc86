// See mapping.hpp.
#include "mapping.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tnbc::shim::mapping {
namespace {

struct Range {
  std::uintptr_t lo = 0, hi = 0;  // empty when lo == hi
  bool overlaps(std::uintptr_t a, std::uintptr_t b) const { return hi > lo && a < hi && b > lo; }
};

// Everything below is under g_lock, held for a scan of these arrays and never across a call.
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
Range g_cache[kCacheRanges];
int g_next_victim = 0;
Range g_locks[kLockRanges];
bool g_all_locked = false;  // mlockall, or more locked ranges than kLockRanges
std::atomic<std::uint64_t> g_generation{0};

void lock() {
  while (g_lock.test_and_set(std::memory_order_acquire)) {
  }
}
void unlock() { g_lock.clear(std::memory_order_release); }

struct Locked {
  Locked() { lock(); }
  ~Locked() { unlock(); }
};

/// The whole of /proc/self/maps ("" if it cannot be read).
std::string read_maps() {
  std::string text;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[16384];
  for (;;) {
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  close(fd);
  return text;
}

/// The run of consecutive replaceable mappings that covers [lo, hi), or an empty range.
Range covering_run(const std::string& maps, std::uintptr_t lo, std::uintptr_t hi) {
  Range run;
  std::uintptr_t next = lo;  // first address not yet known to be covered
  std::size_t pos = 0;
  while (pos < maps.size()) {
    std::size_t eol = maps.find('\n', pos);
    if (eol == std::string::npos) eol = maps.size();
    std::string line = maps.substr(pos, eol - pos);
    pos = eol + 1;
    // start-end perms offset dev inode [path]
    char* rest = nullptr;
    const std::uintptr_t start = std::strtoull(line.c_str(), &rest, 16);
    if (*rest != '-') continue;
    const std::uintptr_t end = std::strtoull(rest + 1, &rest, 16);
    char perms[8] = {};
    char path[4096] = {};
    unsigned long long offset = 0, inode = 0;
    char dev[32] = {};
    int fields = std::sscanf(rest, " %7s %llx %31s %llu %4095[^\n]", perms, &offset, dev, &inode, path);
    if (fields < 4) continue;
    if (end <= next) continue;
    if (start > next) break;  // a gap: unmapped memory in the span
    if (!replaceable_line(perms, path)) return {};
    if (run.hi == 0) run.lo = start;
    run.hi = end;
    next = end;
    if (next >= hi) return run;
  }
  return {};
}

}  // namespace

bool replaceable_line(const char* perms, const char* path) {
  if (std::strlen(perms) < 4 || perms[3] != 'p') return false;  // shared
  const std::string p = path;
  if (p.empty() || p == "[heap]" || p.rfind("[stack", 0) == 0 || p.rfind("[anon:", 0) == 0) return true;
  if (p[0] == '[') return false;                       // [vdso], [vvar], [vsyscall], ...
  if (p.rfind("/dev/", 0) == 0) return false;          // devices, hugetlbfs under /dev/hugepages
  if (p.find("anon_hugepage") != std::string::npos) return false;  // MAP_HUGETLB
  if (p.rfind("/SYSV", 0) == 0) return false;          // System V shared memory
  return p[0] == '/';                                  // a private file mapping
}

bool replaceable(const void* p, std::size_t n) {
  if (n == 0) return true;
  const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + n;
  std::uint64_t generation = 0;
  {
    Locked lock;
    if (g_all_locked) return false;
    for (const Range& r : g_locks)
      if (r.overlaps(lo, hi)) return false;
    for (const Range& r : g_cache)
      if (r.hi > r.lo && r.lo <= lo && hi <= r.hi) return true;
    generation = g_generation.load(std::memory_order_acquire);
  }
  const Range run = covering_run(read_maps(), lo, hi);
  if (run.hi <= run.lo) return false;
  Locked lock;
  // A mapping changed while the file was read: answer for this call, but do not remember it.
  if (g_generation.load(std::memory_order_acquire) == generation) {
    g_cache[g_next_victim] = run;
    g_next_victim = (g_next_victim + 1) % kCacheRanges;
  }
  return true;
}

void forget(const void* p, std::size_t n) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + (n == 0 ? 1 : n);
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  Locked lock;
  for (Range& r : g_cache)
    if (r.overlaps(lo, hi)) r = Range{};
}

void forget_all() {
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  Locked lock;
  for (Range& r : g_cache) r = Range{};
}

void locked(const void* p, std::size_t n) {
  if (n == 0) return;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  Locked lock;
  for (Range& r : g_locks)
    if (r.hi <= r.lo) {
      r = Range{lo, lo + n};
      return;
    }
  g_all_locked = true;  // no room to remember it: treat everything as locked
}

void unlocked(const void* p, std::size_t n) {
  if (n == 0) return;
  const auto lo = reinterpret_cast<std::uintptr_t>(p), hi = lo + n;
  Locked lock;
  for (Range& r : g_locks) {
    if (!r.overlaps(lo, hi)) continue;
    const Range before{r.lo, lo}, after{hi, r.hi};
    r = Range{};
    // What stays locked on either side of the unlocked range.
    for (const Range& part : {before, after}) {
      if (part.hi <= part.lo) continue;
      Range* free_slot = nullptr;
      for (Range& s : g_locks)
        if (s.hi <= s.lo) {
          free_slot = &s;
          break;
        }
      if (free_slot) *free_slot = part;
      else g_all_locked = true;
    }
  }
}

void locked_all() {
  Locked lock;
  g_all_locked = true;
}

void unlocked_all() {
  Locked lock;
  g_all_locked = false;
  for (Range& r : g_locks) r = Range{};
}

void before_fork() { lock(); }
void after_fork() { unlock(); }

}  // namespace tnbc::shim::mapping
