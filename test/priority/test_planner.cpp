#include <catch2/catch.hpp>

#include "priority/planner.hpp"

using namespace tnbc::priority;

namespace {

// A site whose rank r reads the sub-messages in orders[r] (one call each, 10 µs apart).
CallSite reading_site(Op op, int comm, std::size_t n, std::vector<std::vector<std::size_t>> orders) {
  CallSite s;
  s.id = "app+0x10";
  s.op = op;
  s.frames = {"  solve\t(step)  ", "main"};
  s.messages = n;
  s.comm_size = comm;
  s.message_bytes = 4096;
  for (std::size_t r = 0; r < orders.size(); ++r) {
    CallRecord c;
    c.tcomm_us = 1000;
    c.touches.assign(n, FirstTouch::untouched());
    for (std::size_t k = 0; k < orders[r].size(); ++k)
      c.touches[orders[r][k]] = FirstTouch::at(10.0 * (k + 1));
    s.ranks.push_back(RankRecord{static_cast<int>(r), {c}});
  }
  return s;
}

}  // namespace

TEST_CASE("segment order: a segment ranks by the first read of its pieces", "[planner]") {
  std::vector<std::size_t> reversed{7, 6, 5, 4, 3, 2, 1, 0};
  CHECK(segment_order(reversed, 8, 4) == std::vector<std::uint32_t>{3, 2, 1, 0});
  // Pieces -> segments of 5: 0,0,1,1,2,3,3,4.
  CHECK(segment_order(reversed, 8, 5) == std::vector<std::uint32_t>{4, 3, 2, 1, 0});
  std::vector<std::size_t> some{2, 0, 1};
  CHECK(segment_order(some, 3, 2) == std::vector<std::uint32_t>{1, 0});
  CHECK(segment_order({}, 0, 3) == std::vector<std::uint32_t>{0, 1, 2});
}

TEST_CASE("an Alltoall site read in one order by all ranks gets that order, per-node on if asked",
          "[planner]") {
  std::vector<std::size_t> order{2, 0, 3, 1};
  PlannerOptions per_node;
  per_node.per_node = true;
  SitePlan plain = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}));
  REQUIRE(plain.entry);
  CHECK_FALSE(plain.entry->per_node);  // off unless asked
  SitePlan sp = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}), per_node);
  REQUIRE(sp.entry);
  CHECK(sp.entry->order == std::vector<std::uint32_t>{2, 0, 3, 1});
  CHECK(sp.entry->per_node);
  CHECK(sp.entry->comm_size == 4);
  CHECK(sp.entry->size_class == 12);
  CHECK(sp.entry->frames == std::vector<std::string>{"solve?(step)", "main"});
  CHECK(sp.entry->verdict == Verdict::crc);
  CHECK(sp.entry->agreement == 1.0);
  CHECK(sp.warnings.empty());

  // Half the ranks read in reverse: no per-node priority.
  std::vector<std::size_t> reverse{1, 3, 0, 2};
  SitePlan split = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, reverse, reverse}));
  REQUIRE(split.entry);
  CHECK_FALSE(split.entry->per_node);
}

TEST_CASE("a site read right after the call gets a deeper send window under per-node priority",
          "[planner]") {
  std::vector<std::size_t> order{2, 0, 3, 1};
  PlannerOptions per_node;
  per_node.per_node = true;
  // Read 10-40 us after a call of 1000 us: CRC.
  SitePlan crc = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}), per_node);
  REQUIRE(crc.entry);
  REQUIRE(crc.entry->verdict == Verdict::crc);
  CHECK(crc.entry->window == 8);
  CHECK(write_plan(Plan{{*crc.entry}}).find("  window 8\n") != std::string::npos);
  // Without per-node priority the window bounds nothing: not written.
  SitePlan plain = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}));
  REQUIRE(plain.entry);
  CHECK(plain.entry->window == 0);
  // Unrelated work first (first touch at 600 us or later of 1000): CURC, the configured window.
  CallSite late = reading_site(Op::alltoall, 4, 4, {order, order, order, order});
  for (auto& r : late.ranks)
    for (auto& t : r.calls[0].touches) t = FirstTouch::at(t.delay_us + 600);
  SitePlan curc = plan_site(late, per_node);
  REQUIRE(curc.entry);
  REQUIRE(curc.entry->verdict == Verdict::curc);
  CHECK(curc.entry->per_node);
  CHECK(curc.entry->window == 0);
  // The option's 0 writes none.
  per_node.read_at_once_window = 0;
  SitePlan off = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}), per_node);
  REQUIRE(off.entry);
  CHECK(off.entry->window == 0);
}

TEST_CASE("an Alltoallv site's entry fits every size class: each rank looks it up by its own", "[planner]") {
  std::vector<std::size_t> order{0, 1, 2, 3};
  PlannerOptions per_node;
  per_node.per_node = true;
  SitePlan sp = plan_site(reading_site(Op::alltoallv, 4, 4, {order, order, order, order}), per_node);
  REQUIRE(sp.entry);
  CHECK(sp.entry->size_class == -1);
  CHECK(sp.entry->per_node);
  // An Alltoall's entry keeps its class.
  SitePlan a = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}), per_node);
  REQUIRE(a.entry);
  CHECK(a.entry->size_class == 12);
}

TEST_CASE("a Bcast site gets the model's segment count and tree", "[planner]") {
  PlannerOptions options;
  options.loggp = LogGP{2, 1, 0, 0};
  std::vector<std::size_t> reversed{7, 6, 5, 4, 3, 2, 1, 0};
  SitePlan sp = plan_site(reading_site(Op::bcast, 17, 8, {reversed, reversed}), options);
  REQUIRE(sp.bcast);
  REQUIRE(sp.entry);
  CHECK(sp.entry->segments == 5);  // see test_cost_model: P = 17, 32 KiB
  CHECK(sp.entry->tree == TreeShape{});
  CHECK(sp.entry->order == std::vector<std::uint32_t>{4, 3, 2, 1, 0});
  CHECK_FALSE(sp.entry->per_node);
  // Looked up by the whole buffer (8 traced pieces of 4 KiB), as replay looks it up.
  CHECK(sp.entry->size_class == size_class(8 * 4096));
}

TEST_CASE("sites a plan cannot hold are skipped with a reason", "[planner]") {
  std::vector<std::string> warnings;
  Observations obs;
  obs.sites.push_back(reading_site(Op::alltoall, 8, 4, {{0, 1, 2, 3}}));
  obs.sites.push_back(reading_site(Op::alltoall, 4, 4, {{0, 1, 2, 3}}));
  obs.sites.push_back(reading_site(Op::alltoall, 4, 4, {{3, 2, 1, 0}}));
  obs.sites.back().id = "bad id";
  Plan plan = make_plan(obs, {}, &warnings);
  REQUIRE(plan.entries.size() == 1);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "app+0x10: 4 sub-messages but a communicator of 8; not planned");
  CHECK(warnings[1] ==
        "bad id: not planned (entry 1: site: an id is printable ASCII without spaces)");

  // What the planner writes, the parser reads back unchanged.
  auto parsed = parse_plan(write_plan(plan));
  REQUIRE(std::holds_alternative<Plan>(parsed));
  CHECK(std::get<Plan>(parsed) == plan);
}

TEST_CASE("a site read at once gets 'return blocking', one read late 'return early', one in between "
          "neither, and with the rules off none does",
          "[planner]") {
  std::vector<std::size_t> order{2, 0, 3, 1};
  // Read 10-40 us after the return of a 1000 us exchange: nothing to win.
  SitePlan at_once = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}));
  REQUIRE(at_once.entry);
  CHECK(at_once.prediction.plan_us < 0.1 * at_once.inputs.tcomm_us);
  CHECK(at_once.entry->ret == Return::blocking);
  PlannerOptions off;
  off.blocking_below = 0;
  off.early_above = 0;
  SitePlan kept = plan_site(reading_site(Op::alltoall, 4, 4, {order, order, order, order}), off);
  REQUIRE(kept.entry);
  CHECK(kept.entry->ret == Return::measure);
  auto read_after = [&](double us) {
    CallSite site = reading_site(Op::alltoall, 4, 4, {order, order, order, order});
    for (auto& r : site.ranks)
      for (auto& c : r.calls)
        for (auto& t : c.touches) t = FirstTouch::at(t.delay_us + us);
    return site;
  };
  // First read 900 us after the return: most of the exchange can overlap.
  SitePlan overlap = plan_site(read_after(900));
  REQUIRE(overlap.entry);
  CHECK(overlap.prediction.plan_us >= 0.5 * overlap.inputs.tcomm_us);
  CHECK(overlap.entry->ret == Return::early);
  CHECK(plan_site(read_after(900), off).entry->ret == Return::measure);
  // First read 250 us after: some overlap, too little to decide without measuring.
  SitePlan some = plan_site(read_after(250));
  REQUIRE(some.entry);
  REQUIRE(some.prediction.plan_us >= 0.1 * some.inputs.tcomm_us);
  REQUIRE(some.prediction.plan_us < 0.5 * some.inputs.tcomm_us);
  CHECK(some.entry->ret == Return::measure);
}

TEST_CASE("overlap_share: the predicted overlap as a share of Tcomm, none where nothing is read", "[planner]") {
  std::vector<std::size_t> order{2, 0, 3, 1};
  CallSite site = reading_site(Op::alltoall, 4, 4, {order});
  // Read 10-40 us after the return of a 1000 us exchange: a sliver.
  const auto at_once = overlap_share(plan_site(site));
  REQUIRE(at_once);
  CHECK(*at_once < 0.1);
  // The same reads 900 us later: most of the exchange.
  for (auto& c : site.ranks[0].calls)
    for (auto& t : c.touches) t = FirstTouch::at(t.delay_us + 900);
  const SitePlan late = plan_site(site);
  REQUIRE(overlap_share(late));
  CHECK(*overlap_share(late) == Approx(late.prediction.plan_us / late.inputs.tcomm_us));
  CHECK(*overlap_share(late) >= 0.5);
  // Nothing read: no share (a rank that never reads its data does not vote on room).
  for (auto& c : site.ranks[0].calls) c.touches.assign(4, FirstTouch::untouched());
  CHECK_FALSE(overlap_share(plan_site(site)));
  // Tcomm unknown: no share.
  CallSite no_tcomm = reading_site(Op::alltoall, 4, 4, {order});
  no_tcomm.ranks[0].calls[0].tcomm_us = 0;
  CHECK_FALSE(overlap_share(plan_site(no_tcomm)));
}
