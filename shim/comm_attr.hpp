// Communicator attributes the library keeps (the barrier's state, the engine's shadows).
#pragma once

#include <mpi.h>

namespace tnbc::shim {

/// Deletes `keyval`'s attribute of `comm` if it is set (its delete callback runs): Open MPI
/// reports deleting an attribute that is not there as an error, MPICH does not.
inline void delete_attr_if_set(MPI_Comm comm, int keyval) {
  void* value = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &flag);
  if (flag) PMPI_Comm_delete_attr(comm, keyval);
}

}  // namespace tnbc::shim
