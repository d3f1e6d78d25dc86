// libtnbc_trace.so: trace mode.  Collectives run as the blocking call (the base Mode); first-touch
// recording is added on top of it.
#include "mode.hpp"

namespace tnbc::shim {
namespace {

class TraceMode final : public Mode {
 public:
  std::string_view library() const override { return "tnbc_trace"; }
};

}  // namespace

Mode& mode() {
  static TraceMode instance;
  return instance;
}

}  // namespace tnbc::shim
