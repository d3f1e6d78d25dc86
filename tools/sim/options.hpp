// tnbc-sim's command line: the options, their defaults and checks (tools/tnbc_sim.cpp runs them).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shim/config.hpp"
#include "tools/sim/fluid.hpp"
#include "tools/sim/platform.hpp"
#include "tools/sim/reader.hpp"
#include "tools/sim/traced.hpp"

namespace tnbc::sim {

/// Above this many ranks --model defaults to pairs (docs/measurements/scale.md, "Timings").
constexpr int kFluidMaxRanks = 512;

struct Args {
  PlatformSpec spec;
  std::size_t bytes = 1 << 20;
  std::size_t chunk_bytes = tnbc::config::kChunkBytesAcrossNodes;  // the simulated jobs span nodes
  Scenario scenario = *find_scenario("none");
  std::optional<double> work_ms;
  int parts = 1;
  int depth = SimOptions{}.connection_depth;
  double setup_s = 0;   // --setup-us
  double copy_Bps = 0;  // --copy-bw (0: --mem-bw)
  double progress_cpu_s = 0;  // --progress-cpu-us
  std::size_t window = static_cast<std::size_t>(tnbc::config::Config{}.chunk_window);
  std::vector<std::string> cfg;
  std::string model;  // empty: by the rank count
  bool json = false;
  bool plan = true;  // --plan natural
  std::optional<bool> per_node;  // --per-node (default: on with the fluid models)
  std::vector<int> sweep;        // --sweep: rank counts
  std::string svg;               // --svg
  bool nodes_given = false;
  bool alltoallv = false;  // --op alltoallv
  bool bcast = false;      // --op bcast
  int root = 0;                    // --root
  std::optional<int> segments;     // --segments (default: the engine's choice)
  std::optional<int> chains;       // --chains (0: binomial; default: the engine's choice)
  std::vector<int> chain_sweep;    // --chain-sweep
  bool scenario_given = false;
  bool fat_tree_given = false;
  bool ppn_given = false, placement_given = false, bytes_given = false, op_given = false;
  std::string trace;  // --trace DIR
  std::string site;   // --site KEY
  bool trace_per_byte = false;    // --trace-work per-byte
  bool is_counts = false;         // --counts is (with --trace: NPB IS's spread, not the trace's)
  double trace_work_scale = 1;    // --trace-work-scale
  std::optional<TracedSite> traced;  // loaded from --trace
};

/// Prints msg and the usage on standard error; returns 2, the exit code of bad usage.
int usage_error(std::string_view msg);
/// Reads the command line into `a`; a message on bad usage.
std::optional<std::string> parse(int argc, char** argv, Args& a);

}  // namespace tnbc::sim
