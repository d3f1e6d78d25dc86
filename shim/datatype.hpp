// What both modes need to know about an MPI datatype: whether its elements lie back to back
// from the buffer's start (count elements are count * size bytes), and which bytes count
// elements may occupy.  Header-only: replay mode (alltoall.cpp, bcast.cpp, call.cpp) and mode_trace.cpp.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace tnbc::shim::datatype {

struct TypeInfo {
  bool valid = false;       ///< MPI answered every query (an invalid handle does not)
  bool contiguous = false;  ///< element k is at bytes [k * size, (k + 1) * size)
  std::size_t size = 0;     ///< bytes of data per element
  MPI_Aint lb = 0, extent = 0;
  MPI_Aint true_lb = 0, true_extent = 0;
};

inline TypeInfo info(MPI_Datatype t) {
  TypeInfo ti;
  int size = 0;
  if (t == MPI_DATATYPE_NULL || PMPI_Type_get_extent(t, &ti.lb, &ti.extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent(t, &ti.true_lb, &ti.true_extent) != MPI_SUCCESS ||
      PMPI_Type_size(t, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0)
    return ti;
  ti.valid = true;
  ti.size = static_cast<std::size_t>(size);
  ti.contiguous = ti.lb == 0 && ti.true_lb == 0 && ti.extent == size && ti.true_extent == size;
  return ti;
}

/// The bytes [p, p + len) that `count` elements starting at element `first` of `buf` may occupy.
inline std::pair<const char*, std::size_t> span_of(const void* buf, std::size_t first, std::size_t count,
                                                   const TypeInfo& ti) {
  if (count == 0) return {static_cast<const char*>(buf), 0};
  const char* lo = static_cast<const char*>(buf) + static_cast<MPI_Aint>(first) * ti.extent + ti.true_lb;
  const auto len = static_cast<std::size_t>((static_cast<MPI_Aint>(count) - 1) * ti.extent + ti.true_extent);
  return {lo, len};
}

/// An upper bound of the bytes one element reaches from the buffer's start (0 if unknown).
inline std::size_t reach(const TypeInfo& ti) {
  if (!ti.valid || ti.extent < 0) return 0;
  return static_cast<std::size_t>(ti.extent + std::max<MPI_Aint>(ti.lb, 0));
}

/// An upper bound of the elements an Alltoallv buffer spans: the largest displacement + count of
/// its `n` blocks (negative values count as 0; MPI refuses them).
inline std::size_t blocks_span(const int counts[], const int displs[], int n) {
  std::size_t span = 0;
  for (int i = 0; i < n; ++i)
    span = std::max(span, static_cast<std::size_t>(std::max(displs[i], 0)) + static_cast<std::size_t>(std::max(counts[i], 0)));
  return span;
}

}  // namespace tnbc::shim::datatype
