// Which processes share this rank's node (node.hpp).
#include "node.hpp"

#include <climits>
#include <ctime>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <numeric>
#include <set>

namespace tnbc::shim::node {
namespace {

std::vector<char> g_world_on_node;  // rank r of MPI_COMM_WORLD shares this rank's node
std::uint32_t g_node_index = 0;     // this rank's node among the job's nodes
MPI_Group g_world_group = MPI_GROUP_NULL;

constexpr std::size_t kHostBytes = HOST_NAME_MAX + 1;  // a host name, NUL-terminated
using Identity = std::array<char, kHostBytes + 40>;    // the host name, then the boot id (36 characters)

/// The MPI_COMM_WORLD rank of each member of `g` (MPI_UNDEFINED for a process outside it).
std::vector<int> world_ranks(MPI_Group g) {
  int n = 0;
  PMPI_Group_size(g, &n);
  std::vector<int> local(static_cast<std::size_t>(n)), in_world(static_cast<std::size_t>(n));
  std::iota(local.begin(), local.end(), 0);
  PMPI_Group_translate_ranks(g, n, local.data(), g_world_group, in_world.data());
  return in_world;
}

/// What names this rank's node: its host name and the kernel's boot id.  Ranks on one node
/// share both; two machines that share a host name (containers) differ in boot id; the emulated
/// cluster's nodes (network and UTS namespaces of one machine) differ in host name.  A field
/// that cannot be read stays empty.
Identity identity() {
  Identity id{};
  if (gethostname(id.data(), kHostBytes) != 0) id[0] = '\0';
  id[kHostBytes - 1] = '\0';
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (std::fgets(id.data() + kHostBytes, static_cast<int>(id.size() - kHostBytes), f) == nullptr)
      id[kHostBytes] = '\0';
    std::fclose(f);
  }
  id.back() = '\0';
  return id;
}

/// MPI_Wait, but sleeping 50 microseconds between tests.  At the start every rank of the job
/// waits here at once; where ranks outnumber cores, MPI's own wait polls, and every step of the
/// collective then waits for a rank that has no core (16 ranks on 2 cores: about 100 ms,
/// docs/measurements/startup-16ranks.md).  A rank that sleeps leaves its core to the ranks it
/// waits for; with a core per rank a wait ends at most one nap after the data arrives.
int wait_sleeping(MPI_Request* request) {
  for (;;) {
    int done = 0;
    if (const int rc = PMPI_Test(request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
    if (done) return MPI_SUCCESS;
    const timespec nap{0, 50'000};
    nanosleep(&nap, nullptr);
  }
}

}  // namespace

bool learn(std::uint64_t digest, StartValues& values) {
  int world = 0, me = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &world);
  PMPI_Comm_rank(MPI_COMM_WORLD, &me);
  const auto n = static_cast<std::size_t>(world);
  g_world_on_node.assign(n, 0);
  g_node_index = 0;
  // One Iallgather of every rank's node identity: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
  // answers the same question, but costs 50-100 ms a call in MPICH 4.0.2 (it loads the hwloc
  // topology each time; 4 ranks on 2 cores), against one collective's few milliseconds.
  struct Record {
    Identity id;
    std::uint64_t digest;
    StartValues values;
  };
  Record mine{identity(), digest, values};
  std::vector<Record> all(n);
  MPI_Request request = MPI_REQUEST_NULL;
  if (PMPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD, &request) !=
          MPI_SUCCESS ||
      wait_sleeping(&request) != MPI_SUCCESS) {
    values.fill(0);  // nothing agreed: the least of every value
    return false;
  }
  const bool agreed = std::all_of(all.begin(), all.end(), [&](const Record& r) { return r.digest == digest; });
  for (const Record& r : all)
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::min(values[i], r.values[i]);
  const auto same_node = [&](std::size_t a, std::size_t b) { return all[a].id[0] != '\0' && all[a].id == all[b].id; };
  // A rank without a host name is alone on its node, as if every communicator spanned nodes.
  for (std::size_t r = 0; r < n; ++r) g_world_on_node[r] = r == static_cast<std::size_t>(me) || same_node(r, static_cast<std::size_t>(me));
  // The node's index: the nodes numbered in world-rank order of their first ranks, i.e. the
  // nodes met before this node's first rank (a rank without a host name is a node of its own).
  std::set<Identity> before;
  for (std::size_t r = 0; r < n && !g_world_on_node[r]; ++r)
    if (all[r].id[0] == '\0' || before.insert(all[r].id).second) ++g_node_index;
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  return agreed;
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

bool job_spans_nodes() { return known() && world_ranks_here() < static_cast<int>(g_world_on_node.size()); }

std::uint32_t index() { return known() ? g_node_index : 0; }

int communicator(MPI_Comm comm, int tag, MPI_Comm* out) {
  const std::vector<char> here = peers(comm);
  std::vector<int> members;
  for (std::size_t r = 0; r < here.size(); ++r)
    if (here[r]) members.push_back(static_cast<int>(r));
  return group_communicator(comm, members, tag, out);
}

int group_communicator(MPI_Comm comm, const std::vector<int>& members, int tag, MPI_Comm* out) {
  MPI_Group all = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &all);
  PMPI_Group_incl(all, static_cast<int>(members.size()), members.data(), &group);
  const int rc = PMPI_Comm_create_group(comm, group, tag, out);
  PMPI_Group_free(&group);
  PMPI_Group_free(&all);
  return rc;
}

}  // namespace tnbc::shim::node
