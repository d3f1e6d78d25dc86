// Per-node priority: the ranks of a node inject their inter-node sends one after the other, in
// the plan's order, taking turns on the node's turn counters (shadow.hpp draws them); and the
// send window, which bounds the inter-node body chunks in flight under per-node priority.
// The counters turn_calls, gated_sends and turn_wait_ns count the turns taken and the waits
// for them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "schedule.hpp"
#include "shadow.hpp"

namespace tnbc::shim::replay::engine {

using schedule::Kind;
using schedule::Step;

/// Collectives that took turns on their node (whether or not they had to wait), inter-node
/// sends that had to wait for this rank's turn on its node, and the time collectives waited
/// for it.
extern std::atomic<std::uint64_t> g_turn_calls;
extern std::atomic<std::uint64_t> g_gated_sends;
extern std::atomic<std::uint64_t> g_turn_wait_ns;
/// The deepest send window a collective under per-node priority used for its sends to other
/// nodes (a plan entry's `window`, or TNBC_CHUNK_WINDOW, raised to one chunk per peer on
/// another node: schedule::send_window); 0 while none sent to another node.
extern std::atomic<std::uint64_t> g_send_window_max;

/// One op's turn on its node.  Per-node priority: sends to other nodes wait until the ranks of
/// this node that come earlier in the plan's order have injected theirs (*counter == gate_value),
/// then this rank's turn ends when its own inter-node sends completed (*counter = gate_value + 1).
/// Without per-node priority `counter` is null and nothing is gated.
struct NodeTurn {
  std::atomic<std::uint64_t>* counter = nullptr;  // the collective's slot of the node's turn counters
  std::uint64_t gate_value = 0;
  bool first_on_node = false;
  bool turn_passed = false;
  // When a send first found the gate closed (0: never), and how many inter-node sends were
  // held then: all of them, since the gate only ever opens and none could be posted before.
  std::uint64_t held_since = 0;
  std::size_t held_sends = 0;
  const std::vector<char>* on_node = nullptr;
  std::size_t remote_sends_left = 0;
  std::size_t remote_peers = 0;  // the ranks on other nodes it sends bodies to (the send window)

  bool gate_open() const {
    return counter == nullptr || first_on_node || counter->load(std::memory_order_acquire) >= gate_value;
  }
  void pass_turn();
  /// A send the node's turn gates: a body chunk to another node.  Heads and tails are exempt:
  /// receivers wait for them before returning, and they are small.
  bool remote(const Step& s) const {
    return s.kind == Kind::send && !s.edge && on_node != nullptr &&
           !(*on_node)[static_cast<std::size_t>(s.peer)];
  }
  /// With nothing (left) to send off the node, hands the turn on at once, when it is ours;
  /// true when it did.
  bool pass_if_nothing_to_send();
  /// For a remote send that may otherwise go: false while it is not this rank's turn on the
  /// node yet; when the turn has come, accounts for the wait once.
  bool may_send();
  /// Step `s` completed: the last remote send ends this rank's turn (the next rank may inject).
  void step_done(const Step& s) {
    if (remote(s) && --remote_sends_left == 0) pass_turn();
  }
};

/// Gates the inter-node sends among `steps` behind the ranks of this node that come earlier in
/// `order` (sets up the node's turn counters at the first call for `sh`).
void gate(NodeTurn& t, const std::vector<Step>& steps, Shadow& sh, std::uint32_t seq, int rank,
          std::span<const int> order);

struct SendWindow {
  std::size_t window = 0;  // windowed sends in flight (0: no window), see progress()
  /// A send the window orders and bounds, posted as a synchronous send (see post()): an
  /// inter-node body chunk under per-node priority.  The window makes a turn end when the data
  /// has reached the other node, not when it sits in this rank's socket buffers, and keeps
  /// every rank's share of the link's queue short, so that the acknowledgements of synchronous
  /// sends, which travel behind the other node's data, come back soon.  Without per-node
  /// priority there are no turns, and sends within a node have no link to share: they all go
  /// at once as standard sends (each destination's messages still travel in schedule order).
  bool windowed(const Step& s, const NodeTurn& t) const { return window > 0 && t.remote(s); }
};

}  // namespace tnbc::shim::replay::engine
