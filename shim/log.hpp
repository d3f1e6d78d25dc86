// Messages on standard error, one write(2) per line so ranks and threads do not interleave.
//
// Every line starts with "tnbc[<rank>]: ".  warn() is printed at every level (it reports a
// problem that changes behaviour, such as a fallback to pass-through); info() from
// TNBC_LOG=info up; debug() only at TNBC_LOG=debug.  The *_rank0 forms print on world rank 0
// only, for messages every rank would otherwise repeat (bad settings, a missing plan).
#pragma once

#include <fmt/format.h>

#include "config.hpp"

namespace tnbc::log {

void set_level(config::LogLevel level);
config::LogLevel level();
/// Sets the world rank shown in the prefix; -1 (the default) shows "?".
void set_rank(int rank);
int rank();

/// Writes "tnbc[<rank>]: <text>\n" to standard error.
void write_line(std::string_view text);

template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write_line(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn_rank0(fmt::format_string<Args...> f, Args&&... args) {
  if (rank() <= 0) write_line(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= config::LogLevel::info) write_line(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info_rank0(fmt::format_string<Args...> f, Args&&... args) {
  if (rank() <= 0 && level() >= config::LogLevel::info)
    write_line(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= config::LogLevel::debug) write_line(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tnbc::log
