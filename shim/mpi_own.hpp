// MPI's own definitions of the functions the libraries define as PMPI_ too (entry_points.cpp: MPICH's
// mpi_f08 bindings call PMPI_Init, PMPI_Init_thread, PMPI_Finalize and PMPI_Query_thread
// directly).  The libraries' own calls of these go here, never to their PMPI_ names.
#pragma once

namespace tnbc::shim::mpi_own {

int Init(int* argc, char*** argv);
int Init_thread(int* argc, char*** argv, int required, int* provided);
int Finalize();
/// The thread level MPI gave the process (PMPI_Query_thread reports the program's, under MPICH).
int Query_thread(int* provided);

}  // namespace tnbc::shim::mpi_own
