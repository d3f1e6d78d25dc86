#include "watchdog.hpp"

#include <fmt/format.h>

namespace tnbc::shim {

std::string world_ranks(MPI_Comm comm, const std::vector<int>& ranks) {
  std::vector<int> world(ranks.size(), MPI_UNDEFINED);
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  if (PMPI_Comm_group(comm, &group) == MPI_SUCCESS && PMPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS)
    PMPI_Group_translate_ranks(group, static_cast<int>(ranks.size()), ranks.data(), world_group, world.data());
  if (group != MPI_GROUP_NULL) PMPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", ranks[i]);
    if (world[i] != ranks[i] && world[i] != MPI_UNDEFINED) out += fmt::format(" (world {})", world[i]);
  }
  return out;
}

std::string named_ranks(MPI_Comm comm, const std::vector<int>& ranks) {
  if (ranks.empty()) return "no rank";
  return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", world_ranks(comm, ranks));
}

}  // namespace tnbc::shim
