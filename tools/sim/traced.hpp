// The application side of tnbc-sim from a trace (`tnbc-sim --trace DIR`): what each traced rank
// did after one call site's collective -- the blocks in the order it first touched them, the
// work before each touch and after the last -- and how that stretches to another rank count.
//
// Times come from trace mode's first touches (priority::summarise_rank: per sub-message, the
// median over the rank's traced calls of the site) and from the start of the rank's next call
// (the work after the last touch).  The work between two touches is computation the program does
// whatever the network does: a block that arrives late pushes every later read back by as much
// (bench/overlap.c's reader, without its parts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "platform.hpp"
#include "priority/observations.hpp"

namespace tnbc::sim {

/// What one rank read after a call, in the order it first touched the blocks.
struct TracedReads {
  std::vector<int> order;   ///< blocks (source ranks), first touched first; blocks never touched
                            ///< or not observed are absent (their data is not waited for)
  std::vector<double> gap;  ///< seconds of work before each touch (the first: after the return)
  double tail = 0;          ///< seconds of work after the last touch, until the next call
  double work() const;      ///< all of it: the rank's time from the return when nothing waits
};

/// One traced call site, as tnbc-sim uses it.
struct TracedSite {
  std::string dir;                  ///< the trace directory
  std::string key;                  ///< the site's plan key
  priority::Op op = priority::Op::alltoall;
  int ranks = 0;                    ///< the traced communicator's size
  std::size_t calls = 0;            ///< traced calls of the site, summed over ranks
  double tcomm = 0;                 ///< median measured Tcomm, seconds
  double block = 0;                 ///< mean bytes per sub-message
  std::vector<TracedReads> reads;   ///< [traced rank]
  std::vector<double> recv_block;   ///< [traced rank] its mean bytes per received block
  std::vector<std::size_t> order;   ///< the consensus order, as `tnbc-order plan` derives it
  std::vector<int> node_of;         ///< [traced rank] its node (0, 1, ... by first appearance);
                                    ///< empty when not known (traced_site alone)
  std::vector<std::string> notes;   ///< what was assumed or left out, for the user
};

/// Loads trace directory `dir` and picks its call site `key`, or, when `key` is empty, the
/// MPI_Alltoall or MPI_Alltoallv site with the most traced calls (then the largest sub-messages),
/// among those every rank called when there are any.  Throws std::invalid_argument
/// with a message naming the directory or the site (no trace files, a missing rank, no
/// Alltoall(v) site, an unknown key, a site whose ranks traced no call).
TracedSite load_traced_site(const std::string& dir, const std::string& key);

/// The site load_traced_site takes from `obs` (null: none, or no site `key`).
const priority::CallSite* pick_site(const priority::Observations& obs, const std::string& key);

/// From observations (the part of load_traced_site after reading the files; tests build them).
TracedSite traced_site(const priority::CallSite& site);

/// The traced job's platform shape: sets `spec`'s nodes, ppn and placement and returns true
/// when every node ran as many ranks, dealt in blocks or cyclically; else leaves `spec` alone.
bool traced_layout(const TracedSite& site, PlatformSpec& spec);

/// The traced rank simulated rank `rank` of `ranks` stands for, and the traced block simulated
/// block `block` stands for: floor(i * traced / simulated), so that each traced rank or block
/// stands for a run of neighbours.
int traced_index(int i, int simulated, int traced);

/// Simulated rank `rank` of `ranks`'s reads: its traced rank's, each traced block standing for
/// the simulated blocks that map to it (traced_index), read one after the other where the trace
/// read it, each followed by the work from the traced block's touch to the next touch (the work
/// per block stays as traced: k times the blocks, k times that work; a traced block without a
/// stand-in drops its share).  The work before the first touch and after the last (the tail)
/// count once.  With as many simulated ranks as traced, the trace's reads themselves.
TracedReads scaled_reads(const TracedSite& site, int rank, int ranks);

/// `--trace-work per-byte`: the work per byte received stays as traced, for a program run at
/// another size (weak scaling: NPB FT class A on 2 ranks standing for class C on 64).  Simulated
/// rank `rank`'s reads in the order scaled_reads gives, but each traced span shared among the
/// simulated blocks standing for its block (a traced block without a stand-in passes its span to
/// the next read), so that the traced rank's work is kept whole; then all of it, the gaps and the
/// tail, times `received` (the bytes the simulated rank receives per call) over the bytes its
/// traced rank received per call.
TracedReads per_byte_reads(const TracedSite& site, int rank, int ranks, double received);

/// Every gap and the tail of `reads` times `factor` (`--trace-work-scale`: another core's speed).
TracedReads scaled_work(TracedReads reads, double factor);

/// The plan's order for `ranks` simulated ranks: simulated blocks by their traced block's place
/// in the consensus order, neighbours mapping to one traced block in ascending order.
std::vector<int> scaled_order(const TracedSite& site, int ranks);

/// An MPI_Alltoallv's bytes per receiver for `ranks` simulated ranks: what every rank sends
/// rank d is the mean block its traced rank received, scaled so that the mean over d is `mean`
/// (0: the trace's own mean).
std::vector<std::size_t> scaled_blocks(const TracedSite& site, int ranks, std::size_t mean);

/// A rank's time from the call's entry to the end of its work: the call returns at `ret`, then
/// its reads, each waiting for `ready(block)` (the time block `block` is readable), each gap of
/// work starting when the read before it could go on.
double reader_total(double ret, const TracedReads& reads, const std::function<double(int)>& ready);

}  // namespace tnbc::sim
