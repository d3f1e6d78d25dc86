// JSON strings, written one way everywhere (statistics files, tnbc-order's --json output).
#pragma once

#include <string>
#include <string_view>

namespace tnbc::util {

/// The characters of a JSON string for `s`, without the quotes: '"' and '\' escaped, control
/// characters and every byte outside printable ASCII as \u00XX (symbols, paths and host names
/// need not be valid UTF-8, and the output must be valid JSON whatever they hold).
std::string json_escape(std::string_view s);
/// The same, in quotes.
std::string json_string(std::string_view s);

}  // namespace tnbc::util
