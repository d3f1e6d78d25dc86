// The send side of an op: a copy in engine memory, so the caller may reuse its buffer at once,
// filled step by step while the first sends already leave.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>
#include <cstdint>
#include <memory>

#include "buffer_pool.hpp"

namespace tnbc::shim::replay::engine {

struct Op;

/// Send side: a copy, so the caller may reuse its buffer at once.  The caller fills it after
/// handing the op over, step by step in priority order, and marks each step it has copied:
/// the progress thread posts a send (or counts a local copy as done) only once it is marked,
/// so the first sends leave while the rest is still being copied.
struct SendCopy {
  PoolBuffer send_copy;  // none: the sends read the caller's buffer (a call that waits)
  std::size_t send_lo = 0;  // step offsets minus send_lo index send_copy
  const char* base = nullptr;  // the bytes of a send step at offset o are at base + o
  std::unique_ptr<std::atomic<std::uint8_t>[]> copied;  // per step; null: nothing to copy
  bool step_copied(std::size_t i) const {
    return !copied || copied[i].load(std::memory_order_acquire) != 0;
  }
};

/// The span of `op`'s send steps, [first, second) as offsets from the send buffer (empty, first
/// >= second, where it sends nothing).
std::pair<std::size_t, std::size_t> send_span(const Op& op);
/// Bytes of the send copy of `op` (the span of its send steps).
std::size_t send_copy_bytes(const Op& op);

/// Prepares the send side.  stage: takes the copy's buffer from the pool (not filled yet:
/// fill_send_side does that after the op is handed over); returns false, taking nothing, when
/// the pool has no room for it.  Not staged (a call that waits for its completion): the sends read `sendbuf` itself.
/// A local copy step is never staged: the caller copies it straight into place.
bool prepare_send_side(Op& op, const void* sendbuf, bool stage);

/// Copies the send side step by step, edge pieces first, then in schedule order, marking each
/// step for the progress thread as soon as its bytes are in place (not staged: only the local
/// copy steps copy anything).
/// Send steps may share bytes (Alltoallv displacements may overlap; a Bcast root sends each
/// segment to every child): each byte is copied once, since an earlier step's send may already
/// be on the wire from those bytes.
void fill_send_side(Op& op, const void* sendbuf);

/// True when some send byte lies on a page the receive would protect (e.g. one array holding
/// both sides at disjoint displacements).
bool send_meets_receive(const Op& op, const void* sendbuf, std::uintptr_t ps);

}  // namespace tnbc::shim::replay::engine
