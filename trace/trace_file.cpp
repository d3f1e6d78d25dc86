#include "trace_file.hpp"

#include <cmath>
#include <cstring>

#include "util/checksum.hpp"
#include "util/file.hpp"

namespace tnbc::trace {
namespace {

constexpr char kEndMagic[8] = {'T', 'N', 'B', 'C', 'E', 'N', 'D', '\0'};
constexpr std::size_t kPrefix = 8 + 4 + 8 + 8;  // magic, version, file size, checksum
constexpr std::size_t kVersionEnd = 8 + 4;       // magic and version: enough to tell old files
constexpr std::uint32_t kMaxFrames = 256;   // per call site
// Smallest encoding of each repeated element: counts are checked against the bytes left.
constexpr std::size_t kMinCallSite = 8 + 4;
constexpr std::size_t kMinFrame = 4 + 8 + 4;
constexpr std::size_t kMinCall = 1 + 1 + 4 + 4 + 8 * 3 + 4;
constexpr std::size_t kSubBytes = 8 + 8 + 1;
constexpr std::size_t kTouchBytes = 4 + 4 + 8 + 8 + 4;

class Writer {
 public:
  void bytes(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }
  template <typename T>
  void put(T v) {
    // Little-endian on every platform we build for (x86-64); the format says little-endian.
    bytes(&v, sizeof v);
  }
  void str(std::string_view s) {
    auto n = static_cast<std::uint32_t>(std::min<std::size_t>(s.size(), kMaxString));
    put(n);
    bytes(s.data(), n);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> b, std::string_view name) : b_(b), name_(name) {}

  std::size_t left() const { return b_.size() - pos_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  bool fail(const std::string& what) {
    if (error_.empty()) error_ = std::string(name_) + ": " + what;
    return false;
  }
  template <typename T>
  bool get(T* v, const char* what) {
    if (failed()) return false;
    if (left() < sizeof(T)) return fail(std::string("truncated in ") + what);
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool str(std::string* s, const char* what) {
    std::uint32_t n = 0;
    if (!get(&n, what)) return false;
    if (n > kMaxString)
      return fail(std::string("corrupt: ") + what + " is " + std::to_string(n) +
                  " bytes long, more than the limit of " + std::to_string(kMaxString));
    if (left() < n) return fail(std::string("truncated in ") + what);
    s->assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // A count of elements of at least `min_size` bytes each must fit in what is left.
  bool count(std::uint32_t* n, std::size_t min_size, const char* what) {
    if (!get(n, what)) return false;
    if (static_cast<std::uint64_t>(*n) * min_size > left())
      return fail(std::string("corrupt: ") + what + " " + std::to_string(*n) +
                  " does not fit in the remaining " + std::to_string(left()) + " bytes");
    return true;
  }

 private:
  std::span<const std::byte> b_;
  std::string_view name_;
  std::size_t pos_ = 0;
  std::string error_;
};

// The checks of the fixed-size prefix (magic, version, declared size) against `file_size`, the
// real size: `head` may be the prefix alone, so that read_trace reads no further into a file
// that is not a trace or not whole.
std::optional<std::string> check_prefix(std::span<const std::byte> head, std::uint64_t file_size) {
  if (head.size() < sizeof kTraceMagic ||
      std::memcmp(head.data(), kTraceMagic, sizeof kTraceMagic) != 0)
    return "not a tnbc trace file (bad magic number)";
  auto truncated = [&] {
    return "truncated: " + std::to_string(file_size) + " bytes, shorter than the " +
           std::to_string(kPrefix) + "-byte file prefix";
  };
  if (head.size() < kVersionEnd) return truncated();
  std::uint32_t version = 0;
  std::memcpy(&version, head.data() + 8, sizeof version);
  if (version < kTraceVersion)
    return "trace format version " + std::to_string(version) +
           " was written by an older tnbc (this build reads version " +
           std::to_string(kTraceVersion) + "): trace the program again";
  if (version != kTraceVersion)
    return "unsupported trace format version " + std::to_string(version) +
           " (this build reads version " + std::to_string(kTraceVersion) + ")";
  if (head.size() < kPrefix) return truncated();
  std::uint64_t declared = 0;
  std::memcpy(&declared, head.data() + 12, sizeof declared);
  if (declared > file_size)
    return "truncated: the header gives " + std::to_string(declared) + " bytes, the file has " +
           std::to_string(file_size);
  if (declared < file_size)
    return "corrupt: the header gives " + std::to_string(declared) + " bytes, the file has " +
           std::to_string(file_size);
  return std::nullopt;
}

}  // namespace

std::string_view to_string(TracedOp op) {
  switch (op) {
    case TracedOp::alltoall: return "alltoall";
    case TracedOp::alltoallv: return "alltoallv";
    case TracedOp::bcast: return "bcast";
  }
  return "?";
}

std::string encode_trace(const Trace& t) {
  Writer w;
  w.bytes(kTraceMagic, sizeof kTraceMagic);
  w.put(kTraceVersion);
  w.put(std::uint64_t{0});  // file size, patched below
  w.put(std::uint64_t{0});  // checksum, patched below
  const auto& h = t.header;
  w.put(h.rank);
  w.put(h.size);
  w.put(h.node_id);
  w.put(h.page_size);
  w.put(h.ticks_per_us);
  w.put(static_cast<std::uint8_t>(h.tsc));
  w.put(h.sync_stamp);
  w.str(h.hostname);
  w.str(h.job_id);

  w.put(static_cast<std::uint32_t>(t.callsites.size()));
  for (const auto& cs : t.callsites) {
    w.put(cs.id);
    auto nf = static_cast<std::uint32_t>(std::min<std::size_t>(cs.frames.size(), kMaxFrames));
    w.put(nf);
    for (std::uint32_t i = 0; i < nf; ++i) {
      w.str(cs.frames[i].module);
      w.put(cs.frames[i].offset);
      w.str(cs.frames[i].symbol);
    }
  }
  w.put(static_cast<std::uint32_t>(t.calls.size()));
  for (const auto& c : t.calls) {
    w.put(static_cast<std::uint8_t>(c.op));
    w.put(c.flags);
    w.put(c.callsite);
    w.put(c.comm_size);
    w.put(c.start_stamp);
    w.put(c.tcomm);
    w.put(c.return_stamp);
    w.put(static_cast<std::uint32_t>(c.subs.size()));
    for (const auto& s : c.subs) {
      w.put(s.offset);
      w.put(s.size);
      w.put(s.flags);
    }
  }
  w.put(static_cast<std::uint32_t>(t.touches.size()));
  for (const auto& x : t.touches) {
    w.put(x.call);
    w.put(x.sub);
    w.put(x.stamp);
    w.put(x.seq);
    w.put(x.thread);
  }
  w.bytes(kEndMagic, sizeof kEndMagic);
  std::string& out = w.out();
  std::uint64_t size = out.size();
  std::memcpy(out.data() + 12, &size, sizeof size);
  std::uint64_t sum = util::fnv1a64(out.data() + kPrefix, out.size() - kPrefix);
  std::memcpy(out.data() + 20, &sum, sizeof sum);
  return std::move(out);
}

std::optional<std::string> write_trace(const std::string& path, const Trace& trace) {
  return util::write_file_atomic(path, encode_trace(trace));
}

ReadResult parse_trace(std::span<const std::byte> bytes, std::string_view name) {
  ReadResult result;
  Reader r(bytes, name);
  auto fail = [&](const std::string& what) {
    r.fail(what);
    result.error = r.error();
    return result;
  };
  if (auto problem = check_prefix(bytes, bytes.size())) return fail(*problem);
  char magic[8];
  std::uint32_t version = 0;
  std::uint64_t declared = 0, sum = 0;
  r.get(&magic, "magic");
  r.get(&version, "version");
  r.get(&declared, "file size");
  r.get(&sum, "checksum");
  if (sum != util::fnv1a64(bytes.data() + kPrefix, bytes.size() - kPrefix))
    return fail("corrupt: the checksum does not match the content");

  Trace t;
  auto& h = t.header;
  std::uint8_t tsc = 0;
  r.get(&h.rank, "header");
  r.get(&h.size, "header");
  r.get(&h.node_id, "header");
  r.get(&h.page_size, "header");
  r.get(&h.ticks_per_us, "header");
  r.get(&tsc, "header");
  r.get(&h.sync_stamp, "header");
  r.str(&h.hostname, "hostname");
  r.str(&h.job_id, "job id");
  if (r.failed()) return fail("");
  h.tsc = tsc != 0;
  if (h.size <= 0 || h.size > kMaxRanks)
    return fail("corrupt: a job of " + std::to_string(h.size) + " ranks (1 to " +
                std::to_string(kMaxRanks) + ")");
  if (h.rank < 0 || h.rank >= h.size)
    return fail("corrupt: rank " + std::to_string(h.rank) + " of size " + std::to_string(h.size));
  if (h.page_size == 0 || (h.page_size & (h.page_size - 1)) != 0)
    return fail("corrupt: page size " + std::to_string(h.page_size) + " is not a power of two");
  if (!std::isfinite(h.ticks_per_us) || h.ticks_per_us <= 0.0)
    return fail("corrupt: clock rate " + std::to_string(h.ticks_per_us) + " ticks/us");

  std::uint32_t n = 0;
  if (!r.count(&n, kMinCallSite, "call-site count")) return fail("");
  t.callsites.resize(n);
  for (auto& cs : t.callsites) {
    std::uint32_t nf = 0;
    r.get(&cs.id, "call site");
    if (!r.count(&nf, kMinFrame, "frame count")) return fail("");
    if (nf > kMaxFrames)
      return fail("corrupt: a call site has " + std::to_string(nf) + " frames, more than " +
                  std::to_string(kMaxFrames));
    cs.frames.resize(nf);
    for (auto& f : cs.frames) {
      r.str(&f.module, "module name");
      r.get(&f.offset, "frame");
      r.str(&f.symbol, "symbol name");
    }
    if (r.failed()) return fail("");
  }

  if (!r.count(&n, kMinCall, "call count")) return fail("");
  t.calls.resize(n);
  for (std::size_t ci = 0; ci < t.calls.size(); ++ci) {
    auto& c = t.calls[ci];
    std::uint8_t op = 0;
    std::uint32_t nsub = 0;
    r.get(&op, "call");
    r.get(&c.flags, "call");
    r.get(&c.callsite, "call");
    r.get(&c.comm_size, "call");
    r.get(&c.start_stamp, "call");
    r.get(&c.tcomm, "call");
    r.get(&c.return_stamp, "call");
    if (r.failed()) return fail("");
    if (op < 1 || op > 3)
      return fail("corrupt: call " + std::to_string(ci) + " has unknown operation " +
                  std::to_string(op));
    c.op = static_cast<TracedOp>(op);
    if (c.flags > kCallTraced)
      return fail("corrupt: call " + std::to_string(ci) + " has unknown flags " +
                  std::to_string(c.flags));
    if (c.callsite >= t.callsites.size())
      return fail("corrupt: call " + std::to_string(ci) + " names call site " +
                  std::to_string(c.callsite) + " but the file has " +
                  std::to_string(t.callsites.size()));
    if (c.comm_size <= 0 || c.comm_size > kMaxRanks)
      return fail("corrupt: call " + std::to_string(ci) + " has communicator size " +
                  std::to_string(c.comm_size) + " (1 to " + std::to_string(kMaxRanks) + ")");
    if (!r.count(&nsub, kSubBytes, "sub-message count")) return fail("");
    c.subs.resize(nsub);
    for (auto& s : c.subs) {
      r.get(&s.offset, "sub-message");
      r.get(&s.size, "sub-message");
      r.get(&s.flags, "sub-message");
      if (r.failed()) return fail("");
      if (s.flags > 7)
        return fail("corrupt: call " + std::to_string(ci) + " has sub-message flags " +
                    std::to_string(s.flags));
      if (s.offset > UINT64_MAX - s.size)
        return fail("corrupt: call " + std::to_string(ci) +
                    " has a sub-message past the address space");
    }
  }

  if (!r.count(&n, kTouchBytes, "touch count")) return fail("");
  t.touches.resize(n);
  for (std::size_t ti = 0; ti < t.touches.size(); ++ti) {
    auto& x = t.touches[ti];
    r.get(&x.call, "touch");
    r.get(&x.sub, "touch");
    r.get(&x.stamp, "touch");
    r.get(&x.seq, "touch");
    r.get(&x.thread, "touch");
    if (r.failed()) return fail("");
    if (x.call >= t.calls.size() || x.sub >= t.calls[x.call].subs.size())
      return fail("corrupt: touch " + std::to_string(ti) + " names call " + std::to_string(x.call) +
                  " sub-message " + std::to_string(x.sub) + ", which does not exist");
  }
  char end[8];
  if (!r.get(&end, "end marker")) return fail("");
  if (std::memcmp(end, kEndMagic, sizeof end) != 0) return fail("corrupt: bad end marker");
  if (r.left() != 0)
    return fail("corrupt: " + std::to_string(r.left()) + " bytes after the end marker");
  result.trace = std::move(t);
  return result;
}

ReadResult read_trace(const std::string& path, std::uint64_t max_bytes) {
  ReadResult result;
  util::InputFile file(path, max_bytes);
  std::string data;
  // The prefix first: a file that is not a trace, or not whole, is refused before the rest of
  // it is read (a sparse file of gigabytes costs one read).
  if (file.read(kPrefix, data)) {
    auto head = std::as_bytes(std::span<const char>(data.data(), data.size()));
    if (auto problem = check_prefix(head, file.size())) {
      result.error = path + ": " + *problem;
      return result;
    }
    if (file.read(file.size() - data.size(), data))
      return parse_trace(std::as_bytes(std::span<const char>(data.data(), data.size())), path);
  }
  result.error = file.error();
  return result;
}

}  // namespace tnbc::trace
