#!/usr/bin/env bash
# build-heffte.sh: heFFTe 2.4.1 (FFTW backend) and its benchmark speed3d_c2c, with MPICH.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="heFFTe 2.4.1"
DEFAULT_COMMIT=6e16996e5a3eb65c60fd62fd4d93c4b2df833033   # tag v2.4.1
TARGETS="speed3d_c2c"

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Configures heFFTe with CMake (FFTW backend, static library, Release) against Debian's MPICH
(mpicc.mpich/mpicxx.mpich, not Open MPI's wrappers) and builds the benchmark speed3d_c2c.

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; executables go to DIR/bin
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT, tag v2.4.1)
  --targets "LIST"  benchmarks to build (default "$TARGETS"; also speed3d_r2c, speed3d_r2r)
  -j, --jobs N      parallel build jobs (default: nproc)
  -h, --help        this text

Installs missing Debian packages with apt-get: cmake, g++, libfftw3-dev, mpich, libmpich-dev.
EOF
}

parse_args "$@"
need_packages make cmake g++ libfftw3-dev mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
[ -f "$OUT/src/CMakeLists.txt" ] && grep -q 'project(.*Heffte' "$OUT/src/CMakeLists.txt" ||
  die "the source has no heFFTe CMakeLists.txt: is --src heFFTe?"

rm -rf "$OUT/build"
log "configuring (log: $OUT/cmake.log)"
# Both MPICH and Open MPI are installed: name MPICH's wrappers everywhere FindMPI looks, so
# that it cannot pick Open MPI's mpicxx.
CC=mpicc.mpich CXX=mpicxx.mpich cmake -S "$OUT/src" -B "$OUT/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=mpicc.mpich -DCMAKE_CXX_COMPILER=mpicxx.mpich \
  -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich \
  -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich)" \
  -DBUILD_SHARED_LIBS=OFF \
  -DHeffte_ENABLE_FFTW=ON -DHeffte_ENABLE_TESTING=ON \
  >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log" >&2; die "cmake failed (log: $OUT/cmake.log)"; }

# The MPI found must be MPICH's.
grep -E '^MPI_CXX_(COMPILER|LIB_NAMES|INCLUDE_PATH)' "$OUT/build/CMakeCache.txt" >"$OUT/mpi-found.txt" || true
grep -qi openmpi "$OUT/mpi-found.txt" && die "CMake found Open MPI: $(cat "$OUT/mpi-found.txt")"

for t in $TARGETS; do
  build_target "$OUT/build" "$t" "$OUT/build-$t.log"
  install_executable "$OUT/build/benchmarks/$t" "$t"
done
write_provenance
