// Call-site identity: which line of the program called the collective, in a form that is equal
// on every rank and survives address-space randomisation.
//
// capture() takes the return addresses above the MPI call (libunwind's unw_backtrace), drops the
// frames inside our own library, and keys the remaining chain.  The first time a chain is seen
// each address is resolved once to module + offset (dladdr) and symbol (dladdr, else, for the
// innermost `named_frames`, a libunwind walk of the still-live stack, which also reads .symtab);
// the id is a hash of (module basename, offset) of every frame, so two ranks running the same
// binaries get the same id for the same call site, and two call sites of one operation get
// different ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tnbc::shim::observe {

/// One return address, position-independent.
struct Frame {
  std::string module;        ///< path of the object (executable or shared library)
  std::uint64_t offset = 0;  ///< return address minus the object's load address
  std::string symbol;        ///< enclosing function: dynamic symbol, else .symtab, else ""
};

struct CallSite {
  std::uint64_t id = 0;       ///< hash of (basename(module), offset) of every frame
  std::vector<Frame> frames;  ///< innermost first
};

/// Table of the call sites seen in this process.  Thread-safe.
class CallSiteTable {
 public:
  static constexpr int kMaxFrames = 32;

  /// `named_frames`: how many frames of a new call site, innermost first, are named where dladdr
  /// cannot name them (a walk of the live stack whose unw_get_proc_name opens and maps the
  /// frame's object file each time: docs/measurements/nothing-changed.md).  Trace files keep
  /// every frame's name; replay mode shows only the innermost's.
  explicit CallSiteTable(int named_frames = kMaxFrames) : named_frames_(named_frames) {}

  /// Captures the caller's stack and returns the index of its call site in sites().
  /// Frames inside the object that contains this code (the tnbc library) are skipped.
  std::uint32_t capture();
  /// The same for an explicit list of return addresses, innermost first (used by tests).
  std::uint32_t intern(const void* const* addresses, int count);
  /// Every call site, in order of first capture.
  std::vector<CallSite> sites() const;
  /// The plan key of the call site at `index` (cached: cheap on a hot path).
  std::string key(std::uint32_t index) const;
  /// The innermost frame of the call site at `index` (an empty frame for an unknown index).
  Frame innermost(std::uint32_t index) const;
  /// The plan key of a call site, as plans and tnbc-order spell it: "<module basename>+0x<offset>"
  /// per frame, innermost first, joined by ';' (blanks, '#' and non-ASCII become '_').
  static std::string key(const CallSite& site);

  /// The id of a chain of frames (what CallSite::id holds).
  static std::uint64_t hash_frames(const std::vector<Frame>& frames);
  /// Resolves one address (dladdr); an unknown address gives module "?" and the raw address.
  static Frame resolve(const void* address);

 private:
  std::uint32_t intern_chain(const void* const* addresses, int count, bool live_stack);
  void name_local_frames(const std::vector<std::uintptr_t>& key, std::vector<Frame>& frames) const;

  int named_frames_;

  struct KeyHash {
    std::size_t operator()(const std::vector<std::uintptr_t>& k) const;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::vector<std::uintptr_t>, std::uint32_t, KeyHash> by_chain_;
  std::vector<CallSite> sites_;
  std::vector<std::string> keys_;  // key(sites_[i])
};

}  // namespace tnbc::shim::observe
