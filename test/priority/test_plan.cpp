#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "priority/plan.hpp"
#include "test/bit_flips.hpp"
#include "util/checksum.hpp"

using namespace tnbc::priority;

namespace {

Plan sample_plan() {
  Plan plan;
  PlanEntry a;
  a.site = "app+0x1a2b;libapp.so+0x40";
  a.op = Op::alltoall;
  a.comm_size = 4;
  a.size_class = 16;
  a.frames = {"fft_transpose(double*, int)", "main"};
  a.order = {2, 0, 3, 1};
  a.per_node = true;
  a.agreement = 0.9375;
  a.verdict = Verdict::crc;
  PlanEntry b;
  b.site = "app+0x99";
  b.op = Op::bcast;
  b.order = {3, 1, 2, 0};
  b.segments = 4;
  b.tree = TreeShape{TreeKind::chains, 3};
  PlanEntry c = a;
  c.op = Op::alltoallv;
  c.comm_size = 0;
  c.size_class = -1;
  c.frames.clear();
  c.agreement = 0.1;
  c.verdict = std::nullopt;
  c.per_node = false;
  plan.entries = {a, b, c};
  return plan;
}

// Parses text that must be refused; returns the error as "line N: message".
std::string error_of(std::string_view text) {
  auto result = parse_plan(text);
  const PlanError* error = std::get_if<PlanError>(&result);
  return error ? error->to_string() : "(parsed)";
}

const std::string kHead = "tnbc-plan 2\n";
const std::string kEntry =
    "site s1 alltoall comm=4 class=*\n"
    "  order 0 1 2 3\n"
    "  per-node off\n"
    "end\n";

}  // namespace

TEST_CASE("writer and parser round-trip exactly", "[plan]") {
  Plan plan = sample_plan();
  REQUIRE_FALSE(validate_plan(plan));
  std::string text = write_plan(plan, {"generated for a test", "two comment lines"});
  auto parsed = parse_plan(text);
  REQUIRE(std::holds_alternative<Plan>(parsed));
  CHECK(std::get<Plan>(parsed) == plan);
  CHECK(write_plan(std::get<Plan>(parsed), {"generated for a test", "two comment lines"}) == text);
}

TEST_CASE("the written form is the documented one", "[plan]") {
  Plan plan;
  plan.entries = {sample_plan().entries[1]};
  const std::string body =
        "# hello\n"
        "\n"
        "site app+0x99 bcast comm=* class=*\n"
        "  order 3 1 2 0\n"
        "  segments 4\n"
        "  tree chains 3\n"
        "  per-node off\n"
        "end\n"
        "\n"
        "end-of-plan 1\n";
  CHECK(write_plan(plan, {"hello"}) ==
        fmt::format("tnbc-plan 2 checksum={:016x}\n", tnbc::util::fnv1a64(body)) + body);
}

TEST_CASE("an empty plan is valid", "[plan]") {
  auto parsed = parse_plan("tnbc-plan 2\nend-of-plan 0\n");
  REQUIRE(std::holds_alternative<Plan>(parsed));
  CHECK(std::get<Plan>(parsed).entries.empty());
}

TEST_CASE("comments, blank lines and indentation are free", "[plan]") {
  auto parsed = parse_plan(
      "tnbc-plan 2\n# a comment\n\n  # indented comment\nsite s1 alltoall comm=* class=3\n"
      "\torder   1 0\n# inside\nper-node on\n   end   \nend-of-plan 1\n# trailing\n\n");
  REQUIRE(std::holds_alternative<Plan>(parsed));
  const Plan& plan = std::get<Plan>(parsed);
  REQUIRE(plan.entries.size() == 1);
  CHECK(plan.entries[0].order == std::vector<std::uint32_t>{1, 0});
  CHECK(plan.entries[0].size_class == 3);
  CHECK(plan.entries[0].per_node);
  CHECK(plan.entries[0].priorities() == std::vector<std::uint32_t>{1, 0});
}

TEST_CASE("lookup: site and op must match, an exact comm size and class beat '*'", "[plan]") {
  Plan plan = sample_plan();
  PlanEntry any_comm = plan.entries[0];
  any_comm.comm_size = 0;
  any_comm.size_class = 16;
  plan.entries.push_back(any_comm);
  REQUIRE_FALSE(validate_plan(plan));

  const std::string site = "app+0x1a2b;libapp.so+0x40";
  CHECK(plan.find(site, Op::alltoall, 4, 65536) == &plan.entries[0]);
  CHECK(plan.find(site, Op::alltoall, 4, 1 << 20) == nullptr);  // class 20: no entry
  CHECK(plan.find(site, Op::alltoall, 8, 65536) == nullptr);    // '*' entry has 4 messages
  CHECK(plan.find(site, Op::alltoallv, 4, 12) == &plan.entries[2]);
  CHECK(plan.find(site, Op::bcast, 4, 65536) == nullptr);
  CHECK(plan.find("other", Op::alltoall, 4, 65536) == nullptr);
  CHECK(plan.find("app+0x99", Op::bcast, 1000, 1) == &plan.entries[1]);
  CHECK(plan.find(site, Op::alltoall, 4) == &plan.entries[0]);
  CHECK(plan.entries[0].priorities() == std::vector<std::uint32_t>{1, 3, 0, 2});
  CHECK(size_class(0) == 0);
  CHECK(size_class(1) == 0);
  CHECK(size_class(65535) == 15);
  CHECK(size_class(65536) == 16);
}

TEST_CASE("parser errors name the line and say exactly what is wrong", "[plan]") {
  SECTION("wrong magic") {
    CHECK(error_of("tnbc-trace 1\n") ==
          "line 1: not a tnbc plan (the first line must be 'tnbc-plan 2')");
    CHECK(error_of("\x7f" "ELF\x02\x01") ==
          "line 1: not a tnbc plan (the first line must be 'tnbc-plan 2')");
    CHECK(error_of("") == "line 1: empty file; a plan starts with 'tnbc-plan 2'");
  }
  SECTION("foreign version") {
    CHECK(error_of("tnbc-plan 3\nend-of-plan 0\n") ==
          "line 1: plan format version '3' is not supported (this library reads version 2)");
    CHECK(error_of("tnbc-plan 1\nend-of-plan 0\n") ==
          "line 1: plan format version 1 was written by an older tnbc (this library reads version "
          "2): run tnbc-order plan again, or, for a plan written by hand, make the first line "
          "'tnbc-plan 2'");
    CHECK(error_of("tnbc-plan\n") == "line 1: malformed first line (expected 'tnbc-plan 2')");
  }
  SECTION("bad lines") {
    CHECK(error_of(kHead + "order 1\n") == "line 2: unexpected 'order' outside a site entry");
    CHECK(error_of(kHead + "site s1 alltoall comm=4\n") ==
          "line 2: site: expected 'site <id> <op> comm=<size|*> class=<class|*>'");
    CHECK(error_of(kHead + "site s1 reduce comm=4 class=*\n") ==
          "line 2: site: unknown operation 'reduce' (expected alltoall, alltoallv or bcast)");
    CHECK(error_of(kHead + "site s1 alltoall comm=0 class=*\n") ==
          "line 2: site: comm must be * or a size from 1 to 16777216");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=64\n") ==
          "line 2: site: class must be * or a number from 0 to 63");
    CHECK(error_of(kHead + "site a#b alltoall comm=4 class=*\n") ==
          "line 2: site: '#' is not allowed in an id");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  orders 1\n") ==
          "line 3: unknown key 'orders'");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 x 1 2\n") ==
          "line 3: order: 'x' is not a sub-message number");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 1 2\n") ==
          "line 3: order: sub-message 1 listed twice");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  per-node yes\n") ==
          "line 3: per-node: expected on or off");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  segments 2\n") ==
          "line 3: segments: only bcast entries have segments");
    CHECK(error_of(kHead + "site s1 bcast comm=4 class=*\n  tree ternary\n") ==
          "line 3: tree: expected 'binomial' or 'chains <k>'");
    CHECK(error_of(kHead + "site s1 bcast comm=4 class=*\n  segments 65\n") ==
          "line 3: segments: expected a count from 1 to 64");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  agreement 1.5\n") ==
          "line 3: agreement: expected a number from 0 to 1");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  verdict maybe\n") ==
          "line 3: verdict: expected crc, curc or unread");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 2\n  per-node on\nend\n") ==
          "line 5: order lists 3 sub-messages but comm=4 (one per rank)");
    CHECK(error_of(kHead + "site s1 bcast comm=4 class=*\n  order 0 1 2\n  segments 2\n"
                           "  tree chains 3\n  per-node on\nend\n") ==
          "line 7: segments 2 but the order lists 3 segments");
    CHECK(error_of(kHead + "site s1 bcast comm=4 class=*\n  order 0\n  segments 1\n"
                           "  tree chains 4\n  per-node on\nend\n") ==
          "line 7: tree: chains must be from 1 to 3");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 2 3\nend\n") ==
          "line 4: the entry opened at line 2 has no 'per-node'");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\nsite s2 alltoall comm=4 class=*\n") ==
          "line 3: 'site' inside the entry opened at line 2 (missing 'end')");
    CHECK(error_of(kHead + "end-of-plan 0\nsite s1 alltoall comm=4 class=*\n") ==
          "line 3: content after 'end-of-plan'");
    CHECK(error_of(kHead + kEntry + "end-of-plan 2\n") ==
          "line 6: end-of-plan says 2 entries but the plan has 1");
    CHECK(error_of(kHead + "# caf\xc3\xa9\n") ==
          "line 2: byte 0xc3 at column 6 is not printable ASCII");
    CHECK(error_of(kHead + "end-of-plan 0\r\n") ==
          "line 2: byte 0x0d at column 14 is not printable ASCII");
  }
  SECTION("duplicate key") {
    CHECK(error_of(kHead + kEntry + kEntry + "end-of-plan 2\n") ==
          "line 6: duplicate entry for site s1 alltoall comm=4 class=* (first at line 2)");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 2 3\n  order 0 1 2 3\n") ==
          "line 4: duplicate 'order' (first at line 3)");
  }
  SECTION("out-of-range priority") {
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 4 2\n") ==
          "line 3: order: sub-message 4 out of range (the order lists 4, so 0 to 3)");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 99999999999999999999999 2\n") ==
          "line 3: order: '99999999999999999999999' is not a sub-message number");
  }
  SECTION("size bounds") {
    CHECK(error_of(std::string(kMaxPlanBytes + 1, 'x')) == "plan larger than 16777216 bytes");
    std::string huge = kHead + "site s1 alltoall comm=* class=*\n  order";
    for (std::size_t i = 0; i <= kMaxMessages; ++i) huge += " 0";
    CHECK(error_of(huge + "\n") == "line 3: order: more than 1048576 sub-messages");
  }
  SECTION("truncated file") {
    std::string full = kHead + kEntry + "end-of-plan 1\n";
    CHECK(error_of(full.substr(0, full.size() - 1)) ==
          "line 6: last line has no newline (truncated plan?)");
    CHECK(error_of(kHead + kEntry) ==
          "line 6: unexpected end of file: no 'end-of-plan' line (truncated plan?)");
    CHECK(error_of(kHead + "site s1 alltoall comm=4 class=*\n  order 0 1 2 3\n") ==
          "line 4: unexpected end of file inside the entry opened at line 2 (truncated plan?)");
    // Every proper prefix of a valid plan is refused.
    for (std::size_t n = 0; n < full.size(); ++n) {
      INFO("prefix of " << n << " bytes");
      CHECK_FALSE(std::holds_alternative<Plan>(parse_plan(full.substr(0, n))));
    }
  }
}

TEST_CASE("validate_plan refuses what the parser would refuse", "[plan]") {
  Plan plan = sample_plan();
  plan.entries[0].order = {0, 1, 2, 2};
  CHECK(validate_plan(plan) == "entry 1: order: sub-message 2 listed twice");
  plan = sample_plan();
  plan.entries.push_back(plan.entries[1]);
  CHECK(validate_plan(plan) ==
        "entry 4: duplicate entry for site app+0x99 bcast comm=* class=* (first: entry 2)");
  plan = sample_plan();
  plan.entries[0].frames = {" padded"};
  CHECK(validate_plan(plan) == "entry 1: frame: leading or trailing space");
  plan = sample_plan();
  plan.entries[0].site = "has space";
  CHECK(validate_plan(plan) == "entry 1: site: an id is printable ASCII without spaces");
}

TEST_CASE("'return early|blocking' forces the path; absent means measure; written only when set",
          "[plan]") {
  const std::string head = "tnbc-plan 2\nsite s1 alltoall comm=2 class=*\n  order 0 1\n  per-node off\n";
  auto parsed = parse_plan(head + "  return blocking\nend\nend-of-plan 1\n");
  REQUIRE(std::holds_alternative<Plan>(parsed));
  const Plan& p = std::get<Plan>(parsed);
  CHECK(p.entries[0].ret == Return::blocking);
  CHECK(write_plan(p).find("  return blocking\n") != std::string::npos);
  auto early = parse_plan(head + "  return early\nend\nend-of-plan 1\n");
  REQUIRE(std::holds_alternative<Plan>(early));
  CHECK(std::get<Plan>(early).entries[0].ret == Return::early);
  auto none = parse_plan(head + "end\nend-of-plan 1\n");
  REQUIRE(std::holds_alternative<Plan>(none));
  CHECK(std::get<Plan>(none).entries[0].ret == Return::measure);
  CHECK(write_plan(std::get<Plan>(none)).find("return") == std::string::npos);
  CHECK(error_of(head + "  return sometimes\nend\nend-of-plan 1\n") == "line 5: return: expected early or blocking");
  CHECK(error_of(head + "  return early\n  return blocking\nend\nend-of-plan 1\n") ==
        "line 6: duplicate 'return' (first at line 5)");
}

TEST_CASE("'window N' gives an Alltoall(v) entry with per-node priority its send window", "[plan]") {
  const std::string head = "tnbc-plan 2\nsite s1 alltoall comm=2 class=*\n  order 0 1\n";
  auto parsed = parse_plan(head + "  per-node on\n  window 8\nend\nend-of-plan 1\n");
  REQUIRE(std::holds_alternative<Plan>(parsed));
  const Plan& p = std::get<Plan>(parsed);
  CHECK(p.entries[0].window == 8);
  CHECK(write_plan(p).find("  per-node on\n  window 8\n") != std::string::npos);
  REQUIRE(std::holds_alternative<Plan>(parse_plan(write_plan(p))));
  CHECK(std::get<Plan>(parse_plan(write_plan(p))) == p);
  // Absent: 0, TNBC_CHUNK_WINDOW; not written.
  auto none = parse_plan(head + "  per-node on\nend\nend-of-plan 1\n");
  REQUIRE(std::holds_alternative<Plan>(none));
  CHECK(std::get<Plan>(none).entries[0].window == 0);
  CHECK(write_plan(std::get<Plan>(none)).find("window") == std::string::npos);
  // Either order of the lines; checked at 'end'.
  CHECK(std::holds_alternative<Plan>(parse_plan(head + "  window 254\n  per-node on\nend\nend-of-plan 1\n")));
  CHECK(error_of(head + "  per-node on\n  window 0\nend\nend-of-plan 1\n") ==
        "line 5: window: expected a chunk count from 1 to 254");
  CHECK(error_of(head + "  per-node on\n  window 255\nend\nend-of-plan 1\n") ==
        "line 5: window: expected a chunk count from 1 to 254");
  CHECK(error_of(head + "  per-node on\n  window 2 4\nend\nend-of-plan 1\n") ==
        "line 5: window: expected a chunk count from 1 to 254");
  CHECK(error_of(head + "  per-node on\n  window 8\n  window 2\nend\nend-of-plan 1\n") ==
        "line 6: duplicate 'window' (first at line 5)");
  CHECK(error_of(head + "  per-node off\n  window 8\nend\nend-of-plan 1\n") ==
        "line 6: window: the send window applies under per-node priority only (per-node on)");
  CHECK(error_of("tnbc-plan 2\nsite app+0x1 bcast comm=* class=*\n  order 0\n  segments 1\n  tree binomial\n"
                 "  per-node off\n  window 8\nend\nend-of-plan 1\n") ==
        "line 7: window: only alltoall and alltoallv entries have a send window");
  // validate_plan holds a built plan to the same rules.
  Plan built = p;
  built.entries[0].per_node = false;
  CHECK(validate_plan(built) == "entry 1: window: the send window applies under per-node priority only (per-node on)");
}

TEST_CASE("the checksum: written always, checked when present, optional by hand", "[plan]") {
  const std::string text = write_plan(sample_plan(), {"a comment"});
  const std::size_t nl = text.find('\n');
  REQUIRE(text.substr(0, nl).starts_with("tnbc-plan 2 checksum="));
  REQUIRE(std::holds_alternative<Plan>(parse_plan(text)));
  // Without the checksum (written or edited by hand): the same plan.
  auto bare = parse_plan("tnbc-plan 2" + text.substr(nl));
  REQUIRE(std::holds_alternative<Plan>(bare));
  CHECK(std::get<Plan>(bare) == sample_plan());
  // Edited with the checksum left in: refused, saying what to do.
  std::string edited = text;
  edited.replace(edited.find("per-node on"), 11, "per-node off");
  const std::string sum = text.substr(text.find("checksum="), 9 + 16);
  CHECK(error_of(edited) == "line 1: the checksum does not match the content: the plan was "
                            "damaged, or edited without removing '" + sum +
                            "' from the first line");
  CHECK(error_of("tnbc-plan 2 checksum=12\nend-of-plan 0\n") ==
        "line 1: malformed checksum 'checksum=12' (expected checksum=<16 lowercase hex digits>)");
  CHECK(error_of("tnbc-plan 2 checksum=ABCDEF0123456789\nend-of-plan 0\n") ==
        "line 1: malformed checksum 'checksum=ABCDEF0123456789' (expected checksum=<16 lowercase "
        "hex digits>)");
  CHECK(error_of("tnbc-plan 2 checksum=0 x\nend-of-plan 0\n") ==
        "line 1: malformed first line (expected 'tnbc-plan 2')");
}

TEST_CASE("every single bit flip of a written plan is refused, quickly", "[plan]") {
  const std::string text = write_plan(sample_plan(), {"a comment"});
  auto start = std::chrono::steady_clock::now();
  auto accepted = tnbc::test::accepted_bit_flips(
      text, [](const std::string& b) { return std::holds_alternative<Plan>(parse_plan(b)); });
  for (const auto& f : accepted) UNSCOPED_INFO("accepted: bit " << f.bit << " of byte " << f.byte);
  CHECK(accepted.empty());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}
