// The receive side of an op: the mirror the receives land in, the guarded user pages, the edge
// pages (partial first and last page) the call copies before it returns, publishing completed
// pages over the user's (mremap) and unmapping what is left when the op retires.  It changes
// g_guarded_calls (io_interpose.hpp): one per op with registered pages.
//
//   the receive span's pages in the user's buffer
//   +-----------+-------------+-------------+-- ... --+---------------+-----------+
//   | first     | full page 0 | full page 1 |         | full page     | last      |
//   | (partial) | PROT_NONE   | PROT_NONE   |         | guard_pages-1 | (partial) |
//   +-----------+-------------+-------------+-- ... --+---------------+-----------+
//   ^ cover_lo  ^ guard_lo                                                        ^ cover_hi
//
//   the mirror: the same layout, mapped by the engine; receives land in it
//
// Full page i is moved over the user's (mremap) once the holders[i] steps that write or read it
// completed, then marked published[i] = 1.  The partial first and last page (edge pages, when
// the span does not start or end on a page boundary) are never protected: the calling thread
// copies their bytes from the mirror before the call returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "schedule.hpp"

namespace tnbc::shim::engine {

using schedule::Kind;
using schedule::Step;

struct Op;

/// Receive side.  All offsets are relative to recv_base (the user's buffer).
struct ReceiveMirror {
  char* recv_base = nullptr;
  std::uintptr_t cover_lo = 0, cover_hi = 0;  // page-aligned cover of the receive span
  char* mirror = nullptr;                     // same layout as the cover
  std::uintptr_t guard_lo = 0;                // first full page; pages indexed from here
  std::size_t guard_pages = 0;
  std::unique_ptr<std::atomic<std::uint8_t>[]> published;  // per full page
  std::vector<int> holders;                                // steps still using each full page
  std::vector<std::uint8_t> moved;                         // mirror page moved to the user
  int slot = -1;
  // Direct: no mirror, no guard; receives land in the user's buffer and the caller waits for
  // the whole operation (the call does not return early, but speaks the same protocol).
  bool direct = false;

  bool overlaps(std::uintptr_t p, std::size_t n) const {
    return cover_hi > cover_lo && p < cover_hi && p + n > cover_lo;
  }
  char* mirror_at(std::size_t offset) const {
    if (direct) return recv_base + offset;
    return mirror + (reinterpret_cast<std::uintptr_t>(recv_base) + offset - cover_lo);
  }
};

/// Edge pages: sub-messages that touch them complete before the call returns.
struct EdgePages {
  std::vector<char> edge_step;
  std::atomic<int> edge_pending{0};
  // Alltoall(v): body sends wait until this rank has received all its head and tail pieces.
  // By then every peer has entered the collective and posted its own heads and tails, so they
  // are on the way ahead of this rank's bulk data instead of queued behind it in the link's
  // queue, and the calls return sooner (docs/replay.md, "Bodies after the edges").  Heads and
  // tails are never held, so this cannot wait in a circle.  (Bcast counts none: 0.)
  std::size_t edge_recvs_left = 0;
  bool held_for_edges(const Step& s) const {
    return edge_recvs_left > 0 && s.kind == Kind::send && !s.edge;
  }
};

/// Bytes of the mirror prepare_receive would map for `op` (the page cover of its receive span).
std::size_t receive_cover_bytes(const Op& op, std::size_t ps);

/// Sets up the receive side of `op` for the byte ranges its recv/copy steps write, relative to
/// recv_base.  Returns false (nothing mapped) when no full page lies inside the span.
bool prepare_receive(Op& op, std::size_t ps);

/// The receive side of an op that does not return early: receives land in the user's buffer.
void receive_direct(Op& op);

/// Copies the bytes of edge sub-messages (partial first and last pages) from the mirror.
void copy_edges(const Op& op, std::size_t ps);

/// Moves the mirror pages `pages` (indices from guard_lo, every step done with them) over the
/// user's pages and marks them published; clears `pages`.
void publish(Op& op, std::vector<std::size_t>& pages, std::size_t ps);

/// Releases the op's guard slot and unmaps what is left of its mirror; marks it done.
void retire(Op& op, std::size_t ps);

}  // namespace tnbc::shim::engine
