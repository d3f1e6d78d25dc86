// The engine's buffers, kept for reuse (buffer_pool.hpp).
#include "buffer_pool.hpp"
#include "pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "util/clock.hpp"
#include "util/raw.hpp"

namespace tnbc::shim::replay::engine {

namespace {
bool smaller(const BufferPool::Buffer& a, const BufferPool::Buffer& b) { return a.bytes < b.bytes; }
}  // namespace

BufferPool& BufferPool::instance() {
  static BufferPool* pool = new BufferPool;  // never destroyed: ops may outlive static destructors
  return *pool;
}

void BufferPool::set_bound(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  bound_ = bytes;
}

void BufferPool::unmap_kept_locked(std::size_t index) {
  util::raw::munmap(kept_[index].p, kept_[index].bytes);
  mapped_ -= kept_[index].bytes;
  kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(index));
}

BufferPool::Buffer BufferPool::acquire(std::size_t bytes) {
  if (bytes == 0) return {};
  const std::size_t want = page_ceil(bytes, system_page_size());
  std::lock_guard lock(mutex_);
  // The smallest kept buffer that holds it, if it is not more than twice as large.
  std::size_t best = kept_.size();
  for (std::size_t i = 0; i < kept_.size(); ++i)
    if (kept_[i].bytes >= want && kept_[i].bytes <= 2 * want && (best == kept_.size() || kept_[i].bytes < kept_[best].bytes))
      best = i;
  if (best < kept_.size()) {
    const Buffer b = kept_[best];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
    return b;
  }
  // Space for a new one: kept buffers go first, largest first.
  while (bound_ != 0 && mapped_ + want > bound_ && !kept_.empty())
    unmap_kept_locked(static_cast<std::size_t>(std::max_element(kept_.begin(), kept_.end(), smaller) - kept_.begin()));
  if (bound_ != 0 && mapped_ + want > bound_) return {};
  // Populated: one system call faults every page in, instead of one trap per page later.
  void* m = util::raw::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) return {};
  mapped_ += want;
  return {static_cast<char*>(m), want};
}

void BufferPool::release(Buffer b) {
  if (b.p == nullptr) return;
  b.kept_since_ns = util::now_ns();
  std::lock_guard lock(mutex_);
  kept_.push_back(b);
  // Too many kept: the smallest goes (the large ones cost the most to fault in again).
  if (kept_.size() > kKeep)
    unmap_kept_locked(static_cast<std::size_t>(std::min_element(kept_.begin(), kept_.end(), smaller) - kept_.begin()));
}

void BufferPool::forget(Buffer b) {
  std::lock_guard lock(mutex_);
  mapped_ -= b.bytes;
}

void BufferPool::trim() {
  std::lock_guard lock(mutex_);
  while (!kept_.empty()) unmap_kept_locked(kept_.size() - 1);
}

void BufferPool::trim_idle(std::uint64_t idle_ns) {
  const std::uint64_t now = util::now_ns();
  std::lock_guard lock(mutex_);
  for (std::size_t i = kept_.size(); i-- > 0;)
    if (now - kept_[i].kept_since_ns > idle_ns) unmap_kept_locked(i);
}

std::size_t BufferPool::mapped() const {
  std::lock_guard lock(mutex_);
  return mapped_;
}

std::size_t BufferPool::kept() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace tnbc::shim::replay::engine
