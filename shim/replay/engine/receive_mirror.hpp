// The receive side of an op: the mirror the receives land in, the guarded user pages, the edge
// pages (partial first and last page) the call copies before it returns, and publishing
// completed pages into the user's.  It changes g_guarded_calls (io_interpose.hpp): one per op
// with registered pages.
//
//   the receive span's pages in the user's buffer
//   +-----------+-------------+-------------+-- ... --+---------------+-----------+
//   | first     | full page 0 | full page 1 |         | full page     | last      |
//   | (partial) | guarded     | guarded     |         | guard_pages-1 | (partial) |
//   +-----------+-------------+-------------+-- ... --+---------------+-----------+
//   ^ cover_lo  ^ guard_lo                                                        ^ cover_hi
//
//   the mirror: the same layout, mapped by the engine; receives land in it
//
// Full page i is published once the holders[i] steps that write or read it completed; then
// published[i] = 1.  No thread ever sees half a page.  Three ways, the first that works here
// (start_publishing, TNBC_PUBLISH):
//
//   move    The user's own pages serve as the mirror: the call moves them into a mirror
//           mapping (userfaultfd's UFFDIO_MOVE, page_move.hpp), so the user's addresses are
//           *missing* and a thread touching one sleeps in the kernel; a completed page is moved
//           back, which wakes it.  Nothing is copied, allocated or protected, the bytes between
//           sub-messages travel with their pages, and the mirror costs no memory.  Only the
//           user's pages stay registered with the userfaultfd (a move needs its destination
//           registered): a missing page of the mirror reads as zeros, never waits.  A page of
//           the range no step holds that the program never touched gets the zero page at the
//           call, so that no touch of it waits.  A call whose pages the kernel will not move (a
//           file's private pages, a page shared with a fork()ed child or pinned) undoes what it
//           moved and takes the next way.
//   write   The mirror is a pool buffer (buffer_pool.hpp); the user's pages are PROT_NONE
//           (a thread touching one faults and waits in the replay guard's handler); a
//           completed page's bytes are written into the user's page through /proc/self/mem (the
//           kernel's forced write, as a debugger pokes memory), and only then is it opened.  The
//           mirror stays whole and goes back to the pool.
//   mremap  As write, but the mirror page is moved over the user's (mremap), and the op's
//           mirror is used up (where the kernel refuses forced writes: no /proc, or
//           proc_mem.force_override=never).
//
// The partial first and last page (edge pages, when the span does not start or end on a page
// boundary) are never guarded: the calling thread copies their bytes from the mirror before the
// call returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
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
  // Published by moving pages (the "move" way above): `mirror` is a mapping of its own, of
  // cover_hi - cover_lo bytes, unmapped when the op retires; mirror_buf is empty.
  bool by_move = false;
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

/// Takes the mirror's buffer (receive_cover_bytes) from the pool; false if it has no room.  When
/// pages are published by moving, takes nothing (prepare_receive takes the buffer if the
/// kernel will not move this op's pages).
bool reserve_mirror(Op& op, std::size_t ps);

/// Sets up the receive side of `op` for the byte ranges its recv/copy steps write, relative to
/// recv_base: moves the user's pages into a mirror of their own, or guards them and uses the
/// mirror reserve_mirror took.  Returns false (nothing guarded) when no full page lies inside
/// the span, or there is no mirror.
bool prepare_receive(Op& op, std::size_t ps);

/// The receive side of an op that does not return early: receives land in the user's buffer.
void receive_direct(Op& op);

/// Copies the bytes of edge sub-messages (partial first and last pages) from the mirror.
void copy_edges(const Op& op, std::size_t ps);

/// How received pages are published (the ways above).
enum class Publisher { move, write, mremap };

/// Chooses how pages are published: `want` is "auto" (the first way that works here), "move",
/// "write" or "mremap" (TNBC_PUBLISH); a way that does not work here falls to the next.
/// Returns the way chosen, followed by why the ways before it do not work ("write (move: ...)").
std::string start_publishing(std::string_view want = "auto");
/// The way start_publishing chose (mremap before it ran).
Publisher publisher();
/// Unit tests: publish this way from now on (it must work here: start_publishing said so).
void force_publisher(Publisher p);

/// Puts the mirror pages `pages` (indices from guard_lo, every step done with them) in place in
/// the user's buffer (moved, or written and opened) and marks them published; clears `pages`.
void publish(Op& op, std::vector<std::size_t>& pages, std::size_t ps);

/// Releases the op's guard slot, the user range's registration and what publishing left of a
/// used-up mirror; marks it done.
void retire(Op& op, std::size_t ps);

}  // namespace tnbc::shim::replay::engine
