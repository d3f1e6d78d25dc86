// Interposed C library functions (shim/libc_functions.tsv; generated wrappers plus the
// hand-written ones of io_interpose.cpp).
//
// The kernel does not raise SIGSEGV when a system call meets a protected page: write(fd, buf, n)
// on a guarded receive buffer fails with EFAULT.  And memory given back, re-protected, advised,
// locked or remapped must not stay protected.  So the preloaded libraries export every C library
// function that hands a caller's buffer to the kernel or changes the caller's memory (the table
// lists them, and the ones reviewed and left alone, with the reason), and each asks the mode to
// release the bytes it names (Mode::release_range) before calling the real one (dlsym
// RTLD_NEXT, resolved once).  syscall() does the same for the system-call numbers that take a
// buffer; fork() completes everything in flight first (pthread_atfork).  The mapping functions
// also tell the mapping cache (mapping.hpp) what changed.
//
// test/shim/test_coverage.py checks the table against the system's libc and the libraries'
// exports; shim/exports.map is generated from the table.
//
// UCX's memory hooks (libucm, loaded with Debian's MPICH) patch the code of the first `munmap`
// they find -- ours, when we are preloaded -- and then unmap by system call, so our munmap body
// never runs.  subscribe_memory_events() therefore also registers with libucm, when it is there,
// for its "memory is about to be unmapped" and "was mapped" events, which cover munmap, mremap,
// shmdt and madvise(DONTNEED) as well.
#pragma once

#include <atomic>

namespace tnbc::shim {

/// Calls with protected pages, kept by the mode (PageGuard's live counter).  Zero: every
/// interposed function goes straight to the real one after this one load.
extern std::atomic<int> g_guarded_calls;

/// True once the program set up an io_uring (syscall(SYS_io_uring_setup)) or has liburing
/// loaded: the kernel then reads and writes buffers no interposer sees, so receive pages must
/// not be guarded from then on (the engine receives in place, fallback reason "io_uring").
bool io_uring_in_use();

/// Registers for libucm's VM_UNMAPPED and VM_MAPPED events if libucm is loaded (after MPI
/// initialisation).  Returns true if registered.  Idempotent.
bool subscribe_memory_events();

}  // namespace tnbc::shim
