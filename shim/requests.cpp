#include "requests.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tnbc::shim::requests {

std::atomic<int> g_recorded{0};
std::atomic<bool> g_on{false};

namespace {

struct Bytes {
  std::uintptr_t lo = 0, hi = UINTPTR_MAX;  // [lo, hi); the default: every byte
  bool persistent = false;
  bool active = true;  // MPI may touch the bytes now
};

using Map = std::unordered_map<MPI_Request, Bytes>;
std::atomic<bool> g_starts_unseen{false};
std::mutex g_mutex;
Map g_requests;                    // guarded by g_mutex
std::vector<Map::node_type> g_spare;  // erased nodes, reused: no allocation per request

void put(MPI_Request r, Kind kind, Bytes b) {
  if (r == MPI_REQUEST_NULL) return;
  b.persistent = kind == Kind::persistent;
  b.active = !b.persistent || g_starts_unseen.load(std::memory_order_relaxed);
  std::lock_guard lock(g_mutex);
  if (auto it = g_requests.find(r); it != g_requests.end()) {
    it->second = b;  // a handle MPI reused after a completion no wrapper saw
    return;
  }
  if (g_spare.empty()) {
    g_requests.emplace(r, b);
  } else {
    Map::node_type node = std::move(g_spare.back());
    g_spare.pop_back();
    node.key() = r;
    node.mapped() = b;
    g_requests.insert(std::move(node));
  }
  g_recorded.store(static_cast<int>(g_requests.size()), std::memory_order_release);
}

void erase(MPI_Request r) {  // with g_mutex held
  auto it = g_requests.find(r);
  if (it == g_requests.end()) return;
  Map::node_type node = g_requests.extract(it);
  if (g_spare.size() < 4096) g_spare.push_back(std::move(node));
}

}  // namespace

void set_recording(bool on) { g_on.store(on, std::memory_order_relaxed); }
void assume_started() { g_starts_unseen.store(true, std::memory_order_relaxed); }

void record(MPI_Request r, Kind kind, const void* buf, MPI_Count count, MPI_Datatype type) {
  if (count <= 0) return;  // no memory
  // Two queries, not datatype::info's three: this runs for every nonblocking send and receive.
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS ||
      (count > 1 && PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS))
    return put(r, kind, {});
  // Elements may run backwards (a negative extent): the span of the first and of the last.
  const auto base = reinterpret_cast<std::intptr_t>(buf);
  const auto last = static_cast<std::intptr_t>((count - 1) * extent);
  const std::intptr_t lo = base + true_lb + std::min<std::intptr_t>(0, last);
  const std::intptr_t hi = base + true_lb + true_extent + std::max<std::intptr_t>(0, last);
  put(r, kind, {static_cast<std::uintptr_t>(lo), static_cast<std::uintptr_t>(hi)});
}

void record_anywhere(MPI_Request r, Kind kind) { put(r, kind, {}); }

void activate(const MPI_Request* handles, int n) {
  std::lock_guard lock(g_mutex);
  for (int i = 0; i < n; ++i)
    if (auto it = g_requests.find(handles[i]); it != g_requests.end()) it->second.active = true;
}

void forget_completed(const MPI_Request* before, const MPI_Request* after, int n) {
  std::vector<MPI_Request> persistent;  // active persistent requests the call left: complete now?
  {
    std::lock_guard lock(g_mutex);
    for (int i = 0; i < n; ++i) {
      if (before[i] == MPI_REQUEST_NULL) continue;
      if (after[i] == MPI_REQUEST_NULL) {
        erase(before[i]);
      } else if (auto it = g_requests.find(after[i]); it != g_requests.end() && it->second.persistent && it->second.active) {
        persistent.push_back(after[i]);
      }
    }
    g_recorded.store(static_cast<int>(g_requests.size()), std::memory_order_release);
  }
  // Where MPI_Start passes unseen, a persistent request stays active until it is freed.
  if (persistent.empty() || g_starts_unseen.load(std::memory_order_relaxed)) return;
  // An inactive persistent request, or one complete, reports flag true: MPI touches its memory
  // no more.  Asked outside the lock: MPI may progress meanwhile.
  std::vector<MPI_Request> done;
  for (MPI_Request r : persistent) {
    int flag = 0;
    if (PMPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) done.push_back(r);
  }
  std::lock_guard lock(g_mutex);
  for (MPI_Request r : done)
    if (auto it = g_requests.find(r); it != g_requests.end()) it->second.active = false;
}

bool overlaps(const void* p, std::size_t n) {
  if (g_recorded.load(std::memory_order_acquire) == 0 || n == 0) return false;
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const std::uintptr_t hi = (reinterpret_cast<std::uintptr_t>(p) + n + page - 1) & ~(page - 1);
  std::lock_guard lock(g_mutex);
  return std::any_of(g_requests.begin(), g_requests.end(),
                     [&](const auto& r) { return r.second.active && r.second.lo < hi && lo < r.second.hi; });
}

}  // namespace tnbc::shim::requests
