// mapping.hpp: which memory the engine may replace, on real mappings of this process.  This
// binary links the interposers, so its own mmap/munmap/mlock calls tell the cache what changed.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "shim/mapping.hpp"

using namespace tnbc::shim;

namespace {
constexpr std::size_t kBytes = 16 * 4096;
}

TEST_CASE("mapping: one line of /proc/self/maps", "[mapping]") {
  CHECK(mapping::replaceable_line("rw-p", ""));
  CHECK(mapping::replaceable_line("rw-p", "[heap]"));
  CHECK(mapping::replaceable_line("rw-p", "[stack]"));
  CHECK(mapping::replaceable_line("rw-p", "[anon:scratch]"));
  CHECK(mapping::replaceable_line("rw-p", "/usr/bin/program"));
  CHECK_FALSE(mapping::replaceable_line("rw-s", ""));
  CHECK_FALSE(mapping::replaceable_line("rw-s", "/dev/shm/segment"));
  CHECK_FALSE(mapping::replaceable_line("rw-p", "/dev/shm/segment"));
  CHECK_FALSE(mapping::replaceable_line("rw-p", "/anon_hugepage (deleted)"));
  CHECK_FALSE(mapping::replaceable_line("rw-s", "/SYSV00000000 (deleted)"));
  CHECK_FALSE(mapping::replaceable_line("r--p", "[vvar]"));
  CHECK_FALSE(mapping::replaceable_line("rw", ""));
}

TEST_CASE("mapping: heap and private memory may be replaced, shared memory not", "[mapping]") {
  std::vector<char> heap(kBytes);
  CHECK(mapping::replaceable(heap.data(), heap.size()));
  char stack[8192];
  CHECK(mapping::replaceable(stack, sizeof stack));

  void* priv = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* shared = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(priv != MAP_FAILED);
  REQUIRE(shared != MAP_FAILED);
  CHECK(mapping::replaceable(priv, kBytes));
  CHECK_FALSE(mapping::replaceable(shared, kBytes));
  // Part private, part unmapped: not all of it can be replaced.
  munmap(static_cast<char*>(priv) + kBytes / 2, kBytes / 2);
  CHECK_FALSE(mapping::replaceable(priv, kBytes));
  CHECK(mapping::replaceable(priv, kBytes / 2));
  munmap(priv, kBytes / 2);
  munmap(shared, kBytes);
}

TEST_CASE("mapping: a cached answer is forgotten when shared memory is mapped over it", "[mapping]") {
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  REQUIRE(mapping::replaceable(p, kBytes));  // now cached
  void* q = mmap(p, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  REQUIRE(q == p);
  CHECK_FALSE(mapping::replaceable(p, kBytes));
  munmap(p, kBytes);
}

TEST_CASE("mapping: locked memory is not replaced until unlocked", "[mapping]") {
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  REQUIRE(mapping::replaceable(p, kBytes));
  if (mlock(static_cast<char*>(p) + 4096, 4096) != 0) {
    WARN("mlock not permitted here; skipping the lock checks");
    munmap(p, kBytes);
    return;
  }
  CHECK_FALSE(mapping::replaceable(p, kBytes));
  CHECK(mapping::replaceable(static_cast<char*>(p) + 2 * 4096, kBytes - 2 * 4096));
  munlock(static_cast<char*>(p) + 4096, 4096);
  CHECK(mapping::replaceable(p, kBytes));
  munmap(p, kBytes);
}
