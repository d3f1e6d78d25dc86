// Process-wide state of the library between MPI initialisation and MPI_Finalize.
#pragma once

#include <atomic>
#include <string>

#include "config.hpp"
#include "stats.hpp"

namespace tnbc::shim {

class Runtime {
 public:
  /// Before PMPI_Init(_thread): the thread level to ask MPI for when the application asks for
  /// `required` (the mode's need, unless TNBC_DISABLE=1).
  int thread_level_for(int required);
  /// The thread level the application was given (MPI_Init: MPI_THREAD_SINGLE; MPI_Init_thread:
  /// what it asked for, or less where MPI gave less): what MPI_Query_thread reports to it, however
  /// high a level the mode asked MPI for.  -1 before initialisation.
  int program_thread_level() const { return program_thread_level_.load(std::memory_order_acquire); }
  void set_program_thread_level(int level) { program_thread_level_.store(level, std::memory_order_release); }

  /// After a successful PMPI_Init(_thread): reads the configuration once, reports unknown
  /// settings and bad values (rank 0), checks collectively that the settings which must agree
  /// across ranks do (else stays passive on every rank, as disabled), starts the mode unless
  /// TNBC_DISABLE=1.
  void start();
  /// At MPI_Finalize, before PMPI_Finalize: completes in-flight work, stops the mode and writes
  /// the statistics file.  Safe to call when start() was never called.
  void stop();

  /// Whether the MPI this process runs (the one PMPI_* calls reach) is the one the library was
  /// built for (MPICH and its ABI family, or Open MPI): asked once, before PMPI_Init, with
  /// PMPI_Get_library_version, which takes no handle.  When not, the library passes every call
  /// through and start() says so once (docs/design.md, "Open MPI").
  bool mpi_matches();

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
  int mpi_matches_ = -1;   // -1: not asked yet
  std::string running_mpi_;  // the first line of the running MPI's version string
  std::atomic<bool> active_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> program_thread_level_{-1};
};

Runtime& runtime();

}  // namespace tnbc::shim
