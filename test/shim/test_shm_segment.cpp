// Shared-memory segments of one node (shim/shm_segment.hpp): names, zeroed contents, checks on
// open.  Real shm_open and mmap; the "other rank" is this process opening the name again.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "shim/shm_segment.hpp"

using namespace tnbc::shim;

namespace {
std::uint64_t ns_now() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}
}  // namespace

TEST_CASE("segment names carry kind, pid namespace and creator", "[shm]") {
  CHECK(shm::creator_in("tnbc-barrier-77-1234-00ff00ff00ff00ff", 77) == 1234);
  CHECK(shm::creator_in("tnbc-turns-77-99-0123456789abcdef", 77) == 99);
  CHECK(shm::creator_in("tnbc-turns-78-99-0123456789abcdef", 77) == 0);  // another namespace
  CHECK(shm::creator_in("tnbc-other-77-99-0123456789abcdef", 77) == 0);  // not a kind of ours
  CHECK(shm::creator_in("tnbc-turns77-99-01", 77) == 0);
  CHECK(shm::creator_in("tnbc-turns-77-99", 77) == 0);  // no random part
  CHECK(shm::creator_in("tnbc-turns-77--5-01", 77) == 0);
  CHECK(shm::creator_in("sem.tnbc-turns-77-99-01", 77) == 0);
}

TEST_CASE("a created segment reads as zeros where another mapping opens it", "[shm]") {
  constexpr std::size_t kBytes = 2048;
  char name[shm::kNameBytes] = {};
  void* a = nullptr;
  REQUIRE(shm::create(shm::kTurns, kBytes, name, &a).empty());
  REQUIRE(a != nullptr);
  const std::string prefix = fmt::format("/tnbc-turns-{}-{}-", ns_now(), getpid());
  CHECK(std::string(name).rfind(prefix, 0) == 0);
  CHECK(shm::creator_in(name + 1, ns_now()) == getpid());

  void* b = nullptr;
  REQUIRE(shm::open(name, kBytes, &b).empty());
  REQUIRE(b != nullptr);
  CHECK(b != a);
  const auto* bytes = static_cast<const unsigned char*>(b);
  bool zeros = true;
  for (std::size_t i = 0; i < kBytes; ++i) zeros = zeros && bytes[i] == 0;
  CHECK(zeros);
  static_cast<std::uint64_t*>(a)[7] = 0x1234;  // one memory, two mappings
  CHECK(static_cast<const std::uint64_t*>(b)[7] == 0x1234);

  void* c = nullptr;
  CHECK(shm::open(name, kBytes * 2, &c) == "segment has the wrong owner or size");
  CHECK(c == nullptr);
  CHECK(shm_unlink(name) == 0);
  CHECK(shm::open(name, kBytes, &c).rfind("shm_open: ", 0) == 0);
  munmap(a, kBytes);
  munmap(b, kBytes);
}
