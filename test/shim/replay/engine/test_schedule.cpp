#include <catch2/catch.hpp>

#include <climits>
#include <map>
#include <span>
#include <random>
#include <set>
#include <tuple>

#include "shim/replay/engine/schedule.hpp"
#include "shim/replay/engine/schedule_pieces.hpp"

using namespace tnbc::shim::replay::engine::schedule;

TEST_CASE("alltoallv: every rank's sends match the peers' receives, byte for byte",
          "[schedule]") {
  std::mt19937 rng(42);
  for (AlltoallvOptions opt : {AlltoallvOptions{}, AlltoallvOptions{16384}})
  for (int p : {1, 2, 3, 4, 7, 16}) {
    // bytes[s][d]: what s sends to d; zero blocks included.
    std::vector<std::vector<std::size_t>> bytes(p, std::vector<std::size_t>(p));
    for (auto& row : bytes)
      for (auto& b : row) b = rng() % 4 == 0 ? 0 : rng() % 100000;
    std::multiset<std::tuple<int, int, int, std::size_t>> sent, received;  // src, dst, piece, bytes
    std::map<std::pair<int, int>, std::size_t> moved;                      // bytes per (src, dst)
    for (int r = 0; r < p; ++r) {
      std::vector<std::size_t> sb(p), sd(p), rb(p), rd(p);
      std::size_t so = 0, ro = 0;
      for (int i = 0; i < p; ++i) {
        sb[i] = bytes[r][i], sd[i] = so, so += sb[i];
        rb[i] = bytes[i][r], rd[i] = ro, ro += rb[i];
      }
      auto s = alltoallv(r, p, sb, sd, rb, rd, {}, opt);
      for (const auto& st : s.steps) {
        if (st.kind == Kind::send) {
          CHECK(st.offset >= sd[st.peer]);
          CHECK(st.offset + st.bytes <= sd[st.peer] + sb[st.peer]);
          sent.insert({r, st.peer, st.piece, st.bytes});
        } else if (st.kind == Kind::recv) {
          CHECK(st.offset >= rd[st.peer]);
          CHECK(st.offset + st.bytes <= rd[st.peer] + rb[st.peer]);
          CHECK(st.sub == st.peer);
          received.insert({st.peer, r, st.piece, st.bytes});
          moved[{st.peer, r}] += st.bytes;
        } else {
          CHECK(st.peer == r);
          CHECK(st.offset == rd[r]);
          CHECK(st.src_offset == sd[r]);
          CHECK(st.bytes == bytes[r][r]);
        }
        CHECK(st.bytes > 0);
      }
    }
    CHECK(sent == received);
    for (int s = 0; s < p; ++s)  // every block arrives whole
      for (int d = 0; d < p; ++d)
        if (s != d) CHECK(moved[{s, d}] == bytes[s][d]);
  }
}

TEST_CASE("pieces: a body over 2 GiB travels in pieces of at most 1 GiB, an MPI int count each", "[schedule]") {
  const std::size_t body = (std::size_t{5} << 30) + 12345, n = body + 2 * kEdgeBytes;
  for (std::size_t chunk : {std::size_t{0}, std::size_t{65536}}) {
    const std::vector<Piece> ps = pieces(n, chunk);
    std::size_t covered = 0;
    int chunks = 0;
    for (const Piece& p : ps) {
      CHECK(p.bytes <= kMaxPieceBytes);
      CHECK(p.bytes <= static_cast<std::size_t>(INT_MAX));
      if (p.edge) continue;
      CHECK(p.offset == kEdgeBytes + covered);
      covered += p.bytes;
      ++chunks;
    }
    CHECK(covered == body);
    CHECK(chunks <= kMaxChunks);
    CHECK(ps.back().piece <= 255);
    // Whole (chunk 0): 6 pieces of 1 GiB, the last shorter; 64 KiB chunks: 254 of about 20 MiB.
    CHECK(chunks == (chunk == 0 ? 6 : kMaxChunks));
  }
  // The largest sub-message still fits 254 pieces and the tag.
  const std::vector<Piece> most = pieces(kMaxSubMessageBytes, 0);
  CHECK(most.size() == 2 + kMaxChunks);
  for (const Piece& p : most) CHECK(p.bytes <= kMaxPieceBytes);
}

TEST_CASE("alltoallv: large blocks travel as head, body and tail, edge pieces first",
          "[schedule]") {
  const int p = 3, r = 1;
  const std::size_t b = 100000;
  std::vector<std::size_t> sb(p, b), d{0, b, 2 * b};
  auto s = alltoallv(r, p, sb, d, sb, d, {});
  REQUIRE(s.steps.size() == 1 + 2 * 3 * 2);  // copy + (recv, send) x 2 peers x 3 pieces
  bool bodies_started = false;
  for (const auto& st : s.steps) {
    if (st.kind == Kind::copy) continue;
    CHECK(st.edge == (st.piece < 2));
    if (!st.edge) bodies_started = true;
    else CHECK_FALSE(bodies_started);  // no head or tail after a body
    if (st.piece == 0) CHECK(st.offset == d[st.peer]);
    if (st.edge) CHECK(st.bytes == kEdgeBytes);
    if (st.piece == 1) CHECK(st.offset + st.bytes == d[st.peer] + b);
    if (!st.edge) CHECK(st.bytes == b - 2 * kEdgeBytes);
  }
}

TEST_CASE("alltoallv: bodies travel in chunks that tile them front to back", "[schedule]") {
  const int p = 4, r = 2;
  const std::size_t b = 1 << 20, chunk = 64 * 1024;
  std::vector<std::size_t> sb(p, b), d{0, b, 2 * b, 3 * b};
  auto s = alltoallv(r, p, sb, d, sb, d, {}, {chunk});
  const std::size_t chunks = (b - 2 * kEdgeBytes + chunk - 1) / chunk;
  for (Kind kind : {Kind::send, Kind::recv}) {
    for (int peer = 0; peer < p; ++peer) {
      if (peer == r) continue;
      std::vector<std::size_t> idx;  // this peer's body chunks in schedule order
      for (std::size_t i = 0; i < s.steps.size(); ++i)
        if (s.steps[i].kind == kind && s.steps[i].peer == peer && !s.steps[i].edge) idx.push_back(i);
      REQUIRE(idx.size() == chunks);
      std::size_t next = d[peer] + kEdgeBytes;
      for (std::size_t c = 0; c < idx.size(); ++c) {
        const Step& st = s.steps[idx[c]];
        CHECK(st.offset == next);
        CHECK(st.piece == 2 + static_cast<int>(c));
        CHECK(st.bytes <= chunk);
        CHECK(st.after == -1);
        next += st.bytes;
      }
      CHECK(next == d[peer] + b - kEdgeBytes);
    }
  }
  // A body that would need more than kMaxChunks chunks gets larger ones.
  std::vector<std::size_t> big(2, 64 << 20), bd{0, 64 << 20};
  auto s2 = alltoallv(0, 2, big, bd, big, bd, {}, {4096});
  int body_recvs = 0;
  for (const auto& st : s2.steps) body_recvs += st.kind == Kind::recv && !st.edge;
  CHECK(body_recvs == kMaxChunks);
}

TEST_CASE("alltoallv: body sends go first to whom needs them first", "[schedule]") {
  const int p = 4, r = 1;
  const std::size_t b = 3 * 65536 + 2 * kEdgeBytes;  // three 64 KiB chunks per body
  std::vector<std::size_t> sb(p, b), d{0, b, 2 * b, 3 * b};
  auto body_sends = [&](std::span<const int> order) {
    std::vector<std::pair<int, int>> out;  // (destination, chunk)
    for (const auto& st : alltoallv(r, p, sb, d, sb, d, order, {65536}).steps)
      if (st.kind == Kind::send && !st.edge) out.emplace_back(st.peer, st.piece - 2);
    return out;
  };
  // Default: receiver q reads (q - 1), (q - 2), ...: rank 1's block is 2's first need, 3's
  // second, 0's third: whole bodies one after the other.
  CHECK(body_sends({}) == std::vector<std::pair<int, int>>{
                              {2, 0}, {2, 1}, {2, 2}, {3, 0}, {3, 1}, {3, 2}, {0, 0}, {0, 1}, {0, 2}});
  // A plan order is everybody's: rank 1's block is equally urgent for all, chunk 0 to each
  // first (staggered), then chunk 1, ...
  std::vector<int> plan{0, 1, 2, 3};
  CHECK(body_sends(plan) == std::vector<std::pair<int, int>>{
                                {2, 0}, {3, 0}, {0, 0}, {2, 1}, {3, 1}, {0, 1}, {2, 2}, {3, 2}, {0, 2}});
  // A plan that lists rank 1 alone still puts it at the same place for everybody.
  std::vector<int> only_me{1};
  CHECK(body_sends(only_me) == body_sends(plan));
  // One that leaves rank 1 out puts it after the listed ranks, staggered: whole bodies again.
  std::vector<int> without_me{3, 0, 2};
  CHECK(body_sends(without_me) == body_sends({}));
}

TEST_CASE("alltoallv: receives follow the plan order, else the staggered order", "[schedule]") {
  const int p = 5, r = 2;
  std::vector<std::size_t> b(p, 8), d{0, 8, 16, 24, 32};
  auto recv_peers = [&](const Schedule& s) {
    std::vector<int> out;
    for (const auto& st : s.steps)
      if (st.kind == Kind::recv) out.push_back(st.peer);
    return out;
  };
  CHECK(recv_peers(alltoallv(r, p, b, d, b, d, {})) == std::vector<int>{1, 0, 4, 3});
  std::vector<int> plan{4, 2, 0};  // own rank and missing ranks are handled
  CHECK(recv_peers(alltoallv(r, p, b, d, b, d, plan)) == std::vector<int>{4, 0, 1, 3});
  auto s = alltoallv(r, p, b, d, b, d, plan);
  REQUIRE_FALSE(s.steps.empty());
  CHECK(s.steps.front().kind == Kind::copy);  // the own block comes first
  std::vector<int> sends;
  for (const auto& st : s.steps)
    if (st.kind == Kind::send) sends.push_back(st.peer);
  CHECK(sends == std::vector<int>{3, 4, 0, 1});
}

TEST_CASE("alltoallv: mismatched sizes are refused", "[schedule]") {
  std::vector<std::size_t> three(3, 1), two(2, 1);
  CHECK_THROWS_AS(alltoallv(0, 3, three, three, two, three, {}), std::invalid_argument);
}

TEST_CASE("broadcast trees reach every rank exactly once from the root", "[schedule]") {
  for (int p = 1; p <= 17; ++p)
    for (int root : {0, p / 2, p - 1})
      for (int chains : {0, 1, 2, 3, 7, 100}) {
        INFO("p=" << p << " root=" << root << " chains=" << chains);
        std::map<int, int> parent_of;
        std::multiset<std::pair<int, int>> edges_down;
        for (int r = 0; r < p; ++r) {
          auto t = bcast_tree(r, p, root, chains);
          if (r == root) CHECK(t.parent == -1);
          else parent_of[r] = t.parent;
          for (int c : t.children) edges_down.insert({r, c});
        }
        CHECK(static_cast<int>(edges_down.size()) == p - 1);
        for (auto [child, parent] : parent_of) CHECK(edges_down.count({parent, child}) == 1);
        for (int r = 0; r < p; ++r) {  // following parents ends at the root, without a cycle
          int x = r, hops = 0;
          while (x != root && hops <= p) x = parent_of[x], ++hops;
          CHECK(x == root);
        }
      }
}

TEST_CASE("bcast schedule: segments partition the buffer, forwards wait for their receive",
          "[schedule]") {
  const std::size_t total = 1000003;
  for (int chains : {0, 1, 3}) {
    const int p = 7, root = 3, m = 4;
    std::vector<int> order{3, 1, 2, 0};
    std::multiset<std::tuple<int, int, int, std::size_t>> sent, received;  // from, to, piece, bytes
    for (int r = 0; r < p; ++r) {
      auto s = bcast(r, p, root, total, m, chains, order);
      std::vector<int> recv_segments;
      std::size_t covered = 0;
      for (std::size_t i = 0; i < s.steps.size(); ++i) {
        const auto& st = s.steps[i];
        if (st.kind == Kind::recv) {
          if (st.sub >= 0) recv_segments.push_back(st.sub);
          else CHECK(recv_segments.empty());  // the edge pieces come first
          covered += st.bytes;
          received.insert({st.peer, r, st.piece, st.bytes});
        } else {
          REQUIRE(st.kind == Kind::send);
          sent.insert({r, st.peer, st.piece, st.bytes});
          if (r == root) {
            CHECK(st.after == -1);
          } else {
            REQUIRE(st.after >= 0);
            REQUIRE(static_cast<std::size_t>(st.after) < i);
            CHECK(s.steps[st.after].kind == Kind::recv);
            CHECK(s.steps[st.after].piece == st.piece);
          }
        }
      }
      if (r != root) {
        CHECK(recv_segments == order);  // priority order
        CHECK(covered == total);
      }
    }
    CHECK(sent == received);
  }
}

TEST_CASE("bcast schedule: more segments than bytes, and empty buffers", "[schedule]") {
  CHECK(bcast(1, 2, 0, 3, 8, 0, {}).steps.size() == 3);
  CHECK(bcast(1, 2, 0, 0, 4, 0, {}).steps.empty());
  CHECK_THROWS_AS(bcast(0, 2, 5, 10, 4, 0, {}), std::invalid_argument);
}

TEST_CASE("send window under per-node turns: one chunk per peer on another node at least", "[schedule]") {
  CHECK(send_window(2, 2) == 2);    // 2 nodes x 2 ranks: the configured window, unchanged
  CHECK(send_window(2, 1) == 2);
  CHECK(send_window(2, 0) == 2);    // nothing to send off the node
  CHECK(send_window(2, 60) == 60);  // 16 nodes x 4 ranks
  CHECK(send_window(8, 4) == 8);    // a larger configured window stays
  CHECK(send_window(0, 60) == 0);   // TNBC_CHUNK_WINDOW=0: no window at all
}
