#include <catch2/catch.hpp>

#include "shim/stats.hpp"

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
  s.turn_calls = 5;
  s.gated_sends = 4;
  s.turn_wait_ns = 2500;
  s.send_window_max = 8;
  auto j = s.to_json(7, "tnbc", "0.1.0");
  CHECK(j.find(R"("rank":7,"library":"tnbc","version":"0.1.0")") != std::string::npos);
  CHECK(j.find(R"("alltoall":{"calls":2,"early_return":1,"fallback":1,"fallback_reasons":{"small":1},"planned":1})") !=
        std::string::npos);
  CHECK(j.find(R"("alltoallv":{"calls":0,"early_return":0,"fallback":0,"fallback_reasons":{},"planned":0})") !=
        std::string::npos);
  CHECK(j.find(R"("fallback_reasons":{"inter\"comm":1})") != std::string::npos);
  CHECK(j.find(R"("barrier":{"calls":3,"algo":"mpich","root":0})") != std::string::npos);
  CHECK(j.find(R"("init_us":1.500)") != std::string::npos);
  CHECK(j.find(R"("node_priority":{"turn_calls":5,"gated_sends":4,"turn_wait_us":2.500,"send_window_max":8})") != std::string::npos);
}
