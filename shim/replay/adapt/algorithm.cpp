// MPI's own algorithms, set per call through MPI_T (algorithm.hpp).
#include "algorithm.hpp"

#include <algorithm>
#include <array>
#include <regex>
#include <string_view>

#include <fmt/format.h>

#include "shim/log.hpp"
#include "shim/mpi_own.hpp"

namespace tnbc::shim::replay::adapt {
namespace {

/// A control variable that selects the algorithm of one operation.
struct Var {
  priority::Op op;
  const char* name;
  /// The variable's values in order, as MPICH 4.0's description lists them: value i is names[i].
  std::vector<std::string_view> names;
  int index = -1;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int initial = 0;    // the value before the library wrote anything: the "default" restored
  bool usable = false;
};

std::array<Var, 2> g_vars = {
    Var{priority::Op::alltoall, "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM",
        {"auto", "brucks", "nb", "pairwise", "pairwise_sendrecv_replace", "scattered"}},
    Var{priority::Op::bcast, "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
        {"auto", "binomial", "nb", "smp", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"}},
};
bool g_mpi_t = false;
std::string g_status = "MPI's algorithms: not chosen (TNBC_ALGORITHMS=0)";
bool g_unexpected = false;  // variables found but not usable: worth a message at TNBC_LOG=info

/// What find_algorithms found on this rank, for settle_algorithms.
struct Lookup {
  bool enabled = false;
  int usable[2] = {0, 0};
  std::string why;
};
Lookup g_lookup;

Var* var_of(priority::Op op) {
  for (Var& v : g_vars)
    if (v.op == op && v.usable) return &v;
  return nullptr;
}

/// Whether `description` lists exactly `names`, in this order, each as "NAME   - text" (how
/// MPICH's generated descriptions list an enum's values; the value is the position).  The
/// description loses its line breaks on the way, so a name follows the previous entry's text
/// without a space ("... Force brucks algorithmnb   - Force ..."): an entry is a word that ends
/// in the name, where what comes before the name does not end in '_' (k_brucks is not brucks).
/// Together with the count, an MPI that adds, removes or reorders a value is refused.
bool lists_in_order(const std::string& description, const std::vector<std::string_view>& names) {
  static const std::regex entry(R"(([A-Za-z0-9_]+) *- )");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(description.begin(), description.end(), entry); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[1].str());
  if (found.size() != names.size()) return false;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& f = found[i];
    const std::string_view n = names[i];
    if (f.size() < n.size() || f.compare(f.size() - n.size(), n.size(), n) != 0) return false;
    if (f.size() > n.size() && f[f.size() - n.size() - 1] == '_') return false;
  }
  return true;
}

/// Looks `v` up and checks it; "" when usable, else why not.
std::string open_var(Var& v, const std::vector<std::string>& candidates) {
  if (PMPI_T_cvar_get_index(v.name, &v.index) != MPI_SUCCESS) return fmt::format("{} not found", v.name);
  char name[256], desc[4096];
  int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  if (PMPI_T_cvar_get_info(v.index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
          MPI_SUCCESS ||
      type != MPI_INT)
    return fmt::format("{} is not an integer variable", v.name);
  if (!lists_in_order(desc, v.names)) return fmt::format("{} does not list the algorithms this library knows", v.name);
  int count = 0;
  if (PMPI_T_cvar_handle_alloc(v.index, nullptr, &v.handle, &count) != MPI_SUCCESS || count != 1)
    return fmt::format("{}: no handle", v.name);
  if (PMPI_T_cvar_read(v.handle, &v.initial) != MPI_SUCCESS) return fmt::format("{} cannot be read", v.name);
  // Every candidate value is written and read back before any call depends on it.
  for (const std::string& c : candidates) {
    const auto at = std::find(v.names.begin(), v.names.end(), c);
    if (at == v.names.end()) return fmt::format("{} has no value '{}'", v.name, c);
    int value = static_cast<int>(at - v.names.begin()), back = -1;
    if (PMPI_T_cvar_write(v.handle, &value) != MPI_SUCCESS || PMPI_T_cvar_read(v.handle, &back) != MPI_SUCCESS ||
        back != value)
      return fmt::format("{} cannot be written", v.name);
  }
  if (PMPI_T_cvar_write(v.handle, &v.initial) != MPI_SUCCESS) return fmt::format("{} cannot be written", v.name);
  return {};
}

std::vector<std::string> candidates_for(priority::Op op, std::uint64_t bytes, int comm_size) {
  switch (op) {
    case priority::Op::alltoall:
      // Not brucks: under MPICH 4.0.2 it fails some programs' Alltoall.  From 4 KiB the first
      // choice is scattered, which keeps every link busy (docs/measurements/decision-notes.md);
      // not on 2 ranks, where every algorithm sends one block each way and scattered only adds
      // the rank's own block as a message (docs/algorithms.md).
      if (bytes < 4096) return {"auto", "scattered"};
      if (comm_size == 2) return {"auto", "scattered", "pairwise"};
      return {"scattered", "auto", "pairwise"};
    case priority::Op::bcast:
      // Not the scatter + allgather algorithms: the root receives into its own buffer in the
      // allgather, so a root buffer in read-only memory (a const table) fails them, in plain
      // MPICH 4.0.2 too ("process_vm_readv ... Bad address"), where MPICH's default and binomial
      // run; and they lost every measurement here (docs/measurements/adapt-history.md).
      return {"auto", "binomial"};
    default:
      // MPI_Alltoallv: MPICH's default is already its scattered algorithm; the other one
      // (pairwise_sendrecv_replace) serves MPI_IN_PLACE only, which never reaches a decision.
      return {"auto"};
  }
}

/// Every candidate any size may use, per operation.  A communicator's size only reorders the
/// list (2 ranks: MPI's default first), so one size above 2 lists them all.
std::vector<std::string> all_candidates(priority::Op op) {
  constexpr int kAnySize = 4;
  std::vector<std::string> all;
  for (std::uint64_t bytes : {std::uint64_t{1}, std::uint64_t{1} << 30})
    for (std::string& c : candidates_for(op, bytes, kAnySize))
      if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(std::move(c));
  return all;
}

}  // namespace

std::vector<std::string> algorithm_candidates(priority::Op op, std::uint64_t bytes, int comm_size) {
  if (var_of(op) == nullptr) return {"auto"};
  return candidates_for(op, bytes, comm_size);
}

AlgorithmValues find_algorithms(bool enabled) {
  g_lookup = Lookup{};
  g_lookup.enabled = enabled;
  int initial[2] = {0, 0};
  if (enabled) {
    // MPI_T at the thread level MPI runs at: Open MPI's MPI_T_init_thread sets the level MPI
    // reports from then on (asked for MPI_THREAD_SINGLE, the program's MPI_Query_thread said 0
    // where it had MPI_THREAD_FUNNELED: test legal-edges under Open MPI).
    int level = MPI_THREAD_SINGLE, provided = 0;
    mpi_own::Query_thread(&level);
    g_mpi_t = PMPI_T_init_thread(level, &provided) == MPI_SUCCESS;
    if (!g_mpi_t) g_lookup.why = "MPI_T cannot be initialized", g_unexpected = true;
    for (std::size_t i = 0; g_mpi_t && i < g_vars.size(); ++i) {
      const std::string err = open_var(g_vars[i], all_candidates(g_vars[i].op));
      if (!err.empty() && g_lookup.why.empty()) g_lookup.why = err;
      // A variable MPI does not have (Open MPI) is expected; one it has but that reads
      // otherwise (another MPICH version) is not.
      if (!err.empty() && err.find(" not found") == std::string::npos) g_unexpected = true;
      g_lookup.usable[i] = err.empty() ? 1 : 0;
      initial[i] = g_vars[i].initial;
    }
  }
  // Every rank uses a variable or none does, and only where nobody chose an algorithm already
  // (MPIR_CVAR_..._ALGORITHM set in the environment: the user's choice stands): the minimum of
  // each usable flag, and the minimum and maximum of each initial value (0 is MPI's default).
  return {{g_lookup.usable[0], g_lookup.usable[1], initial[0], initial[1], -initial[0], -initial[1]}};
}

void settle_algorithms(const AlgorithmValues& agreed) {
  const int* a = agreed.values.data();
  std::string used, why = g_lookup.why;
  for (std::size_t i = 0; i < g_vars.size(); ++i) {
    const bool user_set = a[2 + i] != 0 || a[4 + i] != 0;
    g_vars[i].usable = a[i] == 1 && !user_set;
    if (g_vars[i].usable) used += fmt::format("{}{}", used.empty() ? "" : ", ", priority::to_string(g_vars[i].op));
    else if (g_lookup.enabled && user_set && why.empty()) why = fmt::format("{} is set by the user", g_vars[i].name);
    else if (g_lookup.enabled && a[i] != 1 && g_lookup.usable[i] == 1 && why.empty())
      why = "not every rank can write them", g_unexpected = true;
  }
  if (!g_lookup.enabled) return;
  g_status = used.empty() ? fmt::format("MPI's algorithms: not chosen per call ({}); MPI's default runs", why)
             : why.empty() ? fmt::format("MPI's algorithms: chosen per call for {}", used)
                           : fmt::format("MPI's algorithms: chosen per call for {} ({})", used, why);
}

void stop_algorithms() {
  for (Var& v : g_vars) {
    if (v.handle != MPI_T_CVAR_HANDLE_NULL) {
      PMPI_T_cvar_write(v.handle, &v.initial);
      PMPI_T_cvar_handle_free(&v.handle);
    }
    v.usable = false;
  }
  if (g_mpi_t) PMPI_T_finalize();
  g_mpi_t = false;
}

const std::string& algorithms_status() { return g_status; }
bool algorithms_unexpected() { return g_unexpected; }

bool algorithm_set(priority::Op op, const std::vector<std::string>& candidates, std::size_t index) {
  Var* v = var_of(op);
  if (v == nullptr || index >= candidates.size() || candidates[index] == "auto") return false;
  const auto at = std::find(v->names.begin(), v->names.end(), candidates[index]);
  if (at == v->names.end()) return false;
  int value = static_cast<int>(at - v->names.begin());
  return PMPI_T_cvar_write(v->handle, &value) == MPI_SUCCESS;
}

void algorithm_restore(priority::Op op) {
  if (Var* v = var_of(op)) PMPI_T_cvar_write(v->handle, &v->initial);
}

std::vector<double> algorithm_votes(const AlgorithmTrial& trial) {
  const std::vector<double> bests = trial.bests();
  const std::size_t k = bests.size();
  std::vector<double> mine(2 * k);
  for (std::size_t i = 0; i < k; ++i) mine[i] = bests[i], mine[k + i] = bests[i] > 0 ? 1 : 0;
  return mine;
}

bool choose_algorithm(AlgorithmTrial& trial, std::span<const double> summed, int ranks) {
  const std::size_t k = summed.size() / 2;
  std::vector<double> agreed(k);
  for (std::size_t i = 0; i < k; ++i) agreed[i] = summed[k + i] >= ranks ? summed[i] : 0;
  return trial.choose(agreed);
}

}  // namespace tnbc::shim::replay::adapt
