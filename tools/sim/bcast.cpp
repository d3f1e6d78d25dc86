#include "bcast.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "priority/cost_model.hpp"

namespace tnbc::sim {

namespace s4u = simgrid::s4u;
using schedule::Kind;
using schedule::Step;

std::string plain_bcast_algorithm(std::size_t bytes, int size) {
  if (bytes < 12288 || size < 8) return "binomial";
  const bool pof2 = (size & (size - 1)) == 0;
  if (bytes < 524288 && pof2) return "scatter + recursive doubling allgather";
  return "scatter + ring allgather";
}

bool plain_bcast_smp(const PlatformSpec& spec, std::size_t bytes) {
  return spec.ppn > 1 && plain_bcast_algorithm(bytes, spec.ranks()) != "scatter + ring allgather";
}

std::string plain_bcast_description(const PlatformSpec& spec, std::size_t bytes) {
  const std::string alg = plain_bcast_algorithm(bytes, spec.ranks());
  if (!plain_bcast_smp(spec, bytes)) return alg;
  const std::string among = plain_bcast_algorithm(bytes, spec.nodes), within = plain_bcast_algorithm(bytes, spec.ppn);
  if (alg == "binomial")
    return "smp: the root's node's local root, " + among + " among the nodes, " + within + " within each";
  return "smp: " + within + " within the root's node, " + among + " among the nodes, " + within + " within the others";
}

namespace {

/// Seed 003's a (one hop: 2 latencies and the bytes at the link's rate) and b (one more send of
/// the root: the bytes at the link's rate) on `spec`, in seconds.
std::pair<double, double> seed_costs(const PlatformSpec& spec, std::size_t bytes) {
  const double b = static_cast<double>(bytes) / spec.link_Bps;
  return {2 * spec.latency_s + b, b};
}

}  // namespace

double seed_chains_time(const PlatformSpec& spec, std::size_t bytes, int k) {
  const int p = spec.ranks();
  if (p <= 1) return 0;
  const auto [a, b] = seed_costs(spec, bytes);
  return (static_cast<double>(p - 1) / k + 1) * a + (k - 1) * b;
}

double seed_best_chains(const PlatformSpec& spec, std::size_t bytes) {
  const auto [a, b] = seed_costs(spec, bytes);
  return std::sqrt(a * (spec.ranks() - 1) / b);
}

double bcast_ready(const RankRun& run) {
  double t = run.ret;
  for (std::size_t i = 0; i < run.steps.size(); ++i)
    if (run.steps[i].kind == Kind::recv) t = std::max(t, run.step_done[i]);
  return t;
}

namespace {

double now() { return s4u::Engine::get_clock(); }

struct World {
  PlatformSpec spec;
  BcastOptions opt;
  s4u::BarrierPtr barrier;
  BcastResult result;
  int p() const { return spec.ranks(); }
  // Messages from `src` to `dst`; `tag` tells a pair's messages apart (plain: 0, engine: piece + 1).
  static s4u::Mailbox* box(int src, int dst, int tag) {
    return s4u::Mailbox::by_name(std::to_string(src) + ">" + std::to_string(dst) + "#" + std::to_string(tag));
  }
};

char token;  // the payload: the simulation reads nothing from the messages

// Blocking point-to-point calls of plain MPICH, in absolute ranks.
void send(int src, int dst, std::size_t bytes) { World::box(src, dst, 0)->put(&token, static_cast<std::uint64_t>(bytes)); }
void recv(int src, int dst) { World::box(src, dst, 0)->get<char>(); }
void sendrecv(int self, int dst, std::size_t bytes, int src) {
  s4u::CommPtr s = World::box(self, dst, 0)->put_async(&token, static_cast<std::uint64_t>(bytes));
  World::box(src, self, 0)->get<char>();
  s->wait();
}

// Plain MPICH's classic MPI_Bcast (MPIR_Bcast_intra_binomial, _scatter_recursive_doubling_allgather,
// _scatter_ring_allgather) among `group` (absolute ranks) from group[root_idx], as group[me]; the
// algorithm by the group's size.
void classic(const std::vector<int>& group, int root_idx, int me, std::size_t n) {
  const int p = static_cast<int>(group.size());
  if (p <= 1) return;
  const int rank = group[static_cast<std::size_t>(me)];
  const int v = (me - root_idx + p) % p;
  auto abs = [&](int rel) { return group[static_cast<std::size_t>((rel + root_idx) % p)]; };
  const std::string alg = plain_bcast_algorithm(n, p);
  if (alg == "binomial") {
    int mask = 1;
    for (; mask < p; mask <<= 1)
      if (v & mask) {
        recv(abs(v - mask), rank);
        break;
      }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < p) send(rank, abs(v + mask), n);
    return;
  }
  // Scatter: rank v ends up with chunk v (of ceil(n / p) bytes) and passes its subtree's on.
  const std::size_t ss = (n + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p);
  auto span = [&](int first, int chunks) {  // bytes of chunks [first, first + chunks)
    const std::size_t lo = std::min(n, static_cast<std::size_t>(first) * ss);
    return std::min(n - lo, static_cast<std::size_t>(chunks) * ss);
  };
  int mask = 1;
  for (; mask < p; mask <<= 1)
    if (v & mask) {
      if (span(v, mask) > 0) recv(abs(v - mask), rank);
      break;
    }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p && span(v + mask, mask) > 0) send(rank, abs(v + mask), span(v + mask, mask));
  if (alg == "scatter + ring allgather") {
    int j = v, jnext = (v - 1 + p) % p;
    for (int i = 1; i < p; ++i) {
      sendrecv(rank, abs((v + 1) % p), span(j, 1), abs((v - 1 + p) % p));
      j = jnext;
      jnext = (jnext - 1 + p) % p;
    }
  } else {
    for (int m = 1, i = 0; m < p; m <<= 1, ++i) {
      const int dst = v ^ m;
      sendrecv(rank, abs(dst), span(v >> i << i, m), abs(dst));
    }
  }
}

// Plain MPICH's MPI_Bcast on MPI_COMM_WORLD (plain_bcast_description says which algorithm).
void plain_call(World& w, int rank, RankRun& out) {
  const PlatformSpec& spec = w.spec;
  const int p = w.p(), root = w.opt.root;
  const std::size_t n = w.opt.bytes;
  out.entry = now();
  std::vector<int> all(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) all[static_cast<std::size_t>(r)] = r;
  const std::string alg = plain_bcast_algorithm(n, p);
  if (!plain_bcast_smp(spec, n)) {
    classic(all, root, rank, n);
    out.ret = out.done = now();
    return;
  }
  // MPIR_Bcast_intra_smp: each node's ranks ascending (its local rank 0 first), the nodes' local
  // roots in node order (as their world ranks order them).
  const std::vector<std::vector<int>> members = node_members(spec);
  std::vector<int> roots;
  for (const auto& m : members) roots.push_back(m.front());
  const int rn = node_of(spec, root), mine = node_of(spec, rank);
  const auto& local = members[static_cast<std::size_t>(mine)];
  const int me = static_cast<int>(std::find(local.begin(), local.end(), rank) - local.begin());
  const int local_root = members[static_cast<std::size_t>(rn)].front();
  if (alg == "binomial") {
    // Short: the root hands its buffer to its node's local root, the local roots broadcast
    // among the nodes, then each node within.
    if (root != local_root) {
      if (rank == root) send(root, local_root, n);
      else if (rank == local_root) recv(root, local_root);
    }
    if (me == 0) classic(roots, rn, mine, n);
    classic(local, 0, me, n);
  } else {
    // Medium on a power of two: the root's node within (from the root) unless the root is its
    // local root, the local roots among the nodes, then the other nodes within.
    const auto& rl = members[static_cast<std::size_t>(rn)];
    const int root_idx = static_cast<int>(std::find(rl.begin(), rl.end(), root) - rl.begin());
    if (root != local_root && mine == rn) classic(local, root_idx, me, n);
    if (me == 0) classic(roots, rn, mine, n);
    if (mine != rn || root == local_root) classic(local, 0, me, n);
  }
  out.ret = out.done = now();
}

// The engine's MPI_Bcast in one shape.
void tnbc_call(World& w, int rank, RankRun& out, const BcastShape& shape) {
  const int p = w.p();
  out.steps = schedule::bcast(rank, p, w.opt.root, w.opt.bytes, shape.segments, shape.chains, {}).steps;
  const std::vector<Step>& steps = out.steps;
  const std::size_t n = steps.size();
  out.step_done.assign(n, -1);
  out.entry = now();
  std::vector<s4u::CommPtr> active;
  std::vector<std::size_t> active_step;
  std::vector<char*> got(n, nullptr);
  for (std::size_t i = 0; i < n; ++i)
    if (steps[i].kind == Kind::recv) {
      active.push_back(World::box(steps[i].peer, rank, steps[i].piece + 1)->get_async<char>(&got[i]));
      active_step.push_back(i);
    }
  // The root copies its buffer first (the send side), edge pieces first, each piece once.
  std::vector<double> copied(n, out.entry);
  double t = out.entry + w.opt.setup_s;
  const double copy_rate = w.opt.copy_Bps > 0 ? w.opt.copy_Bps : w.spec.mem_Bps;
  if (rank == w.opt.root) {
    std::vector<int> done_piece;
    for (int edge = 1; edge >= 0; --edge)
      for (std::size_t i = 0; i < n; ++i)
        if (steps[i].edge == (edge == 1)) {
          if (std::find(done_piece.begin(), done_piece.end(), steps[i].piece) == done_piece.end()) {
            t += static_cast<double>(steps[i].bytes) / copy_rate;
            done_piece.push_back(steps[i].piece);
          }
          copied[i] = t;
        }
  }
  const double copy_end = t;
  // Per child: its sends in schedule order, the next one to post and how many are in flight.
  std::vector<std::vector<std::size_t>> queue(static_cast<std::size_t>(p));
  std::vector<std::size_t> head(static_cast<std::size_t>(p), 0);
  std::vector<int> busy(static_cast<std::size_t>(p), 0);
  for (std::size_t i = 0; i < n; ++i)
    if (steps[i].kind == Kind::send) queue[static_cast<std::size_t>(steps[i].peer)].push_back(i);
  auto ready = [&](std::size_t i) {
    return (steps[i].after < 0 || out.step_done[static_cast<std::size_t>(steps[i].after)] >= 0) && copied[i] <= now();
  };
  auto post = [&](int child) {
    const auto c = static_cast<std::size_t>(child);
    while (busy[c] < w.opt.connection_depth && head[c] < queue[c].size() && ready(queue[c][head[c]])) {
      const std::size_t i = queue[c][head[c]++];
      active.push_back(World::box(rank, child, steps[i].piece + 1)->put_async(&token, static_cast<std::uint64_t>(steps[i].bytes)));
      active_step.push_back(i);
      ++busy[c];
    }
  };
  std::size_t sends_left = 0;
  std::vector<int> children;
  for (int c = 0; c < p; ++c)
    if (!queue[static_cast<std::size_t>(c)].empty()) {
      children.push_back(c);
      sends_left += queue[static_cast<std::size_t>(c)].size();
    }
  for (;;) {
    for (int c : children) post(c);
    if (active.empty() && sends_left == 0) break;
    // The next copy the root finishes, if a send waits for it.
    double next_copy = -1;
    for (int c : children) {
      const auto ci = static_cast<std::size_t>(c);
      if (head[ci] < queue[ci].size() && copied[queue[ci][head[ci]]] > now())
        next_copy = next_copy < 0 ? copied[queue[ci][head[ci]]] : std::min(next_copy, copied[queue[ci][head[ci]]]);
    }
    if (active.empty()) {
      s4u::this_actor::sleep_until(next_copy);
      continue;
    }
    const ssize_t k = s4u::Comm::wait_any_for(active, next_copy < 0 ? -1 : next_copy - now());
    if (k < 0) continue;
    const std::size_t i = active_step[static_cast<std::size_t>(k)];
    active[static_cast<std::size_t>(k)] = active.back();
    active.pop_back();
    active_step[static_cast<std::size_t>(k)] = active_step.back();
    active_step.pop_back();
    out.step_done[i] = now();
    if (steps[i].kind == Kind::send) {
      --busy[static_cast<std::size_t>(steps[i].peer)];
      --sends_left;
    }
  }
  out.done = out.entry;
  for (double d : out.step_done) out.done = std::max(out.done, d);
  out.ret = return_time(out, w.opt.bytes, copy_end);
}

}  // namespace

BcastResult simulate_bcast(const PlatformSpec& spec, const BcastOptions& options) {
  World w;
  w.spec = spec;
  w.opt = options;
  const int p = spec.ranks();
  const auto np = static_cast<std::size_t>(p);
  w.result.plain_algorithm = plain_bcast_description(spec, options.bytes);
  if (options.plain) w.result.plain.resize(np);
  w.result.tnbc.assign(options.shapes.size(), std::vector<RankRun>(np));
  run_simulation(spec, options.cfg, [&](const std::vector<s4u::Host*>& hosts) {
    w.barrier = s4u::Barrier::create(static_cast<unsigned>(p));
    for (int r = 0; r < p; ++r)
      s4u::Actor::create("rank" + std::to_string(r), hosts[static_cast<std::size_t>(node_of(spec, r))], [&w, r] {
        const auto i = static_cast<std::size_t>(r);
        w.barrier->wait();
        if (w.opt.plain) plain_call(w, r, w.result.plain[i]);
        for (std::size_t s = 0; s < w.opt.shapes.size(); ++s) {
          w.barrier->wait();
          tnbc_call(w, r, w.result.tnbc[s][i], w.opt.shapes[s]);
        }
      });
  });
  return std::move(w.result);
}

}  // namespace tnbc::sim
