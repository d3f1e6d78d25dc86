! A Fortran MPI program: the Fortran bindings call the C MPI_ symbols, so the tnbc libraries
! catch its collectives too.  Prints one line per phase and rank for byte-wise comparison.
program mixed_f
  use mpi
  implicit none
  integer, parameter :: n = 2048
  integer :: ierr, rank, nprocs, i, nxt, prv
  integer, allocatable :: a(:), b(:)
  integer :: status(MPI_STATUS_SIZE)
  integer(kind=8) :: s

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  allocate(a(n * nprocs), b(n * nprocs))
  do i = 1, n * nprocs
    a(i) = rank * 1000003 + i
  end do

  call MPI_Alltoall(a, n, MPI_INTEGER, b, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  s = 0
  do i = 1, n * nprocs
    s = s + int(b(i), 8) * i
  end do
  print '(I0,A,I0)', rank, ' alltoall ', s

  if (rank == 0) b(1:n) = a(1:n)
  call MPI_Bcast(b, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  print '(I0,A,I0)', rank, ' bcast ', sum(int(b(1:n), 8))

  nxt = mod(rank + 1, nprocs)
  prv = mod(rank + nprocs - 1, nprocs)
  call MPI_Sendrecv(a, n, MPI_INTEGER, nxt, 3, b, n, MPI_INTEGER, prv, 3, MPI_COMM_WORLD, &
                    status, ierr)
  print '(I0,A,I0)', rank, ' p2p ', sum(int(b(1:n), 8))

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  deallocate(a, b)
  call MPI_Finalize(ierr)
end program mixed_f
