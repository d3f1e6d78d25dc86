// The topology file parser: what it accepts, and the exact message for what it does not.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "barrier/topology.hpp"

using namespace tnbc::barrier;

namespace {
std::string error_of(std::string_view text) {
  TopologyParse r = parse_topology(text);
  CHECK_FALSE(r.topology.has_value());
  return r.error;
}
}  // namespace

TEST_CASE("topology file: ranks on the 'ranks' line, comments and blank lines", "[topology]") {
  TopologyParse r = parse_topology(
      "# 2-socket Intel\n"
      "distances\n"
      "10 21   # node 0\n"
      "\n"
      "21 10\n"
      "ranks 0 1 1 1\n");
  REQUIRE(r.topology.has_value());
  CHECK(r.error.empty());
  CHECK(r.topology->node_count() == 2);
  CHECK(r.topology->distance(0, 1) == 21);
  CHECK(r.topology->rank_nodes() == std::vector<int>{0, 1, 1, 1});
  CHECK(r.topology->node_of_self(3) == 1);
  CHECK(r.topology->node_of_self(4) == -1);
}

TEST_CASE("topology file: ranks on the following lines", "[topology]") {
  TopologyParse r = parse_topology("distances\n10 21\n21 10\nranks\n0 1\n1 1\n");
  REQUIRE(r.topology.has_value());
  CHECK(r.topology->rank_nodes() == std::vector<int>{0, 1, 1, 1});
  TopologyParse both = parse_topology("distances\n\t10\r\nranks 0\n0 0\n");
  REQUIRE(both.topology.has_value());
  CHECK(both.topology->rank_nodes() == std::vector<int>{0, 0, 0});
}

TEST_CASE("topology file: exact messages", "[topology]") {
  CHECK(error_of("") == "no 'distances' section");
  CHECK(error_of("# only a comment\n") == "no 'distances' section");
  CHECK(error_of("10 21\n") == "line 1: expected 'distances'");
  CHECK(error_of("distances\n") == "'distances' has no rows");
  CHECK(error_of("distances\n10\n") == "no 'ranks' section");
  CHECK(error_of("distances 10 21\n") ==
        "line 1: the matrix rows go on the lines after 'distances'");
  CHECK(error_of("distances\n10 21\n21\nranks 0\n") ==
        "line 3: row 1 has 1 distances, expected 2 (one per NUMA node)");
  CHECK(error_of("distances\n10 x\n") == "line 2: 'x' is not a non-negative integer");
  CHECK(error_of("distances\n10 -1\n") == "line 2: '-1' is not a non-negative integer");
  CHECK(error_of("distances\n10\nranks 0 1\n") ==
        "rank 1 is on NUMA node 1, but the matrix has 1 nodes");
  CHECK(error_of("distances\n10\nranks\n") == "'ranks' lists no rank");
  CHECK(error_of("ranks 0\n") == "line 1: 'ranks' must follow the 'distances' section");
  CHECK(error_of("distances\n10\ndistances\n") ==
        "line 3: 'distances' must come first and only once");
}

TEST_CASE("topology file: unreadable file names the path", "[topology]") {
  TopologyParse r = load_topology("/nonexistent/topo.txt");
  CHECK_FALSE(r.topology.has_value());
  CHECK(r.error == "/nonexistent/topo.txt: cannot open: No such file or directory");
  // Special files are refused before anything is read: /dev/zero would otherwise be read forever.
  CHECK(load_topology("/dev/zero").error == "/dev/zero: not a regular file (a character device)");
  CHECK(load_topology("/").error == "/: is a directory");

  std::string path = "tnbc_test_topology.txt";
  { std::ofstream(path) << "distances\n10\nranks 1\n"; }
  CHECK(load_topology(path).error == path + ": rank 0 is on NUMA node 1, but the matrix has 1 nodes");
  std::remove(path.c_str());
}

TEST_CASE("host topology through libnuma answers sanely", "[topology]") {
  NumaTopology host;
  CHECK(host.distance(0, 0) == 10);
  CHECK(host.node_of_self(0) >= 0);
  CHECK(host.node_count() >= 1);
  CHECK(host.node_of_self(0) < host.node_count());
}
