// MPI's own algorithms for the blocking path, chosen per key (trial.hpp) and set per call
// through MPI_T: before a blocking call whose key chose another algorithm than MPI's default,
// the control variable that selects it is written, and set back to the default after the call.
//
// MPICH (4.0 and later) selects the algorithm of a blocking MPI_Alltoall with
// MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM and of MPI_Bcast with MPIR_CVAR_BCAST_INTRA_ALGORITHM.
// They are enums without an MPI_T enum object: their values are the positions of the names in
// the variable's description, which algorithm.cpp checks against the names it knows before it
// writes any value (MPICH aborts on a value out of range).  Their scope is ALL_EQ: every rank of
// a communicator must hold the same value for a call, which the agreed choice gives.  Where a
// variable is missing, reads otherwise or cannot be written (Open MPI; another MPICH), every
// call keeps MPI's default, and rank 0 says so once (at TNBC_LOG=debug where the variables are
// simply missing or set by the user).
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "priority/plan.hpp"
#include "trial.hpp"

namespace tnbc::shim::replay::adapt {

/// What every rank must agree on before it uses a variable: the minimum over MPI_COMM_WORLD of
/// each rank's values (replay::start folds them into its own start-up agreement).
struct AlgorithmValues {
  static constexpr std::size_t kValues = 6;
  std::array<int, kValues> values{};
};
/// Looks the control variables up and checks that each candidate value can be written and read
/// back, on this rank (no message); returns this rank's values to agree on.  `enabled` false
/// (TNBC_ALGORITHMS=0, or TNBC_ADAPT=off): nothing is looked up.
AlgorithmValues find_algorithms(bool enabled);
/// With the minimum of every rank's values: every rank uses the same candidates or none.
void settle_algorithms(const AlgorithmValues& agreed);
/// Sets every variable written back to MPI's default and releases MPI_T.
void stop_algorithms();

/// The names of the candidates of an operation with `bytes` per block (Alltoall) or in all
/// (Bcast) on a communicator of `comm_size` ranks, the first choice first ("auto": MPI's
/// default); one entry, "auto", where there is nothing to choose (or nothing can be chosen:
/// start_algorithms found no usable variable for `op`).  The same on every rank for the same
/// arguments.
std::vector<std::string> algorithm_candidates(priority::Op op, std::uint64_t bytes, int comm_size);

/// Writes the variable of `op` so that the next blocking call runs candidate `index` of
/// `candidates` (nothing for "auto", MPI's default).  Returns whether anything was written
/// (then algorithm_restore must follow the call).
bool algorithm_set(priority::Op op, const std::vector<std::string>& candidates, std::size_t index);
void algorithm_restore(priority::Op op);

/// A line for the log: what start_algorithms found ("MPI's algorithms: ..." or why not).
const std::string& algorithms_status();
/// Whether that is unexpected (variables found that cannot be used: another MPICH version, a
/// failed write, ranks that disagree), and worth a message where TNBC_LOG=debug is not set.
bool algorithms_unexpected();

/// The agreed choice at the end of a trial round, in two halves around a sum over the ranks
/// (the caller's MPI_Iallreduce): what this rank adds (per candidate its best time, trial.hpp,
/// then per candidate whether it has one: 2 values each), and the choice from the sums of
/// `ranks` ranks (a candidate counts only where every rank measured it).  Returns whether the
/// choice changed.
std::vector<double> algorithm_votes(const AlgorithmTrial& trial);
bool choose_algorithm(AlgorithmTrial& trial, std::span<const double> summed, int ranks);

}  // namespace tnbc::shim::replay::adapt
