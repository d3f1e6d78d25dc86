#include "xml.hpp"

namespace tnbc::util {

std::string xml_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace tnbc::util
