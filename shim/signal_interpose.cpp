// The interposed signal functions (shim/libc_functions.tsv, rows "custom"): a SIGSEGV handler the
// program installs while tnbc's is installed becomes the handler tnbc passes foreign faults to,
// not the kernel's (shim/observe/segv.hpp, program_sigaction).  Every other signal, and SIGSEGV while
// tnbc has no handler installed, goes straight to the C library.  While it is installed, a
// thread's signal mask leaves SIGSEGV out (segv::without_segv).
#include <signal.h>

#include <atomic>
#include <cstring>

#include "io_interpose_impl.hpp"
#include "shim/observe/segv.hpp"

using namespace tnbc::shim::interpose;
namespace segv = tnbc::shim::observe::segv;

namespace {

/// signal()-style installation of `handler` for SIGSEGV with `flags`; true if tnbc took it
/// (then *old is the program's previous handler).
bool program_signal(sighandler_t handler, int flags, sighandler_t* old) {
  struct sigaction act, before;
  std::memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (!segv::program_sigaction(&act, &before)) return false;
  *old = (before.sa_flags & SA_SIGINFO) ? reinterpret_cast<sighandler_t>(reinterpret_cast<void*>(before.sa_sigaction)) : before.sa_handler;
  return true;
}

template <typename F>
sighandler_t signal_like(std::atomic<F>& real, const char* name, int sig, sighandler_t handler, int flags) {
  sighandler_t old = SIG_ERR;
  if (sig == SIGSEGV && program_signal(handler, flags, &old)) return old;
  return next(real, name)(sig, handler);
}

}  // namespace

#define TNBC_EXPORT extern "C" __attribute__((visibility("default")))

TNBC_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static std::atomic<int (*)(int, const struct sigaction*, struct sigaction*)> real{nullptr};
  if (sig == SIGSEGV && segv::program_sigaction(act, old)) return 0;
  return next(real, "sigaction")(sig, act, old);
}

using SignalFn = sighandler_t (*)(int, sighandler_t);

// BSD semantics (glibc's signal, bsd_signal): restart system calls, keep the handler.
TNBC_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  return signal_like(real, "signal", sig, handler, SA_RESTART);
}
TNBC_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  return signal_like(real, "bsd_signal", sig, handler, SA_RESTART);
}
TNBC_EXPORT sighandler_t ssignal(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  return signal_like(real, "ssignal", sig, handler, SA_RESTART);
}
// System V semantics: one shot, not blocked while it runs.
TNBC_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  return signal_like(real, "sysv_signal", sig, handler, SA_RESETHAND | SA_NODEFER);
}
TNBC_EXPORT sighandler_t tnbc_sysv_signal2(int sig, sighandler_t handler) __asm__("__sysv_signal");
sighandler_t tnbc_sysv_signal2(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  return signal_like(real, "__sysv_signal", sig, handler, SA_RESETHAND | SA_NODEFER);
}
TNBC_EXPORT int tnbc_sigaction2(int sig, const struct sigaction* act, struct sigaction* old) __asm__("__sigaction");
int tnbc_sigaction2(int sig, const struct sigaction* act, struct sigaction* old) {
  static std::atomic<int (*)(int, const struct sigaction*, struct sigaction*)> real{nullptr};
  if (sig == SIGSEGV && segv::program_sigaction(act, old)) return 0;
  return next(real, "__sigaction")(sig, act, old);
}
// System V's sigset: SIG_HOLD blocks the signal, which the C library does (it installs nothing).
TNBC_EXPORT sighandler_t sigset(int sig, sighandler_t handler) {
  static std::atomic<SignalFn> real{nullptr};
  if (handler == SIG_HOLD) return next(real, "sigset")(sig, handler);
  return signal_like(real, "sigset", sig, handler, 0);
}

// A thread that blocks SIGSEGV would be killed by its first touch of a guarded page.
TNBC_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  static std::atomic<int (*)(int, const sigset_t*, sigset_t*)> real{nullptr};
  sigset_t scratch;
  return next(real, "pthread_sigmask")(how, segv::without_segv(how, set, &scratch), old);
}
TNBC_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  static std::atomic<int (*)(int, const sigset_t*, sigset_t*)> real{nullptr};
  sigset_t scratch;
  return next(real, "sigprocmask")(how, segv::without_segv(how, set, &scratch), old);
}
