// Replay mode's MPI_Alltoall and MPI_Alltoallv (collectives.hpp): the two as Collectives of
// run_call (call.hpp), and the exchange in bytes the engine runs for both.
#include "collectives.hpp"

#include <algorithm>
#include <climits>
#include <vector>

#include "priority/plan.hpp"
#include "shim/datatype.hpp"
#include "shim/replay/call.hpp"
#include "shim/replay/engine/schedule_pieces.hpp"
#include "shim/stats.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {
namespace {

using datatype::span_of;
using datatype::TypeInfo;

/// An Alltoall(v) in bytes as the engine takes it: each block's size and offset on both sides,
/// and the staging buffers of non-contiguous types (packed to send; received, then unpacked).
struct Bytes {
  std::vector<std::size_t> sb, sd, rb, rd;
  std::vector<char> send_stage, recv_stage;
  const void* sptr = nullptr;
  void* rptr = nullptr;
  std::size_t rtotal = 0;
  bool recv_staged = false;
};

/// An MPI_Alltoallv as run_call takes it: the engine's exchange runs it in bytes.
class AlltoallvCall : public Collective {
 public:
  AlltoallvCall(Runtime& rt, OpStats& st, const void* sendbuf, const int* sendcounts, const int* sdispls,
                MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype,
                MPI_Comm comm, priority::Op op = priority::Op::alltoallv)
      : Collective(st, comm, op), rt_(rt), sendbuf_(sendbuf), sendcounts_(sendcounts), sdispls_(sdispls),
        sendtype_(sendtype), recvbuf_(recvbuf), recvcounts_(recvcounts), rdispls_(rdispls), recvtype_(recvtype) {}

  void release_guarded() override {
    if (sendbuf_ != MPI_IN_PLACE)
      replay::release_guarded(sendbuf_, datatype::blocks_span(sendcounts_, sdispls_, size()), sendtype_, true);
    replay::release_guarded(recvbuf_, datatype::blocks_span(recvcounts_, rdispls_, size()), recvtype_, false);
  }
  const void* in_place_buffer() const override { return sendbuf_; }
  /// Sizes differ between ranks: every rank runs the engine's exchange, and only the local size
  /// decides whether this rank returns early.
  const char* exclusion() override {
    PMPI_Type_size(recvtype_, &tsize_);
    for (int i = 0; i < size(); ++i)
      total_ += static_cast<std::size_t>(recvcounts_[i]) * static_cast<std::size_t>(tsize_);
    early_allowed_ = total_ >= rt_.config().min_bytes;
    return nullptr;
  }
  std::uint64_t plan_bytes() const override { return size() > 0 ? total_ / static_cast<std::size_t>(size()) : 0; }
  /// The key has no size (class 0, the same everywhere); the plan entry only votes.
  std::uint64_t key_bytes() const override { return 0; }
  void count_received(const adapt::Decision& d) override {
    for (int i = 0; i < size(); ++i)
      adapt::count_received(d, rank(), i,
                             static_cast<std::uint64_t>(recvcounts_[i]) * static_cast<std::uint64_t>(tsize_));
  }
  int blocking() override {
    return PMPI_Alltoallv(sendbuf_, sendcounts_, sdispls_, sendtype_, recvbuf_, recvcounts_, rdispls_, recvtype_,
                          comm());
  }
  /// The engine's exchange in bytes.  Each rank finds its own plan entry by its own receive size,
  /// so the ranks of a node can disagree on it: call_order takes turns only in the agreed order
  /// (the key holds every size of the communicator's Alltoallv calls, so the agreed order serves
  /// all of them).  Returns MPI_SUCCESS, or the first error of packing or unpacking.
  int exchange(const CallStart& s, bool early) override {
    const adapt::Decision& d = s.d;
    const CallOrder o = early ? call_order(s) : CallOrder{};
    Bytes b;
    bool allow_early = early && early_allowed_;
    const char* why_direct = receive_side(b, d, allow_early);
    int rc = send_side(b);
    // Blocks over 2 GiB travel in pieces of at most 1 GiB (schedule_pieces.hpp).  Only a block
    // beyond what the engine's pieces can hold (254 GiB) runs the blocking call, on this rank
    // alone: the others would wait for the engine's messages (one rank decides this by its own
    // sizes; no such block has been seen).
    for (std::size_t i = 0; i < b.sb.size(); ++i)
      if (b.sb[i] > engine::schedule::kMaxSubMessageBytes || b.rb[i] > engine::schedule::kMaxSubMessageBytes)
        return plain(stats(), "large_block", [this] { return AlltoallvCall::blocking(); });
    if (!d.engine) d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t t0 = util::now_ns();
    const engine::Engine::Result r =
        engine::Engine::instance().alltoallv(b.sptr, b.sb, b.sd, b.rptr, b.rb, b.rd, comm(), o.order, o.per_node,
                                             allow_early, d.engine ? nullptr : d.costs, o.window);
    if (r.why != nullptr) why_direct = r.why;
    adapt::say_early_path_call(d, r.early, why_direct, util::now_ns() - t0);
    adapt::done(d, comm());
    keep_first_error(rc, unpack(b));
    if (r.early) stats().count_early_return();
    else stats().count_fallback(why_direct ? why_direct : "no_full_page");
    return rc;
  }
  void observe(const CallStart& s, std::uint64_t ns) override {
    observe_blocks(s.d, s.ls, recvbuf_, recvcounts_, rdispls_, size(), recvtype_, ns);
  }

 private:
  /// The receive side of `b`, first: its pages may still be guarded by an earlier collective,
  /// whose mirror must be published before this one can guard them again.  Clears `allow_early`
  /// where this rank must receive in place; returns why it does not return early (nullptr: it may).
  const char* receive_side(Bytes& b, const adapt::Decision& d, bool& allow_early) const {
    const auto n = static_cast<std::size_t>(size());
    const TypeInfo rti = datatype::info(recvtype_);
    b.rb.resize(n), b.rd.resize(n);
    b.rptr = recvbuf_;
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;  // the bytes the receives may write
    for (std::size_t i = 0; i < n; ++i) {
      b.rb[i] = static_cast<std::size_t>(recvcounts_[i]) * rti.size;
      b.rtotal += b.rb[i];
      auto [p, len] = span_of(recvbuf_, static_cast<std::size_t>(rdispls_[i]), static_cast<std::size_t>(recvcounts_[i]), rti);
      engine::Engine::instance().complete_overlapping(p, len);
      if (len == 0) continue;
      lo = std::min(lo, reinterpret_cast<std::uintptr_t>(p));
      hi = std::max(hi, reinterpret_cast<std::uintptr_t>(p) + len);
    }
    // A blocking call the engine runs (Decision::engine: not early) counts under the decision's
    // reason.
    const char* why_direct = d.engine ? d.why : !allow_early ? "small" : nullptr;
    if (allow_early && hi > lo) {
      why_direct = receive_in_place(reinterpret_cast<void*>(lo), hi - lo);
      allow_early = why_direct == nullptr;
    }
    if (rti.contiguous) {
      for (std::size_t i = 0; i < n; ++i) b.rd[i] = static_cast<std::size_t>(rdispls_[i]) * rti.size;
      return why_direct;
    }
    b.recv_stage.resize(b.rtotal);
    b.rptr = b.recv_stage.data();
    b.recv_staged = true;
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i) b.rd[i] = off, off += b.rb[i];
    allow_early = false;
    return "datatype";
  }

  /// The send side of `b`, packed into its stage where the type is not contiguous; returns the
  /// first error of packing.
  int send_side(Bytes& b) const {
    const auto n = static_cast<std::size_t>(size());
    const TypeInfo sti = datatype::info(sendtype_);
    b.sb.resize(n), b.sd.resize(n);
    b.sptr = sendbuf_;
    if (sti.contiguous) {
      for (std::size_t i = 0; i < n; ++i) {
        b.sb[i] = static_cast<std::size_t>(sendcounts_[i]) * sti.size;
        b.sd[i] = static_cast<std::size_t>(sdispls_[i]) * sti.size;
      }
      return MPI_SUCCESS;
    }
    int rc = MPI_SUCCESS;
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += static_cast<std::size_t>(sendcounts_[i]) * sti.size;
    b.send_stage.resize(total);
    int pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
      b.sd[i] = static_cast<std::size_t>(pos);
      b.sb[i] = static_cast<std::size_t>(sendcounts_[i]) * sti.size;
      auto [p, len] = span_of(sendbuf_, static_cast<std::size_t>(sdispls_[i]), static_cast<std::size_t>(sendcounts_[i]), sti);
      engine::Engine::instance().complete_overlapping(p, len);
      keep_first_error(rc, PMPI_Pack(static_cast<const char*>(sendbuf_) + static_cast<MPI_Aint>(sdispls_[i]) * sti.extent,
                                     sendcounts_[i], sendtype_, b.send_stage.data(), static_cast<int>(total), &pos, comm()));
    }
    b.sptr = b.send_stage.data();
    return rc;
  }

  /// The received stage unpacked where the receive type is not contiguous; the first error.
  int unpack(const Bytes& b) const {
    if (!b.recv_staged) return MPI_SUCCESS;
    const TypeInfo rti = datatype::info(recvtype_);
    int rc = MPI_SUCCESS;
    for (std::size_t i = 0; i < b.rd.size(); ++i) {
      int pos = static_cast<int>(b.rd[i]);
      keep_first_error(rc, PMPI_Unpack(b.recv_stage.data(), static_cast<int>(b.rtotal), &pos,
                                       static_cast<char*>(recvbuf_) + static_cast<MPI_Aint>(rdispls_[i]) * rti.extent,
                                       recvcounts_[i], recvtype_, comm()));
    }
    return rc;
  }

 protected:
  Runtime& rt_;
  const void* sendbuf_;
  const int *sendcounts_, *sdispls_;
  MPI_Datatype sendtype_;
  void* recvbuf_;
  const int *recvcounts_, *rdispls_;
  MPI_Datatype recvtype_;
  int tsize_ = 0;
  std::size_t total_ = 0;  // the bytes this rank receives
  bool early_allowed_ = false;
};

/// An MPI_Alltoall: an Alltoallv of equal blocks, whose size every rank shares.
class AlltoallCall final : public AlltoallvCall {
 public:
  AlltoallCall(Runtime& rt, OpStats& st, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
      : AlltoallvCall(rt, st, sendbuf, nullptr, nullptr, sendtype, recvbuf, nullptr, nullptr, recvtype, comm,
                      priority::Op::alltoall),
        sendcount_(sendcount), recvcount_(recvcount) {}

  void release_guarded() override {
    const auto ranks = static_cast<std::size_t>(std::max(size(), 0));
    replay::release_guarded(sendbuf_, ranks * static_cast<std::size_t>(std::max(sendcount_, 0)), sendtype_, true);
    replay::release_guarded(recvbuf_, ranks * static_cast<std::size_t>(std::max(recvcount_, 0)), recvtype_, false);
  }
  /// Decided from facts every rank shares: Alltoall's message size is the same everywhere.  The
  /// counts and displacements of its blocks are made only for a call that passes.
  const char* exclusion() override {
    PMPI_Type_size(recvtype_, &tsize_);
    block_ = static_cast<std::size_t>(recvcount_) * static_cast<std::size_t>(tsize_);
    if (block_ == 0) return "empty";
    if (block_ * static_cast<std::size_t>(size()) < rt_.config().min_bytes) return "small";
    if (block_ > INT_MAX || static_cast<long>(recvcount_) * size() > INT_MAX) return "large_block";
    const auto n = static_cast<std::size_t>(size());
    scounts_.assign(n, sendcount_), rcounts_.assign(n, recvcount_), sdispls_v_.resize(n), rdispls_v_.resize(n);
    for (int i = 0; i < size(); ++i) sdispls_v_[i] = i * sendcount_, rdispls_v_[i] = i * recvcount_;
    sendcounts_ = scounts_.data(), sdispls_ = sdispls_v_.data();
    recvcounts_ = rcounts_.data(), rdispls_ = rdispls_v_.data();
    total_ = block_ * n;
    early_allowed_ = true;
    return nullptr;
  }
  std::uint64_t plan_bytes() const override { return block_; }
  std::uint64_t key_bytes() const override { return block_ * static_cast<std::size_t>(size()); }
  void count_received(const adapt::Decision& d) override {
    for (int i = 0; i < size(); ++i) adapt::count_received(d, rank(), i, block_);
  }
  int blocking() override {
    return PMPI_Alltoall(sendbuf_, sendcount_, sendtype_, recvbuf_, recvcount_, recvtype_, comm());
  }

 private:
  int sendcount_, recvcount_;
  std::size_t block_ = 0;
  std::vector<int> scounts_, sdispls_v_, rcounts_, rdispls_v_;
};

}  // namespace

int alltoall(Runtime& rt, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  AlltoallCall call(rt, rt.stats().alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return run_call(call);
}

int alltoallv(Runtime& rt, const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
              MPI_Datatype recvtype, MPI_Comm comm) {
  AlltoallvCall call(rt, rt.stats().alltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                     recvtype, comm);
  return run_call(call);
}

}  // namespace tnbc::shim::replay
