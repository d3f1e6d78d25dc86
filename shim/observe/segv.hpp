// The one SIGSEGV handler of both libraries.  Trace mode's page guard and replay mode's guard
// register a *claim* each: a function that says, async-signal-safely, whether a fault is on
// memory it guards and has been dealt with (the faulting access is then retried).  The first
// claim installs the handler and keeps the one installed before (libucs's, the program's, the
// default) to pass on every fault no claim takes; the last claim removed puts that one back if
// ours is still installed.
//
//   fault --> handler --> claim 1? --> claim 2? --> ... --> the handler installed before us
//                            | yes        | yes
//                            +------------+--> return: the access is retried
//
// - SA_ONSTACK: a thread that overflows its stack still reaches the handler.  add() gives the
//   calling thread an alternate signal stack (mmap'd, never freed) if it has none;
//   ensure_alt_stack() does the same for other threads.  Without one the handler runs on the
//   thread's own stack, which is still correct for guarded pages.
// - SA_NODEFER: a handler we pass a fault to may leave by longjmp rather than siglongjmp (a
//   program's recovery code, a test harness) without leaving SIGSEGV blocked for good.
// - Passing a fault on: a SA_SIGINFO or plain handler is called; the default action is restored
//   and the access retried, so a real fault still kills the process by SIGSEGV; a SIGSEGV sent
//   by kill() or raise() (si_code <= 0) is raised again under the default action, or dropped if
//   it was ignored.
//
// - A handler the program installs later (a JIT, a garbage collector, a crash reporter) does not
//   replace ours: the interposed sigaction and signal functions hand it to program_sigaction(),
//   and ours passes it every fault no claim takes.
//
// No MPI, no allocation in the handler; registration is not async-signal-safe (call it from
// ordinary code).
#pragma once

#include <csignal>
#include <optional>
#include <string>

namespace tnbc::shim::observe::segv {

/// True when the fault `info` describes is the claimer's and has been dealt with.
using Claim = bool (*)(const siginfo_t* info);

/// Registers `claim` (at most kMaxClaims at a time; the same claim twice counts once).  The first
/// registration installs the handler.  Error text when the handler cannot be installed or the
/// table is full.
std::optional<std::string> add(Claim claim);
/// Unregisters `claim`; with none left, restores the previous handler if ours is installed.
void remove(Claim claim);
/// Gives the calling thread an alternate signal stack if it has none.
void ensure_alt_stack();

/// sigaction(SIGSEGV, act, old) as the program sees it while our handler is installed: `old`
/// gets the program's handler (the one we pass faults on to), `act` replaces it; the kernel's
/// handler stays ours, so faults on guarded pages are still ours whatever order handlers are
/// installed in (the approach of libjsig).  Returns false, doing nothing, when our handler is
/// not installed: the caller then calls the real sigaction.  The interposed sigaction, signal
/// & co. (shim/signal_interpose.cpp) call it.
bool program_sigaction(const struct sigaction* act, struct sigaction* old);

/// Whether our handler is installed (one atomic load; async-signal-safe).
bool installed();

/// `set` as a thread may block it while our handler is installed: without SIGSEGV.  A fault on
/// a guarded page with SIGSEGV blocked kills the process (a synchronous fault cannot be held),
/// so the interposed pthread_sigmask and sigprocmask leave it out (threads made with every
/// signal blocked, a common idiom, then still wait for guarded pages).  Returns `set`, or
/// `scratch` holding the copy without SIGSEGV.
const sigset_t* without_segv(int how, const sigset_t* set, sigset_t* scratch);

inline constexpr int kMaxClaims = 4;

}  // namespace tnbc::shim::observe::segv
