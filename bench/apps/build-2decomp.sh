#!/usr/bin/env bash
# build-2decomp.sh: 2DECOMP&FFT (FFTW backend) and its example fft_c2c_x, twice, with MPICH:
# the default build (MPI_Alltoallv in the transposes) and -DEVEN=ON (MPI_Alltoall).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="2DECOMP&FFT 2.2.beta+29 (dev)"
DEFAULT_COMMIT=a9ed2af1f6e0b4df91c84654f1655e8158a5dd7a   # dev branch, git describe v2.2.beta-29-ga9ed2af
TARGETS="fft_c2c_x"
BUILDS="alltoallv even"
FFLAGS_RELEASE="-O2"

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Configures 2DECOMP&FFT with CMake (FFT_Choice=fftw_f03: FFTW's Fortran 2003 interface, double
precision, static library, Release) with mpif90.mpich (not Open MPI's wrapper) and builds the
example fft_c2c_x (forward and backward 3-D c2c FFTs on a p_row x p_col pencil grid, checked
against the input), once per build:

  alltoallv  the default: the transposes call MPI_Alltoallv   -> DIR/bin/TARGET
  even       -DEVEN=ON (padded transposes): MPI_Alltoall      -> DIR/bin/TARGET_even

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; executables go to DIR/bin
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT)
  --targets "LIST"  examples to build (default "$TARGETS"; also fft_r2c_x, fft_c2c_z, ...)
  --builds "LIST"   builds to make (default "$BUILDS")
  --fflags "FLAGS"  Fortran optimisation flags (default "$FFLAGS_RELEASE"; upstream's -O3 -march=native
                    miscompiles the MPI_Alltoallv displacements with gfortran 12.2)
  -j, --jobs N      parallel build jobs (default: nproc)
  -h, --help        this text

Installs missing Debian packages with apt-get: cmake, gfortran, libfftw3-dev, mpich,
libmpich-dev.  Upstream's CMake fetches a FindFFTW module from github
(egpbos/findfftw) at configure time; this script puts a small FindFFTW.cmake of its own in
its place (in the unpacked copy), so that nothing is downloaded.
EOF
}

handle_option() {
  case "$1" in
    --builds) BUILDS=$2 ;;
    --fflags) FFLAGS_RELEASE=$2 ;;
    *) return 1 ;;
  esac
}

parse_args "$@"
need_packages make cmake gcc gfortran libfftw3-dev mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
fftcmake=$OUT/src/cmake/fft/fft.cmake
[ -f "$OUT/src/CMakeLists.txt" ] && grep -q 'project(decomp2d' "$OUT/src/CMakeLists.txt" &&
  [ -f "$fftcmake" ] || die "the source has no 2DECOMP&FFT CMakeLists.txt: is --src 2decomp-fft?"

# Our FindFFTW: the variables upstream's src/CMakeLists.txt reads from egpbos/findfftw's.
mkdir -p "$OUT/cmake-findfftw"
cat >"$OUT/cmake-findfftw/FindFFTW.cmake" <<'EOF'
# written by build-2decomp.sh: in place of https://github.com/egpbos/findfftw (not fetched)
find_path(FFTW_INCLUDE_DIRS NAMES fftw3.h fftw3.f03 HINTS ${FFTW_ROOT}/include)
find_library(FFTW_DOUBLE_LIB NAMES fftw3 HINTS ${FFTW_ROOT}/lib)
find_library(FFTW_FLOAT_LIB NAMES fftw3f HINTS ${FFTW_ROOT}/lib)
if(FFTW_DOUBLE_LIB)
  set(FFTW_DOUBLE_LIB_FOUND TRUE)
endif()
if(FFTW_FLOAT_LIB)
  set(FFTW_FLOAT_LIB_FOUND TRUE)
endif()
set(FFTW_LIBRARIES ${FFTW_DOUBLE_LIB} ${FFTW_FLOAT_LIB})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FFTW REQUIRED_VARS FFTW_INCLUDE_DIRS FFTW_DOUBLE_LIB FFTW_FLOAT_LIB)
EOF
# Replace the download (configure_file ... set(findFFTW_DIR ...)) by our module's folder.
OUT_FINDFFTW=$OUT/cmake-findfftw perl -0pi -e '
  s{configure_file\(\$\{CMAKE_SOURCE_DIR\}/cmake/fft/downloadFindFFTW\.cmake\.in.*?set\(findFFTW_DIR [^\n]*\)}
   {set(findFFTW_DIR "$ENV{OUT_FINDFFTW}")  # build-2decomp.sh: no download}s' "$fftcmake"
grep -q 'build-2decomp.sh: no download' "$fftcmake" && ! grep -q 'downloadFindFFTW' "$fftcmake" ||
  die "could not replace the FindFFTW download in $fftcmake (has upstream changed it?)"

mkdir -p "$OUT/bin"
for b in $BUILDS; do
  case "$b" in
    alltoallv) even=OFF suffix="" want=mpi_alltoallv_ not=mpi_alltoall_ ;;
    even)      even=ON  suffix=_even want=mpi_alltoall_ not=mpi_alltoallv_ ;;
    *) die "unknown build '$b' (alltoallv, even)" ;;
  esac
  bdir=$OUT/build-$b
  rm -rf "$bdir"
  log "configuring the $b build, EVEN=$even (log: $OUT/cmake-$b.log)"
  # Both MPICH and Open MPI are installed: name MPICH's wrapper wherever FindMPI looks.
  FC=mpif90.mpich cmake -S "$OUT/src" -B "$bdir" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_Fortran_COMPILER=mpif90.mpich -DMPI_Fortran_COMPILER=mpif90.mpich \
    -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich)" \
    -DFFT_Choice=fftw_f03 -DEVEN="$even" -DBUILD_TESTING=ON -DBUILD_SHARED_LIBS=OFF \
    >"$OUT/cmake-$b.log" 2>&1 || { tail -30 "$OUT/cmake-$b.log" >&2; die "cmake failed (log: $OUT/cmake-$b.log)"; }
  # -O2, not upstream's Release flags -O3 -march=native: gfortran 12.2 at -O3 leaves garbage
  # in y1disp(1) and z2disp(1) (prepare_buffer in decomp_2d.f90), and the MPI_Alltoallv of
  # the first transpose then reads outside its buffer.  Upstream forces its flags into the
  # cache on the first configure only (FLAGS_SET), so a second configure can set them.
  cmake -S "$OUT/src" -B "$bdir" -DCMAKE_Fortran_FLAGS_RELEASE="$FFLAGS_RELEASE" >>"$OUT/cmake-$b.log" 2>&1 ||
    { tail -30 "$OUT/cmake-$b.log" >&2; die "cmake failed (log: $OUT/cmake-$b.log)"; }
  grep -qx "CMAKE_Fortran_FLAGS_RELEASE:STRING=$FFLAGS_RELEASE" "$bdir/CMakeCache.txt" ||
    die "could not set CMAKE_Fortran_FLAGS_RELEASE=$FFLAGS_RELEASE (log: $OUT/cmake-$b.log)"
  grep -q '^FFTW_DOUBLE_LIB:FILEPATH=/' "$bdir/CMakeCache.txt" ||
    die "CMake did not find FFTW (log: $OUT/cmake-$b.log)"
  grep -E '^MPI_Fortran_(COMPILER|LIB_NAMES|ADDITIONAL_INCLUDE_DIRS)' "$bdir/CMakeCache.txt" \
    >"$OUT/mpi-found-$b.txt" || true
  grep -qi openmpi "$OUT/mpi-found-$b.txt" && die "CMake found Open MPI: $(cat "$OUT/mpi-found-$b.txt")"

  build_target "$bdir" decomp2d "$OUT/build-$b.log"
  # The transposes must call the collective this build is for, and not the other one.
  lib=$(find "$bdir" -name libdecomp2d.a | head -1)
  [ -n "$lib" ] || die "no libdecomp2d.a in $bdir"
  syms=$(nm -u "$lib" 2>/dev/null | awk '{print $NF}' | sort -u)
  grep -qx "$want" <<<"$syms" && ! grep -qx "$not" <<<"$syms" ||
    die "$b build: libdecomp2d.a should call $want and not $not"

  for t in $TARGETS; do
    build_target "$bdir" "$t" "$OUT/build-$b-$t.log"
    install_executable "$bdir/bin/$t" "$t$suffix"
  done
done

# A short run of each fft_c2c_x built (4 ranks, 2 x 2 grid, 32^3, 1 iteration): the example
# checks its own result and prints "fft_c2c_x completed" only when it is right.
rm -rf "$OUT/check"; mkdir -p "$OUT/check"
for b in $BUILDS; do
  case " $TARGETS " in *" fft_c2c_x "*) ;; *) break ;; esac
  exe=$OUT/bin/fft_c2c_x
  [ "$b" = even ] && exe+=_even
  log "checking ${exe##*/}: mpiexec.mpich -n 4 ${exe##*/} 2 2 32 32 32 1 (log: $OUT/check-$b.log)"
  (cd "$OUT/check" && timeout 300 mpiexec.mpich -n 4 "$exe" 2 2 32 32 32 1) >"$OUT/check-$b.log" 2>&1 &&
    grep -q 'fft_c2c_x completed' "$OUT/check-$b.log" ||
    { tail -20 "$OUT/check-$b.log" >&2; die "${exe##*/} failed its check (log: $OUT/check-$b.log)"; }
done
write_provenance
