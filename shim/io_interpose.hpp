// Interposed system calls and memory functions (io_interpose.cpp).
//
// The kernel does not raise SIGSEGV when a system call meets a protected page: write(fd, buf, n)
// on a guarded receive buffer fails with EFAULT.  And memory given back with free/realloc/munmap
// must not stay protected (the allocator writes its own data there).  So the preloaded library
// exports these functions, and each asks the mode to release the buffers it is handed before
// calling the real one (dlsym(RTLD_NEXT), resolved once):
//
//   read write pread pwrite pread64 pwrite64 readv writev          (buffers: io)
//   send recv sendto recvfrom sendmsg recvmsg                      (buffers: io)
//   fread fwrite                   (buffers: io; large transfers bypass the stdio buffer)
//   free realloc munmap                                            (released memory: memory)
//
// test/shim/test_coverage.py holds the same list: the libraries export it and MPI_* only.
//
// UCX's memory hooks (libucm, loaded with Debian's MPICH) patch the code of the first `munmap`
// they find -- ours, when we are preloaded -- and then unmap by system call, so our munmap body
// never runs.  subscribe_memory_events() therefore also registers with libucm, when it is there,
// for its "memory is about to be unmapped" event, which covers munmap, mremap, shmdt and
// madvise(DONTNEED) as well.
#pragma once

#include <atomic>

namespace tnbc::shim {

/// Calls with protected pages, kept by the mode (PageGuard's live counter).  Zero: every
/// interposed function goes straight to the real one after this one load.
extern std::atomic<int> g_guarded_calls;

/// Registers for libucm's VM_UNMAPPED event if libucm is loaded (after MPI initialisation).
/// Returns true if registered.  Idempotent.
bool subscribe_memory_events();

}  // namespace tnbc::shim
