// The simulated cluster of tnbc-sim: nodes on one flat switch, or on a two-level fat tree, built
// in code for SimGrid.
//
// Each node is one SimGrid host and its ranks are actors on it.  A node reaches the switch
// through one full-duplex link (a SimGrid split-duplex link: sending uses its UP half,
// receiving its DOWN half), so a message between nodes crosses the sender's UP half and the
// receiver's DOWN half, like the emulated cluster's links shaped in both directions
// (docs/cluster.md).  A message within a node crosses the node's loopback link, whose
// bandwidth is the memory bandwidth of MPICH's shared-memory copies and which all ranks of
// the node share.  How flows share a link, and what latency and bandwidth a TCP flow really
// gets, is SimGrid's network model (the default LV08, or what --cfg sets).
//
// The fat tree (PlatformSpec::leaf_nodes > 0) is SimGrid's own FatTreeZone with two switch
// levels: leaves of `leaf_nodes` nodes, each leaf switch linked once to each of `spines` spine
// switches, every link full duplex at the nodes' rate and latency.  It routes destination-mod-k:
// a message to node d leaves its leaf towards spine d mod spines.  Fewer spines than nodes per
// leaf taper the tree (leaf_nodes / spines to one).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace simgrid::s4u {
class Host;
}

namespace tnbc::sim {

struct PlatformSpec {
  int nodes = 2;
  int ppn = 2;                ///< ranks per node
  double link_Bps = 25e6;     ///< each direction of a node's link, bytes/s (200 Mbit/s)
  double latency_s = 25e-6;   ///< a node's link, one way (node to switch)
  /// Intra-node copies, bytes/s: about half of the 17 GB/s a 64 MiB memcpy reaches on the
  /// 2-core machine the benchmarks run on, since MPICH's shared-memory path copies each byte
  /// twice (into a shared cell, out of it).
  double mem_Bps = 8e9;
  bool cyclic = false;        ///< placement: rank r on node r mod nodes (else block)
  int leaf_nodes = 0;         ///< fat tree: nodes per leaf switch (0: one flat switch)
  int spines = 0;             ///< fat tree: spine switches, each linked once to every leaf
  int ranks() const { return nodes * ppn; }
  bool fat_tree() const { return leaf_nodes > 0; }
};

/// The latency of a node's memory link (a copy within the node): it stands for the handshake of
/// MPICH's shared-memory cells, well below the network's.
inline constexpr double kMemoryLatency = 1e-6;

/// The node of `rank`: block (ranks 0..ppn-1 on node 0, ...) or cyclic, as
/// `tnbc-cluster run --placement` deals them.
int node_of(const PlatformSpec& spec, int rank);

/// The leaf switch of `node` (0 on a flat switch).
inline int leaf_of(const PlatformSpec& spec, int node) { return spec.fat_tree() ? node / spec.leaf_nodes : 0; }
/// The spine a message to node `dst` crosses between two leaves (SimGrid's destination-mod-k).
inline int spine_to(const PlatformSpec& spec, int dst) { return dst % spec.spines; }
/// Links a message from node a to node b crosses one after the other: 2 within a leaf (or on a
/// flat switch), 4 between leaves; each pays PlatformSpec::latency_s.
inline int hops(const PlatformSpec& spec, int a, int b) {
  return spec.fat_tree() && leaf_of(spec, a) != leaf_of(spec, b) ? 4 : 2;
}

/// Each node's ranks, ascending (its local rank 0 first).
std::vector<std::vector<int>> node_members(const PlatformSpec& spec);

/// The hosts of the nodes, in node order, after building the platform into the running
/// SimGrid engine (which must exist and have no platform yet).
std::vector<simgrid::s4u::Host*> build_platform(const PlatformSpec& spec);

/// Creates SimGrid's engine with the settings `cfg` (each as --cfg takes it: "KEY:VALUE"),
/// builds the platform, lets `actors` create the actors on the hosts (node order) and runs the
/// simulation to its end.  SimGrid allows one engine per process: call this once.
void run_simulation(const PlatformSpec& spec, const std::vector<std::string>& cfg,
                    const std::function<void(const std::vector<simgrid::s4u::Host*>&)>& actors);

/// A rate in tc's syntax ("200mbit", "1gbit", "25mbps", "500kbit") in bytes/s, as
/// bench/link_model.py's parse_rate; a time ("25us", "1ms", "0.5s") in seconds.  Both throw
/// std::invalid_argument on anything else.
double parse_rate(std::string_view text);
double parse_time(std::string_view text);

}  // namespace tnbc::sim
