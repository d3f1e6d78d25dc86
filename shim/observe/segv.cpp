#include "segv.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "util/raw.hpp"

namespace tnbc::shim::observe::segv {
namespace {

constexpr std::size_t kAltStackSize = 64 * 1024;

std::atomic<Claim> g_claims[kMaxClaims];
std::mutex g_mutex;  // add(), remove() and program_sigaction()
int g_count = 0;     // registered claims, under g_mutex
std::atomic<bool> g_installed{false};

// The program's handler: the one installed before ours, or one the program installed since
// (program_sigaction).  Two copies and an index, so the handler always reads a whole one.
struct sigaction g_previous_slots[2];
std::atomic<int> g_previous_index{0};

const struct sigaction& previous() { return g_previous_slots[g_previous_index.load(std::memory_order_acquire)]; }
void set_previous(const struct sigaction& sa) {  // under g_mutex, or in the handler (one-shot)
  const int next = 1 - g_previous_index.load(std::memory_order_relaxed);
  g_previous_slots[next] = sa;
  g_previous_index.store(next, std::memory_order_release);
}

// Passes a fault no claim took to the handler that was installed before ours.
void pass_on(int sig, siginfo_t* info, void* context) {
  const struct sigaction prev = previous();
  if (prev.sa_flags & SA_RESETHAND) {
    // One-shot handler: the kernel would have reset it to the default before calling it.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    set_previous(dfl);
  }
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) {
      prev.sa_sigaction(sig, info, context);
      return;
    }
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  // Default or ignored.  A real fault cannot be ignored (the kernel kills the process even under
  // SIG_IGN), so restore the default action: returning retries the access, which faults again
  // and ends the process by SIGSEGV.  A SIGSEGV sent by kill()/raise() is not retried: re-raise
  // it under SIG_DFL (it stays pending until we return), drop it under SIG_IGN.
  const bool sent = info == nullptr || info->si_code <= 0;
  if (sent && prev.sa_handler == SIG_IGN) return;
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  util::raw::sigaction(sig, &dfl, nullptr);
  if (sent) raise(sig);
}

void on_segv(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  if (info != nullptr) {
    for (auto& slot : g_claims) {
      Claim claim = slot.load(std::memory_order_acquire);
      if (claim != nullptr && claim(info)) {
        errno = saved;
        return;
      }
    }
  }
  pass_on(sig, info, context);
  errno = saved;
}

}  // namespace

void ensure_alt_stack() {
  stack_t current;
  if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
  // Never freed: the thread may be running on it at any time until it exits.
  void* mem = util::raw::mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) return;
  stack_t st{};
  st.ss_sp = mem;
  st.ss_size = kAltStackSize;
  if (sigaltstack(&st, nullptr) != 0) util::raw::munmap(mem, kAltStackSize);
}

std::optional<std::string> add(Claim claim) {
  std::lock_guard lock(g_mutex);
  for (auto& slot : g_claims)
    if (slot.load(std::memory_order_relaxed) == claim) return std::nullopt;
  std::atomic<Claim>* free_slot = nullptr;
  for (auto& slot : g_claims)
    if (slot.load(std::memory_order_relaxed) == nullptr) {
      free_slot = &slot;
      break;
    }
  if (free_slot == nullptr) return std::string("too many SIGSEGV claims");
  ensure_alt_stack();
  if (g_count == 0) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    struct sigaction before;
    if (util::raw::sigaction(SIGSEGV, &sa, &before) != 0)
      return std::string("cannot install the SIGSEGV handler: ") + std::strerror(errno);
    set_previous(before);
    g_installed.store(true, std::memory_order_release);
  }
  free_slot->store(claim, std::memory_order_release);
  ++g_count;
  return std::nullopt;
}

void remove(Claim claim) {
  std::lock_guard lock(g_mutex);
  for (auto& slot : g_claims) {
    if (slot.load(std::memory_order_relaxed) != claim) continue;
    slot.store(nullptr, std::memory_order_release);
    if (--g_count == 0) {
      // If someone installed a handler after ours, it stays; it never calls ours anyway.
      struct sigaction current;
      if (util::raw::sigaction(SIGSEGV, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
          current.sa_sigaction == on_segv)
        util::raw::sigaction(SIGSEGV, &previous(), nullptr);
      g_installed.store(false, std::memory_order_release);
    }
    return;
  }
}

bool installed() { return g_installed.load(std::memory_order_acquire); }

const sigset_t* without_segv(int how, const sigset_t* set, sigset_t* scratch) {
  if (set == nullptr || how == SIG_UNBLOCK || !installed() || sigismember(set, SIGSEGV) != 1) return set;
  *scratch = *set;
  sigdelset(scratch, SIGSEGV);
  return scratch;
}

bool program_sigaction(const struct sigaction* act, struct sigaction* old) {
  if (!installed()) return false;
  std::lock_guard lock(g_mutex);
  if (g_count == 0) return false;
  if (old != nullptr) *old = previous();
  if (act != nullptr) set_previous(*act);
  return true;
}

}  // namespace tnbc::shim::observe::segv
