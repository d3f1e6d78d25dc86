#include "callsite.hpp"

#include <algorithm>
#include <cstdio>

#include <dlfcn.h>
#include <link.h>
// Local unwinding only (the _UL* entry points of libunwind.so), which is all we do.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "util/hash.hpp"

namespace tnbc::shim::observe {
namespace {

using util::fnv;
using util::kFnvOffset;

std::string_view basename_of(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The address ranges of the object that holds this code (the tnbc library): frames there are
// ours and are skipped.  Found once, so that capture() needs no dladdr (which takes the loader's
// lock) per frame.
struct Range {
  std::uintptr_t lo, hi;
};
struct OwnObject {
  std::uintptr_t base = 0;
  std::vector<Range> segments;
};

const OwnObject& own_object() {
  static const OwnObject own = [] {
    OwnObject o;
    Dl_info info{};
    if (!dladdr(reinterpret_cast<const void*>(&own_object), &info) || info.dli_fbase == nullptr)
      return o;
    o.base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    dl_iterate_phdr(
        [](dl_phdr_info* phdr, std::size_t, void* arg) {
          auto* obj = static_cast<OwnObject*>(arg);
          // dladdr's base is the load bias of a shared object or PIE, or the address of the
          // first segment of a fixed-address executable.
          bool ours = phdr->dlpi_addr == obj->base;
          for (int i = 0; i < phdr->dlpi_phnum && !ours; ++i)
            if (phdr->dlpi_phdr[i].p_type == PT_LOAD)
              ours = phdr->dlpi_addr + phdr->dlpi_phdr[i].p_vaddr == obj->base;
          if (!ours) return 0;
          for (int i = 0; i < phdr->dlpi_phnum; ++i) {
            const auto& ph = phdr->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            std::uintptr_t lo = phdr->dlpi_addr + ph.p_vaddr;
            obj->segments.push_back({lo, lo + ph.p_memsz});
          }
          return 1;
        },
        &o);
    return o;
  }();
  return own;
}

bool in_own_object(const void* address) {
  auto a = reinterpret_cast<std::uintptr_t>(address);
  for (const auto& r : own_object().segments)
    if (a >= r.lo && a < r.hi) return true;
  return false;
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
  // Skip our own frames: they are the innermost ones, up to the first foreign frame.
  int first = 0;
  while (first < n && in_own_object(raw[first])) ++first;
  int count = std::min(n - first, kMaxFrames);
  return intern_chain(raw + first, count, /*live_stack=*/true);
}

std::string CallSiteTable::key(std::uint32_t index) const {
  std::lock_guard lock(mutex_);
  return index < keys_.size() ? keys_[index] : std::string("?");
}

std::string CallSiteTable::key(const CallSite& site) {
  std::string key;
  for (const auto& f : site.frames) {
    char off[32];
    std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(f.offset));
    if (!key.empty()) key += ';';
    auto slash = f.module.rfind('/');
    key += (slash == std::string::npos ? f.module : f.module.substr(slash + 1)) + off;
  }
  // A plan key may not be empty nor hold blanks or '#' (docs/plan-format.md); module names
  // normally have none, but a path is the user's to choose.
  if (key.empty()) key = "?";
  for (char& c : key)
    if (c <= ' ' || c == '#' || c > '~') c = '_';
  return key;
}

std::uint32_t CallSiteTable::intern(const void* const* addresses, int count) {
  return intern_chain(addresses, count, /*live_stack=*/false);
}

std::uint32_t CallSiteTable::intern_chain(const void* const* addresses, int count,
                                          bool live_stack) {
  std::vector<std::uintptr_t> key(static_cast<std::size_t>(std::max(count, 0)));
  for (std::size_t i = 0; i < key.size(); ++i)
    key[i] = reinterpret_cast<std::uintptr_t>(addresses[i]);
  std::lock_guard lock(mutex_);
  auto it = by_chain_.find(key);
  if (it != by_chain_.end()) return it->second;
  CallSite site;
  for (auto a : key) site.frames.push_back(resolve(reinterpret_cast<const void*>(a)));
  if (live_stack) name_local_frames(key, site.frames);
  site.id = hash_frames(site.frames);
  // Two raw chains resolve to one id only through unresolvable frames; keep one entry per id.
  for (std::uint32_t i = 0; i < sites_.size(); ++i)
    if (sites_[i].id == site.id) return by_chain_[key] = i;
  auto index = static_cast<std::uint32_t>(sites_.size());
  keys_.push_back(CallSiteTable::key(site));
  sites_.push_back(std::move(site));
  by_chain_.emplace(std::move(key), index);
  return index;
}

void CallSiteTable::name_local_frames(const std::vector<std::uintptr_t>& key,
                                      std::vector<Frame>& frames) const {
  // dladdr only knows the dynamic symbol table, so a program's own functions (main, static
  // functions) stay nameless.  The stack is still live here: walk it with a libunwind cursor,
  // which also reads .symtab, and name the frames dladdr could not.  Done once per call site.
  const std::size_t named = std::min(key.size(), static_cast<std::size_t>(std::max(named_frames_, 0)));
  // The frames still to look for: those dladdr could not name.  The walk ends once each was
  // reached (named or not: an object without symbols stays nameless).
  std::vector<bool> wanted(named);
  std::size_t left = 0;
  for (std::size_t i = 0; i < named; ++i)
    if (frames[i].symbol.empty()) wanted[i] = true, ++left;
  if (left == 0) return;
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return;
  for (int depth = 0; depth < 2 * kMaxFrames + 16 && unw_step(&cursor) > 0; ++depth) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0) break;
    for (std::size_t i = 0; i < named; ++i) {
      if (key[i] != ip || !wanted[i]) continue;
      wanted[i] = false;
      --left;
      char name[256];
      unw_word_t offset = 0;
      if (unw_get_proc_name(&cursor, name, sizeof name, &offset) == 0) frames[i].symbol = name;
    }
    if (left == 0) break;
  }
}

Frame CallSiteTable::innermost(std::uint32_t index) const {
  std::lock_guard lock(mutex_);
  return index < sites_.size() && !sites_[index].frames.empty() ? sites_[index].frames.front() : Frame{};
}

std::vector<CallSite> CallSiteTable::sites() const {
  std::lock_guard lock(mutex_);
  return sites_;
}

}  // namespace tnbc::shim::observe
