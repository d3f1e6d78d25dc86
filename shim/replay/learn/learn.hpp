// One run, no trace step: replay mode learns each call site's first-touch order while the
// program runs and hands it to the engine as per-message priorities (docs/replay.md, "Learning
// the order").
//
//   observe:  some blocking calls of a key (its warm-up, its blocking probes, 1 in
//             kBlockingRunEvery of a blocking run) are watched as trace mode watches every
//             call: after the blocking call returns, kSampledPages pages of each sub-message
//             (an Alltoall's blocks; a Bcast's units, observe::bcast_units, on every rank but the
//             root) are protected and the first touch of each sub-message is stamped (shim/observe/page_guard.hpp:
//             one fault per sub-message, TSC stamps).  The same path on every rank, so every
//             rank counts the same "designated" calls, whether or not its own protection worked.
//   learn:    when a key enters the early path (decide.hpp: every rank at the same call) and
//             calls were designated since the last learn point, every rank summarises the
//             calls of each of its call sites observed since then (the latest kWindow;
//             priority::summarise_rank,
//             step 2 of docs/ordering.md), the ranks gather the summaries (one MPI_Allgather of
//             2 doubles per sub-message and rank per site, independent of the number of calls)
//             and every rank applies priority::consensus -- the rule `tnbc-order plan` applies to
//             a trace, from the same code -- to the same data: the same order everywhere.
//   apply:    from the next call, a call site without a plan entry of its own gets the learned
//             order (TNBC_PLAN wins for its sites).  Orders change between calls, never inside
//             one; an operation in flight keeps the order it started with.
//   turns:    at each learn point, the order of the site that most ranks observed (the same
//             choice everywhere, from the same numbers) becomes the key's turn order: the order
//             its early calls take per-node turns in when the key spans nodes and the per-call
//             decision measured turns cheaper than none (adapt/policy.hpp, KeyState::allow_turns).
//             One order per key, not per site: every member of a node must take turns in the
//             same order, and ranks may call one collective from different sites.
//   hysteresis: the first order is adopted at once; a later one replaces it only when two
//             learn points in a row find an order whose concordance with the current one is
//             below kKeepConcordance and which agree with each other.
//
// Call sites are told apart by a hash of their plan key (module + offset chain), the same on
// every rank of an SPMD program; a key learns at most kMaxSites sites.  TNBC_LEARN=0 turns
// learning off; TNBC_PLAN_OUT writes what was learned as a plan at MPI_Finalize (rank 0).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "priority/observations.hpp"
#include "priority/plan.hpp"
#include "shim/config.hpp"
#include "shim/observe/page_guard.hpp"
#include "shim/replay/learn/rules.hpp"

namespace tnbc::shim::replay::learn {

/// Applies TNBC_LEARN (learning also needs TNBC_ADAPT on or measure) and TNBC_PLAN_OUT and
/// installs the page guard.  Rank-local; returns whether learning is on (the same on every rank
/// unless the guard could not be installed here: that rank observes nothing and still takes
/// part in every learn point).
bool start(const config::Config& cfg);
/// Opens every guarded page and uninstalls the guard; writes TNBC_PLAN_OUT on rank 0 of
/// MPI_COMM_WORLD.
void stop();
/// Learning is on (the keys designate calls and hold learn points).
bool enabled();
/// Whether call sites must be captured for learning.
bool wants_sites();

/// Registers a key's learning (once, when the key is made).
void add_key(KeyLearning& k, priority::Op op, int comm_size);

/// The site entry of `site` (index in the call-site table, `key` its plan key), made on first use;
/// nullptr when it cannot be learned (no site, or kMaxSites already).
SiteLearning* site_of(KeyLearning& k, std::int64_t site, const std::string& key);

/// Whether the blocking call that is the key's `call`-th is designated for observation: the
/// warm-up and probes of the blocking path (`probing`), 1 in kBlockingRunEvery of a blocking
/// run.  The same on every rank; counts it.
bool designate(KeyLearning& k, std::uint64_t call, bool probing);

/// True while some page is guarded (one atomic load).
bool guarded();

/// The learned entry for this call from `s`, or nullptr.
inline const priority::PlanEntry* learned(const SiteLearning* s) { return s ? s->order.current : nullptr; }

/// A Bcast's learned order of its units (observe::bcast_units) as an order of `segments`
/// segments, the rule `tnbc-order plan` applies (priority::segment_order); empty when nothing
/// was learned.
std::vector<std::uint32_t> learned_segments(const SiteLearning* s, int segments);
/// The same for a Bcast call of key `k` from site `s`: the site's learned order, else the key's
/// majority order (KeyLearning::majority).
std::vector<std::uint32_t> learned_segments(const KeyLearning& k, const SiteLearning* s, int segments);

/// A designated blocking call just returned: protect `subs` of `recvbuf` and watch them.
/// `tcomm_ns`: how long the call took.  Rank-local; never fails (a call that cannot be
/// protected is simply not observed).
void observe(KeyLearning& k, SiteLearning& s, void* recvbuf, std::span<const observe::SubRange> subs,
             std::uint64_t tcomm_ns, std::uint64_t message_bytes);

/// Before a collective uses [p, p + n) (a buffer it reads, `touch`, or overwrites): opens the
/// guarded pages there.  Async-signal-safe, cheap when nothing is guarded.
void release(const void* p, std::size_t n, bool touch);
/// A fence (an MPI call that may touch any memory): opens everything, sub-messages not read
/// yet become unobserved.
void drain();

/// The share of an exchange (Tcomm) that a rank's reads must be predicted to leave for the
/// computation to overlap for room() to say yes.  Measured (tnbc-order show on traces, 2 x 2
/// ranks at 200 Mbit/s): overlap scenarios b and c 75% and 51%; the NAS-like kernels 2-3% (FT)
/// and 13-16% (IS's Alltoallv), data read at once under 1%.
inline constexpr double kRoomShare = 0.25;

/// The room point of the per-call decision (adapt/policy.hpp): whether this rank's observed calls of
/// the key leave room to overlap -- the predicted overlap of its own observations of the site
/// it observed most (priority::overlap_share, the rule `tnbc-order plan` applies to a trace)
/// is at least kRoomShare of the exchange.  nullopt when it observed nothing there, or nothing
/// read (it does not vote).  Rank-local; settles the observations in flight, as a learn point
/// does (the records stay for the learn point).
std::optional<bool> room(KeyLearning& k);

/// The key enters the early path: collective over `comm` when calls were designated since the
/// last learn point (the same on every rank).  `call`: the key's call count.
void learn_point(KeyLearning& k, MPI_Comm comm, std::uint64_t call);

/// The "learning" object of a key in the statistics (docs/config.md).
std::string json(const KeyLearning& k);

/// The hash of a plan key (what SiteLearning::hash holds).
std::uint64_t site_hash(const std::string& key);

}  // namespace tnbc::shim::replay::learn
