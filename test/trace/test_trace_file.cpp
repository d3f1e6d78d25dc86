// Trace files: round trip, atomic writing, and a reader that rejects bad input with a clear
// message and never crashes.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "shim/observe/page_guard.hpp"
#include "test/bit_flips.hpp"
#include "trace/trace_file.hpp"
#include "util/checksum.hpp"

using namespace tnbc::trace;
using namespace tnbc::shim::observe;
namespace fs = std::filesystem;

namespace {

Trace sample() {
  Trace t;
  t.header = {3, 8, 1, 4096, 2400.5, true, "node-a", "job-42", 0x123456789};
  CallSite cs;
  cs.frames = {{"/app/bin/ft", 0x1234, "main"}, {"/lib/libc.so.6", 0x29d90, ""}};
  cs.id = CallSiteTable::hash_frames(cs.frames);
  t.callsites.push_back(cs);
  CallSite cs2;
  cs2.frames = {{"/app/bin/ft", 0x1300, "main"}};
  cs2.id = CallSiteTable::hash_frames(cs2.frames);
  t.callsites.push_back(cs2);
  TraceCall c;
  c.op = TracedOp::alltoallv;
  c.flags = kCallTraced;
  c.callsite = 1;
  c.comm_size = 8;
  c.start_stamp = 100;
  c.tcomm = 5000;
  c.return_stamp = 5200;
  for (std::uint64_t i = 0; i < 8; ++i)
    c.subs.push_back({i * 65536, 65536, static_cast<std::uint8_t>(kSubObservable | (i % 4) << 1)});
  t.calls.push_back(c);
  c.op = TracedOp::bcast;
  c.flags = 0;
  c.callsite = 0;
  c.subs.clear();
  t.calls.push_back(c);
  t.touches.push_back({0, 5, 6000, 0, 1234});
  t.touches.push_back({0, 1, 6100, 1, 1235});
  return t;
}

std::string temp_dir() {
  auto d = fs::temp_directory_path() / ("tnbc_trace_test." + std::to_string(getpid()));
  fs::create_directories(d);
  return d.string();
}

ReadResult parse(const std::string& bytes, std::string_view name = "x.tnbct") {
  return parse_trace(std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
                     name);
}

template <typename T>
void poke(std::string& bytes, std::size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

// Bytes changed on purpose with their checksum made right again (offset 20, over the bytes
// after the 28-byte prefix), so that the reader's later checks see them.
std::string sealed(std::string bytes) {
  if (bytes.size() >= 28) poke(bytes, 20, tnbc::util::fnv1a64(bytes.data() + 28, bytes.size() - 28));
  return bytes;
}

}  // namespace

TEST_CASE("trace file: what is written is read back", "[trace_file]") {
  auto dir = temp_dir();
  auto path = dir + "/3.tnbct";
  Trace t = sample();
  REQUIRE_FALSE(write_trace(path, t));
  auto r = read_trace(path);
  INFO(r.error);
  REQUIRE(r.trace);
  const Trace& u = *r.trace;
  CHECK(u.header.rank == 3);
  CHECK(u.header.size == 8);
  CHECK(u.header.node_id == 1);
  CHECK(u.header.page_size == 4096);
  CHECK(u.header.ticks_per_us == 2400.5);
  CHECK(u.header.tsc);
  CHECK(u.header.sync_stamp == t.header.sync_stamp);
  CHECK(u.header.hostname == "node-a");
  CHECK(u.header.job_id == "job-42");
  REQUIRE(u.callsites.size() == 2);
  CHECK(u.callsites[0].id == t.callsites[0].id);
  CHECK(u.callsites[0].frames[1].module == "/lib/libc.so.6");
  CHECK(u.callsites[0].frames[1].offset == 0x29d90);
  CHECK(u.callsites[0].frames[0].symbol == "main");
  REQUIRE(u.calls.size() == 2);
  CHECK(u.calls[0].op == TracedOp::alltoallv);
  CHECK(u.calls[0].flags == kCallTraced);
  CHECK(u.calls[0].callsite == 1);
  CHECK(u.calls[0].tcomm == 5000);
  CHECK(u.calls[0].return_stamp == 5200);
  REQUIRE(u.calls[0].subs.size() == 8);
  CHECK(u.calls[0].subs[7].offset == 7 * 65536);
  CHECK(u.calls[0].subs[3].outcome() == 3);
  CHECK(u.calls[0].subs[3].observable());
  CHECK(u.calls[1].op == TracedOp::bcast);
  REQUIRE(u.touches.size() == 2);
  CHECK(u.touches[0].sub == 5);
  CHECK(u.touches[1].thread == 1235);
  CHECK(u.touches[1].seq == 1);
  // No temporary file is left behind.
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}

TEST_CASE("trace file: an unwritable place is an error, not a half-written file", "[trace_file]") {
  auto err = write_trace("/nonexistent-tnbc-dir/0.tnbct", sample());
  REQUIRE(err);
  CHECK(err->rfind("cannot create /nonexistent-tnbc-dir/0.tnbct.tmp.", 0) == 0);
  if (fs::exists("/dev/full")) {
    // /dev/full is not a folder we can rename into; what matters is the message and no crash.
    auto full = write_trace("/dev/full/0.tnbct", sample());
    CHECK(full);
  }
}

TEST_CASE("trace file: the reader names the file and the problem", "[trace_file]") {
  const std::string good = encode_trace(sample());
  REQUIRE(parse(good).trace);

  SECTION("a file that is not a trace") {
    CHECK(parse("hello world, this is text").error ==
          "x.tnbct: not a tnbc trace file (bad magic number)");
    CHECK(parse("").error == "x.tnbct: not a tnbc trace file (bad magic number)");
  }
  SECTION("a foreign version") {
    std::string b = good;
    poke<std::uint32_t>(b, 8, 99);
    CHECK(parse(b).error ==
          "x.tnbct: unsupported trace format version 99 (this build reads version 3)");
    poke<std::uint32_t>(b, 8, 2);
    CHECK(parse(b).error == "x.tnbct: trace format version 2 was written by an older tnbc (this "
                            "build reads version 3): trace the program again");
  }
  SECTION("a changed byte") {
    std::string b = good;
    b[good.size() / 2] ^= 0x10;
    CHECK(parse(b).error == "x.tnbct: corrupt: the checksum does not match the content");
  }
  SECTION("sizes beyond any job, even with a right checksum") {
    // The flip that made every tnbc-order command spin for 50 s in predict_overlap.
    Trace t = sample();
    t.calls[0].comm_size = 1073741826;
    CHECK(parse(encode_trace(t)).error ==
          "x.tnbct: corrupt: call 0 has communicator size 1073741826 (1 to 16777216)");
    t = sample();
    t.header.size = kMaxRanks + 1;
    CHECK(parse(encode_trace(t)).error == "x.tnbct: corrupt: a job of 16777217 ranks (1 to 16777216)");
  }
  SECTION("a truncated file") {
    std::string b = good.substr(0, good.size() - 10);
    CHECK(parse(b, "run/3.tnbct").error ==
          "run/3.tnbct: truncated: the header gives " + std::to_string(good.size()) +
              " bytes, the file has " + std::to_string(good.size() - 10));
    CHECK(parse(good.substr(0, 12)).error ==
          "x.tnbct: truncated: 12 bytes, shorter than the 28-byte file prefix");
  }
  SECTION("bytes after the end") {
    CHECK(parse(good + "xx").error == "x.tnbct: corrupt: the header gives " +
                                          std::to_string(good.size()) + " bytes, the file has " +
                                          std::to_string(good.size() + 2));
  }
  SECTION("a count that cannot fit") {
    std::string b = good;
    // The call-site count follows the fixed header (sync stamp included) and the two strings.
    std::size_t at = 28 + 4 + 4 + 4 + 4 + 8 + 1 + 8 + 4 + 6 + 4 + 6;
    poke<std::uint32_t>(b, at, 0xfffffff0u);
    auto r = parse(sealed(b));
    CHECK_FALSE(r.trace);
    CHECK(r.error.rfind(
              "x.tnbct: corrupt: call-site count 4294967280 does not fit in the remaining ", 0) ==
          0);
  }
  SECTION("a bad reference") {
    Trace t = sample();
    t.calls[0].callsite = 7;
    CHECK(parse(encode_trace(t)).error ==
          "x.tnbct: corrupt: call 0 names call site 7 but the file has 2");
    t = sample();
    t.touches[1].sub = 8;
    CHECK(parse(encode_trace(t)).error ==
          "x.tnbct: corrupt: touch 1 names call 0 sub-message 8, which does not exist");
    t = sample();
    t.header.rank = 8;
    CHECK(parse(encode_trace(t)).error == "x.tnbct: corrupt: rank 8 of size 8");
  }
  SECTION("a missing file") {
    auto r = read_trace("/nonexistent-tnbc-dir/0.tnbct");
    CHECK(r.error == "/nonexistent-tnbc-dir/0.tnbct: cannot open: No such file or directory");
  }
  SECTION("a large sparse file is refused by its prefix, without reading the rest") {
    char dir[] = "/tmp/tnbc_sparse_XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string path = std::string(dir) + "/0.tnbct";
    const std::string good = encode_trace(sample());
    {
      std::ofstream out(path, std::ios::binary);
      out << good;
    }
    REQUIRE(truncate(path.c_str(), 3ll << 30) == 0);  // the declared size no longer matches
    auto start = std::chrono::steady_clock::now();
    auto r = read_trace(path);
    auto took = std::chrono::steady_clock::now() - start;
    CHECK(r.error == path + ": corrupt: the header gives " + std::to_string(good.size()) +
                         " bytes, the file has " + std::to_string(3ll << 30));
    CHECK(took < std::chrono::milliseconds(500));  // reading 3 GiB of zeros takes seconds
    CHECK(read_trace(path, 1 << 20).error ==
          path + ": " + std::to_string(3ll << 30) + " bytes, larger than the limit of 1048576");
    unlink(path.c_str());
    rmdir(dir);
  }
}

TEST_CASE("trace file: every single-byte corruption and every truncation is handled",
          "[trace_file][fuzz]") {
  const std::string good = encode_trace(sample());
  for (std::size_t n = 0; n < good.size(); ++n) {
    auto r = parse(good.substr(0, n));
    CHECK_FALSE(r.trace);
    CHECK_FALSE(r.error.empty());
  }
  for (std::size_t i = 0; i < good.size(); ++i)
    for (unsigned v : {0x00u, 0x01u, 0x7fu, 0x80u, 0xffu}) {
      std::string b = good;
      b[i] = static_cast<char>(v);
      auto r = parse(sealed(b));  // must not crash; may or may not be valid
      if (!r.trace) CHECK(r.error.rfind("x.tnbct: ", 0) == 0);
    }
}

TEST_CASE("trace file: every single bit flip is refused, quickly", "[trace_file][fuzz]") {
  const std::string good = encode_trace(sample());
  REQUIRE(parse(good).trace);
  auto start = std::chrono::steady_clock::now();
  auto accepted = tnbc::test::accepted_bit_flips(
      good, [](const std::string& b) { return parse(b).trace.has_value(); });
  for (const auto& f : accepted) UNSCOPED_INFO("accepted: bit " << f.bit << " of byte " << f.byte);
  CHECK(accepted.empty());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}
