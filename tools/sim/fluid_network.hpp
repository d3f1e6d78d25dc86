// The fluid model's network (fluid.cpp): flows sharing links max-min fairly, re-solved at every
// event, with SimGrid's TCP parameters; and the loop that runs it beside the ranks' timers.
// Internal to the fluid model: only fluid.cpp includes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "fluid.hpp"

namespace tnbc::sim::fluid_network {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kCross = 0.05;  // SimGrid's reverse flow for TCP's acknowledgements

// A min-heap of times keyed by a small index, with changes in place (a pair's next end moves at
// every re-solve: stale entries would pile up).
class IndexedHeap {
 public:
  explicit IndexedHeap(std::size_t n) : pos_(n, kNone) {}
  bool empty() const { return heap_.empty(); }
  double top_time() const { return heap_.front().first; }
  std::uint32_t top() const { return heap_.front().second; }
  void set(std::uint32_t i, double t) {
    std::size_t at = pos_[i];
    if (at == kNone) {
      at = heap_.size();
      heap_.emplace_back(t, i);
      pos_[i] = at;
    } else {
      heap_[at].first = t;
    }
    up(down(at));
  }
  void erase(std::uint32_t i) {
    const std::size_t at = pos_[i];
    if (at == kNone) return;
    swap(at, heap_.size() - 1);
    heap_.pop_back();
    pos_[i] = kNone;
    if (at < heap_.size()) up(down(at));
  }

 private:
  static constexpr std::size_t kNone = SIZE_MAX;
  void swap(std::size_t a, std::size_t b) {
    std::swap(heap_[a], heap_[b]);
    pos_[heap_[a].second] = a;
    pos_[heap_[b].second] = b;
  }
  std::size_t up(std::size_t at) {
    while (at > 0 && heap_[(at - 1) / 2].first > heap_[at].first) {
      swap(at, (at - 1) / 2);
      at = (at - 1) / 2;
    }
    return at;
  }
  std::size_t down(std::size_t at) {
    for (;;) {
      std::size_t m = at;
      for (std::size_t c = 2 * at + 1; c <= 2 * at + 2 && c < heap_.size(); ++c)
        if (heap_[c].first < heap_[m].first) m = c;
      if (m == at) return at;
      swap(at, m);
      at = m;
    }
  }
  std::vector<std::pair<double, std::uint32_t>> heap_;
  std::vector<std::size_t> pos_;
};

// Messages between nodes, as flows shared per pair of nodes (see fluid.hpp).
class Network {
 public:
  Network(const PlatformSpec& spec, const FluidOptions& f)
      : spec_(spec), n_(spec.nodes), f_(f),
        ends_(static_cast<std::size_t>(spec.nodes) * static_cast<std::size_t>(spec.nodes)) {
    const auto nn = static_cast<std::size_t>(n_);
    pairs_.resize(nn * nn);
    // Links: the UP and DOWN halves of each node's link and its memory link; on a fat tree also
    // the UP (leaf to spine) and DOWN halves of each leaf's link to each spine.
    const std::size_t leaves = spec.fat_tree() ? nn / static_cast<std::size_t>(spec.leaf_nodes) : 0;
    cap_.assign(3 * nn + 2 * leaves * static_cast<std::size_t>(std::max(spec.spines, 0)), spec.link_Bps);
    for (std::size_t a = 0; a < nn; ++a) cap_[2 * nn + a] = spec.mem_Bps;
    users_.resize(cap_.size());
    lat_intra_ = kMemoryLatency * f.latency_factor;
    // SimGrid's sharing penalty of a flow: its route's latency (before the latency factor) plus
    // weight-S over each link's bandwidth; a flow's share of a link goes as 1 / penalty (TCP's
    // RTT unfairness: on a fat tree, flows between leaves get less than flows within a leaf).
    inv_penalty_.resize(nn * nn);
    for (int a = 0; a < n_; ++a)
      for (int b = 0; b < n_; ++b) {
        const int h = hops(spec, a, b);
        const double pen = a == b ? kMemoryLatency + f.weight_S / spec.mem_Bps
                                  : h * spec.latency_s + h * f.weight_S / spec.link_Bps;
        inv_penalty_[static_cast<std::size_t>(a * n_ + b)] = pen > 0 ? 1 / pen : 1;
      }
  }

  // A message of `bytes` from node a to node b, posted at `now`: it pays its latency, then moves.
  void post(int a, int b, std::uint64_t bytes, std::uint64_t msg, double now) {
    const auto pair = static_cast<std::uint32_t>(a * n_ + b);
    // One queue per latency, so that each stays in time order.
    const int h = a == b ? 0 : hops(spec_, a, b);
    const double lat = a == b ? lat_intra_ : h * spec_.latency_s * f_.latency_factor;
    waiting_[h == 0 ? 0 : h == 2 ? 1 : 2].push_back({now + lat, pair, bytes, msg});
  }

  // The time of the next thing that happens in the network (kInf: nothing moves).
  double next_time() {
    if (dirty_) solve();
    double t = ends_.empty() ? kInf : ends_.top_time();
    for (const std::deque<Waiting>& q : waiting_)
      if (!q.empty()) t = std::min(t, q.front().t);
    return t;
  }

  // Handles the next thing at `now` (= next_time()); messages that arrived go to `deliver`.
  template <typename Deliver>
  void step(double now, Deliver&& deliver) {
    now_ = now;
    for (std::deque<Waiting>* q : {&waiting_[1], &waiting_[2], &waiting_[0]})
      if (!q->empty() && q->front().t <= now) {
        const Waiting w = q->front();
        q->pop_front();
        if (w.bytes == 0) {
          deliver(w.msg, now);
          return;
        }
        Pair& p = pairs_[w.pair];
        advance(p);
        p.heap.emplace_back(p.v + static_cast<double>(w.bytes), w.msg);
        std::push_heap(p.heap.begin(), p.heap.end(), std::greater<>());
        if (++p.k == 1 || f_.weights == FluidOptions::Weights::per_message) dirty_ = true;
        reschedule(w.pair);
        return;
      }
    const std::uint32_t pair = ends_.top();
    Pair& p = pairs_[pair];
    advance(p);
    // The message this end was computed for, and every other one done by now (to a
    // picosecond: messages that started together end together).
    for (bool first = true; !p.heap.empty(); first = false) {
      const double left = p.heap.front().first - p.v;
      if (!first && left > 0 && left * p.k / p.rate > 1e-12) break;
      const std::uint64_t msg = p.heap.front().second;
      std::pop_heap(p.heap.begin(), p.heap.end(), std::greater<>());
      p.heap.pop_back();
      --p.k;
      if (p.k == 0 || f_.weights == FluidOptions::Weights::per_message) dirty_ = true;
      deliver(msg, now);
    }
    if (p.k == 0) p.v = 0;
    reschedule(pair);
  }

  std::size_t solves() const { return solves_; }

 private:
  struct Waiting {
    double t;
    std::uint32_t pair;
    std::uint64_t bytes;
    std::uint64_t msg;
  };
  struct Pair {
    double rate = 0;  // bytes/s the pair's messages move at together
    double v = 0;     // bytes each of its messages has moved since the clock started
    double t_last = 0;
    std::uint32_t k = 0;  // messages moving
    std::vector<std::pair<double, std::uint64_t>> heap;  // (v at which it is done, message), min first
  };

  void advance(Pair& p) {
    if (p.k > 0 && p.rate > 0) p.v += (now_ - p.t_last) * p.rate / p.k;
    p.t_last = now_;
  }

  void reschedule(std::uint32_t i) {
    Pair& p = pairs_[i];
    if (p.k == 0 || p.rate <= 0) {
      ends_.erase(i);
      return;
    }
    const double t = p.t_last + std::max(0.0, p.heap.front().first - p.v) * p.k / p.rate;
    ends_.set(i, std::max(t, now_));
  }

  // Max-min sharing of the links among the pairs that move data (SimGrid's lmm::System, for
  // this platform): repeatedly the link with the least share per unit of weight fixes the
  // rate of every pair crossing it.
  void solve() {
    dirty_ = false;
    ++solves_;
    const int n = n_;
    const auto nn = static_cast<std::size_t>(n);
    const bool per_msg = f_.weights == FluidOptions::Weights::per_message;
    auto weight = [&](std::size_t i) {
      const Pair& p = pairs_[i];
      return (per_msg ? static_cast<double>(p.k) : (p.k > 0 ? 1.0 : 0.0)) * inv_penalty_[i];
    };
    const std::size_t nl = cap_.size();
    rem_ = cap_;
    sumw_.assign(nl, 0);
    cnt_.assign(nl, 0);
    value_.assign(pairs_.size(), -1);
    for (std::vector<std::uint32_t>& u : users_) u.clear();
    const double cross = f_.crosstraffic ? kCross : 0;
    const auto spines = static_cast<std::size_t>(std::max(spec_.spines, 0));
    // Between leaves: the UP half of leaf l's link to spine s, and its DOWN half.
    auto leaf_up = [&](int l, int s) { return 3 * nn + 2 * (static_cast<std::size_t>(l) * spines + static_cast<std::size_t>(s)); };
    auto route = [&](int a, int b, double use, auto&& fn) {  // SimGrid's route from node a to b
      fn(static_cast<std::size_t>(a), use);
      if (hops(spec_, a, b) == 4) {
        const int s = spine_to(spec_, b);
        fn(leaf_up(leaf_of(spec_, a), s), use);
        fn(leaf_up(leaf_of(spec_, b), s) + 1, use);
      }
      fn(nn + static_cast<std::size_t>(b), use);
    };
    // The links pair (a, b) crosses, with its use of each per unit of rate: its route, and with
    // cross-traffic the route back (SimGrid routes it from b to a: through spine a mod spines).
    auto links = [&](int a, int b, auto&& fn) {
      if (a == b) {
        fn(2 * nn + static_cast<std::size_t>(a), 1 + cross);
        return;
      }
      route(a, b, 1.0, fn);
      if (cross > 0) route(b, a, cross, fn);
    };
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const auto i = static_cast<std::uint32_t>(a * n + b);
        if (pairs_[i].k == 0) continue;
        const double w = weight(i);
        links(a, b, [&](std::size_t c, double use) {
          sumw_[c] += use * w;
          ++cnt_[c];
          users_[c].push_back(i);
        });
      }
    for (;;) {
      std::size_t best = SIZE_MAX;
      double share = kInf;
      for (std::size_t c = 0; c < nl; ++c)
        if (cnt_[c] > 0 && sumw_[c] > 0) {
          const double s = std::max(0.0, rem_[c]) / sumw_[c];
          if (s < share) share = s, best = c;
        }
      if (best == SIZE_MAX) break;
      // The pairs crossing link `best` that are not fixed yet get its share.
      for (const std::uint32_t i : users_[best]) {
        if (value_[i] >= 0) continue;
        const double w = weight(i);
        value_[i] = share * w;
        links(static_cast<int>(i) / n, static_cast<int>(i) % n, [&](std::size_t c, double use) {
          rem_[c] -= use * value_[i];
          sumw_[c] -= use * w;
          --cnt_[c];
        });
      }
      cnt_[best] = 0;
    }
    for (std::size_t i = 0; i < pairs_.size(); ++i) {
      Pair& p = pairs_[i];
      const double rate = p.k == 0 ? 0 : f_.bandwidth_factor * value_[i];
      if (rate == p.rate) continue;
      advance(p);
      p.rate = rate;
      reschedule(static_cast<std::uint32_t>(i));
    }
  }

  PlatformSpec spec_;
  int n_;
  FluidOptions f_;
  double lat_intra_ = 0, now_ = 0;
  std::vector<Pair> pairs_;
  std::vector<double> cap_, rem_, sumw_, value_, inv_penalty_;
  std::vector<int> cnt_;
  std::vector<std::vector<std::uint32_t>> users_;  // per link: the busy pairs that cross it
  std::deque<Waiting> waiting_[3];  // messages paying their latency: within a node, 2 hops, 4 hops
  IndexedHeap ends_;  // per pair: when its next message is done
  bool dirty_ = false;
  std::size_t solves_ = 0;
};

// A timer per rank, earliest first.
using Timers = std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>;

// Runs the network and the timers until nothing is left.
template <typename OnTimer, typename Deliver>
void run(Network& net, Timers& timers, OnTimer&& on_timer, Deliver&& deliver) {
  for (;;) {
    const double tn = net.next_time();
    const double tt = timers.empty() ? kInf : timers.top().first;
    if (tn == kInf && tt == kInf) return;
    if (tt <= tn) {
      const auto [t, r] = timers.top();
      timers.pop();
      on_timer(r, t);
    } else {
      net.step(tn, deliver);
    }
  }
}

}  // namespace tnbc::sim::fluid_network
