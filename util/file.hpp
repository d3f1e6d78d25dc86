// Writing a file so that readers never see half of it: traces, plans and statistics.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tnbc::util {

/// Writes `content` to `path` atomically: a temporary file in the same folder, fsync'd and
/// renamed over `path`.  Returns an error message naming the file, or nullopt.
std::optional<std::string> write_file_atomic(const std::string& path, std::string_view content);

}  // namespace tnbc::util
