// The application side of tnbc-sim: bench/overlap.c's work after the call, its reads of the
// received blocks, and the least total any schedule over the links allows (bench/link_model.py).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tnbc::sim {

/// One of bench/overlap.py's scenarios: the work after the call as fractions of Tcomm.
struct Scenario {
  std::string name;
  std::string what;
  double curc;  ///< TCURC / Tcomm: work that reads nothing
  double crc;   ///< TCRC / Tcomm: work spread over the blocks, read in order 0..p-1
};
/// a..e and none, as bench/overlap.py's SCENARIOS.
const std::vector<Scenario>& scenarios();
std::optional<Scenario> find_scenario(std::string_view name);

/// Work after the call, in seconds, and the parts each block is read in.
struct Work {
  double curc = 0;
  double crc = 0;
  int parts = 1;
};

/// One rank's time from the call's entry to the end of its work, as bench/overlap.c counts it:
/// TCURC after the call returned at `ret` (relative to the entry), then the blocks 0..p-1
/// (`ranks` blocks of `block` bytes), each in `parts` parts; a part's read waits until
/// `ready(lo, hi)`, the time the buffer bytes [lo, hi) are readable, and each share of TCRC
/// ends a fixed time after the previous one or after its data came, if the read waited.
double reader_total(double ret, const Work& work, int ranks, std::size_t block,
                    const std::function<double(std::size_t, std::size_t)>& ready);

/// The least total time (seconds) any Alltoall schedule allows bench/overlap.c over links of
/// `rate` bytes/s per node and direction (bench/link_model.py's ideal_total, which documents
/// the bound): `node_of[r]` is rank r's node; data within a node is free; data flows from the
/// call's entry, each link sending earliest-need-first; reads start at `tinit` + TCURC.
double link_bound(const std::vector<int>& node_of, double rate, std::size_t block, const Work& work,
                  double tinit);

/// The same for an MPI_Alltoallv in which every rank sends rank r `block_of[r]` bytes and rank r
/// reads its blocks with TCRC `crc_of[r]` (TCURC is work.curc everywhere; work.crc is not used).
/// Each link, either direction, carries its bytes earliest-need-first: the bound is the
/// latest any reader can finish on the busiest link, so a node that receives more than it
/// sends is bound by its incoming link.
double link_bound(const std::vector<int>& node_of, double rate, std::span<const std::size_t> block_of,
                  std::span<const double> crc_of, const Work& work, double tinit);

/// One block a reader needs, for the link bound: `bytes` from rank `sender`, needed `need`
/// seconds after the call's entry by rank `reader`.
struct Need {
  int reader = 0;
  int sender = 0;
  double bytes = 0;
  double need = 0;
};

/// The least total time any schedule allows readers that need `needs` and finish at `end_of[r]`
/// (seconds after the entry) when nothing waits: each link, either direction, carries its bytes
/// earliest-due-first (due date need - end of the reader, Jackson's rule), and a reader whose
/// block comes late finishes late by as much (its later reads wait in turn).  The two link_bound
/// above are this with bench/overlap.c's reads.
double link_bound(const std::vector<int>& node_of, double rate, std::span<const Need> needs,
                  std::span<const double> end_of);

}  // namespace tnbc::sim
