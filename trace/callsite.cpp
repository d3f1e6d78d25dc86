#include "callsite.hpp"

#include <dlfcn.h>
#include <libunwind.h>

namespace tnbc::trace {
namespace {

constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t fnv(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

std::string_view basename_of(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The load address of the object that holds this code: its frames are ours and are skipped.
const void* own_base() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&own_base), &info) ? info.dli_fbase : nullptr;
  }();
  return base;
}

}  // namespace

std::size_t CallSiteTable::KeyHash::operator()(const std::vector<std::uintptr_t>& k) const {
  return static_cast<std::size_t>(fnv(kFnvOffset, k.data(), k.size() * sizeof(std::uintptr_t)));
}

std::uint64_t CallSiteTable::hash_frames(const std::vector<Frame>& frames) {
  std::uint64_t h = kFnvOffset;
  for (const auto& f : frames) {
    auto name = basename_of(f.module);
    h = fnv(h, name.data(), name.size());
    h = fnv(h, "\0", 1);
    h = fnv(h, &f.offset, sizeof f.offset);
  }
  return h;
}

Frame CallSiteTable::resolve(const void* address) {
  Frame f;
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fbase == nullptr) {
    f.module = "?";
    f.offset = reinterpret_cast<std::uintptr_t>(address);
    return f;
  }
  f.module = info.dli_fname != nullptr ? info.dli_fname : "?";
  f.offset =
      reinterpret_cast<std::uintptr_t>(address) - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  if (info.dli_sname != nullptr) f.symbol = info.dli_sname;
  return f;
}

std::uint32_t CallSiteTable::capture() {
  void* raw[kMaxFrames + 8];
  int n = unw_backtrace(raw, kMaxFrames + 8);
  // Skip our own frames: everything up to the last frame inside this object.
  const void* base = own_base();
  int first = 0;
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    if (base != nullptr && dladdr(raw[i], &info) != 0 && info.dli_fbase == base)
      first = i + 1;
    else
      break;  // our frames are the innermost ones: stop at the first foreign frame
  }
  int count = std::min(n - first, kMaxFrames);
  return intern(raw + first, count);
}

std::uint32_t CallSiteTable::intern(const void* const* addresses, int count) {
  std::vector<std::uintptr_t> key(static_cast<std::size_t>(std::max(count, 0)));
  for (std::size_t i = 0; i < key.size(); ++i)
    key[i] = reinterpret_cast<std::uintptr_t>(addresses[i]);
  std::lock_guard lock(mutex_);
  auto it = by_chain_.find(key);
  if (it != by_chain_.end()) return it->second;
  CallSite site;
  for (auto a : key) site.frames.push_back(resolve(reinterpret_cast<const void*>(a)));
  site.id = hash_frames(site.frames);
  // Two raw chains resolve to one id only through unresolvable frames; keep one entry per id.
  for (std::uint32_t i = 0; i < sites_.size(); ++i)
    if (sites_[i].id == site.id) return by_chain_[key] = i;
  auto index = static_cast<std::uint32_t>(sites_.size());
  sites_.push_back(std::move(site));
  by_chain_.emplace(std::move(key), index);
  return index;
}

std::vector<CallSite> CallSiteTable::sites() const {
  std::lock_guard lock(mutex_);
  return sites_;
}

}  // namespace tnbc::trace
