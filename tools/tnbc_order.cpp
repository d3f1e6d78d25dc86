// tnbc-order: inspect tnbc traces and turn them into plans.
//
// Exit codes: 0 ok, 1 findings (with --strict), 2 bad input or usage.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"
#include "version.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;

constexpr std::string_view kUsage =
    "usage: tnbc-order <command> [options]\n"
    "\n"
    "Inspect tnbc traces and turn them into plans for libtnbc.so.\n"
    "\n"
    "commands:\n"
    "  config [--markdown]   print every TNBC_* setting with its type, default and meaning\n"
    "\n"
    "options:\n"
    "  -h, --help            this text (also: tnbc-order <command> --help)\n"
    "  --version             print the version\n"
    "\n"
    "exit codes: 0 ok, 1 findings (with --strict), 2 bad input or usage\n";

constexpr std::string_view kConfigUsage =
    "usage: tnbc-order config [--markdown]\n"
    "\n"
    "Print the TNBC_* environment variables read by libtnbc.so and libtnbc_trace.so at\n"
    "MPI initialisation.  --markdown prints the table as docs/config.md has it.\n";

int usage_error(std::string_view msg, std::string_view usage) {
  std::fprintf(stderr, "tnbc-order: %.*s\n\n%.*s", static_cast<int>(msg.size()), msg.data(),
               static_cast<int>(usage.size()), usage.data());
  return kExitUsage;
}

bool is_help(std::string_view a) { return a == "-h" || a == "--help"; }

int cmd_config(const std::vector<std::string_view>& args) {
  bool markdown = false;
  for (auto a : args) {
    if (is_help(a)) {
      std::fputs(kConfigUsage.data(), stdout);
      return kExitOk;
    }
    if (a == "--markdown") markdown = true;
    else return usage_error("config: unknown option '" + std::string(a) + "'", kConfigUsage);
  }
  std::fputs(tnbc::config::render_table(markdown).c_str(), stdout);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("no command given", kUsage);
  auto cmd = args.front();
  std::vector<std::string_view> rest(args.begin() + 1, args.end());
  if (is_help(cmd)) {
    std::fputs(kUsage.data(), stdout);
    return kExitOk;
  }
  if (cmd == "--version") {
    std::printf("tnbc-order %s\n", tnbc::kVersion);
    return kExitOk;
  }
  if (cmd == "config") return cmd_config(rest);
  return usage_error("unknown command '" + std::string(cmd) + "'", kUsage);
}
