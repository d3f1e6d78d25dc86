#include "alltoall.hpp"

#include "shim/replay/engine/schedule_pieces.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace tnbc::sim {

namespace s4u = simgrid::s4u;
using schedule::Kind;
using schedule::Step;

schedule::Schedule alltoall_steps(int rank, int size, std::size_t block, std::span<const int> order,
                                  std::size_t chunk_bytes) {
  const std::vector<std::size_t> blocks(static_cast<std::size_t>(size), block);
  return alltoallv_steps(rank, size, blocks, order, chunk_bytes);
}

schedule::Schedule alltoallv_steps(int rank, int size, std::span<const std::size_t> blocks,
                                   std::span<const int> order, std::size_t chunk_bytes) {
  const auto n = static_cast<std::size_t>(size);
  const std::size_t mine = blocks[static_cast<std::size_t>(rank)];
  std::vector<std::size_t> send_displs(n), recv_bytes(n, mine), recv_displs(n);
  for (std::size_t i = 0; i < n; ++i) {
    send_displs[i] = i == 0 ? 0 : send_displs[i - 1] + blocks[i - 1];
    recv_displs[i] = i * mine;
  }
  return schedule::alltoallv(rank, size, blocks, send_displs, recv_bytes, recv_displs, order, {chunk_bytes});
}

schedule::Schedule SimOptions::steps(int rank, int size, std::span<const int> order) const {
  return alltoallv() ? alltoallv_steps(rank, size, blocks, order, chunk_bytes)
                     : alltoall_steps(rank, size, block, order, chunk_bytes);
}

std::vector<std::size_t> is_like_blocks(int size, std::size_t mean) {
  // The distribution function of the mean of four uniform numbers on [0, 1): the Irwin-Hall
  // distribution of order 4, scaled by 1/4.
  auto cdf = [](double x) {
    const double y = 4 * std::clamp(x, 0.0, 1.0);
    double sum = 0;
    const double binom[] = {1, 4, 6, 4, 1};
    for (int k = 0; k <= 4 && k <= y; ++k) sum += (k % 2 ? -1 : 1) * binom[k] * std::pow(y - k, 4);
    return std::min(1.0, sum / 24);
  };
  const auto n = static_cast<std::size_t>(size);
  const double keys = static_cast<double>(mean) * static_cast<double>(n) / 4;  // 4-byte keys per rank
  std::vector<std::size_t> out(n);
  double below = 0;  // keys of the ranks before d, rounded
  for (std::size_t d = 0; d < n; ++d) {
    const double upto = std::round(keys * cdf(static_cast<double>(d + 1) / static_cast<double>(n)));
    out[d] = 4 * static_cast<std::size_t>(upto - below);
    below = upto;
  }
  return out;
}

std::vector<std::vector<int>> turn_members(const PlatformSpec& spec, std::span<const int> order) {
  std::vector<std::vector<int>> members = node_members(spec);
  for (auto& m : members) m = schedule::turn_order(std::move(m), order);
  return members;
}

std::string plain_algorithm(std::size_t block, int /*size*/, bool alltoallv) {
  return !alltoallv && block > 32768 ? "pairwise" : "scattered";  // MPICH: nbytes <= MEDIUM is scattered
}

namespace {

// What an engine message carries for the simulation: who sent it and which piece it is (the
// part of the tag that tells a rank's messages to one peer apart).
struct Msg {
  int src;
  int piece;
};

std::uint64_t key(int src, int piece) {
  return (static_cast<std::uint64_t>(src) << 8) | static_cast<unsigned>(piece & 0xff);
}

struct World {
  PlatformSpec spec;
  SimOptions opt;
  std::vector<s4u::Host*> hosts;
  std::vector<s4u::Mailbox*> pair_boxes;            // plain MPICH: [src * p + dst], made when first used
  std::vector<s4u::Mailbox*> edge_boxes, body_boxes;  // the engine's messages, per receiver
  s4u::BarrierPtr barrier;
  SimResult result;
  // The engine's messages: per receiver, when each (source, piece) arrived, written by the
  // sender when its send completed (a send and its receive end together).
  std::vector<std::unordered_map<std::uint64_t, double>> arrived;
  // Per-node turns (the plan's call with plan_per_node): each node's members in turn order, the
  // place of the member whose turn it is, each rank's inter-node bodies, and the mailboxes the
  // turns pass through (a message of no bytes within the node).
  std::vector<std::vector<int>> members;
  std::vector<std::size_t> turn;
  std::vector<std::size_t> remote_count;
  std::vector<s4u::Mailbox*> turn_boxes;

  int p() const { return spec.ranks(); }
  bool has_bodies(int rank) const { return remote_count[static_cast<std::size_t>(rank)] > 0; }
  s4u::Mailbox* pair_box(int src, int dst) {
    s4u::Mailbox*& m = pair_boxes[static_cast<std::size_t>(src) * static_cast<std::size_t>(p()) + static_cast<std::size_t>(dst)];
    if (m == nullptr) m = s4u::Mailbox::by_name(std::to_string(src) + ">" + std::to_string(dst));
    return m;
  }
};

double now() { return s4u::Engine::get_clock(); }

// Plain MPICH's MPI_Alltoall (MPIR_Alltoall_intra_pairwise and _scattered: the own block copied
// locally first, then the exchange with blocking waits) and MPI_Alltoallv
// (MPIR_Alltoallv_intra_scattered).
void plain_call(World& w, int rank, RankRun& out) {
  static char token;  // the payload: the simulation reads nothing from plain messages
  const int p = w.p();
  const auto block = static_cast<std::uint64_t>(w.opt.block);
  out.entry = now();
  // MPI_Alltoall copies the own block first; MPI_Alltoallv sends it to itself among the others.
  if (!w.opt.alltoallv()) s4u::this_actor::sleep_for(static_cast<double>(block) / w.spec.mem_Bps);
  if (plain_algorithm(w.opt.block, p, w.opt.alltoallv()) == "pairwise") {
    // Round i: MPI_Sendrecv with rank ^ i on a power of two, else to rank + i from rank - i.
    const bool pof2 = (p & (p - 1)) == 0;
    for (int i = 1; i < p; ++i) {
      const int src = pof2 ? rank ^ i : (rank - i + p) % p;
      const int dst = pof2 ? rank ^ i : (rank + i) % p;
      void* got = nullptr;
      s4u::CommPtr recv = w.pair_box(src, rank)->get_async<void>(&got);
      s4u::CommPtr send = w.pair_box(rank, dst)->put_async(&token, block);
      recv->wait();
      send->wait();
    }
  } else {
    // 32 receives and 32 sends at a time (MPIR_CVAR_ALLTOALL_THROTTLE), the own block among
    // them; MPI_Alltoallv posts no message of zero bytes.
    constexpr int kThrottle = 32;
    const bool skip_empty = w.opt.alltoallv();
    for (int ii = 0; ii < p; ii += kThrottle) {
      const int ss = std::min(p - ii, kThrottle);
      std::vector<s4u::CommPtr> comms;
      std::vector<void*> got(static_cast<std::size_t>(ss));
      if (!skip_empty || w.opt.bytes_to(rank) > 0)
        for (int i = 0; i < ss; ++i)
          comms.push_back(w.pair_box((rank + ii + i) % p, rank)->get_async<void>(&got[static_cast<std::size_t>(i)]));
      for (int i = 0; i < ss; ++i) {
        const int dst = (rank - ii - i + p) % p;
        const std::size_t bytes = w.opt.bytes_to(dst);
        if (!skip_empty || bytes > 0) comms.push_back(w.pair_box(rank, dst)->put_async(&token, bytes));
      }
      s4u::Comm::wait_all(comms);
    }
  }
  out.ret = out.done = now();
}

// The engine's MPI_Alltoall, posted as progress.cpp posts it.  Receive times are filled in after
// the simulation (finish_tnbc), once every sender has recorded its sends.
// The engine's inter-node body sends under per-node turns (node_turn.hpp), as the fluid model
// takes them.
bool remote_body(const PlatformSpec& spec, int rank, const Step& s) {
  return s.kind == Kind::send && !s.edge && node_of(spec, s.peer) != node_of(spec, rank);
}

void tnbc_call(World& w, int rank, RankRun& out, std::span<const int> order, bool per_node) {
  const int p = w.p();
  out.steps = w.opt.steps(rank, p, order).steps;
  const std::vector<Step>& steps = out.steps;
  const std::size_t n = steps.size();
  out.step_done.assign(n, -1);
  out.entry = now();

  // Every receive at once.  They are all posted before any message can arrive, so which
  // receive a message meets does not change when it flows; heads and tails get a mailbox of
  // their own only so that this rank can wait for them alone.
  std::vector<Msg*> slots(n, nullptr);
  std::vector<s4u::CommPtr> body_gets;
  std::vector<s4u::CommPtr> active;  // in flight: sends, and receives of heads and tails
  std::vector<std::size_t> active_step;
  constexpr std::size_t kEdgeRecv = SIZE_MAX;
  std::size_t edges_left = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (steps[i].kind != Kind::recv) continue;
    if (steps[i].edge) {
      active.push_back(w.edge_boxes[static_cast<std::size_t>(rank)]->get_async<Msg>(&slots[i]));
      active_step.push_back(kEdgeRecv);
      ++edges_left;
    } else {
      body_gets.push_back(w.body_boxes[static_cast<std::size_t>(rank)]->get_async<Msg>(&slots[i]));
    }
  }

  // The caller copies the send side at memory speed, edge pieces first, then in schedule order
  // (send_copy.cpp: fill_send_side); a send may be posted once its bytes are in place.
  std::vector<std::size_t> fill;
  for (int edge = 1; edge >= 0; --edge)
    for (std::size_t i = 0; i < n; ++i)
      if (steps[i].edge == (edge == 1) && steps[i].kind != Kind::recv) fill.push_back(i);
  std::vector<double> copied(n, out.entry);
  double t = out.entry + w.opt.setup_s;
  for (std::size_t i : fill) copied[i] = t += static_cast<double>(steps[i].bytes) / w.opt.copy_rate(w.spec);
  out.ret = t;  // for now: when the send side is copied; finish_tnbc adds the edge receives

  // Per destination, the sends waiting behind those in flight (one connection per peer).
  std::vector<Msg> msgs(n);
  std::vector<std::vector<std::size_t>> queue(static_cast<std::size_t>(p));
  std::vector<std::size_t> head(static_cast<std::size_t>(p), 0);
  std::vector<int> busy(static_cast<std::size_t>(p), 0);
  // Per-node turns: this rank's inter-node bodies go in fill order, only in its turn, after
  // all of its heads and tails arrived, at most `window` in flight, each behind the earlier
  // messages to its peer (post_remote); the last one to arrive passes the turn on.
  auto is_remote = [&](std::size_t i) { return per_node && remote_body(w.spec, rank, steps[i]); };
  std::vector<std::size_t> remote;
  std::vector<char> remote_peer(static_cast<std::size_t>(p), 0);
  for (std::size_t i : fill)
    if (is_remote(i)) remote.push_back(i), remote_peer[static_cast<std::size_t>(steps[i].peer)] = 1;
  const std::size_t window = schedule::send_window(
      w.opt.chunk_window, static_cast<std::size_t>(std::count(remote_peer.begin(), remote_peer.end(), 1)));
  std::size_t next_remote = 0, remote_inflight = 0, remote_left = remote.size();
  const auto node = static_cast<std::size_t>(node_of(w.spec, rank));
  std::size_t my_turn = 0;
  if (per_node) {
    const auto& m = w.members[node];
    my_turn = static_cast<std::size_t>(std::find(m.begin(), m.end(), rank) - m.begin());
  }
  std::vector<char> queued(n, 0);  // copied: in its peer's queue
  // The progress thread's CPU per send (SimOptions::progress_cpu_s): a send goes once the
  // thread has spent its share on it, one after the other (`deferred`: when each goes).
  const auto sends = static_cast<std::size_t>(std::count_if(fill.begin(), fill.end(), [&](std::size_t i) { return steps[i].kind == Kind::send; }));
  const double send_cpu = sends > 0 ? w.opt.progress_cpu_s / static_cast<double>(sends) : 0;
  double cpu_free = out.entry;
  std::deque<std::pair<double, std::size_t>> deferred;
  auto put = [&](std::size_t i) {
    const auto d = static_cast<std::size_t>(steps[i].peer);
    msgs[i] = {rank, steps[i].piece};
    s4u::Mailbox* box = (steps[i].edge ? w.edge_boxes : w.body_boxes)[d];
    active.push_back(box->put_async(&msgs[i], steps[i].bytes));
    active_step.push_back(i);
  };
  auto issue = [&](std::size_t i) {
    if (send_cpu <= 0) return put(i);
    cpu_free = std::max(now(), cpu_free) + send_cpu;
    deferred.emplace_back(cpu_free, i);
  };
  auto post = [&](int peer) {
    const auto d = static_cast<std::size_t>(peer);
    if (busy[d] >= w.opt.connection_depth || head[d] == queue[d].size()) return;
    if (is_remote(queue[d][head[d]])) return;  // post_remote's
    issue(queue[d][head[d]++]);
    ++busy[d];
  };

  auto post_remote = [&] {
    while (next_remote < remote.size() && my_turn <= w.turn[node]) {
      const std::size_t i = remote[next_remote];
      const auto d = static_cast<std::size_t>(steps[i].peer);
      if (!queued[i] || edges_left > 0) return;  // not copied, or heads and tails first
      if (window > 0 && remote_inflight >= window) return;
      if (queue[d][head[d]] != i || busy[d] >= w.opt.connection_depth) return;
      ++head[d];
      issue(i);
      ++busy[d];
      ++next_remote;
      ++remote_inflight;
    }
  };
  // A member whose turn comes later waits for it: a message of no bytes from the member before.
  constexpr std::size_t kTurnRecv = SIZE_MAX - 1;
  char* turn_slot = nullptr;
  if (remote_left > 0 && my_turn > w.turn[node]) {
    active.push_back(w.turn_boxes[static_cast<std::size_t>(rank)]->get_async<char>(&turn_slot));
    active_step.push_back(kTurnRecv);
  }
  std::size_t cursor = 0;
  while (cursor < fill.size() || active.size() > 0 || next_remote < remote.size() || !deferred.empty()) {
    const double t_now = now();
    for (; cursor < fill.size(); ++cursor) {
      const std::size_t i = fill[cursor];
      const Step& s = steps[i];
      if (copied[i] > t_now) break;
      // Bodies after the heads and tails (receive_mirror.hpp: held_for_edges).
      if (s.kind == Kind::send && !s.edge && edges_left > 0) break;
      if (s.kind == Kind::copy) {
        out.step_done[i] = copied[i];
        continue;
      }
      queue[static_cast<std::size_t>(s.peer)].push_back(i);
      queued[i] = 1;
      post(s.peer);
    }
    post_remote();
    while (!deferred.empty() && deferred.front().first <= now()) {
      put(deferred.front().second);
      deferred.pop_front();
    }
    double timeout = cursor < fill.size() && copied[fill[cursor]] > t_now ? copied[fill[cursor]] - t_now : -1;
    if (!deferred.empty()) {
      const double next = deferred.front().first - now();
      timeout = timeout < 0 ? next : std::min(timeout, next);
    }
    if (active.empty()) {
      if (timeout <= 0) break;  // cannot happen: a held send means heads or tails in flight
      s4u::this_actor::sleep_for(timeout);
      continue;
    }
    const ssize_t k = s4u::Comm::wait_any_for(active, timeout);
    if (k < 0) continue;  // the next send's bytes are copied
    const std::size_t i = active_step[static_cast<std::size_t>(k)];
    active[static_cast<std::size_t>(k)] = active.back();
    active.pop_back();
    active_step[static_cast<std::size_t>(k)] = active_step.back();
    active_step.pop_back();
    if (i == kEdgeRecv) {
      --edges_left;
      continue;
    }
    if (i == kTurnRecv) {
      w.turn[node] = my_turn;
      continue;
    }
    const Step& s = steps[i];
    out.step_done[i] = now();
    w.arrived[static_cast<std::size_t>(s.peer)][key(rank, s.piece)] = now();
    --busy[static_cast<std::size_t>(s.peer)];
    post(s.peer);
    if (is_remote(i)) {
      --remote_inflight;
      if (--remote_left == 0) {  // the last one ends the turn: to the next member with bodies
        const auto& m = w.members[node];
        const std::size_t t = next_turn(m, my_turn + 1, [&w](int r) { return w.has_bodies(r); });
        static char turn_token;  // (what the message carries does not matter)
        // Detached: it arrives even if this rank's call ends first (an actor's own unfinished
        // activities are cancelled when it ends).
        if (t < m.size()) w.turn_boxes[static_cast<std::size_t>(m[t])]->put_init(&turn_token, 0)->detach();
        else w.turn[node] = t;
      }
    }
  }
  s4u::Comm::wait_all(body_gets);
}

// After the simulation: each receive step's time from its sender's record, the return and the end.
void finish_tnbc(World& w, int rank, RankRun& out) {
  const auto& got = w.arrived[static_cast<std::size_t>(rank)];
  double done = out.entry;
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    const Step& s = out.steps[i];
    if (s.kind == Kind::recv) out.step_done[i] = got.at(key(s.peer, s.piece));
    done = std::max(done, out.step_done[i]);
  }
  out.done = done;
  out.ret = return_time(out, static_cast<std::size_t>(w.p()) * w.opt.bytes_to(rank), out.ret);
}

}  // namespace

SimResult simulate(const PlatformSpec& spec, const SimOptions& options) {
  World w;
  w.spec = spec;
  w.opt = options;
  const int p = spec.ranks();
  const auto np = static_cast<std::size_t>(p);
  w.pair_boxes.assign(np * np, nullptr);
  w.arrived.resize(np);
  w.result.plain_algorithm = plain_algorithm(options.block, p, options.alltoallv());
  if (options.plain) w.result.plain.resize(np);
  if (options.tnbc) w.result.tnbc.resize(np);
  if (options.tnbc_plan) w.result.tnbc_plan.resize(np);
  // Per-node turns: each node's members in the engine's turn order, each member's inter-node
  // bodies, and the first member with some (members without any pass at once).
  if (options.tnbc_plan && options.plan_per_node) {
    w.members = turn_members(spec, options.plan_order);
    w.remote_count.assign(np, 0);
    for (int r = 0; r < p; ++r)
      for (const Step& s : options.steps(r, p, options.plan_order).steps)
        w.remote_count[static_cast<std::size_t>(r)] += remote_body(spec, r, s);
    for (const auto& m : w.members) w.turn.push_back(next_turn(m, 0, [&w](int r) { return w.has_bodies(r); }));
  }
  // Both engine calls record their arrivals in w.arrived: the first call's are set aside.
  std::vector<std::unordered_map<std::uint64_t, double>> tnbc_arrived;
  run_simulation(spec, options.cfg, [&](const std::vector<s4u::Host*>& hosts) {
    w.hosts = hosts;
    for (int r = 0; r < p; ++r) {
      w.edge_boxes.push_back(s4u::Mailbox::by_name("edges>" + std::to_string(r)));
      w.body_boxes.push_back(s4u::Mailbox::by_name("bodies>" + std::to_string(r)));
      w.turn_boxes.push_back(s4u::Mailbox::by_name("turn>" + std::to_string(r)));
    }
    w.barrier = s4u::Barrier::create(static_cast<unsigned>(p));
    for (int r = 0; r < p; ++r)
      s4u::Actor::create("rank" + std::to_string(r), w.hosts[static_cast<std::size_t>(node_of(spec, r))], [&w, &tnbc_arrived, r] {
        const auto i = static_cast<std::size_t>(r);
        // One call after the other, each from a barrier: the network is idle when it begins.
        w.barrier->wait();
        if (w.opt.plain) plain_call(w, r, w.result.plain[i]);
        w.barrier->wait();
        if (w.opt.tnbc) tnbc_call(w, r, w.result.tnbc[i], {}, false);
        w.barrier->wait();
        if (r == 0) tnbc_arrived = std::exchange(w.arrived, decltype(w.arrived)(w.arrived.size()));
        w.barrier->wait();
        if (w.opt.tnbc_plan) tnbc_call(w, r, w.result.tnbc_plan[i], w.opt.plan_order, w.opt.plan_per_node);
      });
  });
  if (options.tnbc_plan)
    for (int r = 0; r < p; ++r) finish_tnbc(w, r, w.result.tnbc_plan[static_cast<std::size_t>(r)]);
  w.arrived = std::move(tnbc_arrived);
  if (options.tnbc)
    for (int r = 0; r < p; ++r) finish_tnbc(w, r, w.result.tnbc[static_cast<std::size_t>(r)]);
  return std::move(w.result);
}

namespace {

// The receive buffer's bytes [lo, hi) as addresses relative to the start of its first page.
std::pair<std::size_t, std::size_t> span_of(std::size_t offset, std::size_t bytes) {
  return {kBufferPageOffset + offset, kBufferPageOffset + offset + bytes};
}

}  // namespace

std::vector<double> page_ready(const RankRun& run, std::size_t total_bytes) {
  const std::size_t hi = span_of(0, total_bytes).second;
  const std::size_t pages = (hi + kPageBytes - 1) / kPageBytes;
  std::vector<double> ready(pages, run.ret);
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const Step& s = run.steps[i];
    if (s.kind == Kind::send || s.bytes == 0) continue;
    const auto [b, e] = span_of(s.offset, s.bytes);
    for (std::size_t pg = b / kPageBytes; pg * kPageBytes < e; ++pg) ready[pg] = std::max(ready[pg], run.step_done[i]);
  }
  // The partial first and last pages are copied into place before the call returns.
  ready.front() = run.ret;
  if (hi % kPageBytes != 0) ready.back() = run.ret;
  return ready;
}

double return_time(const RankRun& run, std::size_t total_bytes, double copied) {
  const auto [lo, hi] = span_of(0, total_bytes);
  const std::size_t full_lo = (lo + kPageBytes - 1) / kPageBytes * kPageBytes;
  const std::size_t full_hi = hi / kPageBytes * kPageBytes;
  double t = copied;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const Step& s = run.steps[i];
    if (s.kind == Kind::send || s.bytes == 0) continue;
    const auto [b, e] = span_of(s.offset, s.bytes);
    if (b < full_lo || e > full_hi) t = std::max(t, run.step_done[i]);
  }
  return t;
}

}  // namespace tnbc::sim
