// libtnbc.so: replay mode.  Collectives still run as the blocking call (the base Mode); the
// non-blocking engine replaces them in a later step.  MPI_Barrier runs on shared memory
// (barrier_shim.hpp).
#include "barrier_shim.hpp"
#include "mode.hpp"

namespace tnbc::shim {
namespace {

class ReplayMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc"; }
  void start(Runtime& rt) override { barrier_start(rt); }
  void stop(Runtime& rt) override { barrier_stop(rt); }
  int barrier(MPI_Comm comm) override { return shim::barrier(comm); }
};

}  // namespace

Mode& mode() {
  static ReplayMode instance;
  return instance;
}

}  // namespace tnbc::shim
