#!/usr/bin/env bash
# build-fftmpi.sh: fftMPI (Sandia's parallel FFT library, the one LAMMPS's KSpace FFTs come
# from) and its 3-D test driver test3d, with MPICH and FFTW 3.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="fftMPI"
DEFAULT_COMMIT=3c2b939e12734282923b459268990364c116be48   # master (2022-06-06)

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Compiles fftMPI's 3-D library (src/fft3d.cpp, remap3d.cpp, memory.cpp, error.cpp) and its test
driver test/test3d.cpp with mpicxx.mpich -O3, FFTW 3 for the 1-D FFTs (-DFFT_FFTW3, double
precision, -DFFT_MEMALIGN=64), as upstream's Makefiles do with fft=fftw3.  With its option
'-c all' the remaps between bricks and pencils call MPI_Alltoallv on a communicator of the ranks
that exchange data (MPI_Comm_create, once per plan); the default ('-c point') uses point-to-point.

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; the executable goes to DIR/bin/test3d
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT)
  -j, --jobs N      accepted (five source files, one compiler call: a few seconds)
  -h, --help        this text

Installs missing Debian packages with apt-get: g++, libfftw3-dev, mpich, libmpich-dev.  Ends with
a short checked run (mpiexec.mpich -n 4 test3d -g 32 32 32 -n 2 -c all -i 82783 -v).
EOF
}

parse_args "$@"
need_packages g++ libfftw3-dev mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
[ -f "$OUT/src/src/remap3d.cpp" ] && [ -f "$OUT/src/test/test3d.cpp" ] &&
  grep -q MPI_Alltoallv "$OUT/src/src/remap3d.cpp" ||
  die "the source has no src/remap3d.cpp calling MPI_Alltoallv and test/test3d.cpp: is --src fftmpi?"

log "compiling (log: $OUT/make.log)"
(cd "$OUT/src" && mpicxx.mpich -O3 -DFFT_FFTW3 -DFFT_DOUBLE -DFFT_MEMALIGN=64 -Isrc -o test3d \
   src/fft3d.cpp src/remap3d.cpp src/memory.cpp src/error.cpp test/test3d.cpp -lfftw3 -lm) >"$OUT/make.log" 2>&1 ||
  { tail -30 "$OUT/make.log" >&2; die "compiling failed (log: $OUT/make.log)"; }
install_executable "$OUT/src/test3d" test3d
calls_mpi "$OUT/bin/test3d" MPI_Alltoallv || die "test3d calls no MPI_Alltoallv (its remaps' collective mode)"
write_provenance
CHECK_LINE='^Max error = ' check_run mpiexec.mpich -n 4 "$OUT/bin/test3d" -g 32 32 32 -n 2 -c all -i 82783 -v
