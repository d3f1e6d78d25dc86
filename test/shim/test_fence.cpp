#include <catch2/catch.hpp>

#include "shim/fence.hpp"

using namespace tnbc::shim;

namespace {
int g_drains = 0;
void count_drain() { ++g_drains; }
}  // namespace

TEST_CASE("a fence drains only when collectives are in flight, and only at the outermost call",
          "[fence]") {
  set_drain_hook(count_drain);
  g_drains = 0;
  { FenceScope f; }
  CHECK(g_drains == 0);  // nothing in flight: fast path

  g_in_flight = 1;
  { FenceScope f; }
  CHECK(g_drains == 1);

  {
    MpiScope outer;  // e.g. inside MPI_File_write_all, which calls other MPI functions
    CHECK(nested_in_mpi());
    FenceScope inner;
    CHECK(g_drains == 1);
  }
  CHECK_FALSE(nested_in_mpi());
  g_in_flight = 0;
  set_drain_hook(nullptr);
}
