#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "shim/config.hpp"

using namespace tnbc::config;

namespace {
LoadResult load_env(std::vector<const char*> env) {
  env.push_back(nullptr);
  return load(env.data());
}
}  // namespace

TEST_CASE("defaults hold when no TNBC_ variable is set", "[config]") {
  auto r = load_env({"PATH=/bin", "HOME=/root"});
  CHECK(r.messages.empty());
  CHECK_FALSE(r.config.disable);
  CHECK(r.config.log == LogLevel::info);
  CHECK(r.config.stats_prefix.empty());
  CHECK(r.config.trace_dir.empty());
  CHECK(r.config.trace_bcast_units == 16);
}

TEST_CASE("every setting is parsed into its field", "[config]") {
  auto r = load_env({"TNBC_DISABLE=yes", "TNBC_LOG=debug", "TNBC_STATS=/tmp/run/stats",
                     "TNBC_TRACE_DIR=/tmp/run/trace", "TNBC_TRACE_BCAST_UNITS=4"});
  CHECK(r.messages.empty());
  CHECK(r.config.trace_dir == "/tmp/run/trace");
  CHECK(r.config.trace_bcast_units == 4);
  CHECK(r.config.disable);
  CHECK(r.config.log == LogLevel::debug);
  CHECK(r.config.stats_prefix == "/tmp/run/stats");
}

TEST_CASE("a bad value keeps the default and says why, naming variable and value", "[config]") {
  auto r = load_env({"TNBC_LOG=loud", "TNBC_DISABLE=maybe"});
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0] == "TNBC_LOG=loud: expected one of quiet, info, debug; using the default (info)");
  CHECK(r.messages[1] ==
        "TNBC_DISABLE=maybe: expected 1/0, yes/no, true/false or on/off; using the default (0)");
  CHECK(r.config.log == LogLevel::info);
  CHECK_FALSE(r.config.disable);
}

TEST_CASE("TNBC_EXPLORE: a percentage or off; anything else keeps 1 and says why", "[config]") {
  CHECK(load_env({"TNBC_EXPLORE=0.5"}).config.explore == 0.5);
  CHECK(load_env({"TNBC_EXPLORE=0"}).config.explore == 0.0);
  CHECK(load_env({"TNBC_EXPLORE=100"}).config.explore == 100.0);
  CHECK(load_env({"TNBC_EXPLORE=off"}).config.explore < 0);
  for (const char* bad : {"TNBC_EXPLORE=abc", "TNBC_EXPLORE=101", "TNBC_EXPLORE=-1", "TNBC_EXPLORE=1%"}) {
    auto r = load_env({bad});
    REQUIRE(r.messages.size() == 1);
    CHECK(r.messages[0] == std::string(bad) +
                               ": expected off or a percentage from 0 to 100 (e.g. 1 or 0.5); using the default (1)");
    CHECK(r.config.explore == 1.0);
  }
}

TEST_CASE("a bad number of broadcast units keeps the default", "[config]") {
  auto r = load_env({"TNBC_TRACE_BCAST_UNITS=0"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] ==
        "TNBC_TRACE_BCAST_UNITS=0: expected an integer from 1 to 4096; using the default (16)");
  CHECK(r.config.trace_bcast_units == 16);
}

TEST_CASE("an unknown TNBC_ variable is reported once and ignored", "[config]") {
  auto r = load_env({"TNBC_STAT=x", "NOT_TNBC_FOO=1"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] == "unknown setting TNBC_STAT ignored (`tnbc-order config` lists the settings)");
}

TEST_CASE("an empty value counts as unset", "[config]") {
  auto r = load_env({"TNBC_LOG="});
  CHECK(r.messages.empty());
  CHECK(r.config.log == LogLevel::info);
}

TEST_CASE("size parser accepts suffixes and rejects junk", "[config]") {
  std::string err;
  CHECK(parse_size("4096", &err) == 4096u);
  CHECK(parse_size("64K", &err) == 65536u);
  CHECK(parse_size("2M", &err) == 2u * 1024 * 1024);
  CHECK(parse_size("1g", &err) == 1ull << 30);
  CHECK_FALSE(parse_size("", &err));
  CHECK_FALSE(parse_size("12Q", &err));
  CHECK_FALSE(parse_size("-5", &err));
  CHECK_FALSE(parse_size("99999999999999999999G", &err));
  CHECK(err == "expected a byte count, optionally with a K, M or G suffix (e.g. 64K)");
}

TEST_CASE("int parser enforces the range", "[config]") {
  std::string err;
  CHECK(parse_int("16", 1, 64, &err) == 16);
  CHECK_FALSE(parse_int("0", 1, 64, &err));
  CHECK(err == "expected an integer from 1 to 64");
  CHECK_FALSE(parse_int("3x", 1, 64, &err));
  CHECK(err == "expected an integer");
}

TEST_CASE("the table documents every setting with a default parsable by its own parser",
          "[config]") {
  REQUIRE_FALSE(settings().empty());
  for (const auto& s : settings()) {
    INFO(s.name);
    CHECK(s.name.substr(0, 5) == "TNBC_");
    CHECK_FALSE(s.description.empty());
    if (!s.default_value.empty()) {
      Config cfg;
      CHECK_FALSE(s.field.apply(cfg, s.default_value).has_value());
      // The default is written twice, in Config's initialisers and in the table: they agree.
      CHECK(cfg == Config{});
    }
  }
  auto md = render_table(true);
  for (const auto& s : settings()) CHECK(md.find(std::string(s.name)) != std::string::npos);
}

TEST_CASE("barrier settings: defaults, values, and exact messages for bad values", "[config]") {
  auto d = load_env({});
  CHECK(d.config.barrier_algo == "auto");
  CHECK(d.config.barrier_root == kBarrierRootAuto);
  CHECK(d.config.numa_topology.empty());
  CHECK(d.config.barrier_split == 0);

  auto r = load_env({"TNBC_BARRIER_ALGO=combining_tree_atomic", "TNBC_BARRIER_ROOT=3",
                     "TNBC_NUMA_TOPOLOGY=/tmp/epyc.topo", "TNBC_BARRIER_SPLIT=2"});
  CHECK(r.messages.empty());
  CHECK(r.config.barrier_algo == "combining_tree_atomic");
  CHECK(r.config.barrier_root == 3);
  CHECK(r.config.numa_topology == "/tmp/epyc.topo");
  CHECK(r.config.barrier_split == 2);
  CHECK(load_env({"TNBC_BARRIER_ALGO=mpich"}).config.barrier_algo == "mpich");
  CHECK(load_env({"TNBC_BARRIER_ROOT=auto"}).config.barrier_root == kBarrierRootAuto);

  auto bad = load_env({"TNBC_BARRIER_ALGO=butterfly", "TNBC_BARRIER_ROOT=x"});
  REQUIRE(bad.messages.size() == 2);
  CHECK(bad.messages[0] ==
        "TNBC_BARRIER_ALGO=butterfly: expected auto, mpich, central_counter, flat_tree, "
        "gather_release, combining_tree, combining_tree_atomic, mcs, tournament, dissemination; "
        "using the default (auto)");
  CHECK(bad.messages[1] ==
        "TNBC_BARRIER_ROOT=x: expected auto or a local rank from 0 to 65535; using the default "
        "(auto)");
  CHECK(bad.config.barrier_algo == "auto");
  CHECK(bad.config.barrier_root == kBarrierRootAuto);
}

TEST_CASE("replay engine settings: auto Bcast shape, chunks, and messages for bad values", "[config]") {
  auto d = load_env({});
  CHECK(d.config.bcast_segments == 0);  // auto: the LogGP model decides
  CHECK(d.config.bcast_chains == -1);
  CHECK(d.config.chunk_bytes == tnbc::config::kChunkBytesAuto);  // auto: by whether the job spans nodes
  CHECK(tnbc::config::chunk_bytes_for(d.config.chunk_bytes, true) == 64 * 1024);
  CHECK(tnbc::config::chunk_bytes_for(d.config.chunk_bytes, false) == 1024 * 1024);
  CHECK(d.config.chunk_window == 2);
  auto r = load_env({"TNBC_BCAST_SEGMENTS=7", "TNBC_BCAST_CHAINS=0", "TNBC_CHUNK_BYTES=0",
                     "TNBC_CHUNK_WINDOW=5"});
  CHECK(r.messages.empty());
  CHECK(r.config.bcast_segments == 7);
  CHECK(r.config.bcast_chains == 0);
  CHECK(r.config.chunk_bytes == 0);
  CHECK(tnbc::config::chunk_bytes_for(r.config.chunk_bytes, false) == 0);  // a size set holds on one node too
  CHECK(tnbc::config::chunk_bytes_for(load_env({"TNBC_CHUNK_BYTES=64K"}).config.chunk_bytes, false) == 64 * 1024);
  CHECK(load_env({"TNBC_CHUNK_BYTES=auto"}).config.chunk_bytes == tnbc::config::kChunkBytesAuto);
  CHECK(r.config.chunk_window == 5);
  CHECK(load_env({"TNBC_BCAST_SEGMENTS=auto", "TNBC_BCAST_CHAINS=auto"}).config.bcast_chains == -1);

  auto bad = load_env({"TNBC_BCAST_SEGMENTS=0", "TNBC_BCAST_CHAINS=-1", "TNBC_CHUNK_BYTES=big",
                       "TNBC_CHUNK_WINDOW=255"});
  REQUIRE(bad.messages.size() == 4);
  CHECK(bad.messages[0] ==
        "TNBC_BCAST_SEGMENTS=0: expected auto or an integer from 1 to 253; using the default (auto)");
  CHECK(bad.messages[1] ==
        "TNBC_BCAST_CHAINS=-1: expected auto or an integer from 0 to 4096; using the default (auto)");
  CHECK(bad.messages[2].find("TNBC_CHUNK_BYTES=big: expected a byte count") == 0);
  CHECK(bad.messages[3] ==
        "TNBC_CHUNK_WINDOW=255: expected an integer from 0 to 254; using the default (2)");
  CHECK(bad.config.bcast_segments == 0);
  CHECK(bad.config.bcast_chains == -1);
  CHECK(bad.config.chunk_bytes == tnbc::config::kChunkBytesAuto);
  CHECK(bad.config.chunk_window == 2);
}

TEST_CASE("TNBC_ADAPT: on/off/measure and the boolean spellings; bad values keep 'on' and say so",
          "[config]") {
  CHECK(load_env({"TNBC_ADAPT=measure"}).config.adapt == Adapt::measure);
  CHECK(load_env({"TNBC_ADAPT=off"}).config.adapt == Adapt::off);
  CHECK(load_env({"TNBC_ADAPT=0"}).config.adapt == Adapt::off);
  CHECK(load_env({"TNBC_ADAPT=yes"}).config.adapt == Adapt::on);
  CHECK(load_env({}).config.adapt == Adapt::on);
  auto r = load_env({"TNBC_ADAPT=sometimes", "TNBC_PROGRESS_MAX_SLEEP_US=200000"});
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0] == "TNBC_ADAPT=sometimes: expected on, off or measure; using the default (on)");
  CHECK(r.messages[1] ==
        "TNBC_PROGRESS_MAX_SLEEP_US=200000: expected an integer from 0 to 100000; using the default (1000)");
  CHECK(r.config.adapt == Adapt::on);
  CHECK(r.config.progress_max_sleep_us == 1000);
  CHECK(load_env({"TNBC_PROGRESS_MAX_SLEEP_US=250"}).config.progress_max_sleep_us == 250);
}

TEST_CASE("TNBC_ADAPT_WARMUP: calls before early is tried; bad values keep 6 and say so", "[config]") {
  CHECK(load_env({}).config.adapt_warmup == 6);
  CHECK(load_env({"TNBC_ADAPT_WARMUP=0"}).config.adapt_warmup == 0);
  CHECK(load_env({"TNBC_ADAPT_WARMUP=500"}).config.adapt_warmup == 500);
  auto r = load_env({"TNBC_ADAPT_WARMUP=-1"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] == "TNBC_ADAPT_WARMUP=-1: expected an integer from 0 to 1000000; using the default (6)");
  CHECK(r.config.adapt_warmup == 6);
}

TEST_CASE("TNBC_ADAPT_WARMUP_ROOM: the room point's call, 0 for none; bad values keep 4 and say so", "[config]") {
  CHECK(load_env({}).config.adapt_warmup_room == 4);
  CHECK(load_env({"TNBC_ADAPT_WARMUP_ROOM=0"}).config.adapt_warmup_room == 0);
  CHECK(load_env({"TNBC_ADAPT_WARMUP_ROOM=5"}).config.adapt_warmup_room == 5);
  auto r = load_env({"TNBC_ADAPT_WARMUP_ROOM=soon"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] == "TNBC_ADAPT_WARMUP_ROOM=soon: expected an integer; using the default (4)");
  CHECK(r.config.adapt_warmup_room == 4);
  r = load_env({"TNBC_ADAPT_WARMUP_ROOM=-1"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] == "TNBC_ADAPT_WARMUP_ROOM=-1: expected an integer from 0 to 1000000; using the default (4)");
  CHECK(r.config.adapt_warmup_room == 4);
}

TEST_CASE("TNBC_PUBLISH: auto by default, each way by name; a bad value keeps auto and says so", "[config]") {
  CHECK(load_env({}).config.publish == "auto");
  for (const char* way : {"move", "write", "mremap", "auto"}) {
    const std::string env = std::string("TNBC_PUBLISH=") + way;
    auto r = load_env({env.c_str()});
    CHECK(r.messages.empty());
    CHECK(r.config.publish == way);
  }
  auto r = load_env({"TNBC_PUBLISH=copy"});
  REQUIRE(r.messages.size() == 1);
  CHECK(r.messages[0] == "TNBC_PUBLISH=copy: expected auto, move, write or mremap; using the default (auto)");
  CHECK(r.config.publish == "auto");
}

namespace {
const Setting& setting(std::string_view name) {
  for (const auto& s : settings())
    if (s.name == name) return s;
  FAIL("no setting " << name);
  return settings().front();
}

/// The digest of `name` on a rank whose environment is `env`.
std::uint64_t digest(std::string_view name, std::vector<const char*> env) {
  return agreement_digest(setting(name), load_env(std::move(env)).config);
}

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = "/tmp/tnbc_unit_config_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("agreement digests compare values in effect, not spellings", "[config]") {
  const auto d64k = digest("TNBC_MIN_BYTES", {"TNBC_MIN_BYTES=64K"});
  CHECK(d64k == digest("TNBC_MIN_BYTES", {"TNBC_MIN_BYTES=65536"}));
  CHECK(d64k == digest("TNBC_MIN_BYTES", {}));                         // the default, unset
  CHECK(d64k == digest("TNBC_MIN_BYTES", {"TNBC_MIN_BYTES=lots"}));    // bad: the default
  CHECK(d64k != digest("TNBC_MIN_BYTES", {"TNBC_MIN_BYTES=1M"}));
  CHECK(digest("TNBC_DISABLE", {"TNBC_DISABLE=yes"}) == digest("TNBC_DISABLE", {"TNBC_DISABLE=1"}));
  CHECK(digest("TNBC_DISABLE", {"TNBC_DISABLE=1"}) != digest("TNBC_DISABLE", {}));
  CHECK(digest("TNBC_ADAPT", {"TNBC_ADAPT=true"}) == digest("TNBC_ADAPT", {}));
  CHECK(digest("TNBC_ADAPT", {"TNBC_ADAPT=measure"}) != digest("TNBC_ADAPT", {}));
  CHECK(digest("TNBC_BCAST_SEGMENTS", {"TNBC_BCAST_SEGMENTS=2"}) !=
        digest("TNBC_BCAST_SEGMENTS", {"TNBC_BCAST_SEGMENTS=7"}));
  // Rank-local settings have no digest: they never disagree.
  CHECK(digest("TNBC_LOG", {"TNBC_LOG=debug"}) == 0);
  CHECK(digest("TNBC_STATS", {"TNBC_STATS=/tmp/x"}) == 0);
}

TEST_CASE("agreement digests of files compare their bytes, not their paths", "[config]") {
  const std::string a = write_temp("a", "distances\n10\nranks 0\n");
  const std::string b = write_temp("b", "distances\n10\nranks 0\n");
  const std::string c = write_temp("c", "distances\n10\nranks 0 0\n");
  auto plan = [](const std::string& path) {
    const std::string entry = "TNBC_PLAN=" + path;
    return digest("TNBC_PLAN", {entry.c_str()});
  };
  CHECK(plan(a) == plan(b));
  CHECK(plan(a) != plan(c));
  CHECK(plan(a) != 0);
  // No file, an unreadable one, a directory and a device all count as no plan.
  CHECK(digest("TNBC_PLAN", {}) == 0);
  CHECK(plan("/nonexistent/plan") == 0);
  CHECK(plan("/tmp") == 0);
  CHECK(plan("/dev/zero") == 0);
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST_CASE("every setting that must agree has a digest that tells values apart", "[config]") {
  for (const auto& s : settings()) {
    INFO(s.name);
    if (s.agree != Agree::value) continue;
    // The default and another valid value of the setting differ in their digests.
    Config defaults, changed;
    const std::string current = s.field.show(defaults);
    for (const char* v : {"1", "2", "0", "mcs", "off", "mpi"}) {
      Config c;
      if (!s.field.apply(c, v) && s.field.show(c) != current) {
        changed = c;
        break;
      }
    }
    CHECK(s.field.show(changed) != current);
    CHECK(agreement_digest(s, changed) != agreement_digest(s, defaults));
  }
}
