#include "plan.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "util/checksum.hpp"

namespace tnbc::priority {

namespace {

constexpr int kMaxCommSize = 1 << 24;

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool is_printable(unsigned char c) { return c >= 0x20 && c <= 0x7e; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Tokens of a line, at most max_tokens of them: a hostile line of millions of short tokens must
// not cost 16 bytes of memory per 2 bytes of input before it is refused.
std::vector<std::string_view> split(std::string_view s, std::size_t max_tokens) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < s.size() && tokens.size() < max_tokens) {
    while (i < s.size() && is_space(s[i])) ++i;
    std::size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) tokens.push_back(s.substr(start, i - start));
  }
  return tokens;
}

// A plain decimal number (digits only) within [min, max].
std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t min,
                                          std::uint64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

// "checksum=" and exactly 16 lowercase hex digits (uppercase would let a flip of bit 5 of a
// letter through unnoticed).
std::optional<std::uint64_t> parse_checksum(std::string_view token) {
  if (!token.starts_with(kPlanChecksumKey)) return std::nullopt;
  std::string_view hex = token.substr(kPlanChecksumKey.size());
  if (hex.size() != 16) return std::nullopt;
  for (char c : hex)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  std::uint64_t value = 0;
  std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
  return value;
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  for (Verdict v : {Verdict::crc, Verdict::curc, Verdict::unread})
    if (text == to_string(v)) return v;
  return std::nullopt;
}

std::optional<std::string> check_site_id(std::string_view id) {
  if (id.empty()) return "site: empty id";
  if (id.size() > kMaxSiteIdBytes) return fmt::format("site: id longer than {} bytes", kMaxSiteIdBytes);
  for (unsigned char c : id) {
    if (c == '#') return std::string("site: '#' is not allowed in an id");
    if (!is_printable(c) || c == ' ') return std::string("site: an id is printable ASCII without spaces");
  }
  return std::nullopt;
}

std::optional<std::string> check_frame(std::string_view frame) {
  if (frame.empty()) return "frame: empty";
  for (unsigned char c : frame)
    if (!is_printable(c)) return std::string("frame: not printable ASCII");
  if (frame.front() == ' ' || frame.back() == ' ')
    return std::string("frame: leading or trailing space");
  return std::nullopt;
}

std::optional<std::string> check_order(const std::vector<std::uint32_t>& order) {
  if (order.empty()) return "order: expected at least one sub-message";
  if (order.size() > kMaxMessages)
    return fmt::format("order: more than {} sub-messages", kMaxMessages);
  std::vector<bool> seen(order.size(), false);
  for (std::uint32_t i : order) {
    if (i >= order.size())
      return fmt::format("order: sub-message {} out of range (the order lists {}, so 0 to {})", i,
                         order.size(), order.size() - 1);
    if (seen[i]) return fmt::format("order: sub-message {} listed twice", i);
    seen[i] = true;
  }
  return std::nullopt;
}

std::string describe_key(const PlanEntry& e) {
  return fmt::format("site {} {} comm={} class={}", e.site, to_string(e.op),
                     e.comm_size == 0 ? std::string("*") : std::to_string(e.comm_size),
                     e.size_class < 0 ? std::string("*") : std::to_string(e.size_class));
}

// Checks shared by the parser (at 'end') and validate_plan: everything about one entry beyond
// the syntax of its lines.
std::optional<std::string> check_entry(const PlanEntry& e) {
  if (auto error = check_site_id(e.site)) return error;
  if (e.comm_size < 0 || e.comm_size > kMaxCommSize)
    return fmt::format("site: comm size must be from 1 to {}", kMaxCommSize);
  if (e.size_class < -1 || e.size_class > kMaxSizeClass)
    return fmt::format("site: size class must be from 0 to {}", kMaxSizeClass);
  for (const auto& frame : e.frames)
    if (auto error = check_frame(frame)) return error;
  if (auto error = check_order(e.order)) return error;
  if (e.op == Op::bcast) {
    if (e.segments < 1 || e.segments > kMaxPlanSegments)
      return fmt::format("segments: expected a count from 1 to {}", kMaxPlanSegments);
    if (static_cast<std::size_t>(e.segments) != e.order.size())
      return fmt::format("segments {} but the order lists {} segments", e.segments, e.order.size());
    if (e.tree.kind == TreeKind::chains) {
      int max_k = e.comm_size > 1 ? e.comm_size - 1 : kMaxCommSize;
      if (e.tree.chains < 1 || e.tree.chains > max_k)
        return fmt::format("tree: chains must be from 1 to {}", max_k);
    } else if (e.tree.chains != 0) {
      return std::string("tree: a binomial tree has no chain count");
    }
  } else {
    if (e.segments != 0) return std::string("segments: only bcast entries have segments");
    if (e.tree != TreeShape{}) return std::string("tree: only bcast entries have a tree");
    if (e.comm_size > 0 && e.order.size() != static_cast<std::size_t>(e.comm_size))
      return fmt::format("order lists {} sub-messages but comm={} (one per rank)", e.order.size(),
                         e.comm_size);
  }
  if (e.window != 0) {
    if (e.op == Op::bcast) return std::string("window: only alltoall and alltoallv entries have a send window");
    if (e.window < 1 || e.window > kMaxPlanWindow)
      return fmt::format("window: expected a chunk count from 1 to {}", kMaxPlanWindow);
    if (!e.per_node) return std::string("window: the send window applies under per-node priority only (per-node on)");
  }
  if (e.agreement && !(*e.agreement >= 0 && *e.agreement <= 1))
    return std::string("agreement: expected a number from 0 to 1");
  return std::nullopt;
}

using EntryKey = std::tuple<std::string, Op, int, int>;
EntryKey key_of(const PlanEntry& e) { return {e.site, e.op, e.comm_size, e.size_class}; }

// Parser state for one entry under construction.
struct OpenEntry {
  PlanEntry entry;
  std::size_t line = 0;
  std::map<std::string, std::size_t, std::less<>> keys_seen;  // key -> line
};

}  // namespace

int size_class(std::uint64_t bytes) {
  int c = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++c;
  }
  return c;
}

std::vector<std::uint32_t> PlanEntry::priorities() const {
  std::vector<std::uint32_t> p(order.size(), 0);
  for (std::size_t pos = 0; pos < order.size(); ++pos)
    if (order[pos] < p.size()) p[order[pos]] = static_cast<std::uint32_t>(pos);
  return p;
}

const PlanEntry* Plan::find(std::string_view site, Op op, int comm_size,
                            std::uint64_t message_bytes) const {
  const int cls = size_class(message_bytes);
  const PlanEntry* best = nullptr;
  int best_score = -1;
  for (const PlanEntry& e : entries) {
    if (e.site != site || e.op != op) continue;
    if (e.comm_size != 0 && e.comm_size != comm_size) continue;
    if (e.size_class >= 0 && e.size_class != cls) continue;
    if (op != Op::bcast && e.order.size() != static_cast<std::size_t>(std::max(comm_size, 0)))
      continue;
    int score = (e.comm_size != 0 ? 2 : 0) + (e.size_class >= 0 ? 1 : 0);
    if (score > best_score) {
      best = &e;
      best_score = score;
    }
  }
  return best;
}

const PlanEntry* Plan::find(std::string_view site, Op op, int comm_size) const {
  const PlanEntry* best = nullptr;
  for (const PlanEntry& e : entries) {
    if (e.site != site || e.op != op) continue;
    if (e.comm_size != 0 && e.comm_size != comm_size) continue;
    if (op != Op::bcast && e.order.size() != static_cast<std::size_t>(std::max(comm_size, 0)))
      continue;
    if (!best || (best->comm_size == 0 && e.comm_size != 0)) best = &e;
  }
  return best;
}

std::string PlanError::to_string() const {
  return line == 0 ? message : fmt::format("line {}: {}", line, message);
}

std::optional<std::string> validate_plan(const Plan& plan) {
  std::map<EntryKey, std::size_t> seen;
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    if (auto error = check_entry(e)) return fmt::format("entry {}: {}", i + 1, *error);
    auto [it, inserted] = seen.emplace(key_of(e), i);
    if (!inserted)
      return fmt::format("entry {}: duplicate entry for {} (first: entry {})", i + 1,
                         describe_key(e), it->second + 1);
  }
  return std::nullopt;
}

std::string write_plan(const Plan& plan, const std::vector<std::string>& comments) {
  std::string out;
  for (const auto& c : comments) {
    std::string line = c;
    for (char& ch : line)
      if (!is_printable(static_cast<unsigned char>(ch))) ch = '?';
    out += line.empty() ? "#\n" : fmt::format("# {}\n", line);
  }
  for (const PlanEntry& e : plan.entries) {
    out += '\n';
    out += describe_key(e);
    out += '\n';
    for (const auto& frame : e.frames) out += fmt::format("  frame {}\n", frame);
    out += fmt::format("  order {}\n", fmt::join(e.order, " "));
    if (e.op == Op::bcast) {
      out += fmt::format("  segments {}\n", e.segments);
      if (e.tree.kind == TreeKind::chains)
        out += fmt::format("  tree chains {}\n", e.tree.chains);
      else
        out += "  tree binomial\n";
    }
    out += fmt::format("  per-node {}\n", e.per_node ? "on" : "off");
    if (e.window != 0) out += fmt::format("  window {}\n", e.window);
    if (e.ret != Return::measure) out += fmt::format("  return {}\n", to_string(e.ret));
    if (e.agreement) out += fmt::format("  agreement {}\n", *e.agreement);
    if (e.verdict) out += fmt::format("  verdict {}\n", to_string(*e.verdict));
    out += "end\n";
  }
  out += fmt::format("\nend-of-plan {}\n", plan.entries.size());
  return fmt::format("{} {} {}{:016x}\n", kPlanMagic, kPlanVersion, kPlanChecksumKey,
                     util::fnv1a64(out)) +
         out;
}

std::string_view to_string(Return r) {
  switch (r) {
    case Return::measure: return "measure";
    case Return::early: return "early";
    case Return::blocking: return "blocking";
  }
  return "measure";
}

namespace {

using Error = std::optional<std::string>;

/// The first line: magic, version, optional checksum of everything after it (`rest`).
Error check_first_line(std::string_view line, std::string_view rest, const std::string& magic_line) {
  auto tokens = split(line, 4);
  if (tokens.size() < 1 || tokens[0] != kPlanMagic)
    return fmt::format("not a tnbc plan (the first line must be '{}')", magic_line);
  if (tokens.size() == 2 || tokens.size() == 3) {
    auto version = parse_number(tokens[1], 1, std::numeric_limits<int>::max());
    if (version && *version < kPlanVersion)
      return fmt::format("plan format version {} was written by an older tnbc (this "
                         "library reads version {}): run tnbc-order plan again, or, "
                         "for a plan written by hand, make the first line '{}'",
                         *version, kPlanVersion, magic_line);
    if (tokens[1] != std::to_string(kPlanVersion))
      return fmt::format("plan format version '{}' is not supported (this library "
                         "reads version {})",
                         tokens[1], kPlanVersion);
  }
  if (tokens.size() == 3) {
    auto sum = parse_checksum(tokens[2]);
    if (!sum)
      return fmt::format("malformed checksum '{}' (expected {}<16 lowercase hex digits>)", tokens[2],
                         kPlanChecksumKey);
    if (*sum != util::fnv1a64(rest))
      return fmt::format("the checksum does not match the content: the plan was damaged, "
                         "or edited without removing '{}' from the first line",
                         tokens[2]);
  } else if (tokens.size() != 2) {
    return fmt::format("malformed first line (expected '{}')", magic_line);
  }
  return std::nullopt;
}

/// A 'site <id> <op> comm=<size|*> class=<class|*>' line opens an entry.
std::variant<OpenEntry, std::string> parse_site(const std::vector<std::string_view>& tokens, std::size_t line_no) {
  if (tokens.size() != 5 || tokens[3].substr(0, 5) != "comm=" || tokens[4].substr(0, 6) != "class=")
    return std::string("site: expected 'site <id> <op> comm=<size|*> class=<class|*>'");
  OpenEntry entry;
  entry.line = line_no;
  entry.entry.site = std::string(tokens[1]);
  if (auto error = check_site_id(tokens[1])) return *error;
  auto op = parse_op(tokens[2]);
  if (!op)
    return fmt::format("site: unknown operation '{}' (expected alltoall, alltoallv or bcast)", tokens[2]);
  entry.entry.op = *op;
  std::string_view comm = tokens[3].substr(5), cls = tokens[4].substr(6);
  if (comm != "*") {
    auto n = parse_number(comm, 1, kMaxCommSize);
    if (!n) return fmt::format("site: comm must be * or a size from 1 to {}", kMaxCommSize);
    entry.entry.comm_size = static_cast<int>(*n);
  }
  if (cls != "*") {
    auto n = parse_number(cls, 0, kMaxSizeClass);
    if (!n) return fmt::format("site: class must be * or a number from 0 to {}", kMaxSizeClass);
    entry.entry.size_class = static_cast<int>(*n);
  }
  return entry;
}

/// One key line inside an entry (frame, order, segments, tree, per-node, window, return,
/// agreement, verdict) applied to `e`.  `content` is the trimmed line, `tokens` its words.
Error parse_entry_line(std::string_view content, const std::vector<std::string_view>& tokens, PlanEntry& e) {
  const std::string_view key = tokens[0];
  const std::size_t args = tokens.size() - 1;
  if (key == "frame") {
    std::string_view rest = trim(content.substr(5));
    if (content.size() <= 5 || !is_space(content[5]) || rest.empty()) return "frame: expected 'frame <symbol>'";
    e.frames.emplace_back(rest);
  } else if (key == "order") {
    if (args == 0) return "order: expected at least one sub-message";
    if (args > kMaxMessages) return fmt::format("order: more than {} sub-messages", kMaxMessages);
    e.order.reserve(args);
    for (std::size_t i = 1; i < tokens.size(); ++i) {
      auto n = parse_number(tokens[i], 0, std::numeric_limits<std::uint32_t>::max());
      if (!n) return fmt::format("order: '{}' is not a sub-message number", tokens[i]);
      e.order.push_back(static_cast<std::uint32_t>(*n));
    }
    if (auto error = check_order(e.order)) return *error;
  } else if (key == "segments") {
    if (e.op != Op::bcast) return "segments: only bcast entries have segments";
    auto n = args == 1 ? parse_number(tokens[1], 1, kMaxPlanSegments) : std::nullopt;
    if (!n) return fmt::format("segments: expected a count from 1 to {}", kMaxPlanSegments);
    e.segments = static_cast<int>(*n);
  } else if (key == "tree") {
    if (e.op != Op::bcast) return "tree: only bcast entries have a tree";
    if (args == 1 && tokens[1] == "binomial") {
      e.tree = TreeShape{};
    } else if (args == 2 && tokens[1] == "chains") {
      auto k = parse_number(tokens[2], 1, kMaxCommSize);
      if (!k) return fmt::format("tree: chains must be from 1 to {}", kMaxCommSize);
      e.tree = TreeShape{TreeKind::chains, static_cast<int>(*k)};
    } else {
      return "tree: expected 'binomial' or 'chains <k>'";
    }
  } else if (key == "per-node") {
    if (args != 1 || (tokens[1] != "on" && tokens[1] != "off")) return "per-node: expected on or off";
    e.per_node = tokens[1] == "on";
  } else if (key == "window") {
    if (e.op == Op::bcast) return "window: only alltoall and alltoallv entries have a send window";
    auto n = args == 1 ? parse_number(tokens[1], 1, kMaxPlanWindow) : std::nullopt;
    if (!n) return fmt::format("window: expected a chunk count from 1 to {}", kMaxPlanWindow);
    e.window = static_cast<int>(*n);
  } else if (key == "return") {
    if (args != 1 || (tokens[1] != "early" && tokens[1] != "blocking")) return "return: expected early or blocking";
    e.ret = tokens[1] == "early" ? Return::early : Return::blocking;
  } else if (key == "agreement") {
    double value = -1;
    bool ok = args == 1;
    if (ok) {
      std::string_view v = tokens[1];
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
      ok = ec == std::errc() && end == v.data() + v.size() && value >= 0 && value <= 1;
    }
    if (!ok) return "agreement: expected a number from 0 to 1";
    e.agreement = value;
  } else if (key == "verdict") {
    auto v = args == 1 ? parse_verdict(tokens[1]) : std::nullopt;
    if (!v) return "verdict: expected crc, curc or unread";
    e.verdict = *v;
  } else {
    return fmt::format("unknown key '{}'", key);
  }
  return std::nullopt;
}

/// The keys an entry must have before its 'end'.
Error check_complete(const OpenEntry& open) {
  const PlanEntry& e = open.entry;
  for (std::string_view k : {"order", "segments", "tree", "per-node"}) {
    const bool needed = (k != "segments" && k != "tree") || e.op == Op::bcast;
    if (needed && !open.keys_seen.count(std::string(k)))
      return fmt::format("the entry opened at line {} has no '{}'", open.line, k);
  }
  return check_entry(e);
}

}  // namespace

std::variant<Plan, PlanError> parse_plan(std::string_view text) {
  if (text.size() > kMaxPlanBytes)
    return PlanError{0, fmt::format("plan larger than {} bytes", kMaxPlanBytes)};
  const std::string magic_line = fmt::format("{} {}", kPlanMagic, kPlanVersion);
  if (text.empty()) return PlanError{1, fmt::format("empty file; a plan starts with '{}'", magic_line)};
  // Foreign files (binary or not) get this message rather than one about their bytes.
  if (!text.starts_with(kPlanMagic) ||
      (text.size() > kPlanMagic.size() && !is_space(text[kPlanMagic.size()]) &&
       text[kPlanMagic.size()] != '\n'))
    return PlanError{1, fmt::format("not a tnbc plan (the first line must be '{}')", magic_line)};

  Plan plan;
  std::map<EntryKey, std::size_t> entry_lines;  // key -> line of its 'site'
  std::optional<OpenEntry> open;
  std::optional<std::size_t> trailer_line;
  std::size_t line_no = 0;
  std::size_t pos = 0;

  while (pos < text.size()) {
    ++line_no;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos)
      return PlanError{line_no, "last line has no newline (truncated plan?)"};
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto fail = [&](std::string message) -> std::variant<Plan, PlanError> {
      return PlanError{line_no, std::move(message)};
    };

    for (std::size_t col = 0; col < line.size(); ++col) {
      unsigned char c = static_cast<unsigned char>(line[col]);
      if (!is_printable(c) && c != '\t')
        return fail(fmt::format("byte 0x{:02x} at column {} is not printable ASCII", c, col + 1));
    }

    if (line_no == 1) {
      if (auto error = check_first_line(line, text.substr(pos), magic_line)) return fail(*error);
      continue;
    }

    std::string_view content = trim(line);
    if (content.empty() || content.front() == '#') continue;
    if (trailer_line) return fail("content after 'end-of-plan'");

    // Enough for an order line one token too long (refused below), more than any other key needs.
    auto tokens = split(content, kMaxMessages + 2);
    std::string_view key = tokens[0];
    std::size_t args = tokens.size() - 1;

    if (!open) {
      if (key == "site") {
        auto entry = parse_site(tokens, line_no);
        if (auto* error = std::get_if<std::string>(&entry)) return fail(*error);
        open = std::move(std::get<OpenEntry>(entry));
        continue;
      }
      if (key == "end-of-plan") {
        auto n = args == 1 ? parse_number(tokens[1], 0, std::numeric_limits<std::uint32_t>::max())
                           : std::nullopt;
        if (!n) return fail("end-of-plan: expected the number of entries");
        if (*n != plan.entries.size())
          return fail(fmt::format("end-of-plan says {} entries but the plan has {}", *n,
                                  plan.entries.size()));
        trailer_line = line_no;
        continue;
      }
      return fail(fmt::format("unexpected '{}' outside a site entry", key));
    }

    // Inside an entry.
    if (key == "site" || key == "end-of-plan")
      return fail(fmt::format("'{}' inside the entry opened at line {} (missing 'end')", key,
                              open->line));
    if (key == "end") {
      if (args != 0) return fail("end: takes no argument");
      if (auto error = check_complete(*open)) return fail(*error);
      auto [it, inserted] = entry_lines.emplace(key_of(open->entry), open->line);
      if (!inserted)
        return PlanError{open->line, fmt::format("duplicate entry for {} (first at line {})",
                                                 describe_key(open->entry), it->second)};
      plan.entries.push_back(std::move(open->entry));
      open.reset();
      continue;
    }
    if (key != "frame") {
      auto [it, inserted] = open->keys_seen.emplace(std::string(key), line_no);
      if (!inserted && (key == "order" || key == "segments" || key == "tree" ||
                        key == "per-node" || key == "window" || key == "return" || key == "agreement" ||
                        key == "verdict"))
        return fail(fmt::format("duplicate '{}' (first at line {})", key, it->second));
    }
    if (auto error = parse_entry_line(content, tokens, open->entry)) return fail(*error);
  }

  if (open)
    return PlanError{line_no + 1,
                     fmt::format("unexpected end of file inside the entry opened at line {} "
                                 "(truncated plan?)",
                                 open->line)};
  if (!trailer_line)
    return PlanError{line_no + 1, "unexpected end of file: no 'end-of-plan' line (truncated plan?)"};
  return plan;
}

}  // namespace tnbc::priority
