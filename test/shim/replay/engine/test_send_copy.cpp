// The send copy of the replay engine (shim/replay/engine/send_copy.hpp) below MPI: overlapping send
// ranges (Alltoallv displacements may overlap) copied whole, local copy steps written into the
// receive side, every step marked for the progress thread, and the check that refuses an early
// return when a send byte lies on a page the receive would guard.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "shim/replay/engine/op.hpp"
#include "shim/replay/engine/send_copy.hpp"

using tnbc::shim::replay::engine::Op;
using tnbc::shim::replay::engine::schedule::Kind;
using tnbc::shim::replay::engine::schedule::Step;
namespace engine = tnbc::shim::replay::engine;

TEST_CASE("send copy: overlapping send ranges and a local copy, every step marked", "[send_copy]") {
  std::vector<char> src(400), dst(100, 'u');
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  Op op;
  op.recv.recv_base = dst.data();
  op.recv.direct = true;  // receives (and the local copy) land in dst itself
  Step head{Kind::send, 1, 50, 100, 1};
  head.edge = true;
  op.steps = {Step{Kind::send, 0, 0, 100, 0}, head, Step{Kind::send, 2, 200, 100, 2},
              Step{Kind::copy, 3, 10, 80, 3}};
  op.steps[3].src_offset = 300;
  REQUIRE(engine::prepare_send_side(op, src.data(), true));
  REQUIRE(op.send.send_copy.get() != nullptr);
  CHECK(op.send.send_lo == 0);
  CHECK(engine::send_copy_bytes(op) == 300);
  for (std::size_t i = 0; i < op.steps.size(); ++i) CHECK_FALSE(op.send.step_copied(i));
  engine::fill_send_side(op, src.data());
  for (std::size_t i = 0; i < op.steps.size(); ++i) CHECK(op.send.step_copied(i));
  // Every byte a send step reads is the caller's, overlaps included.
  std::size_t wrong = 0;
  for (const auto& s : op.steps)
    if (s.kind == Kind::send)
      for (std::size_t b = s.offset; b < s.offset + s.bytes; ++b) wrong += op.send.base[b] != src[b];
  CHECK(wrong == 0);
  // A copy, not the caller's buffer: the caller may change its buffer now.
  CHECK((op.send.base + 0 < src.data() || op.send.base + 0 >= src.data() + src.size()));
  // The local copy went straight to its place in the receive buffer, and nowhere else.
  for (std::size_t b = 0; b < dst.size(); ++b)
    CHECK(dst[b] == (b >= 10 && b < 90 ? src[300 + b - 10] : 'u'));
}

TEST_CASE("send copy: a call that waits sends from the caller's buffer and copies only its own block",
          "[send_copy]") {
  std::vector<char> src(400), dst(100, 'u');
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 5 + 1);
  Op op;
  op.recv.recv_base = dst.data();
  op.recv.direct = true;
  op.steps = {Step{Kind::send, 0, 0, 100, 0}, Step{Kind::copy, 1, 0, 50, 1}};
  op.steps[1].src_offset = 200;
  REQUIRE(engine::prepare_send_side(op, src.data(), false));
  CHECK(op.send.send_copy.get() == nullptr);
  CHECK(op.send.base == src.data());
  engine::fill_send_side(op, src.data());
  CHECK(op.send.step_copied(0));
  CHECK(op.send.step_copied(1));
  for (std::size_t b = 0; b < dst.size(); ++b) CHECK(dst[b] == (b < 50 ? src[200 + b] : 'u'));
}

TEST_CASE("send copy: a send byte on a page the receive would guard is found", "[send_copy]") {
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // One array, both sides: receive [ps, 4 ps) (full pages ps..4 ps guarded), send elsewhere.
  std::vector<char> arr(8 * ps + ps);
  char* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(arr.data()) + ps - 1) & ~(ps - 1));
  Op op;
  op.recv.recv_base = base;
  op.steps = {Step{Kind::recv, 1, ps, 3 * ps, 1}, Step{Kind::send, 1, 0, 100, 1}};
  SECTION("send bytes inside a guarded page") {
    // The send side starts 2 pages in: its bytes [2 ps, 2 ps + 100) lie on a guarded page.
    CHECK(engine::send_meets_receive(op, base + 2 * ps, ps));
  }
  SECTION("send bytes on the receive's partial edge page only") {
    op.steps[0] = Step{Kind::recv, 1, ps + 10, 3 * ps - 20, 1};  // full pages: 2 ps .. 3 ps
    CHECK_FALSE(engine::send_meets_receive(op, base + ps, ps));  // [ps, ps + 100): edge page
  }
  SECTION("send bytes after the receive") {
    CHECK_FALSE(engine::send_meets_receive(op, base + 5 * ps, ps));
  }
}
