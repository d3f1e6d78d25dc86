// Taking turns on the node (node_turn.hpp): the gate, passing the turn on, and the waits for it.
#include "node_turn.hpp"

#include <algorithm>

#include "schedule_pieces.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay::engine {

std::atomic<std::uint64_t> g_turn_calls{0};    // collectives that took turns on their node
std::atomic<std::uint64_t> g_gated_sends{0};   // inter-node sends held for the node's turn
std::atomic<std::uint64_t> g_send_window_max{0};
std::atomic<std::uint64_t> g_turn_wait_ns{0};  // time collectives waited for the node's turn

void NodeTurn::pass_turn() {
  // Never lower the counter: a later collective may already have moved it on.
  std::uint64_t cur = counter->load(std::memory_order_acquire);
  while (cur < gate_value + 1 && !counter->compare_exchange_weak(cur, gate_value + 1, std::memory_order_acq_rel)) {
  }
  turn_passed = true;
}

bool NodeTurn::pass_if_nothing_to_send() {
  if (counter == nullptr || turn_passed || remote_sends_left != 0 || !gate_open()) return false;
  pass_turn();
  return true;
}

bool NodeTurn::may_send() {
  if (!gate_open()) {  // not this rank's turn on the node yet
    if (held_since == 0) held_since = util::now_ns(), held_sends = remote_sends_left;
    return false;
  }
  if (held_since != 0) {  // the turn came: account for the wait once
    g_turn_wait_ns.fetch_add(util::now_ns() - held_since, std::memory_order_relaxed);
    g_gated_sends.fetch_add(held_sends, std::memory_order_relaxed);
    held_since = 0;
    held_sends = 0;
  }
  return true;
}

void gate(NodeTurn& t, const std::vector<Step>& steps, Shadow& sh, std::uint32_t seq, int rank,
          std::span<const int> order) {
  if (!prepare_node(sh)) return;
  const std::vector<int> members = schedule::turn_order(sh.node_members, order);
  const auto k = static_cast<std::uint64_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  t.counter = &sh.turns[seq % kTurnSlots];
  t.gate_value = static_cast<std::uint64_t>(seq) * kTurnStride + k;
  t.first_on_node = k == 0;
  t.on_node = &sh.on_node;
  g_turn_calls.fetch_add(1, std::memory_order_relaxed);
  std::vector<char> peer_seen(sh.on_node.size(), 0);
  for (const Step& s : steps) {
    if (!t.remote(s)) continue;
    ++t.remote_sends_left;
    char& seen = peer_seen[static_cast<std::size_t>(s.peer)];
    if (!seen) seen = 1, ++t.remote_peers;
  }
}

}  // namespace tnbc::shim::replay::engine
