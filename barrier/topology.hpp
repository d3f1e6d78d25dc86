// Where ranks sit: the NUMA distance matrix and the NUMA node of a rank.  Behind an interface
// so tests and machines with one NUMA node can model any machine (TNBC_NUMA_TOPOLOGY=FILE).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tnbc::barrier {

class Topology {
 public:
  virtual ~Topology() = default;
  /// Distance between NUMA nodes a and b as numactl -H prints it (10 = local).
  virtual int distance(int a, int b) const = 0;
  /// NUMA node of the calling process, known as `world_rank` in MPI_COMM_WORLD; -1 if unknown.
  virtual int node_of_self(int world_rank) const = 0;
  /// NUMA nodes of the machine (at least 1): with one, every rank sits on node 0.
  virtual int node_count() const = 0;
};

/// The host, through libnuma: numa_distance() and the node of the CPU the caller runs on.
/// Without NUMA support every distance is 10 and every rank on node 0.
class NumaTopology final : public Topology {
 public:
  int distance(int a, int b) const override;
  int node_of_self(int world_rank) const override;
  int node_count() const override;
};

/// A modelled machine: a distance matrix and the node of each rank of MPI_COMM_WORLD.
class MatrixTopology final : public Topology {
 public:
  MatrixTopology(std::vector<std::vector<int>> distances, std::vector<int> rank_nodes)
      : distances_(std::move(distances)), rank_nodes_(std::move(rank_nodes)) {}

  int distance(int a, int b) const override { return distances_.at(a).at(b); }
  /// -1 for a rank the model does not list.
  int node_of_self(int world_rank) const override {
    return world_rank >= 0 && world_rank < static_cast<int>(rank_nodes_.size())
               ? rank_nodes_[world_rank]
               : -1;
  }
  int node_count() const override { return static_cast<int>(distances_.size()); }
  const std::vector<int>& rank_nodes() const { return rank_nodes_; }

 private:
  std::vector<std::vector<int>> distances_;
  std::vector<int> rank_nodes_;
};

/// A parse result: the topology, or the reason there is none.
struct TopologyParse {
  std::optional<MatrixTopology> topology;
  std::string error;  ///< empty when topology is set
};

/// Parses the topology file format (docs/barrier.md):
///
///   # comment to the end of the line, blank lines ignored
///   distances
///   10 21          one row per NUMA node, as numactl -H prints the matrix
///   21 10
///   ranks 0 1 1 1  NUMA node of rank 0, 1, ... of MPI_COMM_WORLD, on this line and/or the
///                  following ones
TopologyParse parse_topology(std::string_view text);
/// Largest topology file load_topology reads (64 MiB: a matrix of 1024 NUMA nodes and the
/// nodes of millions of ranks fit).
inline constexpr std::uint64_t kMaxTopologyBytes = 64ull << 20;
/// Reads (util::InputFile: a regular file of at most kMaxTopologyBytes, opened without
/// blocking) and parses `path`; errors are prefixed with the path.
TopologyParse load_topology(const std::string& path);

}  // namespace tnbc::barrier
