#include "runtime.hpp"

#include <mpi.h>

#include <algorithm>
#include <unistd.h>

#include "fence.hpp"
#include "log.hpp"
#include "mode.hpp"
#include "util/file.hpp"
#include "version.hpp"

extern char** environ;

namespace tnbc::shim {

Runtime& runtime() {
  static Runtime instance;
  return instance;
}

int Runtime::thread_level_for(int required) const {
  // Reading the table here is pure (no output); start() reads it again and reports problems.
  if (config::load(environ).config.disable) return required;
  return std::max(required, mode().thread_level());
}

void Runtime::start() {
  if (started_) return;
  started_ = true;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  log::set_rank(world_rank_);

  auto loaded = config::load(environ);
  config_ = std::move(loaded.config);
  log::set_level(config_.log);
  for (const auto& m : loaded.messages) log::warn_rank0("{}", m);

  if (config_.disable) {
    log::info_rank0("TNBC_DISABLE=1: {} {} passes every call straight to MPI", mode().library(),
                    kVersion);
    return;
  }
  mode().start(*this);
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
  if (auto err = util::write_file_atomic(path, stats_.to_json(world_rank_, mode().library(), kVersion))) {
    // Every rank usually fails the same way: say it once, from rank 0.
    if (world_rank_ == 0) log::warn("statistics not written: {}", *err);
    else log::debug("statistics not written: {}", *err);
  }
}

}  // namespace tnbc::shim
