#include "fluid.hpp"
#include "fluid_network.hpp"

#include "shim/replay/engine/schedule_pieces.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace tnbc::sim {

using schedule::Kind;
using schedule::Step;

void FluidOptions::apply_cfg(const std::vector<std::string>& cfg) {
  // The model first (it sets the factors' defaults), then the settings that override them.
  for (int pass = 0; pass < 2; ++pass)
    for (const std::string& c : cfg) {
      const std::size_t colon = c.find(':');
      if (colon == std::string::npos) throw std::invalid_argument("--cfg " + c + ": not KEY:VALUE");
      const std::string key = c.substr(0, colon), value = c.substr(colon + 1);
      const bool model = key == "network/model";
      if (model != (pass == 0)) continue;
      if (model && value == "LV08") {
        latency_factor = 13.01;
        bandwidth_factor = 0.97;
        weight_S = 20537;
      } else if (model && value == "CM02") {
        latency_factor = 1;
        bandwidth_factor = 1;
        weight_S = 0;
      } else if (key == "network/crosstraffic" && (value == "0" || value == "no" || value == "false")) {
        crosstraffic = false;
      } else if (key == "network/crosstraffic" && (value == "1" || value == "yes" || value == "true")) {
        crosstraffic = true;
      } else if (key == "network/latency-factor") {
        latency_factor = std::stod(value);
      } else if (key == "network/bandwidth-factor") {
        bandwidth_factor = std::stod(value);
      } else if (key == "network/weight-S") {
        weight_S = std::stod(value);
      } else {
        throw std::invalid_argument("--cfg " + c + ": not a setting the fluid model follows (--model simgrid takes any)");
      }
    }
}

namespace {

using namespace fluid_network;

// Plain MPICH (alltoall.cpp: plain_call), as phases: a pairwise round or a scattered batch.  A
// message of phase j starts once both its sender and its receiver are in phase j.
void plain_fluid(const PlatformSpec& spec, const SimOptions& opt, const FluidOptions& f, SimResult& res) {
  const int p = spec.ranks();
  Network net(spec, f);
  Timers timers;
  const bool pairwise = plain_algorithm(opt.block, p, opt.alltoallv()) == "pairwise";
  // MPI_Alltoallv posts no message of zero bytes (those to a rank that gets nothing).
  auto exists = [&](int d) { return !opt.alltoallv() || opt.bytes_to(d) > 0; };
  const bool pof2 = (p & (p - 1)) == 0;
  constexpr int kThrottle = 32;
  const int phases = pairwise ? p - 1 : (p + kThrottle - 1) / kThrottle;
  std::vector<int> phase(static_cast<std::size_t>(p), -1), pending(static_cast<std::size_t>(p), 0);
  res.plain.assign(static_cast<std::size_t>(p), RankRun{});
  // Phase j of rank r: its sends and receives.
  auto sends = [&](int r, int j, auto&& fn) {
    if (pairwise) {
      const int i = j + 1;
      fn(pof2 ? r ^ i : (r + i) % p);
    } else {
      const int ii = j * kThrottle, ss = std::min(p - ii, kThrottle);
      for (int i = 0; i < ss; ++i)
        if (exists((r - ii - i + 2 * p) % p)) fn((r - ii - i + 2 * p) % p);
    }
  };
  auto recvs = [&](int r, int j, auto&& fn) {
    if (pairwise) {
      const int i = j + 1;
      fn(pof2 ? r ^ i : (r - i + p) % p);
    } else {
      const int ii = j * kThrottle, ss = std::min(p - ii, kThrottle);
      if (exists(r))
        for (int i = 0; i < ss; ++i) fn((r + ii + i) % p);
    }
  };
  auto start = [&](int s, int d, double now) {
    net.post(node_of(spec, s), node_of(spec, d), opt.bytes_to(d),
             (static_cast<std::uint64_t>(s) << 32) | static_cast<std::uint32_t>(d), now);
  };
  auto enter = [&](int r, int j, double now) {
    const auto ri = static_cast<std::size_t>(r);
    for (;; ++j) {  // past the MPI_Alltoallv batches with nothing for this rank
      phase[ri] = j;
      if (j == phases) {
        res.plain[ri].ret = res.plain[ri].done = now;
        return;
      }
      int n = 0;
      sends(r, j, [&](int d) {
        ++n;
        if (phase[static_cast<std::size_t>(d)] == j) start(r, d, now);
      });
      recvs(r, j, [&](int s) {
        ++n;
        if (s != r && phase[static_cast<std::size_t>(s)] == j) start(s, r, now);
      });
      pending[ri] = n;
      if (n > 0) return;
    }
  };
  // MPI_Alltoall copies the own block first.
  for (int r = 0; r < p; ++r)
    timers.push({opt.alltoallv() ? 0.0 : static_cast<double>(opt.block) / spec.mem_Bps, r});
  run(
      net, timers, [&](int r, double now) { enter(r, 0, now); },
      [&](std::uint64_t msg, double now) {
        const int s = static_cast<int>(msg >> 32), d = static_cast<int>(msg & 0xffffffffu);
        --pending[static_cast<std::size_t>(s)];
        --pending[static_cast<std::size_t>(d)];
        for (int r : {s, d})
          if (pending[static_cast<std::size_t>(r)] == 0 && phase[static_cast<std::size_t>(r)] < phases) {
            pending[static_cast<std::size_t>(r)] = -1;  // entered once, even when s == d
            enter(r, phase[static_cast<std::size_t>(r)] + 1, now);
          }
      });
}

// The engine (alltoall.cpp: tnbc_call): every receive posted at once; the send side copied at
// memory speed, edge pieces first; a send posted once copied, bodies only after all of the
// rank's heads and tails arrived; at most connection_depth messages per destination in flight.
struct Send {
  std::int32_t peer;
  std::uint32_t bytes;
  std::uint8_t piece;
  bool copy;
  bool edge;
  std::int32_t next;  // the next send to the same peer in fill order, or -1
};

struct EngineRank {
  std::vector<Send> fill;     // sends and the own copy, in the order the caller copies them
  std::vector<std::int32_t> head;  // per peer: the next send not posted yet, or -1
  std::vector<std::uint8_t> busy;  // per peer: messages in flight
  std::size_t cursor = 0;
  double copy_t = 0, copy_end = 0, copy_step = 0;
  int edges_left = 0;
  // Per-node turns (node_turn.hpp): the inter-node body sends, in fill order; the next to post;
  // how many are in flight and left; this rank's place among its node's members.
  std::vector<std::int32_t> remote;
  std::size_t next_remote = 0;
  std::size_t remote_inflight = 0, remote_left = 0;
  std::size_t window = 0;  // its inter-node bodies in flight at once under turns (0: no bound)
  std::size_t turn_pos = 0;
  // The progress thread's CPU per send (SimOptions::progress_cpu_s), when it is next free, and
  // the sends it is still posting: (when each goes, its place in fill).
  double send_cpu = 0, cpu_free = 0;
  std::deque<std::pair<double, std::int32_t>> deferred;
};

void tnbc_fluid(const PlatformSpec& spec, const SimOptions& opt, const FluidOptions& f, std::vector<RankRun>& out,
                std::span<const int> order, bool per_node, const RankVisitor& visitor, bool keep_steps) {
  const int p = spec.ranks();
  const auto np = static_cast<std::size_t>(p);
  auto is_remote = [&](int r, const Send& s) {
    return per_node && !s.copy && !s.edge && node_of(spec, s.peer) != node_of(spec, r);
  };
  std::vector<EngineRank> ranks(np);
  // Pieces per block, at most (an Alltoallv's blocks differ in size).
  std::size_t pieces = 1;
  for (int r = 0; r < p; ++r) {
    EngineRank& e = ranks[static_cast<std::size_t>(r)];
    const std::vector<Step> steps = opt.steps(r, p, order).steps;
    for (const Step& s : steps) pieces = std::max(pieces, static_cast<std::size_t>(s.piece) + 1);
    for (int edge = 1; edge >= 0; --edge)
      for (const Step& s : steps)
        if (s.edge == (edge == 1) && s.kind != Kind::recv)
          e.fill.push_back({s.peer, static_cast<std::uint32_t>(s.bytes), static_cast<std::uint8_t>(s.piece),
                            s.kind == Kind::copy, s.edge, -1});
    for (const Step& s : steps) e.edges_left += s.kind == Kind::recv && s.edge;
    e.head.assign(np, -1);
    e.busy.assign(np, 0);
    for (std::size_t i = e.fill.size(); i-- > 0;) {
      Send& s = e.fill[i];
      e.copy_end += static_cast<double>(s.bytes) / opt.copy_rate(spec);
      if (s.copy) continue;
      s.next = e.head[static_cast<std::size_t>(s.peer)];
      e.head[static_cast<std::size_t>(s.peer)] = static_cast<std::int32_t>(i);
    }
    for (std::size_t i = 0; i < e.fill.size(); ++i)
      if (is_remote(r, e.fill[i])) e.remote.push_back(static_cast<std::int32_t>(i));
    e.remote_left = e.remote.size();
    e.copy_t = opt.setup_s;  // the engine's setup, then the send copy
    e.copy_end += opt.setup_s;
    const auto sends = static_cast<std::size_t>(std::count_if(e.fill.begin(), e.fill.end(), [](const Send& s) { return !s.copy; }));
    if (sends > 0) e.send_cpu = opt.progress_cpu_s / static_cast<double>(sends);
  }
  // arrived[r][src * pieces + piece]: when rank r's receive of that piece completed.
  std::vector<std::vector<double>> arrived(np, std::vector<double>(np * pieces, 0));
  // Each node's members in the order of their turns, as the engine orders them, and the place
  // of the member whose turn it is.
  std::vector<std::vector<int>> members(static_cast<std::size_t>(spec.nodes));
  std::vector<std::size_t> turn(static_cast<std::size_t>(spec.nodes), 0);
  if (per_node) {
    members = turn_members(spec, order);
    for (const auto& m : members)
      for (std::size_t k = 0; k < m.size(); ++k) ranks[static_cast<std::size_t>(m[k])].turn_pos = k;
  }
  // Each rank's send window under turns, by the engine's rule.
  if (per_node)
    for (EngineRank& e : ranks) {
      std::vector<char> peer(np, 0);
      for (std::int32_t pos : e.remote) peer[static_cast<std::size_t>(e.fill[static_cast<std::size_t>(pos)].peer)] = 1;
      e.window = schedule::send_window(opt.chunk_window, static_cast<std::size_t>(std::count(peer.begin(), peer.end(), 1)));
    }

  Network net(spec, f);
  Timers timers;
  const auto depth = static_cast<std::uint8_t>(std::min(opt.connection_depth, 255));
  // Send `pos` of rank r's fill into the network now (the message: rank << 32 | pos).
  auto send = [&](int r, std::int32_t pos, double now) {
    const Send& s = ranks[static_cast<std::size_t>(r)].fill[static_cast<std::size_t>(pos)];
    net.post(node_of(spec, r), node_of(spec, s.peer), s.bytes,
             (static_cast<std::uint64_t>(r) << 32) | static_cast<std::uint32_t>(pos), now);
  };
  auto post = [&](int r, std::int32_t pos, double now) {
    EngineRank& e = ranks[static_cast<std::size_t>(r)];
    const Send& s = e.fill[static_cast<std::size_t>(pos)];
    e.head[static_cast<std::size_t>(s.peer)] = s.next;
    ++e.busy[static_cast<std::size_t>(s.peer)];
    if (e.send_cpu > 0) {  // the progress thread posts it once it has spent its share on it
      e.cpu_free = std::max(now, e.cpu_free) + e.send_cpu;
      e.deferred.emplace_back(e.cpu_free, pos);
      timers.push({e.cpu_free, r});
      return;
    }
    send(r, pos, now);
  };
  // The sends rank r's progress thread has finished posting by `now`.
  auto flush = [&](int r, double now) {
    auto& deferred = ranks[static_cast<std::size_t>(r)].deferred;
    for (; !deferred.empty() && deferred.front().first <= now; deferred.pop_front()) send(r, deferred.front().second, now);
  };
  auto gate_open = [&](int r) {
    const EngineRank& e = ranks[static_cast<std::size_t>(r)];
    return e.turn_pos <= turn[static_cast<std::size_t>(node_of(spec, r))];
  };
  // The inter-node bodies of rank r that may go now: copied, its turn on the node, strictly in
  // fill order, at most its window in flight (0: no bound), each behind the earlier messages to
  // its peer.
  auto post_remote = [&](int r, double now) {
    EngineRank& e = ranks[static_cast<std::size_t>(r)];
    while (e.next_remote < e.remote.size() && gate_open(r)) {
      const std::int32_t pos = e.remote[e.next_remote];
      const Send& s = e.fill[static_cast<std::size_t>(pos)];
      if (static_cast<std::size_t>(pos) >= e.cursor || e.edges_left > 0) return;  // not copied, or heads and tails first
      if (e.window > 0 && e.remote_inflight >= e.window) return;
      if (e.head[static_cast<std::size_t>(s.peer)] != pos || e.busy[static_cast<std::size_t>(s.peer)] >= depth) return;
      post(r, pos, now);
      ++e.next_remote;
      ++e.remote_inflight;
    }
  };
  // The member of node `n` at or after place t with something to send off the node (members
  // with nothing pass the turn on at once).
  auto next_member = [&](std::size_t n, std::size_t t) {
    return next_turn(members[n], t, [&](int m) { return ranks[static_cast<std::size_t>(m)].remote_left > 0; });
  };
  auto advance = [&](int r, double now) {
    EngineRank& e = ranks[static_cast<std::size_t>(r)];
    post_remote(r, now);
    while (e.cursor < e.fill.size()) {
      const Send& s = e.fill[e.cursor];
      const double copied = e.copy_t + static_cast<double>(s.bytes) / opt.copy_rate(spec);
      if (copied > now) {
        timers.push({copied, r});
        break;  // (the bodies copied so far may go: post_remote below)
      }
      if (!s.copy && !s.edge && e.edges_left > 0) return;  // bodies after the heads and tails
      e.copy_t = copied;
      const auto pos = static_cast<std::int32_t>(e.cursor++);
      if (s.copy) {
        e.copy_step = copied;
        continue;
      }
      if (is_remote(r, s)) continue;  // post_remote's
      if (e.head[static_cast<std::size_t>(s.peer)] == pos && e.busy[static_cast<std::size_t>(s.peer)] < depth)
        post(r, pos, now);
    }
    post_remote(r, now);
  };
  for (std::size_t n = 0; n < members.size(); ++n) turn[n] = next_member(n, 0);
  for (int r = 0; r < p; ++r) advance(r, 0);
  // A turn passes as a message of no bytes within the node (kTurnMsg | node): it pays the node's
  // memory latency, as the SimGrid model's does.
  constexpr std::uint64_t kTurnMsg = std::uint64_t{1} << 63;
  std::vector<std::size_t> passing(members.size(), 0);  // per node: the member the turn goes to
  auto on_timer = [&](int r, double now) {
    flush(r, now);
    advance(r, now);
  };
  run(net, timers, on_timer, [&](std::uint64_t msg, double now) {
    if (msg & kTurnMsg) {
      const auto n = static_cast<std::size_t>(msg & ~kTurnMsg);
      turn[n] = passing[n];
      post_remote(members[n][turn[n]], now);
      return;
    }
    const int r = static_cast<int>(msg >> 32);
    EngineRank& e = ranks[static_cast<std::size_t>(r)];
    const Send& s = e.fill[msg & 0xffffffffu];
    const auto d = static_cast<std::size_t>(s.peer);
    arrived[d][static_cast<std::size_t>(r) * pieces + s.piece] = now;
    --e.busy[d];
    const std::int32_t next = e.head[d];
    if (next >= 0 && static_cast<std::size_t>(next) < e.cursor && !is_remote(r, e.fill[static_cast<std::size_t>(next)]))
      post(r, next, now);
    if (is_remote(r, s)) {
      --e.remote_inflight;
      if (--e.remote_left == 0) {  // the last one ends its turn
        const int node = node_of(spec, r);
        const auto n = static_cast<std::size_t>(node);
        passing[n] = next_member(n, turn[n] + 1);
        if (passing[n] < members[n].size()) net.post(node, node, 0, kTurnMsg | n, now);
        else turn[n] = passing[n];
      }
    }
    post_remote(r, now);
    if (s.edge && --ranks[d].edges_left == 0) advance(s.peer, now);
  });

  out.assign(np, RankRun{});
  for (int r = 0; r < p; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    const std::size_t total = np * opt.bytes_to(r);
    RankRun run;
    run.entry = 0;
    run.steps = opt.steps(r, p, order).steps;
    run.step_done.resize(run.steps.size());
    for (std::size_t i = 0; i < run.steps.size(); ++i) {
      const Step& s = run.steps[i];
      const auto peer = static_cast<std::size_t>(s.peer), piece = static_cast<std::size_t>(s.piece);
      run.step_done[i] = s.kind == Kind::copy   ? ranks[ri].copy_step
                         : s.kind == Kind::recv ? arrived[ri][peer * pieces + piece]
                                                : arrived[peer][ri * pieces + piece];
      run.done = std::max(run.done, run.step_done[i]);
    }
    run.ret = return_time(run, total, ranks[ri].copy_end);
    if (visitor) visitor(r, run);
    if (!keep_steps) {  // (assigning {} would keep the capacity)
      std::vector<Step>().swap(run.steps);
      std::vector<double>().swap(run.step_done);
    }
    out[ri] = std::move(run);
  }
}

}  // namespace

SimResult simulate_fluid(const PlatformSpec& spec, const SimOptions& options, const FluidOptions& fluid,
                         const RankVisitor& tnbc_visitor, bool keep_steps, const RankVisitor& plan_visitor) {
  SimResult res;
  res.plain_algorithm = plain_algorithm(options.block, spec.ranks(), options.alltoallv());
  if (options.plain) plain_fluid(spec, options, fluid, res);
  if (options.tnbc) tnbc_fluid(spec, options, fluid, res.tnbc, {}, false, tnbc_visitor, keep_steps);
  if (options.tnbc_plan)
    tnbc_fluid(spec, options, fluid, res.tnbc_plan, options.plan_order, options.plan_per_node, plan_visitor,
               keep_steps);
  return res;
}

}  // namespace tnbc::sim
