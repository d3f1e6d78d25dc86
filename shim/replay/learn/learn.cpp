// Online learning of the first-touch order (learn.hpp).
#include "learn.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "shim/fence.hpp"
#include "shim/io_interpose.hpp"
#include "shim/log.hpp"
#include "priority/consensus.hpp"
#include "priority/planner.hpp"
#include "shim/observe/tsc_clock.hpp"
#include "util/clock.hpp"
#include "util/file.hpp"
#include "util/hash.hpp"
#include "util/json.hpp"

namespace tnbc::shim::replay::learn {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// Observed calls waiting for their key's next learn point, at most (more are not observed).
constexpr std::size_t kMaxPending = 64;

bool g_enabled = false;
bool g_turns = true;  // TNBC_LEARN_PER_NODE
std::string g_plan_out;
observe::TscClock g_clock;
std::atomic<int> g_live{0};  // calls with protected pages (the guard's counter)
std::unique_ptr<observe::PageGuard> g_guard;
// While observed calls may guard pages, learning holds one count of g_in_flight, so that every
// fenced MPI call reaches drain() (fence.hpp).
std::atomic<bool> g_holding{false};
void hold() {
  if (!g_holding.exchange(true, std::memory_order_acq_rel)) g_in_flight.fetch_add(1, std::memory_order_acq_rel);
}
void unhold() {
  if (g_holding.exchange(false, std::memory_order_acq_rel)) g_in_flight.fetch_sub(1, std::memory_order_acq_rel);
}

/// One observed call, until the next learn point turns it into a record.
struct Pending {
  SiteLearning* site;
  const observe::GuardedCall* call;
  std::uint64_t return_stamp;
  double tcomm_us;
};
std::mutex g_mutex;  // g_pending, g_keys (the calling threads; never the fault handler)
std::vector<Pending> g_pending;
std::vector<KeyLearning*> g_keys;
std::uint32_t g_next_index = 0;

/// What the guard saw of one call, as trace mode's reader turns a traced call into a record
/// (tools/trace_observations.cpp): overwritten unread counts as untouched.
priority::CallRecord to_record(const Pending& p, double ticks_per_us) {
  priority::CallRecord rec;
  rec.tcomm_us = p.tcomm_us;
  rec.touches.reserve(p.call->sub_count());
  for (std::size_t i = 0; i < p.call->sub_count(); ++i) {
    const auto outcome = p.call->outcome(i);
    if (outcome == observe::Outcome::touched) {
      if (auto t = p.call->touch(i)) {
        const double delay = t->stamp > p.return_stamp && ticks_per_us > 0
                                 ? static_cast<double>(t->stamp - p.return_stamp) / ticks_per_us
                                 : 0.0;
        rec.touches.push_back(priority::FirstTouch::at(delay));
        continue;
      }
    }
    if (p.call->observable(i) && (outcome == observe::Outcome::untouched || outcome == observe::Outcome::released))
      rec.touches.push_back(priority::FirstTouch::untouched());
    else
      rec.touches.push_back(priority::FirstTouch::unobserved());
  }
  return rec;
}

/// Opens every guarded page and moves every observed call into its site's records.
void settle() {
  std::lock_guard lock(g_mutex);
  if (!g_guard) return;
  g_guard->release_all();
  g_clock.end();  // the rate over the run so far
  const double tpu = g_clock.ticks_per_us();
  for (const Pending& p : g_pending) {
    SiteLearning& s = *p.site;
    s.records.push_back(to_record(p, tpu));
    ++s.observed;
    while (s.records.size() > kWindow) s.records.pop_front();
  }
  g_pending.clear();
  g_guard->reset();
  unhold();
}

SiteLearning* find_site(KeyLearning& k, std::uint64_t hash) {
  for (SiteLearning& s : k.sites)
    if (s.hash == hash) return &s;
  return nullptr;
}

}  // namespace

bool start(const config::Config& cfg) {
  g_enabled = cfg.learn && cfg.adapt != config::Adapt::off;
  g_turns = cfg.learn_per_node;
  g_plan_out = cfg.plan_out;
  if (!g_enabled) {
    if (!g_plan_out.empty())
      log::warn_rank0("TNBC_PLAN_OUT={}: nothing is learned ({}), so no plan will be written", g_plan_out,
                      cfg.learn ? "TNBC_ADAPT=off" : "TNBC_LEARN=0");
    return false;
  }
  g_clock.begin();
  // Its calls count in the interposers' counter too: a system call, mlock or mremap of a page it
  // guards waits for it (Mode::release_range), as for the engine's pages.
  g_guard = std::make_unique<observe::PageGuard>(g_clock.stamp_fn(), &g_live, &g_guarded_calls);
  if (auto err = g_guard->install()) {
    // This rank observes nothing but still takes part in every learn point.
    log::warn("learning: cannot watch first touches on this rank ({}); it learns from the others", *err);
    g_guard.reset();
  }
  return true;
}

namespace {

void write_plan_out() {
  if (g_plan_out.empty()) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  priority::Plan plan;
  {
    std::lock_guard lock(g_mutex);
    for (const KeyLearning* k : g_keys)
      for (const SiteLearning& s : k->sites) {
        if (s.order.current == nullptr || s.key.empty()) continue;
        priority::PlanEntry e = *s.order.current;
        e.site = s.key;
        e.per_node = k->turns_chosen && s.order.current == k->turns;
        if (e.per_node && k->op != priority::Op::bcast) e.window = k->turn_window;
        e.agreement = s.agreement;
        // Alltoall keys hold one size class; Alltoallv's sizes differ by rank: any class.
        e.size_class = k->op == priority::Op::alltoall && s.message_bytes > 0 ? priority::size_class(s.message_bytes) : -1;
        if (k->op == priority::Op::bcast) {
          // As tnbc-order plan writes a Bcast: its segments and tree, the units' order as an
          // order of the segments, the size class of the whole buffer.
          if (s.bcast_segments <= 0 || s.total_bytes == 0) continue;
          e.segments = s.bcast_segments;
          e.tree = s.bcast_chains > 0 ? priority::TreeShape{priority::TreeKind::chains, s.bcast_chains}
                                      : priority::TreeShape{priority::TreeKind::binomial, 0};
          e.order = learned_segments(&s, s.bcast_segments);
          e.size_class = priority::size_class(s.total_bytes);
        }
        const bool dup = std::any_of(plan.entries.begin(), plan.entries.end(), [&](const priority::PlanEntry& o) {
          return o.site == e.site && o.op == e.op && o.comm_size == e.comm_size && o.size_class == e.size_class;
        });
        if (!dup) plan.entries.push_back(std::move(e));
      }
  }
  if (auto bad = priority::validate_plan(plan)) {
    log::warn("TNBC_PLAN_OUT={}: the learned plan is not valid ({}); not written", g_plan_out, *bad);
    return;
  }
  const std::string text = priority::write_plan(plan, {"learned by libtnbc.so while the program ran (TNBC_LEARN)"});
  if (auto err = util::write_file_atomic(g_plan_out, text))
    log::warn("TNBC_PLAN_OUT: {}", *err);
  else
    log::info("learned plan written to {} ({} call sites)", g_plan_out, plan.entries.size());
}

}  // namespace

void stop() {
  if (!g_enabled) return;
  settle();
  // The guard object stays: an interposed system call on another thread may still look at it
  // (it finds nothing guarded).
  if (g_guard) g_guard->uninstall();
  write_plan_out();
}

bool enabled() { return g_enabled; }
bool wants_sites() { return g_enabled; }

void add_key(KeyLearning& k, priority::Op op, int comm_size) {
  k.op = op;
  k.comm_size = comm_size;
  std::lock_guard lock(g_mutex);
  g_keys.push_back(&k);
}

std::uint64_t site_hash(const std::string& key) {
  return util::fnv(util::kFnvOffset, key.data(), key.size()) | 1;
}

SiteLearning* site_of(KeyLearning& k, std::int64_t site, const std::string& key) {
  if (!g_enabled || site < 0) return nullptr;
  const std::uint64_t h = site_hash(key);
  if (SiteLearning* s = find_site(k, h)) {
    if (s->site < 0) s->site = site, s->key = key;  // learned from the others before this rank came here
    return s;
  }
  if (k.sites.size() >= kMaxSites) return nullptr;
  std::lock_guard lock(g_mutex);  // stop() may be reading
  SiteLearning& s = k.sites.emplace_back();
  s.hash = h;
  s.site = site;
  s.key = key;
  return &s;
}

bool designate(KeyLearning& k, std::uint64_t call, bool probing) {
  if (!g_enabled || k.comm_size > kMaxRanks) return false;
  if (!designated(call, probing)) return false;
  ++k.designated;
  return true;
}

void observe(KeyLearning& k, SiteLearning& s, void* recvbuf, std::span<const observe::SubRange> subs,
             std::uint64_t tcomm_ns, std::uint64_t message_bytes) {
  if (!g_guard || subs.empty()) return;
  const std::uint64_t t0 = util::now_ns();
  std::lock_guard lock(g_mutex);
  if (g_pending.size() >= kMaxPending) return;
  std::string err;
  const observe::GuardedCall* call = nullptr;
  try {
    call = g_guard->protect(g_next_index++, recvbuf, subs, &err, kSampledPages);
  } catch (...) {
    return;  // out of memory: this call is not observed
  }
  if (call == nullptr) {
    log::debug("learning: call not observed: {}", err);
    return;
  }
  s.messages = subs.size();
  s.message_bytes = message_bytes;
  s.total_bytes = 0;
  for (const observe::SubRange& r : subs) s.total_bytes += r.length;
  g_pending.push_back({&s, call, g_clock.stamp(), static_cast<double>(tcomm_ns) / 1000.0});
  hold();
  ++k.observed;
  k.protect_ns += util::now_ns() - t0;
}

bool guarded() { return g_live.load(std::memory_order_acquire) != 0; }

namespace {
std::vector<std::uint32_t> segments_of(const priority::PlanEntry* e, int segments) {
  if (e == nullptr || segments <= 0) return {};
  const std::vector<std::size_t> units(e->order.begin(), e->order.end());
  return priority::segment_order(units, units.size(), segments);
}
}  // namespace

std::vector<std::uint32_t> learned_segments(const SiteLearning* s, int segments) {
  return segments_of(s != nullptr ? s->order.current : nullptr, segments);
}

std::vector<std::uint32_t> learned_segments(const KeyLearning& k, const SiteLearning* s, int segments) {
  return segments_of(s != nullptr && s->order.current != nullptr ? s->order.current : k.majority, segments);
}

void release(const void* p, std::size_t n, bool touch) {
  if (g_live.load(std::memory_order_acquire) == 0 || p == nullptr || n == 0) return;
  if (auto* g = g_guard.get())
    g->release(p, n, touch ? observe::PageGuard::Release::touch : observe::PageGuard::Release::forget);
}

void drain() {
  // Nothing guarded any more (the program's reads or a release opened every page): the hold
  // goes too, else every fenced MPI call and interposed system call would drain until the
  // key's next learn point, which a key that stays blocking never reaches.
  if (auto* g = g_guard.get(); g != nullptr && g_live.load(std::memory_order_acquire) != 0)
    g->release_all(/*lose_untouched=*/true);
  unhold();
}

namespace {

/// This rank's observed calls of site `s` as a call site of `messages` sub-messages, as a trace
/// would give them to the planner (one rank).
priority::CallSite own_site(const KeyLearning& k, const SiteLearning& s, std::size_t messages) {
  priority::CallSite site;
  site.op = k.op;
  site.messages = messages;
  site.comm_size = k.comm_size;
  site.message_bytes = s.message_bytes;
  site.ranks.push_back({0, std::vector<priority::CallRecord>(s.records.begin(), s.records.end())});
  return site;
}

}  // namespace

std::optional<bool> room(KeyLearning& k) {
  if (!g_enabled) return std::nullopt;
  const std::uint64_t t0 = util::now_ns();
  settle();
  const SiteLearning* most = nullptr;
  for (const SiteLearning& s : k.sites)
    if (!s.records.empty() && s.messages > 0 && (most == nullptr || s.records.size() > most->records.size())) most = &s;
  std::optional<bool> out;
  if (most != nullptr)
    if (const auto share = priority::overlap_share(priority::plan_site(own_site(k, *most, most->messages))))
      out = *share >= kRoomShare;
  k.learn_ns += util::now_ns() - t0;
  return out;
}

namespace {

/// The sites of a learn point: (hash, sub-messages) of each rank's sites with records, gathered
/// from every rank of `comm`; the union by hash (the most sub-messages any rank saw), at most
/// kMaxSites.  Adds the gather's time to `gathered`.
std::map<std::uint64_t, std::size_t> gather_sites(const KeyLearning& k, MPI_Comm comm, std::size_t ranks,
                                                  std::uint64_t& gathered) {
  constexpr std::size_t kSlots = 2 * kMaxSites;
  std::uint64_t mine[kSlots] = {};
  std::size_t used = 0;
  for (const SiteLearning& s : k.sites)
    if (!s.records.empty() && used < kSlots) mine[used++] = s.hash, mine[used++] = s.messages;
  std::vector<std::uint64_t> all(kSlots * ranks);
  const std::uint64_t g0 = util::now_ns();
  PMPI_Allgather(mine, static_cast<int>(kSlots), MPI_UINT64_T, all.data(), static_cast<int>(kSlots), MPI_UINT64_T, comm);
  gathered += util::now_ns() - g0;
  std::map<std::uint64_t, std::size_t> sites;  // hash -> sub-messages (the largest any rank saw)
  for (std::size_t i = 0; i + 1 < all.size(); i += 2)
    if (all[i] != 0 && all[i + 1] != 0 && all[i + 1] <= static_cast<std::uint64_t>(priority::kMaxMessages))
      sites[all[i]] = std::max<std::size_t>(sites[all[i]], all[i + 1]);
  while (sites.size() > kMaxSites) sites.erase(std::prev(sites.end()));
  return sites;
}

/// Per site of `sites`, 2n + 1 doubles of every rank of `comm`, rank after rank: its summary
/// (delays, then positions; NaN: nothing observed there), and whether its calls read the data
/// right after the call (1: verdict CRC, 0: not, NaN: nothing observed or read).  `total`: the
/// doubles of one rank.  Adds the gather's time to `gathered`.
std::vector<double> gather_summaries(KeyLearning& k, const std::map<std::uint64_t, std::size_t>& sites,
                                     MPI_Comm comm, std::size_t ranks, std::size_t& total, std::uint64_t& gathered) {
  total = 0;
  for (const auto& [h, n] : sites) total += 2 * n + 1;
  std::vector<double> send(total, kNaN), recv(total * ranks);
  std::size_t at = 0;
  for (const auto& [h, n] : sites) {
    const SiteLearning* s = find_site(k, h);
    if (s != nullptr && !s->records.empty()) {
      const priority::CallSite site = own_site(k, *s, n);
      const priority::RankSummary sum = priority::summarise_rank(site.ranks[0].calls, n);
      std::copy(sum.delay.begin(), sum.delay.end(), send.begin() + static_cast<std::ptrdiff_t>(at));
      std::copy(sum.position.begin(), sum.position.end(), send.begin() + static_cast<std::ptrdiff_t>(at + n));
      // The verdict tnbc-order gives a trace, over this rank's own calls.
      const priority::Verdict v = priority::analyse(site).verdict;
      if (v != priority::Verdict::unread) send[at + 2 * n] = v == priority::Verdict::crc ? 1.0 : 0.0;
    }
    at += 2 * n + 1;
  }
  const std::uint64_t g0 = util::now_ns();
  PMPI_Allgather(send.data(), static_cast<int>(total), MPI_DOUBLE, recv.data(), static_cast<int>(total), MPI_DOUBLE, comm);
  gathered += util::now_ns() - g0;
  return recv;
}

/// The order of the site most ranks observed (for per-node turns) and whether most of its
/// ranks read the data right after the call.
struct TurnCandidate {
  const priority::PlanEntry* order = nullptr;
  std::size_t seen = 0;
  bool read_at_once = false;
};

/// One site's consensus from every rank's summary (`base(r)`: rank r's 2n + 1 doubles), the
/// same on every rank from the same numbers: updates its learned order at `call`, and `turns`
/// where more ranks observed it than the candidate's site.
void agree_site(KeyLearning& k, std::uint64_t h, std::size_t n, std::size_t ranks,
                const std::function<const double*(std::size_t)>& base, std::uint64_t call, TurnCandidate& turns) {
  std::vector<priority::RankSummary> ranks_seen;
  std::size_t crc_voters = 0, crc_ranks = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const double* b = base(r);
    priority::RankSummary sum{std::vector<double>(b, b + n), std::vector<double>(b + n, b + 2 * n)};
    if (std::any_of(sum.delay.begin(), sum.delay.end(), [](double d) { return !std::isnan(d); }))
      ranks_seen.push_back(std::move(sum));
    if (!std::isnan(b[2 * n])) ++crc_voters, crc_ranks += b[2 * n] > 0.5 ? 1 : 0;
  }
  const priority::Consensus c = priority::consensus(ranks_seen, n);
  if (c.ordered == 0) return;  // nothing was read: no order to learn
  SiteLearning* s = find_site(k, h);
  if (s == nullptr) {
    std::lock_guard lock(g_mutex);
    s = &k.sites.emplace_back();
    s->hash = h;
  }
  s->messages = n;
  update(k, s->order, c, call);
  if (s->order.current == nullptr) return;
  const std::vector<std::size_t> current(s->order.current->order.begin(), s->order.current->order.end());
  double agree = 0;
  for (const priority::RankSummary& r : ranks_seen) {
    const priority::Consensus own = priority::consensus(std::span(&r, 1), n);
    agree += priority::concordance(own.order, n - own.ordered, current, n - s->order.current_ordered);
  }
  s->agreement = ranks_seen.empty() ? 1.0 : agree / static_cast<double>(ranks_seen.size());
  if (ranks_seen.size() > turns.seen) turns = {s->order.current, ranks_seen.size(), 2 * crc_ranks > crc_voters};
}

}  // namespace

void learn_point(KeyLearning& k, MPI_Comm comm, std::uint64_t call) {
  if (!g_enabled || k.designated == k.designated_learned) return;
  k.designated_learned = k.designated;
  const std::uint64_t t0 = util::now_ns();
  settle();
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const auto ranks = static_cast<std::size_t>(size);
  std::uint64_t gathered = 0;
  const std::map<std::uint64_t, std::size_t> sites = gather_sites(k, comm, ranks, gathered);
  if (!sites.empty()) {
    std::size_t total = 0;
    const std::vector<double> recv = gather_summaries(k, sites, comm, ranks, total, gathered);
    TurnCandidate turns;
    std::size_t at = 0;
    for (const auto& [h, n] : sites) {
      agree_site(k, h, n, ranks, [&](std::size_t r) { return recv.data() + r * total + at; }, call, turns);
      at += 2 * n + 1;
    }
    if (turns.order != nullptr) k.majority = turns.order;
    if (turns.order != nullptr && g_turns) {
      k.turns = turns.order;
      k.turn_window = turns.read_at_once ? priority::PlannerOptions{}.read_at_once_window : 0;
    }
    // The next learn point hears only what is observed from now on: a phase change shows at the
    // first point after it, and the hysteresis asks for a second one before the order changes.
    for (SiteLearning& s : k.sites) s.records.clear();
    ++k.points;
  }
  k.gather_ns += gathered;
  k.learn_ns += util::now_ns() - t0 - gathered;
}

std::string json(const KeyLearning& k) {
  std::string sites;
  for (const SiteLearning& s : k.sites) {
    std::string order;
    if (s.order.current != nullptr && s.order.current->order.size() <= 64)
      order = fmt::format("{}", fmt::join(s.order.current->order, ","));
    sites += fmt::format(
        R"({}{{"site":"{}","learned":{},"at_call":{},"changes":{},"agreement":{:.3f},"observed":{},"order":[{}]}})",
        sites.empty() ? "" : ",", util::json_escape(s.key), s.order.current ? "true" : "false", s.order.learned_at_call,
        s.order.changes, s.agreement, s.observed, order);
  }
  return fmt::format(
      R"({{"points":{},"designated":{},"observed":{},"applied":{},"protect_us":{:.3f},"learn_us":{:.3f},"gather_us":{:.3f},)"
      R"("turn_window":{},"sites":[{}]}})",
      k.points, k.designated, k.observed, k.applied, static_cast<double>(k.protect_ns) / 1e3,
      static_cast<double>(k.learn_ns) / 1e3, static_cast<double>(k.gather_ns) / 1e3, k.turn_window, sites);
}

}  // namespace tnbc::shim::replay::learn
