#include "trace_observations.hpp"

#include "trace/trace_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <tuple>

namespace tnbc::tools {

namespace fs = std::filesystem;
namespace tr = tnbc::trace;
namespace pr = tnbc::priority;

namespace {

/// The rank a file name stands for, or -1 when the name is not "<decimal>.tnbct" (leading
/// zeros refused, so that one rank cannot have two names).
int rank_of_name(const std::string& name) {
  constexpr std::string_view kExt = ".tnbct";
  if (name.size() <= kExt.size() || name.compare(name.size() - kExt.size(), kExt.size(), kExt) != 0)
    return -1;
  std::string_view digits(name.data(), name.size() - kExt.size());
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  int rank = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || end != digits.data() + digits.size()) return -1;
  return rank;
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 9) {
      out += ", ... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

pr::Op to_priority(tr::TracedOp op) {
  switch (op) {
    case tr::TracedOp::alltoall: return pr::Op::alltoall;
    case tr::TracedOp::alltoallv: return pr::Op::alltoallv;
    case tr::TracedOp::bcast: return pr::Op::bcast;
  }
  return pr::Op::alltoall;
}

}  // namespace

std::string frame_label(const tnbc::shim::observe::Frame& frame) {
  if (!frame.symbol.empty()) return frame.symbol;
  char off[32];
  std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(frame.offset));
  return basename_of(frame.module) + off;
}

std::string site_key(const tnbc::shim::observe::CallSite& site) { return tnbc::shim::observe::CallSiteTable::key(site); }

LoadResult load_trace_dir(const std::string& dir, bool partial) {
  LoadResult result;
  // The real reason when it is not a folder (a symlink loop, no permission), not a guess.
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    result.error = dir + ": " + (errno == ENOENT ? "no such directory" : std::strerror(errno));
    return result;
  }
  if (!S_ISDIR(st.st_mode)) {
    result.error = dir + ": not a directory";
    return result;
  }
  std::error_code ec;
  std::map<int, std::string> by_rank;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    result.error = dir + ": cannot list: " + ec.message();
    return result;
  }
  for (; it != end; it.increment(ec)) {
    int rank = rank_of_name(it->path().filename().string());
    if (rank >= 0) by_rank[rank] = (fs::path(dir) / it->path().filename()).string();
  }
  if (ec) {
    result.error = dir + ": cannot list: " + ec.message();
    return result;
  }
  if (by_rank.empty()) {
    result.error = dir + ": no trace files (<rank>.tnbct)";
    return result;
  }

  TraceSet set;
  set.dir = dir;
  std::string first_file;
  std::string job_id;
  for (auto& [rank, path] : by_rank) {
    auto read = tr::read_trace(path);
    if (!read.trace) {
      result.error = read.error;
      return result;
    }
    const auto& h = read.trace->header;
    if (h.rank != rank) {
      result.error = path + ": holds the trace of rank " + std::to_string(h.rank);
      return result;
    }
    if (first_file.empty()) {
      first_file = path;
      job_id = h.job_id;
      set.size = h.size;
      set.ranks.resize(static_cast<std::size_t>(set.size));
      set.files.resize(static_cast<std::size_t>(set.size));
    } else if (h.job_id != job_id) {
      result.error = path + ": job id '" + h.job_id + "' differs from '" + job_id + "' in " +
                     first_file + " (traces of different runs)";
      return result;
    } else if (h.size != set.size) {
      result.error = path + ": job of " + std::to_string(h.size) + " ranks, but " + first_file +
                     " is from a job of " + std::to_string(set.size) + " (traces of different runs)";
      return result;
    }
    // The reader guarantees rank < size, and the size is common, so the index is in range.
    set.ranks[static_cast<std::size_t>(rank)] = std::move(*read.trace);
    set.files[static_cast<std::size_t>(rank)] = path;
  }
  for (int r = 0; r < set.size; ++r)
    if (!set.ranks[static_cast<std::size_t>(r)]) set.missing.push_back(r);
  if (!set.missing.empty()) {
    std::string what = dir + ": no trace file for rank" + (set.missing.size() > 1 ? "s " : " ") +
                       join_ranks(set.missing) + " (job of " + std::to_string(set.size) + " ranks)";
    if (!partial) {
      result.error = what + "; --partial uses the others";
      return result;
    }
    result.warnings.push_back(what + "; using the other " +
                              std::to_string(set.size - static_cast<int>(set.missing.size())));
  }
  result.traces = std::move(set);
  return result;
}

pr::Observations to_observations(const std::vector<const tr::Trace*>& traces,
                                 std::vector<tnbc::shim::observe::CallSite>* detail) {
  pr::Observations obs;
  std::map<std::tuple<std::uint64_t, tr::TracedOp, std::int32_t>, std::size_t> index;
  std::vector<std::uint64_t> bytes_sum, bytes_count;
  if (detail) detail->clear();

  for (const tr::Trace* t : traces) {
    if (!t) continue;
    const double tpu = t->header.ticks_per_us;  // reader guarantees finite and > 0
    // First touch per (call, sub): the touch list holds one entry per touched sub-message.
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> touch;
    for (const auto& x : t->touches) touch.emplace(std::make_pair(x.call, x.sub), x.stamp);
    // Per rank, the record of each site it traced (index into obs.sites -> ranks index).
    std::map<std::size_t, std::size_t> rank_slot;

    for (std::uint32_t ci = 0; ci < t->calls.size(); ++ci) {
      const tr::TraceCall& call = t->calls[ci];
      if (!(call.flags & tr::kCallTraced)) continue;
      const tnbc::shim::observe::CallSite& cs = t->callsites[call.callsite];
      auto key = std::make_tuple(cs.id, call.op, call.comm_size);
      auto [pos, inserted] = index.emplace(key, obs.sites.size());
      if (inserted) {
        pr::CallSite site;
        site.id = site_key(cs);
        site.op = to_priority(call.op);
        for (const auto& f : cs.frames) site.frames.push_back(frame_label(f));
        site.comm_size = call.comm_size;
        obs.sites.push_back(std::move(site));
        bytes_sum.push_back(0);
        bytes_count.push_back(0);
        if (detail) detail->push_back(cs);
      }
      const std::size_t si = pos->second;
      pr::CallSite& site = obs.sites[si];
      auto [slot, fresh] = rank_slot.emplace(si, site.ranks.size());
      if (fresh) site.ranks.push_back(pr::RankRecord{t->header.rank, {}});
      pr::RankRecord& rr = site.ranks[slot->second];

      pr::CallRecord rec;
      rec.tcomm_us = static_cast<double>(call.tcomm) / tpu;
      if (ci + 1 < t->calls.size() && t->calls[ci + 1].start_stamp >= call.return_stamp)
        rec.next_call_us = static_cast<double>(t->calls[ci + 1].start_stamp - call.return_stamp) / tpu;
      rec.touches.reserve(call.subs.size());
      for (std::uint32_t k = 0; k < call.subs.size(); ++k) {
        const tr::TraceSub& sub = call.subs[k];
        bytes_sum[si] += sub.size;
        rec.recv_bytes += sub.size;
        ++bytes_count[si];
        auto found = touch.find({ci, k});
        if (found != touch.end()) {
          // A touch by another thread can land between protection and the return stamp.
          double delay = found->second > call.return_stamp
                             ? static_cast<double>(found->second - call.return_stamp) / tpu
                             : 0.0;
          rec.touches.push_back(pr::FirstTouch::at(delay));
          continue;
        }
        auto outcome = static_cast<tnbc::shim::observe::Outcome>(sub.outcome());
        if (sub.observable() && (outcome == tnbc::shim::observe::Outcome::untouched || outcome == tnbc::shim::observe::Outcome::released))
          rec.touches.push_back(pr::FirstTouch::untouched());
        else
          rec.touches.push_back(pr::FirstTouch::unobserved());
      }
      site.messages = std::max(site.messages, rec.touches.size());
      rr.calls.push_back(std::move(rec));
    }
  }
  for (std::size_t i = 0; i < obs.sites.size(); ++i)
    obs.sites[i].message_bytes = bytes_count[i] ? bytes_sum[i] / bytes_count[i] : 0;
  return obs;
}

pr::Observations to_observations(const TraceSet& traces, std::vector<tnbc::shim::observe::CallSite>* detail) {
  std::vector<const tr::Trace*> list;
  for (const auto& t : traces.ranks)
    if (t) list.push_back(&*t);
  return to_observations(list, detail);
}

}  // namespace tnbc::tools
