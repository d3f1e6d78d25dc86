/* ft: an NPB FT-like kernel, a distributed 3-D complex FFT with one MPI_Alltoall per iteration.
 *
 * Algorithm:
 *   Idea: slab decomposition of an NX x NY x NZ grid over P ranks (NZ/P planes each); the z
 *   direction is made local by a global transpose, as NPB FT does.
 *   Phases of each iteration:
 *     1. local 2-D FFTs (FFTW) of the rank's NZ/P xy-planes
 *     2. pack: block d holds the rank's planes restricted to y-slab d ([zl][yl][x])
 *     3. MPI_Alltoall of the blocks (--mpi3: MPI_Ialltoall)
 *     4. communication-unrelated computation: generate the next iteration's input
 *     5. (--mpi3: MPI_Wait) unpack: read the received blocks one after another, in the order
 *        --order gives, into z-contiguous lines ([yl][x][z]) — the communication-related part
 *     6. local 1-D FFTs along z, then a weighted sum of the result into the checksum
 *   Edge cases: P must divide NY and NZ.
 *   Cost per iteration: (P-1)·α + (P-1)/P · 16·NX·NY·NZ/P · β for the transpose,
 *   O(NX·NY·NZ/P · log(NX·NY·NZ)) for the FFTs.
 *   Verification: the checksum (complex sum of all results weighted by index) is printed with
 *   every digit, so plain, libtnbc.so and --mpi3 runs can be compared byte for byte; Parseval's
 *   identity (output energy = N · input energy) is checked on the last iteration.
 *
 * Classes (4 ranks on 2 shared cores, 200 Mbit/s nodes: about 0.2 s, 1 s, 3 s):
 *   S 64x64x64 (256 KiB blocks), W 128x128x64 (1 MiB), A 128x128x128 (2 MiB). */
/* complex.h first: fftw_complex is then C99's double complex. */
#include <complex.h>
#include <fftw3.h>
#include <math.h>

#include "kernel_util.h"

static double complex input_value(size_t gidx, int iter) {
  uint64_t h = mix64(gidx * 1315423911ULL + (uint64_t)iter);
  double re = (double)(h >> 11) * 0x1.0p-53 - 0.5;
  double im = (double)(mix64(h) >> 11) * 0x1.0p-53 - 0.5;
  return re + im * I;
}

/* Fills the rank's planes z0 .. z0+nzl-1 for iteration `iter`; returns their energy. */
static double generate(fftw_complex *slab, int nx, int ny, int nzl, int z0, int iter) {
  double energy = 0;
  for (int zl = 0; zl < nzl; zl++)
    for (int y = 0; y < ny; y++)
      for (int x = 0; x < nx; x++) {
        size_t local = ((size_t)zl * ny + y) * nx + x;
        size_t gidx = ((size_t)(z0 + zl) * ny + y) * nx + x;
        double complex v = input_value(gidx, iter);
        slab[local] = v;
        energy += creal(v) * creal(v) + cimag(v) * cimag(v);
      }
  return energy;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  struct kernel_args a = parse_kernel_args(argc, argv, "ft");
  int nx = 64, ny = 64, nz = 64, iters = 4;
  if (a.cls == 'W') nx = 128, ny = 128, nz = 64, iters = 6;
  if (a.cls == 'A') nx = 128, ny = 128, nz = 128, iters = 6;
  if (a.iters) iters = a.iters;
  if (ny % p || nz % p) {
    if (rank == 0) fprintf(stderr, "ft: %d ranks do not divide NY=%d and NZ=%d\n", p, ny, nz);
    MPI_Finalize();
    return 2;
  }
  int nzl = nz / p, nyl = ny / p, z0 = rank * nzl;
  size_t local = (size_t)nx * ny * nzl;   /* complex elements per rank */
  size_t block = local / p;               /* elements per Alltoall block */

  fftw_complex *slab = fftw_malloc(sizeof(fftw_complex) * local);
  fftw_complex *zbuf = fftw_malloc(sizeof(fftw_complex) * local);
  fftw_complex *sendbuf = comm_alloc(&a, sizeof(fftw_complex) * local);
  fftw_complex *recvbuf = comm_alloc(&a, sizeof(fftw_complex) * local);
  int n2[2] = {ny, nx};
  fftw_plan plan2d = fftw_plan_many_dft(2, n2, nzl, slab, NULL, 1, ny * nx, slab, NULL, 1, ny * nx,
                                        FFTW_FORWARD, FFTW_ESTIMATE);
  fftw_plan plan1d = fftw_plan_many_dft(1, &nz, nyl * nx, zbuf, NULL, 1, nz, zbuf, NULL, 1, nz,
                                        FFTW_FORWARD, FFTW_ESTIMATE);

  double in_energy = generate(slab, nx, ny, nzl, z0, 0), out_energy = 0;
  double chk_re = 0, chk_im = 0, comm = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++) {
    fftw_execute(plan2d);                                           /* 1 */
    for (int d = 0; d < p; d++)                                     /* 2 */
      for (int zl = 0; zl < nzl; zl++)
        memcpy(sendbuf + d * block + (size_t)zl * nyl * nx, slab + ((size_t)zl * ny + d * nyl) * nx,
               sizeof(fftw_complex) * nyl * nx);
    double c0 = MPI_Wtime();                                        /* 3 */
    MPI_Request req = MPI_REQUEST_NULL;
    if (a.mpi3)
      MPI_Ialltoall(sendbuf, (int)(2 * block), MPI_DOUBLE, recvbuf, (int)(2 * block), MPI_DOUBLE,
                    MPI_COMM_WORLD, &req);
    else
      MPI_Alltoall(sendbuf, (int)(2 * block), MPI_DOUBLE, recvbuf, (int)(2 * block), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    comm += MPI_Wtime() - c0;
    double next_energy = 0;                                         /* 4 */
    if (it + 1 < iters) next_energy = generate(slab, nx, ny, nzl, z0, it + 1);
    if (a.mpi3) {                                                   /* 5 */
      double w0 = MPI_Wtime();
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      comm += MPI_Wtime() - w0;
    }
    for (int i = 0; i < p; i++) {
      int s = block_at(a.order, i, p);
      const fftw_complex *src = recvbuf + s * block;
      for (int zl = 0; zl < nzl; zl++)
        for (int yl = 0; yl < nyl; yl++)
          for (int x = 0; x < nx; x++)
            zbuf[((size_t)yl * nx + x) * nz + s * nzl + zl] = src[((size_t)zl * nyl + yl) * nx + x];
    }
    fftw_execute(plan1d);                                           /* 6 */
    out_energy = 0;
    for (size_t j = 0; j < local; j++) {
      double w = (double)((j + (size_t)rank * local) % 1021 + 1);
      chk_re += w * creal(zbuf[j]);
      chk_im += w * cimag(zbuf[j]);
      out_energy += creal(zbuf[j]) * creal(zbuf[j]) + cimag(zbuf[j]) * cimag(zbuf[j]);
    }
    if (it + 1 < iters) in_energy = next_energy;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double elapsed = MPI_Wtime() - t0;

  /* Summed on rank 0 in rank order, so the digits do not depend on MPI's reduction order. */
  double mine[4] = {chk_re, chk_im, in_energy, out_energy}, *all = NULL;
  if (rank == 0) all = malloc(sizeof(double) * 4 * p);
  MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double re = 0, im = 0, ein = 0, eout = 0;
    for (int r = 0; r < p; r++) re += all[4 * r], im += all[4 * r + 1], ein += all[4 * r + 2], eout += all[4 * r + 3];
    double n = (double)nx * ny * nz;
    int verified = fabs(eout - n * ein) <= 1e-9 * n * ein;
    printf("result kernel=ft class=%c ranks=%d mode=%s order=%s iters=%d grid=%dx%dx%d block_bytes=%zu "
           "buffers=%s time_s=%.6f comm_s=%.6f checksum=%.15e,%.15e verified=%s\n",
           a.cls, p, a.mpi3 ? "mpi3" : "blocking", order_name(a.order), iters, nx, ny, nz,
           block * sizeof(fftw_complex), a.page_aligned ? "page" : "malloc", elapsed, comm, re, im, verified ? "yes" : "no");
    free(all);
  }
  fftw_destroy_plan(plan2d);
  fftw_destroy_plan(plan1d);
  fftw_free(slab);
  fftw_free(zbuf);
  free(sendbuf);
  free(recvbuf);
  MPI_Finalize();
  return 0;
}
