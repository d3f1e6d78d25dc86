// XML text, written one way everywhere (tnbc-order's first-touch plots, tnbc-sim's sweep SVG).
#pragma once

#include <string>
#include <string_view>

namespace tnbc::util {

/// `s` as XML character data or an attribute value: '<', '>', '&' and '"' escaped; control
/// characters and every byte outside printable ASCII become '?' (XML 1.0 forbids most control
/// characters, and the bytes may not be UTF-8).
std::string xml_escape(std::string_view s);

}  // namespace tnbc::util
