// Anonymous shared memory holding a header (what the driving code shares between ranks) and,
// from the first page after it, a barrier segment for `size` ranks: fork()ed children inherit it, threads
// share it.  For the unit tests' harness and the latency benchmark.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#include "segment.hpp"

namespace tnbc::barrier {

template <typename Header>
class SharedArena {
  static constexpr std::size_t kHeaderBytes = (sizeof(Header) + kPageBytes - 1) / kPageBytes * kPageBytes;

 public:
  explicit SharedArena(int size) : bytes_(kHeaderBytes + Segment::bytes(size)) {
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) std::abort();
    header_ = new (base_) Header;
  }
  ~SharedArena() { munmap(base_, bytes_); }
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  Header& header() { return *header_; }
  void* segment_base() { return static_cast<std::byte*>(base_) + kHeaderBytes; }

 private:
  std::size_t bytes_;
  void* base_;
  Header* header_;
};

}  // namespace tnbc::barrier
