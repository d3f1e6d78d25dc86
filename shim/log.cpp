#include "log.hpp"

#include <atomic>
#include <unistd.h>

namespace tnbc::log {
namespace {
std::atomic<config::LogLevel> g_level{config::LogLevel::info};
std::atomic<int> g_rank{-1};
}  // namespace

void set_level(config::LogLevel l) { g_level.store(l, std::memory_order_relaxed); }
config::LogLevel level() { return g_level.load(std::memory_order_relaxed); }
void set_rank(int r) { g_rank.store(r, std::memory_order_relaxed); }
int rank() { return g_rank.load(std::memory_order_relaxed); }

void write_line(std::string_view text) {
  int r = rank();
  std::string line = r >= 0 ? fmt::format("tnbc[{}]: {}\n", r, text) : fmt::format("tnbc[?]: {}\n", text);
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;  // nothing sensible to do if stderr is gone
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace tnbc::log
