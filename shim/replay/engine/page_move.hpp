// Moving whole pages between the user's buffer and the engine's mirror with userfaultfd
// (UFFDIO_MOVE, Linux 6.8 and later): the receive side's fastest way to publish
// (receive_mirror.hpp).
//
// A page moved out of a range registered with the userfaultfd is *missing* there: a thread that
// touches it sleeps in the kernel (no signal, so a thread that blocks SIGSEGV waits as well) until
// a page is moved back in, which wakes it.  Moving changes page-table entries only: no byte is
// copied, no page is allocated or zero-filled, no protection changes.  So a call moves the user's
// own pages into its mirror (their bytes, the gaps between sub-messages included, travel with
// them), receives into them, and moves each back when it is complete.
//
// The kernel refuses a move unless both sides are private anonymous memory with the same
// protection and the page is this process's alone (not shared with a fork()ed child, not
// pinned, not KSM-merged); the caller then undoes what it moved and publishes another way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tnbc::shim::replay::engine::page_move {

/// Opens the userfaultfd and checks, on two pages of its own, that the kernel moves a page
/// there and back with its bytes; idempotent.  Returns "" when moving works, else why not.  Faults from system
/// calls wait too where the kernel lets this process handle them (root, CAP_SYS_PTRACE or
/// vm.unprivileged_userfaultfd=1); elsewhere they fail with EFAULT, as on a protected page, and
/// the interposed C library functions wait first (io_interpose.hpp).
const std::string& start();
/// True when start() found that moving works.
bool available();
/// True when a system call meeting a missing page waits too (else it fails with EFAULT).
bool kernel_faults_wait();
/// The userfaultfd (readable while a fault is reported and not yet taken), or -1.
int fd();

/// Registers [p, p + n) (page aligned) for missing-page faults; false if the kernel refuses
/// (not anonymous or shared memory, or registered with another userfaultfd).
bool register_range(std::uintptr_t p, std::size_t n);
/// Ends the registration; threads still waiting there retry their access.
void unregister_range(std::uintptr_t p, std::size_t n);

/// Moves the pages [src, src + n) to [dst, dst + n) (dst registered, its pages missing); a page
/// missing at the source is filled with zeros at the destination, as a first touch would have.
/// Wakes threads waiting at dst unless `wake` is false.  Returns the bytes placed (n, or fewer
/// when the kernel refused a page: errno says why).
std::size_t move(std::uintptr_t dst, std::uintptr_t src, std::size_t n, bool wake);

/// Copies [src, src + n) into the missing pages [dst, dst + n) (UFFDIO_COPY) and wakes their
/// waiters; false if the kernel refused.
bool copy(std::uintptr_t dst, const void* src, std::size_t n);

/// Maps the zero page (UFFDIO_ZEROPAGE) at every missing page of [p, p + n) (page aligned,
/// registered), as a first read would have; pages that are there stay as they are.  False if the
/// kernel refused one.
bool zero_missing(std::uintptr_t p, std::size_t n);

/// Wakes the threads held at the page `page` (registered): each touches it again.
void wake(std::uintptr_t page);

/// Whether the page holding `p` of this process is there (in memory or swapped out), not missing:
/// reading a missing page of a registered range would wait for this process's own userfaultfd.
/// True where the kernel does not say.
bool populated(std::uintptr_t p);

/// Missing-page faults reported since the last call, each one's address in `addrs` (up to
/// `max`); returns how many were written.  Never blocks.
std::size_t take_faults(std::uintptr_t* addrs, std::size_t max);

}  // namespace tnbc::shim::replay::engine::page_move
