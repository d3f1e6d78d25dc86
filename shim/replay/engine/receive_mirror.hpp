// The receive side of an op: the mirror the receives land in (a pool buffer), the guarded user
// pages, the edge pages (partial first and last page) the call copies before it returns, and
// publishing completed pages into the user's.  It changes g_guarded_calls (io_interpose.hpp):
// one per op with registered pages.
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
// Full page i is published once the holders[i] steps that write or read it completed: its bytes
// are written into the user's page while that is still PROT_NONE, through /proc/self/mem (the
// kernel's forced write, as a debugger pokes memory), and only then is the page made readable
// and writable, so no thread can see half of it; then published[i] = 1.  The mirror stays
// whole and goes back to the pool for the next call, and the user keeps its own pages (no page
// fault on fresh memory, no TLB shootdown of an unmapped page).  Where the kernel refuses
// such writes (no /proc, or proc_mem.force_override=never), mremap moves the mirror page over
// the user's instead, and the op's mirror is used up.  The partial first and last page (edge pages, when
// the span does not start or end on a page boundary) are never protected: the calling thread
// copies their bytes from the mirror before the call returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "buffer_pool.hpp"
#include "schedule.hpp"

namespace tnbc::shim::replay::engine {

using schedule::Kind;
using schedule::Step;

struct Op;

/// Receive side.  All offsets are relative to recv_base (the user's buffer).
struct ReceiveMirror {
  char* recv_base = nullptr;
  std::uintptr_t cover_lo = 0, cover_hi = 0;  // page-aligned cover of the receive span
  PoolBuffer mirror_buf;                      // the mirror's memory, from reserve_mirror
  char* mirror = nullptr;                     // same layout as the cover (in mirror_buf)
  std::uintptr_t guard_lo = 0;                // first full page; pages indexed from here
  std::size_t guard_pages = 0;
  std::unique_ptr<std::atomic<std::uint8_t>[]> published;  // per full page
  std::vector<int> holders;                                // steps still using each full page
  std::vector<std::uint8_t> moved;                         // mirror page moved to the user (mremap)
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

/// Takes the mirror's buffer (receive_cover_bytes) from the pool; false if it has no room.
bool reserve_mirror(Op& op, std::size_t ps);

/// Sets up the receive side of `op` for the byte ranges its recv/copy steps write, relative to
/// recv_base, in the mirror reserve_mirror took.  Returns false (nothing guarded) when no full
/// page lies inside the span, or there is no mirror.
bool prepare_receive(Op& op, std::size_t ps);

/// The receive side of an op that does not return early: receives land in the user's buffer.
void receive_direct(Op& op);

/// Copies the bytes of edge sub-messages (partial first and last pages) from the mirror.
void copy_edges(const Op& op, std::size_t ps);

/// Opens /proc/self/mem for publishing by writing and checks that the kernel writes through it
/// into a page of this process that is PROT_NONE; else publishing moves pages (mremap).
/// Returns which way it publishes ("write" or "mremap: <why>").
const char* start_publishing();
/// True when pages are published by writing (start_publishing found it works).
bool publishing_by_write();
/// Unit tests: publish by mremap even where writing works (on), or as start_publishing found.
void force_mremap_publishing(bool on);

/// Writes the mirror pages `pages` (indices from guard_lo, every step done with them) into the
/// user's pages, opens them and marks them published; clears `pages`.
void publish(Op& op, std::vector<std::size_t>& pages, std::size_t ps);

/// Releases the op's guard slot and what publishing left of a used-up mirror; marks it done.
void retire(Op& op, std::size_t ps);

}  // namespace tnbc::shim::replay::engine
