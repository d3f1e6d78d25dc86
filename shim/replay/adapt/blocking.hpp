// The blocking path of a key, inside adapt/ (blocking.cpp): which of MPI's algorithms, or the
// engine's exchange run to completion, runs its blocking calls.  decide.hpp's before_blocking and
// after_blocking are its entry points; for_call completes its tallies (complete_tally).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "decide.hpp"

namespace tnbc::shim::replay::adapt {

/// The trial's settings (TNBC_ALGORITHMS_AFTER; decide.cpp, start_decisions).
const TrialPolicy& trial_policy();
/// The calls of a key as a person names them: "alltoall of 1 MiB", "alltoallv" (no size).
std::string what(const Key& k, std::uint64_t bytes);

/// Whether the key may post a tally of the engine's first choice after this blocking call: before
/// any trial round, none running or due, no tally in flight (the same on every rank of the key).
bool before_rounds_idle(const Key& key);
/// Completes the key's tally in flight (AlgorithmChoice::tally: the engine's first choice, or a trial
/// round's), if any, and applies it: at the key's next call (for_call), before its path and
/// algorithm.
void complete_tally(Key& key, MPI_Comm comm);
/// The same at MPI_Finalize (finish_tallies): completes it; applies a trial round's choice
/// (for the statistics), not the engine's tallies (they would start more MPI calls).
void tally_at_end(Key& key);

/// The "algorithm" object of a key in the statistics (docs/config.md).
std::string algorithm_json(const Key& k);

}  // namespace tnbc::shim::replay::adapt
