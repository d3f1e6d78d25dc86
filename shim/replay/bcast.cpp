// Replay mode's MPI_Bcast (replay.hpp): the plain call, or the engine's tree of segments.
#include "replay.hpp"

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

using datatype::span_of;
using datatype::TypeInfo;

namespace {

struct BcastShape {
  int segments = 1;
  int chains = 0;  // 0 = binomial
};

/// Segments and tree of a replayed Bcast: the plan's, else the settings', else the LogGP
/// model's choice (priority/cost_model.hpp, default parameters).  Every input is the same on every
/// rank (plan file and call site, environment, communicator size, byte count), so every rank
/// builds the same messages.
BcastShape bcast_shape(const config::Config& cfg, const priority::PlanEntry* entry, int size, std::size_t bytes) {
  BcastShape out;
  // The LogGP model decides only what neither the plan nor a setting fixes.
  std::optional<priority::BcastChoice> model;
  auto modelled = [&]() -> const priority::BcastChoice& {
    if (!model) model = priority::choose_bcast(priority::LogGP{}, size, bytes, priority::BcastLimits{});
    return *model;
  };
  if (entry && entry->segments > 0) out.segments = entry->segments;
  else if (cfg.bcast_segments > 0) out.segments = cfg.bcast_segments;
  else out.segments = modelled().segments;
  if (entry) out.chains = entry->tree.kind == priority::TreeKind::chains ? entry->tree.chains : 0;
  else if (cfg.bcast_chains >= 0) out.chains = cfg.bcast_chains;
  else out.chains = modelled().shape.kind == priority::TreeKind::chains ? modelled().shape.chains : 0;
  return out;
}

}  // namespace

int bcast(Runtime& rt, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  OpStats& st = rt.stats().bcast;
  auto blocking = [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); };
  if (learn::guarded()) {
    int me = 0;
    PMPI_Comm_rank(comm, &me);
    release_guarded(buffer, static_cast<std::size_t>(std::max(count, 0)), datatype, me == root);
  }
  if (const char* why = shared_exclusion(buffer, comm)) return plain(st, why, blocking);
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  const TypeInfo ti = datatype::info(datatype);
  const std::size_t bytes = static_cast<std::size_t>(count) * ti.size;
  if (bytes == 0) return plain(st, "empty", blocking);
  if (bytes < rt.config().min_bytes) return plain(st, "small", blocking);
  if (bytes > INT_MAX) return plain(st, "large_block", blocking);
  const CallStart c = begin(st, comm, priority::Op::bcast, bytes, bytes);
  const decide::Decision& d = c.d;
  const priority::PlanEntry* entry = c.entry;
  learn::SiteLearning* ls = c.ls;
  // Whatever the tree, the data comes from the root: counted by where the root is.
  decide::count_received(d, rank, root, bytes);
  int size = 1;
  PMPI_Comm_size(comm, &size);
  // Segment count and tree change the messages: they come from the plan entry every rank agreed
  // on (decide.hpp) or from the settings, never from anything rank-local.  A site that learns
  // keeps them: a learned plan of it is written with them (TNBC_PLAN_OUT).
  auto shape_of_call = [&] {
    const BcastShape shape = bcast_shape(rt.config(), d.shape, size, bytes);
    if (ls != nullptr) ls->bcast_segments = shape.segments, ls->bcast_chains = shape.chains, ls->total_bytes = bytes;
    return shape;
  };
  if (d.path == decide::Path::blocking && !d.engine) {
    const std::uint64_t t0 = util::now_ns();
    const int rc = plain(st, d, comm, blocking);
    if (rc == MPI_SUCCESS && d.observe && ls != nullptr) shape_of_call();
    // The root sends its buffer: only the others have something to read.
    if (rc == MPI_SUCCESS && rank != root && d.observe && ls != nullptr && ti.contiguous) {
      const auto units = observe::bcast_units(bytes, static_cast<std::size_t>(rt.config().trace_bcast_units),
                                            static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
      learn::observe(d.key->learning, *ls, buffer, units, util::now_ns() - t0,
                     units.empty() ? 0 : bytes / units.size());
    }
    return rc;
  }
  const BcastShape shape = shape_of_call();
  const int segments = shape.segments, chains = shape.chains;
  // The segment order may be this call's own (it only says when segments are posted), if it
  // orders as many segments as there are, else the agreed entry's, else the order learned for
  // the site, or for the key when nobody else calls from this rank's site (a Bcast root whose
  // call the compiler gave a copy of its own); the same on every rank.
  auto orders_all = [&](const priority::PlanEntry* e) {
    return e != nullptr && e->order.size() == static_cast<std::size_t>(segments);
  };
  const priority::PlanEntry* ordered = orders_all(entry) ? entry : orders_all(d.shape) ? d.shape : nullptr;
  const std::vector<int> order =
      ordered ? as_ints(ordered->order) : ls ? as_ints(learn::learned_segments(d.key->learning, ls, segments)) : std::vector<int>{};
  if (ordered == nullptr && !order.empty()) ++d.key->learning.applied;
  if (!d.engine && (ordered != nullptr || !order.empty()))  // where the order came from (tnbc-stats: "early order")
    (ordered != nullptr ? d.costs->order_plan_calls : d.costs->order_learned_calls).fetch_add(1, std::memory_order_relaxed);

  auto [lo, len] = span_of(buffer, 0, static_cast<std::size_t>(count), ti);
  engine::Engine::instance().complete_overlapping(lo, len);
  bool early = false;
  int rc = MPI_SUCCESS;  // the packing's or unpacking's error, after the exchange
  // A blocking call the engine runs (Decision::engine) receives in place, under the decision's
  // reason.
  const char* in_place = d.engine ? d.why : rank != root ? receive_in_place(lo, len) : nullptr;
  const char* why_direct = !ti.contiguous ? "datatype" : in_place ? in_place : "no_full_page";
  if (!d.engine) d.costs->early_calls.fetch_add(1, std::memory_order_relaxed);
  engine::Costs* costs = d.engine ? nullptr : d.costs;
  // The exchange, early or not; a blocking call the engine runs is measured around it.
  const std::uint64_t t0 = util::now_ns();
  auto run = [&] {
    if (ti.contiguous) {
      const engine::Engine::Result r =
          engine::Engine::instance().bcast(buffer, bytes, root, comm, segments, chains, order, in_place == nullptr, costs);
      early = r.early;
      if (r.why != nullptr) why_direct = r.why;
    } else {
      std::vector<char> stage(bytes);
      int pos = 0;
      if (rank == root) rc = PMPI_Pack(buffer, count, datatype, stage.data(), static_cast<int>(bytes), &pos, comm);
      engine::Engine::instance().bcast(stage.data(), bytes, root, comm, segments, chains, order, false, costs);
      if (rank != root) rc = PMPI_Unpack(stage.data(), static_cast<int>(bytes), &pos, buffer, count, datatype, comm);
    }
    decide::done(d, comm);
    return rc;
  };
  if (d.engine) engine_blocking(d, comm, run);
  else run();
  decide::say_early_path_call(d, early, why_direct, util::now_ns() - t0);
  if (early) st.count_early_return();
  else st.count_fallback(why_direct);
  return rc;
}

}  // namespace tnbc::shim::replay
