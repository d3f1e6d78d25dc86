// Which memory the replay engine may replace page by page (mapping.cpp).
//
// Publishing a received page moves a private anonymous mirror page over the user's page
// (mremap).  That is only what blocking MPI would have done when the user's page is private
// memory of this process: over a shared mapping (a file mapped MAP_SHARED, shm_open, System V
// shared memory, MPI_Win_allocate_shared) the data would never reach the shared object; over
// hugetlb or device memory the move fails or changes what the memory is; a locked page would
// lose its lock.  So before returning early the engine asks replaceable() for the receive span;
// when the answer is no, the call receives straight into the user's buffer and returns when the
// data is there (fallback reason "mapping").
//
// Replaceable: every page lies in a private mapping ("p" in /proc/self/maps) that is anonymous
// (no path, [heap], [stack], [anon:...]) or a regular file outside /dev (a program's .data, a
// MAP_PRIVATE file), and no part of it was locked with mlock/mlock2/mlockall.
//
// Cost: the answer for a range is cached (kCacheRanges maximal runs of replaceable mappings);
// only a miss reads /proc/self/maps.  The cache forgets a range whenever the process maps,
// unmaps, moves or attaches memory there (the interposed mmap, munmap, mremap, shmat, shmdt and
// syscall, and libucm's unmap events); forget() never allocates and holds a spin lock for
// a scan of the cache only.
#pragma once

#include <cstddef>

namespace tnbc::shim::mapping {

inline constexpr int kCacheRanges = 32;
inline constexpr int kLockRanges = 16;

/// True when the engine may replace every page of [p, p + n) (see above).  Not
/// async-signal-safe (it may read /proc/self/maps); call it from ordinary code.
bool replaceable(const void* p, std::size_t n);

/// The mapping of [p, p + n) changed: forget what the cache knew about it.
void forget(const void* p, std::size_t n);
/// Forget everything (a change whose range is not known).
void forget_all();

/// mlock/mlock2 locked [p, p + n); munlock unlocked it; mlockall/munlockall.
void locked(const void* p, std::size_t n);
void unlocked(const void* p, std::size_t n);
void locked_all();
void unlocked_all();

/// fork(): the cache's lock is held across it so that the child never inherits it taken.
void before_fork();
void after_fork();

/// One line of /proc/self/maps: true when its pages may be replaced (exposed for unit tests).
bool replaceable_line(const char* perms, const char* path);

}  // namespace tnbc::shim::mapping
