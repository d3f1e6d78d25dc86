#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "stats.hpp"

using namespace tnbc::shim;

TEST_CASE("statistics JSON has every documented key with the counted values", "[stats]") {
  Stats s;
  s.alltoall.count_call();
  s.alltoall.count_call();
  s.alltoall.count_early_return();
  s.alltoall.count_fallback("small");
  s.alltoall.count_planned();
  s.bcast.count_fallback("inter\"comm");
  s.barrier_calls = 3;
  s.init_ns = 1500;
  s.gated_sends = 4;
  s.turn_wait_ns = 2500;
  auto j = s.to_json(7, "tnbc", "0.1.0");
  CHECK(j.find(R"("rank":7,"library":"tnbc","version":"0.1.0")") != std::string::npos);
  CHECK(j.find(R"("alltoall":{"calls":2,"early_return":1,"fallback":1,"fallback_reasons":{"small":1},"planned":1})") !=
        std::string::npos);
  CHECK(j.find(R"("alltoallv":{"calls":0,"early_return":0,"fallback":0,"fallback_reasons":{},"planned":0})") !=
        std::string::npos);
  CHECK(j.find(R"("fallback_reasons":{"inter\"comm":1})") != std::string::npos);
  CHECK(j.find(R"("barrier":{"calls":3,"algo":"mpich","root":0})") != std::string::npos);
  CHECK(j.find(R"("init_us":1.500)") != std::string::npos);
  CHECK(j.find(R"("node_priority":{"gated_sends":4,"turn_wait_us":2.500})") != std::string::npos);
}

TEST_CASE("json_escape escapes quotes, backslashes and control characters", "[stats]") {
  CHECK(json_escape("a\"b\\c\n\x01") == "a\\\"b\\\\c\\n\\u0001");
}

TEST_CASE("write_file_atomic writes the whole content and leaves no temporary", "[stats]") {
  char dir[] = "/tmp/tnbc_stats_XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string path = std::string(dir) + "/s.0.json";
  REQUIRE_FALSE(write_file_atomic(path, "{\"x\":1}\n").has_value());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "{\"x\":1}\n");
  unlink(path.c_str());
  CHECK(rmdir(dir) == 0);  // fails if a temporary file was left behind
}

TEST_CASE("write_file_atomic reports a missing folder", "[stats]") {
  auto err = write_file_atomic("/nonexistent-tnbc-dir/s.json", "x");
  REQUIRE(err.has_value());
  CHECK(err->find("cannot create /nonexistent-tnbc-dir/s.json.tmp.") == 0);
  CHECK(err->find("No such file or directory") != std::string::npos);
}
