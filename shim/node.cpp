// Which processes share this rank's node (node.hpp).
#include "node.hpp"

#include <algorithm>
#include <numeric>

namespace tnbc::shim::node {
namespace {

std::vector<char> g_world_on_node;  // rank r of MPI_COMM_WORLD shares this rank's node
MPI_Group g_world_group = MPI_GROUP_NULL;

/// The MPI_COMM_WORLD rank of each member of `g` (MPI_UNDEFINED for a process outside it).
std::vector<int> world_ranks(MPI_Group g) {
  int n = 0;
  PMPI_Group_size(g, &n);
  std::vector<int> local(static_cast<std::size_t>(n)), in_world(static_cast<std::size_t>(n));
  std::iota(local.begin(), local.end(), 0);
  PMPI_Group_translate_ranks(g, n, local.data(), g_world_group, in_world.data());
  return in_world;
}

}  // namespace

void learn() {
  int world = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  g_world_on_node.assign(static_cast<std::size_t>(world), 0);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  MPI_Comm node = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    PMPI_Group_free(&g_world_group);
    g_world_group = MPI_GROUP_NULL;
    return;
  }
  MPI_Group g = MPI_GROUP_NULL;
  PMPI_Comm_group(node, &g);
  for (int r : world_ranks(g))
    if (r >= 0 && r < world) g_world_on_node[static_cast<std::size_t>(r)] = 1;
  PMPI_Group_free(&g);
  PMPI_Comm_free(&node);
}

bool known() { return g_world_group != MPI_GROUP_NULL; }

std::vector<char> peers(MPI_Comm comm) {
  MPI_Group g = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &g);
  int n = 0;
  PMPI_Group_size(g, &n);
  std::vector<char> out(static_cast<std::size_t>(n), 0);
  if (known()) {
    const std::vector<int> in_world = world_ranks(g);
    for (std::size_t i = 0; i < in_world.size(); ++i) {
      const int r = in_world[i];
      out[i] = r >= 0 && static_cast<std::size_t>(r) < g_world_on_node.size() && g_world_on_node[static_cast<std::size_t>(r)];
    }
  }
  PMPI_Group_free(&g);
  return out;
}

int world_ranks_here() {
  return std::max(1, static_cast<int>(std::count(g_world_on_node.begin(), g_world_on_node.end(), 1)));
}

std::uint32_t index() {
  if (!known()) return 0;
  int world_rank = 0, world = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  // The node's first rank leads it.
  const auto first_here = std::find(g_world_on_node.begin(), g_world_on_node.end(), 1);
  const int first = first_here != g_world_on_node.end() ? static_cast<int>(first_here - g_world_on_node.begin())
                                                        : world_rank;
  int leader = first == world_rank;
  std::vector<int> leaders(static_cast<std::size_t>(world));
  PMPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return static_cast<std::uint32_t>(std::count(leaders.begin(), leaders.begin() + first, 1));
}

}  // namespace tnbc::shim::node
