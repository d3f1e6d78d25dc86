// The trace-directory adapter (tools/trace_observations.hpp): synthetic traces written with
// trace/'s writer, loaded back and turned into priority::Observations.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "tools/trace_observations.hpp"
#include "trace/trace_file.hpp"

using namespace tnbc;
namespace fs = std::filesystem;
using trace::Trace;
using trace::TraceCall;
using trace::TraceSub;

namespace {

/// A fresh, empty folder, removed when the test ends.
struct TempDir {
  std::string path;
  TempDir() {
    char templ[] = "/tmp/tnbc_adapter_XXXXXX";
    path = mkdtemp(templ);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(int rank) const { return path + "/" + std::to_string(rank) + ".tnbct"; }
};

std::uint8_t sub_flags(bool observable, shim::observe::Outcome outcome) {
  return static_cast<std::uint8_t>((observable ? trace::kSubObservable : 0) | (static_cast<unsigned>(outcome) << 1));
}

/// Rank `rank` of a `size`-rank job: 2 ticks per µs; call sites 0 (ids 100) and 1 (id 200).
Trace make_trace(int rank, int size, std::string job = "job-1") {
  Trace t;
  t.header.rank = rank;
  t.header.size = size;
  t.header.page_size = 4096;
  t.header.ticks_per_us = 2.0;
  t.header.tsc = true;
  t.header.hostname = "host";
  t.header.job_id = std::move(job);
  t.callsites.push_back({100, {{"/path/app", 0x1a2b, "main"}, {"/lib/libc.so.6", 0x40, ""}}});
  t.callsites.push_back({200, {{"/path/app", 0x99, ""}}});
  return t;
}

TraceCall make_call(trace::TracedOp op, std::uint32_t site, int comm, std::uint64_t start,
                    std::uint64_t tcomm, std::size_t subs, std::uint8_t flags) {
  TraceCall c;
  c.op = op;
  c.flags = trace::kCallTraced;
  c.callsite = site;
  c.comm_size = comm;
  c.start_stamp = start;
  c.tcomm = tcomm;
  c.return_stamp = start + tcomm + 10;
  for (std::size_t i = 0; i < subs; ++i) c.subs.push_back({i * 4096, 4096, flags});
  return c;
}

void write(const std::string& path, const Trace& t) { REQUIRE_FALSE(trace::write_trace(path, t)); }

}  // namespace

TEST_CASE("adapter: delays are (touch - return) / ticks_per_us, outcomes map to touch states",
          "[adapter]") {
  Trace t = make_trace(0, 1);
  auto c = make_call(trace::TracedOp::alltoall, 0, 4, 1000, 200, 4, 0);
  c.subs[0].flags = sub_flags(true, shim::observe::Outcome::touched);
  c.subs[1].flags = sub_flags(true, shim::observe::Outcome::untouched);
  c.subs[2].flags = sub_flags(true, shim::observe::Outcome::released);
  c.subs[3].flags = sub_flags(true, shim::observe::Outcome::unobserved);
  t.calls.push_back(c);
  // return stamp 1210; sub 0 touched at 1250 -> 20 µs.
  t.touches.push_back({0, 0, 1250, 0, 1});
  auto obs = tools::to_observations({&t});
  REQUIRE(obs.sites.size() == 1);
  const auto& site = obs.sites[0];
  REQUIRE(site.ranks.size() == 1);
  REQUIRE(site.ranks[0].calls.size() == 1);
  const auto& rec = site.ranks[0].calls[0];
  CHECK(rec.tcomm_us == Approx(100.0));
  REQUIRE(rec.touches.size() == 4);
  CHECK(rec.touches[0].state == priority::TouchState::touched);
  CHECK(rec.touches[0].delay_us == Approx(20.0));
  CHECK(rec.touches[1].state == priority::TouchState::untouched);
  CHECK(rec.touches[2].state == priority::TouchState::untouched);  // released unread
  CHECK(rec.touches[3].state == priority::TouchState::unobserved);
  CHECK(site.messages == 4);
  CHECK(site.message_bytes == 4096);
}

TEST_CASE("adapter: a sub-message that was not observable says nothing, even if untouched",
          "[adapter]") {
  Trace t = make_trace(0, 1);
  auto c = make_call(trace::TracedOp::alltoall, 0, 2, 0, 10, 2, sub_flags(false, shim::observe::Outcome::untouched));
  t.calls.push_back(c);
  auto obs = tools::to_observations({&t});
  REQUIRE(obs.sites.size() == 1);
  for (const auto& x : obs.sites[0].ranks[0].calls[0].touches)
    CHECK(x.state == priority::TouchState::unobserved);
}

TEST_CASE("adapter: the work after a call runs to the next call of any site; bytes per call",
          "[adapter]") {
  Trace t = make_trace(0, 1);
  // Site 0 at 1000 (returns at 1210), site 1 at 1610, site 0 again at 3010 (the rank's last).
  t.calls.push_back(make_call(trace::TracedOp::alltoall, 0, 2, 1000, 200, 2, sub_flags(true, shim::observe::Outcome::untouched)));
  t.calls.push_back(make_call(trace::TracedOp::bcast, 1, 2, 1610, 100, 1, sub_flags(true, shim::observe::Outcome::untouched)));
  t.calls.push_back(make_call(trace::TracedOp::alltoall, 0, 2, 3010, 200, 2, sub_flags(true, shim::observe::Outcome::untouched)));
  t.calls[2].subs[1].size = 1000;
  auto obs = tools::to_observations({&t});
  REQUIRE(obs.sites.size() == 2);
  const auto& calls = obs.sites[0].ranks[0].calls;
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].next_call_us == Approx(200.0));  // (1610 - 1210) / 2 ticks per µs
  CHECK(std::isnan(calls[1].next_call_us));
  CHECK(calls[0].recv_bytes == 8192);
  CHECK(calls[1].recv_bytes == 5096);
  CHECK(obs.sites[1].ranks[0].calls[0].next_call_us == Approx((3010 - 1720) / 2.0));
}

TEST_CASE("adapter: a touch stamped before the return counts as delay 0", "[adapter]") {
  Trace t = make_trace(0, 1);
  t.calls.push_back(make_call(trace::TracedOp::bcast, 0, 2, 1000, 100, 1, sub_flags(true, shim::observe::Outcome::touched)));
  t.touches.push_back({0, 0, 1050, 0, 1});
  auto obs = tools::to_observations({&t});
  CHECK(obs.sites[0].ranks[0].calls[0].touches[0].delay_us == 0.0);
}

TEST_CASE("adapter: calls are grouped by call site, operation and communicator size; untraced "
          "calls do not count",
          "[adapter]") {
  std::uint8_t u = sub_flags(true, shim::observe::Outcome::untouched);
  Trace r0 = make_trace(0, 2), r1 = make_trace(1, 2);
  for (Trace* t : {&r0, &r1}) {
    t->calls.push_back(make_call(trace::TracedOp::alltoall, 0, 2, 0, 10, 2, u));    // A
    t->calls.push_back(make_call(trace::TracedOp::alltoall, 1, 2, 100, 10, 2, u));  // B: other site
    t->calls.push_back(make_call(trace::TracedOp::alltoall, 0, 2, 200, 10, 2, u));  // A again
    t->calls.push_back(make_call(trace::TracedOp::bcast, 0, 2, 300, 10, 3, u));     // C: other op
    t->calls.push_back(make_call(trace::TracedOp::alltoall, 0, 1, 400, 10, 1, u));  // D: other comm
    auto untraced = make_call(trace::TracedOp::alltoall, 0, 2, 500, 10, 2, u);
    untraced.flags = 0;
    t->calls.push_back(untraced);
  }
  // The same site id in another rank's table at another index is the same site.
  std::swap(r1.callsites[0], r1.callsites[1]);
  for (auto& c : r1.calls) c.callsite = 1 - c.callsite;

  std::vector<shim::observe::CallSite> detail;
  auto obs = tools::to_observations({&r0, &r1}, &detail);
  REQUIRE(obs.sites.size() == 4);
  REQUIRE(detail.size() == 4);
  CHECK(obs.sites[0].id == "app+0x1a2b;libc.so.6+0x40");
  CHECK(obs.sites[0].frames == std::vector<std::string>{"main", "libc.so.6+0x40"});
  CHECK(obs.sites[0].op == priority::Op::alltoall);
  CHECK(obs.sites[0].comm_size == 2);
  REQUIRE(obs.sites[0].ranks.size() == 2);
  CHECK(obs.sites[0].ranks[0].rank == 0);
  CHECK(obs.sites[0].ranks[1].rank == 1);
  CHECK(obs.sites[0].ranks[0].calls.size() == 2);  // A twice, untraced one left out
  CHECK(obs.sites[0].ranks[1].calls.size() == 2);
  CHECK(obs.sites[1].id == "app+0x99");
  CHECK(obs.sites[1].frames == std::vector<std::string>{"app+0x99"});
  CHECK(obs.sites[2].op == priority::Op::bcast);
  CHECK(obs.sites[2].messages == 3);
  CHECK(obs.sites[3].comm_size == 1);
  CHECK(detail[1].id == 200);
}

TEST_CASE("adapter: a directory of one job loads, in rank order", "[adapter][dir]") {
  TempDir d;
  for (int r : {1, 0}) write(d.file(r), make_trace(r, 2));
  std::ofstream(d.path + "/notes.txt") << "not a trace";
  std::ofstream(d.path + "/0.tnbct.tmp.123") << "a writer's leftover";
  auto res = tools::load_trace_dir(d.path, false);
  REQUIRE(res.traces);
  CHECK(res.error.empty());
  CHECK(res.warnings.empty());
  CHECK(res.traces->size == 2);
  CHECK(res.traces->missing.empty());
  CHECK(res.traces->ranks[1]->header.rank == 1);
}

TEST_CASE("adapter: directory problems give one message naming the file and the problem",
          "[adapter][dir]") {
  TempDir d;
  SECTION("no such directory") {
    auto res = tools::load_trace_dir(d.path + "/nope", false);
    CHECK_FALSE(res.traces);
    CHECK(res.error == d.path + "/nope: no such directory");
  }
  SECTION("empty directory") {
    auto res = tools::load_trace_dir(d.path, false);
    CHECK(res.error == d.path + ": no trace files (<rank>.tnbct)");
  }
  SECTION("mixed jobs: job id") {
    write(d.file(0), make_trace(0, 2, "job-A"));
    write(d.file(1), make_trace(1, 2, "job-B"));
    auto res = tools::load_trace_dir(d.path, false);
    CHECK_FALSE(res.traces);
    CHECK(res.error == d.file(1) + ": job id 'job-B' differs from 'job-A' in " + d.file(0) +
                           " (traces of different runs)");
  }
  SECTION("mixed jobs: size") {
    write(d.file(0), make_trace(0, 2));
    write(d.file(1), make_trace(1, 3));
    auto res = tools::load_trace_dir(d.path, false);
    CHECK(res.error == d.file(1) + ": job of 3 ranks, but " + d.file(0) +
                           " is from a job of 2 (traces of different runs)");
  }
  SECTION("a file holding another rank") {
    write(d.file(0), make_trace(0, 2));
    write(d.file(1), make_trace(0, 2));
    auto res = tools::load_trace_dir(d.path, false);
    CHECK(res.error == d.file(1) + ": holds the trace of rank 0");
  }
  SECTION("a truncated file: the reader's message") {
    write(d.file(0), make_trace(0, 1));
    fs::resize_file(d.file(0), 30);
    auto res = tools::load_trace_dir(d.path, false);
    CHECK_FALSE(res.traces);
    CHECK(res.error.rfind(d.file(0) + ": truncated", 0) == 0);
  }
  SECTION("missing ranks: an error, or a warning with partial") {
    write(d.file(0), make_trace(0, 4));
    write(d.file(2), make_trace(2, 4));
    auto res = tools::load_trace_dir(d.path, false);
    CHECK_FALSE(res.traces);
    CHECK(res.error == d.path + ": no trace file for ranks 1, 3 (job of 4 ranks); --partial uses the others");
    auto part = tools::load_trace_dir(d.path, true);
    REQUIRE(part.traces);
    CHECK(part.traces->missing == std::vector<int>{1, 3});
    REQUIRE(part.warnings.size() == 1);
    CHECK(part.warnings[0] == d.path + ": no trace file for ranks 1, 3 (job of 4 ranks); using the other 2");
    CHECK(tools::to_observations(*part.traces).sites.empty());
  }
}

TEST_CASE("adapter: site keys are valid plan ids", "[adapter]") {
  shim::observe::CallSite cs{1, {{"/odd dir/my app#1", 0x10, "f"}}};
  CHECK(tools::site_key(cs) == "my_app_1+0x10");
  CHECK(tools::site_key(shim::observe::CallSite{}) == "?");
}
