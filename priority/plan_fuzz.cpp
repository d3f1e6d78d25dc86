// Fuzz target of the plan parser (libFuzzer entry point; plan_fuzz_main.cpp drives it without
// libFuzzer).  Properties checked on every input, beyond "does not crash or leak":
//   - a parsed plan passes validate_plan;
//   - write_plan of it parses back to the same plan, and writing that again gives the same text.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tnbc::priority;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto result = parse_plan(text);
  if (const Plan* plan = std::get_if<Plan>(&result)) {
    if (validate_plan(*plan)) std::abort();
    std::string written = write_plan(*plan);
    auto again = parse_plan(written);
    const Plan* reparsed = std::get_if<Plan>(&again);
    if (!reparsed || !(*reparsed == *plan) || write_plan(*reparsed) != written) std::abort();
  } else if (std::get<PlanError>(result).message.empty()) {
    std::abort();
  }
  return 0;
}
