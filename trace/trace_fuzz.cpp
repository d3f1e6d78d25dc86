// Fuzz target of the trace reader (libFuzzer entry point; trace_fuzz_main.cpp drives it without
// libFuzzer).  Properties checked on every input, beyond "does not crash, leak or allocate
// beyond the input's size":
//   - a refused input comes with a message that names the file;
//   - an accepted trace encodes to bytes that parse again, and encoding that gives the same bytes
//     (the reader keeps everything the writer writes).
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tnbc::trace;
using namespace tnbc::shim::observe;
  auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
  auto result = parse_trace(bytes, "fuzz.tnbct");
  if (!result.trace) {
    if (result.error.rfind("fuzz.tnbct: ", 0) != 0 || result.error.size() <= 12) std::abort();
    return 0;
  }
  std::string encoded = encode_trace(*result.trace);
  auto again = parse_trace(std::as_bytes(std::span<const char>(encoded.data(), encoded.size())),
                           "again.tnbct");
  if (!again.trace || encode_trace(*again.trace) != encoded) std::abort();
  return 0;
}
