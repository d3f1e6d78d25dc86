// Preparing and filling the send copy (send_copy.hpp).
#include "send_copy.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "op.hpp"

namespace tnbc::shim::replay::engine {

std::pair<std::size_t, std::size_t> send_span(const Op& op) {
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& s : op.steps)
    if (s.kind == Kind::send) lo = std::min(lo, s.offset), hi = std::max(hi, s.offset + s.bytes);
  return {lo, hi};
}

std::size_t send_copy_bytes(const Op& op) {
  const auto [lo, hi] = send_span(op);
  return hi > lo ? hi - lo : 0;
}

bool prepare_send_side(Op& op, const void* sendbuf, bool stage) {
  const auto [lo, hi] = send_span(op);
  op.send.base = static_cast<const char*>(sendbuf);
  if (stage && hi > lo) {
    op.send.send_copy = PoolBuffer(BufferPool::instance().acquire(hi - lo));
    if (!op.send.send_copy) return false;
    op.send.send_lo = lo;
    op.send.base = op.send.send_copy.get() - lo;
  }
  op.send.copied.reset(new std::atomic<std::uint8_t>[op.steps.size()]);
  for (std::size_t i = 0; i < op.steps.size(); ++i) op.send.copied[i].store(0, std::memory_order_relaxed);
  return true;
}

void fill_send_side(Op& op, const void* sendbuf) {
  const auto* src = static_cast<const char*>(sendbuf);
  std::map<std::size_t, std::size_t> done;  // copied send-side ranges [first, second), disjoint
  auto copy_once = [&](std::size_t a, std::size_t b) {
    auto copy = [&](std::size_t lo, std::size_t hi) {
      std::memcpy(op.send.send_copy.get() + (lo - op.send.send_lo), src + lo, hi - lo);
    };
    auto it = done.upper_bound(a);
    if (it != done.begin() && std::prev(it)->second >= a) --it;  // a range reaching a
    std::size_t cur = a, lo = a, hi = b;
    for (; it != done.end() && it->first <= b; it = done.erase(it)) {  // merge what [a, b) meets
      if (cur < it->first) copy(cur, it->first);
      cur = std::max(cur, it->second);
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
    }
    if (cur < b) copy(cur, b);
    done.emplace(lo, hi);
  };
  auto fill = [&](std::size_t i) {
    const Step& s = op.steps[i];
    if (s.kind == Kind::copy) std::memcpy(op.recv.mirror_at(s.offset), src + s.src_offset, s.bytes);
    else if (s.kind == Kind::send && op.send.send_copy) copy_once(s.offset, s.offset + s.bytes);
    op.send.copied[i].store(1, std::memory_order_release);
  };
  for (std::size_t i = 0; i < op.steps.size(); ++i)
    if (op.steps[i].edge) fill(i);
  for (std::size_t i = 0; i < op.steps.size(); ++i)
    if (!op.steps[i].edge) fill(i);
}

bool send_meets_receive(const Op& op, const void* sendbuf, std::uintptr_t ps) {
  const auto sb = reinterpret_cast<std::uintptr_t>(sendbuf), rb = reinterpret_cast<std::uintptr_t>(op.recv.recv_base);
  std::uintptr_t slo = UINTPTR_MAX, shi = 0, rlo = UINTPTR_MAX, rhi = 0;
  for (const auto& s : op.steps) {
    if (s.kind == Kind::send) slo = std::min(slo, sb + s.offset), shi = std::max(shi, sb + s.offset + s.bytes);
    if (s.kind == Kind::copy) slo = std::min(slo, sb + s.src_offset), shi = std::max(shi, sb + s.src_offset + s.bytes);
    if (s.kind != Kind::send) rlo = std::min(rlo, rb + s.offset), rhi = std::max(rhi, rb + s.offset + s.bytes);
  }
  // Only the receive span's full pages get protected; its partial first and last page never do.
  return shi > slo && rhi > rlo && slo < page_floor(rhi, ps) && shi > page_ceil(rlo, ps);
}

}  // namespace tnbc::shim::replay::engine
