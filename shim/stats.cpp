#include "stats.hpp"

#include <fmt/format.h>

#include "util/json.hpp"

namespace tnbc::shim {

void OpStats::count_fallback(std::string_view reason) {
  fallback_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  // Every call that runs blocking comes here: no allocation once a reason has been seen.
  if (auto it = reasons_.find(reason); it != reasons_.end()) {
    ++it->second;
    return;
  }
  reasons_.emplace(std::string(reason), 1);
}

std::map<std::string, std::uint64_t> OpStats::fallback_reasons() const {
  std::lock_guard lock(mutex_);
  return {reasons_.begin(), reasons_.end()};
}

std::string OpStats::to_json() const {
  std::string reasons;
  for (const auto& [k, v] : fallback_reasons())
    reasons += fmt::format("{}\"{}\":{}", reasons.empty() ? "" : ",", util::json_escape(k), v);
  return fmt::format(
      R"({{"calls":{},"early_return":{},"fallback":{},"fallback_reasons":{{{}}},"planned":{}}})",
      calls(), early_returns(), fallbacks(), reasons, planned());
}

std::string Stats::to_json(int rank, std::string_view library, std::string_view version) const {
  auto us = [](const std::atomic<std::uint64_t>& ns) {
    return static_cast<double>(ns.load(std::memory_order_relaxed)) / 1000.0;
  };
  return fmt::format(
      R"({{"rank":{},"library":"{}","version":"{}","alltoall":{},"alltoallv":{},"bcast":{},)"
      R"("barrier":{{"calls":{},"algo":"{}","root":{}}},"publish":"{}","faults":{},"fault_wait_us":{:.3f},)"
      R"("init_us":{:.3f},"node_priority":{{"turn_calls":{},"gated_sends":{},"turn_wait_us":{:.3f},"send_window_max":{}}},)"
      R"("fence_wait_us":{:.3f},"fence_drains":{},"progress":{{"started":{},"starts":{},"cpu_us":{:.3f},"rounds":{},"user_us":{:.3f},"system_us":{:.3f},"wakeups":{}}},)"
      R"("adapt":{}}})"
      "\n",
      rank, util::json_escape(library), util::json_escape(version), alltoall.to_json(), alltoallv.to_json(),
      bcast.to_json(), barrier_calls.load(), util::json_escape(barrier_algo), barrier_root, util::json_escape(publish),
      faults.load(), us(fault_wait_ns), us(init_ns), turn_calls.load(), gated_sends.load(), us(turn_wait_ns),
      send_window_max.load(), us(fence_wait_ns), fence_drains.load(), progress_started,
      progress_starts, us(progress_cpu_ns), progress_rounds.load(), us(progress_user_ns), us(progress_system_ns),
      progress_wakeups.load(), adapt_json);
}

}  // namespace tnbc::shim
