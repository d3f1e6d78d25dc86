// Replay mode's MPI_Bcast (collectives.hpp): a Collective of run_call (call.hpp) whose engine
// exchange is a tree of segments.
#include "collectives.hpp"

#include <climits>
#include <optional>
#include <vector>

#include <unistd.h>

#include "priority/cost_model.hpp"
#include "shim/datatype.hpp"
#include "shim/observe/page_guard.hpp"
#include "shim/replay/call.hpp"
#include "util/clock.hpp"

namespace tnbc::shim::replay {
namespace {

using datatype::span_of;
using datatype::TypeInfo;
using priority::BcastShape;

/// Segments and tree of a replayed Bcast: the plan's, else the settings', else the LogGP
/// model's choice (priority/cost_model.hpp, default parameters).  Every input is the same on every
/// rank (plan file and call site, environment, communicator size, byte count), so every rank
/// builds the same messages.
BcastShape bcast_shape(const config::Config& cfg, const priority::PlanEntry* entry, int size, std::size_t bytes) {
  BcastShape out;
  // The LogGP model decides only what neither the plan nor a setting fixes.
  std::optional<BcastShape> model;
  auto modelled = [&]() -> const BcastShape& {
    if (!model) model = priority::default_bcast_shape(size, bytes);
    return *model;
  };
  if (entry && entry->segments > 0) out.segments = entry->segments;
  else if (cfg.bcast_segments > 0) out.segments = cfg.bcast_segments;
  else out.segments = modelled().segments;
  if (entry) out.chains = entry->tree.kind == priority::TreeKind::chains ? entry->tree.chains : 0;
  else if (cfg.bcast_chains >= 0) out.chains = cfg.bcast_chains;
  else out.chains = modelled().chains;
  return out;
}

class BcastCall final : public Collective {
 public:
  BcastCall(Runtime& rt, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
      : Collective(rt.stats().bcast, comm, priority::Op::bcast), rt_(rt), buffer_(buffer), count_(count),
        datatype_(datatype), root_(root) {}

  void release_guarded() override {
    replay::release_guarded(buffer_, static_cast<std::size_t>(std::max(count_, 0)), datatype_, rank() == root_);
  }
  const void* in_place_buffer() const override { return buffer_; }
  const char* exclusion() override {
    ti_ = datatype::info(datatype_);
    bytes_ = static_cast<std::size_t>(count_) * ti_.size;
    if (bytes_ == 0) return "empty";
    if (bytes_ < rt_.config().min_bytes) return "small";
    if (bytes_ > INT_MAX) return "large_block";
    return nullptr;
  }
  std::uint64_t plan_bytes() const override { return bytes_; }
  std::uint64_t key_bytes() const override { return bytes_; }
  /// Whatever the tree, the data comes from the root: counted by where the root is.
  void count_received(const adapt::Decision& d) override { adapt::count_received(d, rank(), root_, bytes_); }
  int blocking() override { return PMPI_Bcast(buffer_, count_, datatype_, root_, comm()); }
  /// A blocking call the engine runs (Decision::engine) receives in place, under the decision's
  /// reason; on the early path only a non-root rank whose buffer allows it returns early.
  int exchange(const CallStart& s, bool /*early: Decision::engine says it*/) override {
    const adapt::Decision& d = s.d;
    const BcastShape shape = shape_of_call(s);
    const std::vector<int> order = call_order(s, shape.segments).order;
    auto [lo, len] = span_of(buffer_, 0, static_cast<std::size_t>(count_), ti_);
    engine::Engine::instance().complete_overlapping(lo, len);
    bool early = false;
    int rc = MPI_SUCCESS;  // the packing's or unpacking's error, after the exchange
    const char* in_place = d.engine ? d.why : rank() != root_ ? receive_in_place(lo, len) : nullptr;
    const char* why_direct = !ti_.contiguous ? "datatype" : in_place ? in_place : "no_full_page";
    if (!d.engine) d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
    engine::Costs* costs = d.engine ? nullptr : d.costs;
    const std::uint64_t t0 = util::now_ns();
    if (ti_.contiguous) {
      const engine::Engine::Result r = engine::Engine::instance().bcast(
          buffer_, bytes_, root_, comm(), shape.segments, shape.chains, order, in_place == nullptr, costs);
      early = r.early;
      if (r.why != nullptr) why_direct = r.why;
    } else {
      std::vector<char> stage(bytes_);
      int pos = 0;
      if (rank() == root_) rc = PMPI_Pack(buffer_, count_, datatype_, stage.data(), static_cast<int>(bytes_), &pos, comm());
      engine::Engine::instance().bcast(stage.data(), bytes_, root_, comm(), shape.segments, shape.chains, order, false,
                                       costs);
      if (rank() != root_)
        rc = PMPI_Unpack(stage.data(), static_cast<int>(bytes_), &pos, buffer_, count_, datatype_, comm());
    }
    adapt::done(d, comm());
    adapt::say_early_path_call(d, early, why_direct, util::now_ns() - t0);
    if (early) stats().count_early_return();
    else stats().count_fallback(why_direct);
    return rc;
  }
  /// MPI's blocking call observed: the root sends its buffer, only the others have something to
  /// read.  (A blocking call the engine runs is not observed.)
  void observe(const CallStart& s, std::uint64_t ns) override {
    const adapt::Decision& d = s.d;
    if (d.engine || !d.observe || s.ls == nullptr) return;
    shape_of_call(s);
    if (rank() == root_ || !ti_.contiguous) return;
    const auto units = observe::bcast_units(bytes_, static_cast<std::size_t>(rt_.config().trace_bcast_units),
                                            static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
    learn::observe(d.key->learning, *s.ls, buffer_, units, ns, units.empty() ? 0 : bytes_ / units.size());
  }

 private:
  /// Segment count and tree change the messages: they come from the plan entry every rank agreed
  /// on (decide.hpp) or from the settings, never from anything rank-local.  A site that learns
  /// keeps them: a learned plan of it is written with them (TNBC_PLAN_OUT).
  BcastShape shape_of_call(const CallStart& s) const {
    const BcastShape shape = bcast_shape(rt_.config(), s.d.shape, size(), bytes_);
    if (s.ls != nullptr) s.ls->bcast_segments = shape.segments, s.ls->bcast_chains = shape.chains, s.ls->total_bytes = bytes_;
    return shape;
  }

  Runtime& rt_;
  void* buffer_;
  int count_;
  MPI_Datatype datatype_;
  int root_;
  TypeInfo ti_;
  std::size_t bytes_ = 0;
};

}  // namespace

int bcast(Runtime& rt, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  BcastCall call(rt, buffer, count, datatype, root, comm);
  return run_call(call);
}

}  // namespace tnbc::shim::replay
