// libtnbc.so: replay mode.  Collectives still run as the blocking call (the base Mode); the
// non-blocking engine replaces them in a later step.
#include "mode.hpp"

namespace tnbc::shim {
namespace {

class ReplayMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc"; }
};

}  // namespace

Mode& mode() {
  static ReplayMode instance;
  return instance;
}

}  // namespace tnbc::shim
