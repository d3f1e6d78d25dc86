#include "fence.hpp"

namespace tnbc::shim {

std::atomic<int> g_in_flight{0};
thread_local int t_mpi_depth __attribute__((tls_model("initial-exec"))) = 0;

namespace {
std::atomic<void (*)()> g_drain_hook{nullptr};
}

void set_drain_hook(void (*hook)()) { g_drain_hook.store(hook, std::memory_order_release); }

std::atomic<std::uint64_t> g_fence_drains{0};

void drain_in_flight() {
  g_fence_drains.fetch_add(1, std::memory_order_relaxed);
  if (auto hook = g_drain_hook.load(std::memory_order_acquire)) hook();
}

}  // namespace tnbc::shim
