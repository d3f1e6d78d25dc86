// Engine memory: the page-aligned buffers of send copies and receive mirrors, kept for reuse.
//
// A fresh anonymous page costs a page fault on its first touch (a trap, a zero-filled page, and
// under a hypervisor an exit as well; measured here: 2 MiB of fresh pages 5.3 ms to fill, the
// same 2 MiB reused 0.04 ms).  A program calls the same collective over and over, so the
// buffers of a finished call are kept and handed to the next call that fits in them.
//
// The pool is also where TNBC_MAX_MEMORY holds: it never maps more than the bound, counting the
// buffers in use and the ones kept; kept buffers are unmapped first when a new one would not
// fit, and after a second without a call that takes one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace tnbc::shim::replay::engine {

class BufferPool {
 public:
  /// At most this many buffers are kept for reuse.
  static constexpr std::size_t kKeep = 6;

  struct Buffer {
    char* p = nullptr;
    std::size_t bytes = 0;  // the mapping's size (a whole number of pages)
    std::uint64_t kept_since_ns = 0;  // when it was given back (kept buffers only)
  };

  /// Bound on what the pool maps, in use and kept (0: none).
  void set_bound(std::size_t bytes);
  /// A buffer of at least `bytes`: a kept one that fits (at most twice the size), else a new
  /// mapping, its pages populated.  {nullptr, 0} when the bound leaves no room even with no
  /// buffer kept, or the mapping fails.
  Buffer acquire(std::size_t bytes);
  /// Gives a buffer back: kept for reuse, or unmapped when kKeep are kept already.
  void release(Buffer b);
  /// A buffer whose pages are no longer the pool's (moved away or unmapped by its user): only
  /// its bytes leave the count.
  void forget(Buffer b);
  /// Unmaps every kept buffer.
  void trim();
  /// Unmaps the kept buffers given back more than `idle_ns` ago (the progress thread calls it
  /// while no operation is in flight).
  void trim_idle(std::uint64_t idle_ns);

  std::size_t mapped() const;
  std::size_t kept() const;

  static BufferPool& instance();

 private:
  void unmap_kept_locked(std::size_t index);

  mutable std::mutex mutex_;
  std::size_t bound_ = 0;
  std::size_t mapped_ = 0;  // in use and kept
  std::vector<Buffer> kept_;
};

/// A buffer from the pool, given back when this is destroyed (or forgotten).
class PoolBuffer {
 public:
  PoolBuffer() = default;
  explicit PoolBuffer(BufferPool::Buffer b) : b_(b) {}
  PoolBuffer(PoolBuffer&& o) noexcept : b_(std::exchange(o.b_, {})) {}
  PoolBuffer& operator=(PoolBuffer&& o) noexcept {
    reset();
    b_ = std::exchange(o.b_, {});
    return *this;
  }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  ~PoolBuffer() { reset(); }

  char* get() const { return b_.p; }
  std::size_t bytes() const { return b_.bytes; }
  explicit operator bool() const { return b_.p != nullptr; }
  /// Gives the buffer back to the pool now.
  void reset() {
    if (b_.p != nullptr) BufferPool::instance().release(std::exchange(b_, {}));
  }
  /// The buffer's pages are gone (publishing moved them): only the pool's count forgets it.
  void forget() {
    if (b_.p != nullptr) BufferPool::instance().forget(std::exchange(b_, {}));
  }

 private:
  BufferPool::Buffer b_;
};

}  // namespace tnbc::shim::replay::engine
