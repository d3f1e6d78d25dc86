! A Fortran program with `use mpi_f08`: MPICH's mpi_f08 bindings call PMPI_Init, PMPI_Finalize,
! PMPI_Query_thread, PMPI_Wait and PMPI_Barrier directly, and the C MPI_ symbols for calls with
! buffers; the tnbc libraries catch its initialisation and its collectives all the same.  Prints
! one line per phase and rank for byte-wise comparison with plain MPI.
program mixed_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 4096
  integer :: rank, nprocs, i, round, level
  integer, allocatable :: a(:), b(:), c(:)
  type(MPI_Request) :: req(2)
  integer(kind=8) :: s

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call MPI_Query_thread(level)
  print '(I0,A,I0)', rank, ' thread level ', level
  allocate(a(n * nprocs), b(n * nprocs), c(n))
  do round = 1, 4
    do i = 1, n * nprocs
      a(i) = rank * 1000003 + i * round
    end do
    call MPI_Alltoall(a, n, MPI_INTEGER, b, n, MPI_INTEGER, MPI_COMM_WORLD)
    s = 0
    do i = 1, n * nprocs
      s = s + int(b(i), 8) * i
    end do
    print '(I0,A,I0,A,I0)', rank, ' alltoall ', round, ' ', s
  end do

  if (rank == 0) b(1:n) = a(1:n)
  call MPI_Bcast(b, n, MPI_INTEGER, 0, MPI_COMM_WORLD)
  print '(I0,A,I0)', rank, ' bcast ', sum(int(b(1:n), 8))

  call MPI_Irecv(c, n, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 3, MPI_COMM_WORLD, req(1))
  call MPI_Isend(a, n, MPI_INTEGER, mod(rank + 1, nprocs), 3, MPI_COMM_WORLD, req(2))
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE)
  print '(I0,A,I0)', rank, ' p2p ', sum(int(c, 8))

  call MPI_Barrier(MPI_COMM_WORLD)
  deallocate(a, b, c)
  call MPI_Finalize()
end program mixed_f08
