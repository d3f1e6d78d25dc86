// What the library's waits on the program's behalf say when one lasts (TNBC_WATCHDOG): the parts
// that the engine's report (replay/engine/progress.cpp) and the shared-memory barrier's
// (replay/barrier_shim.cpp) have in common.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

namespace tnbc::shim {

/// `ranks` of `comm`, each with its MPI_COMM_WORLD rank where that differs: "3", "2, 3",
/// "2 (world 6)".
std::string world_ranks(MPI_Comm comm, const std::vector<int>& ranks);

/// "rank 3", "ranks 2, 3", "no rank": world_ranks with its noun.
std::string named_ranks(MPI_Comm comm, const std::vector<int>& ranks);

/// How every report ends: what to do about it.
inline constexpr std::string_view kWatchdogHint = "(TNBC_WATCHDOG=SECONDS sets the bound, 0 turns this off)";

}  // namespace tnbc::shim
