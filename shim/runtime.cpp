#include "runtime.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>
#include <unistd.h>

#include "fence.hpp"
#include "log.hpp"
#include "mode.hpp"
#include "node.hpp"
#include "util/file.hpp"
#include "util/hash.hpp"
#include "version.hpp"

extern char** environ;

/// Set before PMPI_Init when the process runs the other MPI: the generated MPI_x trampolines
/// then jump straight to PMPI_x, arguments untouched (mpi_wrappers.cpp, shim/gen_wrappers.py).
extern "C" {
__attribute__((visibility("hidden"))) unsigned char tnbc_mpi_mismatch = 0;
}

namespace tnbc::shim {

namespace {

/// The settings that must agree across ranks (config::Agree), in one digest.
std::uint64_t settings_digest(const config::Config& cfg) {
  std::uint64_t h = util::kFnvOffset;
  for (const auto& s : config::settings()) {
    const std::uint64_t d = config::agreement_digest(s, cfg);
    h = util::fnv(h, &d, sizeof d);
  }
  return h;
}

/// The settings that must agree across ranks and do not, by name.  Collective over
/// MPI_COMM_WORLD: one MPI_Allreduce(MAX) of each digest and its complement, since
/// max(d) == ~max(~d) exactly when every rank has the same d.
std::vector<std::string_view> differing_settings(const config::Config& cfg) {
  std::vector<const config::Setting*> checked;
  for (const auto& s : config::settings())
    if (s.agree != config::Agree::no) checked.push_back(&s);
  const std::size_t n = checked.size();
  std::vector<std::uint64_t> mine(2 * n), max(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    mine[i] = config::agreement_digest(*checked[i], cfg);
    mine[n + i] = ~mine[i];
  }
  PMPI_Allreduce(mine.data(), max.data(), static_cast<int>(2 * n), MPI_UINT64_T, MPI_MAX,
                 MPI_COMM_WORLD);
  std::vector<std::string_view> differ;
  for (std::size_t i = 0; i < n; ++i)
    if (max[i] != ~max[n + i]) differ.push_back(checked[i]->name);
  return differ;
}

/// The MPI this library was built against, as its version string starts.
#ifdef OMPI_MAJOR_VERSION
constexpr bool kBuiltForOpenMpi = true;
constexpr std::string_view kBuiltFor = "Open MPI";
#else
constexpr bool kBuiltForOpenMpi = false;
constexpr std::string_view kBuiltFor = "MPICH";
#endif

/// The world rank the launcher gave this process, before MPI can be asked (hydra: PMI_RANK;
/// Open MPI: OMPI_COMM_WORLD_RANK; PMIx, Slurm), or -1.
int launcher_rank() {
  for (const char* name : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::atoi(v);
  }
  return -1;
}

}  // namespace

bool Runtime::mpi_matches() {
  if (mpi_matches_ >= 0) return mpi_matches_ == 1;
  // Larger than either MPI's MPI_MAX_LIBRARY_VERSION_STRING (MPICH 8192, Open MPI 256): the
  // running MPI may be the other one.
  static char version[16384];
  int len = 0;
  if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS) len = 0;
  std::string_view v(version, static_cast<std::size_t>(std::clamp(len, 0, static_cast<int>(sizeof version - 1))));
  v = v.substr(0, std::min(v.find('\n'), v.size()));
  // "MPICH Version:\t4.0.2" reads as "MPICH Version: 4.0.2".
  for (char c : v.substr(0, 120)) {
    if (c == '\t' || c == ' ') {
      if (!running_mpi_.empty() && running_mpi_.back() != ' ') running_mpi_ += ' ';
    } else {
      running_mpi_ += c;
    }
  }
  const bool open_mpi = v.starts_with("Open MPI");
  mpi_matches_ = (open_mpi == kBuiltForOpenMpi) ? 1 : 0;
  if (!mpi_matches_) tnbc_mpi_mismatch = 1;
  return mpi_matches_ == 1;
}

Runtime& runtime() {
  static Runtime instance;
  return instance;
}

int Runtime::thread_level_for(int required) {
  // Reading the table here is pure (no output); start() reads it again and reports problems.
  if (!mpi_matches() || config::load(environ).config.disable) return required;
  return std::max(required, mode().thread_level());
}

void Runtime::start() {
  if (started_) return;
  started_ = true;
  if (!mpi_matches()) {
    // Nothing here may touch a handle: this library's MPI_COMM_WORLD is not the running MPI's.
    log::set_rank(launcher_rank());
    log::warn_rank0("{} {} is built for {} but runs under {}; every call passes straight to MPI "
                    "(preload the library built for this MPI)", mode().library(), kVersion, kBuiltFor,
                    running_mpi_.empty() ? "another MPI" : running_mpi_);
    return;
  }
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  log::set_rank(world_rank_);

  auto loaded = config::load(environ);
  config_ = std::move(loaded.config);
  log::set_level(config_.log);
  for (const auto& m : loaded.messages) log::warn_rank0("{}", m);

  // Before anything collective that depends on a setting (the barrier's setup, the engine's
  // exchanges; prepare() below starts only what is local to this rank):
  // ranks that disagree would build different messages, or wait in different calls.  On every
  // rank, TNBC_DISABLE=1 or not: one collective learns the node map (shim/node.hpp), whether
  // the settings' digests agree and what the mode's local start needs agreed (Mode::prepare:
  // whether the engine started on every rank); only where the settings differ, a second one
  // names them, and what prepare() started is undone.
  const bool prepared = !config_.disable;
  node::StartValues values{};
  if (prepared) mode().prepare(*this, values);
  const bool agreed = node::learn(settings_digest(config_), values);
  if (const auto differ = agreed ? std::vector<std::string_view>{} : differing_settings(config_); !differ.empty()) {
    log::warn_rank0("settings differ between ranks: {}; every call passes straight to MPI, as "
                    "with TNBC_DISABLE=1", fmt::join(differ, ", "));
    if (prepared) mode().abandon(*this);
    config_.disable = true;
    return;
  }
  if (config_.disable) {
    log::info_rank0("TNBC_DISABLE=1: {} {} passes every call straight to MPI", mode().library(),
                    kVersion);
    return;
  }
  mode().start(*this, values);
  active_.store(true, std::memory_order_release);
  log::debug("{} {} active on {} ranks", mode().library(), kVersion, world_size_);
}

void Runtime::stop() {
  if (!active()) return;
  stopping_.store(true, std::memory_order_release);
  drain_in_flight();
  mode().stop(*this);
  active_.store(false, std::memory_order_release);
  if (config_.stats_prefix.empty()) return;
  std::string path = config_.stats_prefix + "." + std::to_string(world_rank_) + ".json";
  // TNBC_STATS=run2/stats creates run2/, as TNBC_TRACE_DIR creates its folder.
  const std::size_t slash = config_.stats_prefix.rfind('/');
  std::optional<std::string> err;
  if (slash != std::string::npos && slash > 0) err = util::make_dirs(config_.stats_prefix.substr(0, slash));
  if (!err) err = util::write_file_atomic(path, stats_.to_json(world_rank_, mode().library(), kVersion));
  if (err) {
    // Every rank usually fails the same way: say it once, from rank 0.
    if (world_rank_ == 0) log::warn("statistics not written: {}", *err);
    else log::debug("statistics not written: {}", *err);
  }
}

}  // namespace tnbc::shim
