// Page arithmetic shared by the engine's parts (page size is a parameter, so unit tests may
// pass another).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace tnbc::shim::replay::engine {

inline std::uintptr_t page_floor(std::uintptr_t a, std::size_t ps) { return a & ~(ps - 1); }
inline std::uintptr_t page_ceil(std::uintptr_t a, std::size_t ps) { return (a + ps - 1) & ~(ps - 1); }

/// The machine's page size.
inline std::size_t system_page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace tnbc::shim::replay::engine
