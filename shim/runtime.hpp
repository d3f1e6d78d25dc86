// Process-wide state of the library between MPI initialisation and MPI_Finalize.
#pragma once

#include <atomic>

#include "config.hpp"
#include "stats.hpp"

namespace tnbc::shim {

class Runtime {
 public:
  /// Before PMPI_Init(_thread): the thread level to ask MPI for when the application asks for
  /// `required` (the mode's need, unless TNBC_DISABLE=1).
  int thread_level_for(int required) const;

  /// After a successful PMPI_Init(_thread): reads the configuration once, reports unknown
  /// settings and bad values (rank 0), checks collectively that the settings which must agree
  /// across ranks do (else stays passive on every rank, as disabled), starts the mode unless
  /// TNBC_DISABLE=1.
  void start();
  /// At MPI_Finalize, before PMPI_Finalize: completes in-flight work, stops the mode and writes
  /// the statistics file.  Safe to call when start() was never called.
  void stop();

  /// True between start() and stop() unless disabled: the intercepted calls act.
  bool active() const { return active_.load(std::memory_order_acquire); }
  /// True from the start of stop(): a drain hook called then is the last one, at MPI_Finalize.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  const config::Config& config() const { return config_; }
  Stats& stats() { return stats_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  config::Config config_;
  Stats stats_;
  int world_rank_ = -1;
  int world_size_ = 0;
  bool started_ = false;
  std::atomic<bool> active_{false};
  std::atomic<bool> stopping_{false};
};

Runtime& runtime();

}  // namespace tnbc::shim
