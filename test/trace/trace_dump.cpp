// trace_dump FILE...: prints each trace file as one JSON document per line, through the same
// reader tnbc-order uses, so the MPI tests can check what was recorded.  A file the reader rejects
// prints {"file":..., "error":...} and makes the exit status 1.
#include <cstdio>
#include <string>

#include "trace/trace_file.hpp"

using namespace tnbc::trace;
using namespace tnbc::shim::observe;

namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string outcome_name(std::uint8_t o) {
  switch (static_cast<Outcome>(o)) {
    case Outcome::untouched: return "untouched";
    case Outcome::touched: return "touched";
    case Outcome::unobserved: return "unobserved";
    case Outcome::released: return "released";
  }
  return "?";
}

std::string to_json(const std::string& file, const Trace& t) {
  const auto& h = t.header;
  std::string o = "{\"file\":" + quote(file) + ",\"rank\":" + std::to_string(h.rank) +
                  ",\"size\":" + std::to_string(h.size) +
                  ",\"node_id\":" + std::to_string(h.node_id) +
                  ",\"page_size\":" + std::to_string(h.page_size) +
                  ",\"ticks_per_us\":" + std::to_string(h.ticks_per_us) +
                  ",\"tsc\":" + (h.tsc ? "true" : "false") + ",\"hostname\":" + quote(h.hostname) +
                  ",\"job_id\":" + quote(h.job_id) + ",\"callsites\":[";
  for (std::size_t i = 0; i < t.callsites.size(); ++i) {
    const auto& cs = t.callsites[i];
    o += (i ? "," : "") + std::string("{\"id\":\"") + std::to_string(cs.id) + "\",\"frames\":[";
    for (std::size_t k = 0; k < cs.frames.size(); ++k)
      o += (k ? "," : "") + std::string("{\"module\":") + quote(cs.frames[k].module) +
           ",\"offset\":" + std::to_string(cs.frames[k].offset) +
           ",\"symbol\":" + quote(cs.frames[k].symbol) + "}";
    o += "]}";
  }
  o += "],\"calls\":[";
  for (std::size_t i = 0; i < t.calls.size(); ++i) {
    const auto& c = t.calls[i];
    o += (i ? "," : "") + std::string("{\"op\":") + quote(to_string(c.op)) +
         ",\"traced\":" + ((c.flags & kCallTraced) ? "true" : "false") +
         ",\"callsite\":" + std::to_string(c.callsite) +
         ",\"comm_size\":" + std::to_string(c.comm_size) +
         ",\"start\":" + std::to_string(c.start_stamp) + ",\"tcomm\":" + std::to_string(c.tcomm) +
         ",\"return\":" + std::to_string(c.return_stamp) + ",\"subs\":[";
    for (std::size_t k = 0; k < c.subs.size(); ++k)
      o += (k ? "," : "") + std::string("{\"offset\":") + std::to_string(c.subs[k].offset) +
           ",\"size\":" + std::to_string(c.subs[k].size) +
           ",\"observable\":" + (c.subs[k].observable() ? "true" : "false") +
           ",\"outcome\":" + quote(outcome_name(c.subs[k].outcome())) + "}";
    o += "]}";
  }
  o += "],\"touches\":[";
  for (std::size_t i = 0; i < t.touches.size(); ++i) {
    const auto& x = t.touches[i];
    o += (i ? "," : "") + std::string("{\"call\":") + std::to_string(x.call) +
         ",\"sub\":" + std::to_string(x.sub) + ",\"stamp\":" + std::to_string(x.stamp) +
         ",\"seq\":" + std::to_string(x.seq) + ",\"thread\":" + std::to_string(x.thread) + "}";
  }
  return o + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    auto r = read_trace(argv[i]);
    if (r.trace) {
      std::printf("%s\n", to_json(argv[i], *r.trace).c_str());
    } else {
      std::printf("{\"file\":%s,\"error\":%s}\n", quote(argv[i]).c_str(), quote(r.error).c_str());
      status = 1;
    }
  }
  return status;
}
