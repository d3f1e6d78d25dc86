// The joint verdict of a job on one node (blocking.cpp's step 4 of the engine's first choice):
// after a key's own samples and check, its ranks judge it again with their other keys, from the
// ledgers of every key's samples and checks (engine_ledger.hpp), after its blocking call
// kJointFirst and each time twice as far on until a trial round begins.  Where the ledgers hold
// other keys' evidence the key runs what they say (joint_verdict), so that a rank's keys run one
// way: on one node a rank whose keys split between the engine's exchange and MPI's calls lost the
// engine's gain (docs/measurements/engine-joint.md).  Each step is a tally on the key's
// communicator, posted after one call and taken at the next, as the key's other tallies.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "decide.hpp"

namespace tnbc::shim::replay::adapt {

/// The key's blocking call (the trial's count) after which its first joint verdict is asked.
/// After its samples (calls 12-15) and their check (16-25) wherever those run, and early in a
/// run of 50-100 calls a key (heFFTe's, fftMPI's, 2DECOMP&FFT's on one node).
inline constexpr std::uint64_t kJointFirst = 32;

/// Whether the key is judged with the rank's other keys: it lies in a job on one node (the same
/// on every rank).  Its samples and judged checks then go into the rank's ledger.
bool judged_jointly(const Key& key);

/// Whether the key's ranks ask the joint verdict after this blocking call: its samples judged
/// (EngineSamples::joint_at set), at the blocking call joint_at, before any trial round, with
/// nothing of the engine's or the trial's under way.  Every condition is the same on every rank.
bool joint_due(const Key& key);

/// Posts this rank's ledger (LedgerPart) over the key's communicator (EngineStage::joining); the
/// next verdict is due after twice the key's blocking calls.
void ask_joint(Key& key, MPI_Comm comm);

/// The agreed ledgers, at the key's next call: it runs what joint_verdict says, where it says
/// anything; a check asked for a choice the verdict leaves is dropped (the ledgers hold the checks
/// there were).
void joint_agreed(Key& key);

}  // namespace tnbc::shim::replay::adapt
