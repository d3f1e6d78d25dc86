// The barrier algorithms by name: what the settings table validates and documents, and what the
// barrier itself dispatches on.  Header-only and free of the barrier's code, so the
// configuration layer can check a name without linking the barrier (the algorithms are in
// barrier.hpp and barrier/<name>.cpp).
#pragma once

#include <optional>
#include <string_view>

namespace tnbc::barrier {

/// Every algorithm.  The numeric order is the documentation order.
enum class Algorithm {
  central_counter,        ///< one atomic counter, the last arrival releases (O(p) atomics)
  flat_tree,              ///< root polls every rank's arrival line, one release flag
  gather_release,         ///< flat_tree, but the root releases each rank in its own line
  combining_tree,         ///< k-ary tree of arrival lines (no atomics), one release flag
  combining_tree_atomic,  ///< k-ary tree of atomic counters, one release flag
  mcs,                    ///< arrival tree fan-in 4, wakeup tree fan-out 2, per-rank flags
  tournament,             ///< binomial tournament, champion (root) releases
  dissemination,          ///< log2 p symmetric rounds, no root
};
inline constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::central_counter, Algorithm::flat_tree,   Algorithm::gather_release,
    Algorithm::combining_tree,  Algorithm::combining_tree_atomic, Algorithm::mcs,
    Algorithm::tournament,      Algorithm::dissemination};

constexpr std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::central_counter: return "central_counter";
    case Algorithm::flat_tree: return "flat_tree";
    case Algorithm::gather_release: return "gather_release";
    case Algorithm::combining_tree: return "combining_tree";
    case Algorithm::combining_tree_atomic: return "combining_tree_atomic";
    case Algorithm::mcs: return "mcs";
    case Algorithm::tournament: return "tournament";
    case Algorithm::dissemination: return "dissemination";
  }
  return "?";
}

/// The algorithm named `name` exactly, or nullopt.
constexpr std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (Algorithm a : kAllAlgorithms)
    if (to_string(a) == name) return a;
  return std::nullopt;
}

}  // namespace tnbc::barrier
