// The engine's ledger of one rank: what the engine's samples and checks measured on all of the
// rank's keys, summed, so that a job on one node judges its keys together (blocking.cpp, the joint
// verdict).  No MPI here: a key's ranks sum their ledgers in the key's own tally.
//
// Why together: on one node a rank whose calls on one communicator poll in MPI's call while its
// calls on another sleep in the engine's exchange loses both ways (the polling takes the core from
// the ranks the sleepers wait for), and keys judged each on two samples of each candidate split so
// in about a third of the runs: fftMPI's pencils took 1.02-1.30x plain where its keys split,
// 0.51-0.82x where every key ran the engine (docs/measurements/engine-pooled.md).  The ledger holds
// the evidence of every key, so the keys that re-judge from it follow one verdict, from more data.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tnbc::shim::replay::adapt {

/// A rank's part of a joint verdict (EngineLedger::part), summed over a key's ranks.
struct LedgerPart {
  /// samples_mpi, samples_engine: the sample calls' costs (time plus CPU by the key's weight);
  /// sampled: key-ranks whose samples are in; checks_mpi, checks_engine: the program's intervals
  /// in the checks' blocks of each candidate; checked: key-ranks whose check was judged;
  /// samples_spread_sq: the samples' spread, squared (EngineSamples::spread_squared), summed;
  /// checks_spread_sq: the checks' spread (CheckSums::spread), squared, summed.
  enum Field : std::size_t {
    samples_mpi,
    samples_engine,
    sampled,
    checks_mpi,
    checks_engine,
    checked,
    samples_spread_sq,
    checks_spread_sq,
    kFields
  };
};

/// What the joint verdict says, from a ledger summed over a key's ranks (`sums`, LedgerPart order).
enum class JointVerdict : std::uint8_t {
  own,     ///< no other key's evidence (at most the key's own): its own verdict stands
  engine,  ///< neither the samples nor the judged checks showed the engine costing more beyond their spread
  mpi,     ///< MPI's calls: the samples or the checks cost more on the engine beyond their spread
};

/// The statistics' name of a verdict: "own", "engine" or "mpi".
const char* name(JointVerdict v);

/// `sums`: the ledgers of the key's ranks summed; `comm_size`: its ranks (each put its own key's
/// evidence in: more key-ranks than that are other keys').  Every key sampled (their CPU weight
/// showed MPI's polling taking a core others want) runs the engine's exchange unless the pooled
/// evidence shows it costing more: its samples more than MPI's by more than their spread (the root
/// of the summed squares of the difference between each candidate's two calls, over every
/// key-rank), or the judged checks' engine blocks longer than MPI's by more than theirs.  The
/// samples time one key's calls while the others run as they are; what a sleeping caller gives the
/// ranks it shares cores with shows in the program's time of all keys together, not in the sample
/// calls.  Asking them for a gain beyond their spread left keys on MPI's calls at random, and a
/// split lost both ways: fftMPI's pencils took 1.30-1.50 s where every key ended on the engine,
/// 1.76-2.07 s where they split or ended on MPI's, so the defaults took 0.91x plain against 0.71x
/// with the engine on every key; on its uneven grid 1.14x against 1.00x
/// (docs/measurements/engine-one-node-default.md).  MPI's calls stay where the samples show the
/// engine's calls dearer beyond the spread: large blocks, as NPB IS A's when samples came at its
/// calls 4-7 (7-43 ms on the engine against 8-10 ms; with 11 calls a key it is no longer sampled).
JointVerdict joint_verdict(std::span<const double> sums, int comm_size);

/// The samples' pooled spread in a ledger summed over a key's ranks (`sums`, LedgerPart order):
/// the root of the summed squares, the margin joint_verdict asks of the engine's samples.
double samples_spread(std::span<const double> sums);

/// The judged checks' pooled spread (the root of their spreads' squares summed), likewise.
double checks_spread(std::span<const double> sums);

class EngineLedger {
 public:
  /// A key's samples on this rank: the cost of MPI's and of the engine's sample calls, and their
  /// spread squared.
  void add_samples(double mpi, double engine, double spread_squared);
  /// A key's judged check on this rank: its blocks' intervals under MPI's and under the engine's,
  /// and their spread (CheckSums).
  void add_check(double mpi, double engine, double spread);
  /// This rank's part of a joint verdict's tally (LedgerPart order).
  std::array<double, LedgerPart::kFields> part() const;

 private:
  // Keys of several threads may add (MPI_THREAD_MULTIPLE): each field on its own.
  std::array<std::atomic<double>, LedgerPart::kFields> sums_{};
};

/// This rank's ledger.
EngineLedger& engine_ledger();

}  // namespace tnbc::shim::replay::adapt
