// CallSiteTable: call sites keyed by position-independent frames.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "shim/observe/callsite.hpp"

using namespace tnbc::shim::observe;

TEST_CASE("CallSiteTable: one chain is one site, another chain another", "[callsite]") {
  CallSiteTable table;
  const void* a[] = {reinterpret_cast<const void*>(&::strlen),
                     reinterpret_cast<const void*>(&::qsort)};
  const void* b[] = {reinterpret_cast<const void*>(&::qsort),
                     reinterpret_cast<const void*>(&::strlen)};
  auto ia = table.intern(a, 2);
  auto ib = table.intern(b, 2);
  CHECK(table.intern(a, 2) == ia);
  CHECK(ia != ib);
  auto sites = table.sites();
  REQUIRE(sites.size() == 2);
  CHECK(sites[ia].id != sites[ib].id);
  CHECK(sites[ia].frames.size() == 2);
}

TEST_CASE("CallSiteTable: frames are module + offset + symbol", "[callsite]") {
  // getpid: a libc function that sanitizer runtimes do not intercept.
  auto f = CallSiteTable::resolve(reinterpret_cast<const void*>(&::getpid));
  CHECK(f.module.find("libc") != std::string::npos);
  CHECK(f.offset != 0);
  CHECK(f.offset < (1ull << 32));  // an offset inside the object, not an absolute address
  auto unknown = CallSiteTable::resolve(reinterpret_cast<const void*>(16));
  CHECK(unknown.module == "?");
}

TEST_CASE("CallSiteTable: the id ignores the module's folder, not its name or offset",
          "[callsite]") {
  std::vector<Frame> x{{"/usr/lib/libfoo.so", 0x1234, "f"}};
  std::vector<Frame> y{{"/opt/other/libfoo.so", 0x1234, "g"}};
  std::vector<Frame> z{{"/usr/lib/libfoo.so", 0x1235, "f"}};
  std::vector<Frame> w{{"/usr/lib/libbar.so", 0x1234, "f"}};
  CHECK(CallSiteTable::hash_frames(x) == CallSiteTable::hash_frames(y));
  CHECK(CallSiteTable::hash_frames(x) != CallSiteTable::hash_frames(z));
  CHECK(CallSiteTable::hash_frames(x) != CallSiteTable::hash_frames(w));
}

namespace {
[[gnu::noinline]] std::uint32_t site_one(CallSiteTable& t) { return t.capture(); }
[[gnu::noinline]] std::uint32_t site_two(CallSiteTable& t) { return t.capture(); }
}  // namespace

TEST_CASE("CallSiteTable: capture() returns a non-empty chain", "[callsite]") {
  // In this test binary the caller is in the same object as the table, so its own frames are
  // skipped; what is left (libc's start-up frames) must still form a valid site: frames that
  // resolve to a module, an id that is the hash of those frames, and the same index when the
  // same chain is captured again.
  CallSiteTable table;
  auto a = site_one(table);
  auto b = site_two(table);
  auto sites = table.sites();
  REQUIRE(a < sites.size());
  REQUIRE(b < sites.size());
  REQUIRE_FALSE(sites[a].frames.empty());
  for (const auto& f : sites[a].frames) CHECK(f.module != "?");
  CHECK(sites[a].id == CallSiteTable::hash_frames(sites[a].frames));
  CHECK(site_one(table) == a);
  CHECK(table.sites().size() == sites.size());
}

TEST_CASE("CallSiteTable: only the innermost named_frames frames are named from the live stack",
          "[callsite]") {
  // Same chain in three tables (this file's frames are skipped: the tables live in this object).
  // A frame dladdr cannot name (no dynamic symbol: the executable's _start) is named from the
  // stack walk only where the table names that deep.
  CallSiteTable all, one(1), none(0);
  const std::uint32_t ia = site_one(all), io = site_one(one), in = site_one(none);
  const CallSite a = all.sites().at(ia), o = one.sites().at(io), n = none.sites().at(in);
  REQUIRE(a.frames.size() == n.frames.size());
  REQUIRE(o.frames.size() == n.frames.size());
  REQUIRE(a.id == n.id);  // names never change the site's identity
  int named_by_walk = 0;
  for (std::size_t i = 0; i < n.frames.size(); ++i) {
    CAPTURE(i, a.frames[i].module, a.frames[i].symbol, n.frames[i].symbol);
    if (!n.frames[i].symbol.empty()) CHECK(a.frames[i].symbol == n.frames[i].symbol);
    named_by_walk += n.frames[i].symbol.empty() && !a.frames[i].symbol.empty();
    CHECK(o.frames[i].symbol == (i == 0 ? a.frames[i].symbol : n.frames[i].symbol));
  }
  CHECK(named_by_walk > 0);
}
