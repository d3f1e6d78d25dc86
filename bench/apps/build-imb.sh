#!/usr/bin/env bash
# build-imb.sh: Intel MPI Benchmarks (IMB-MPI1) with MPICH.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="Intel MPI Benchmarks 2021.11 (IMB-MPI1)"
DEFAULT_COMMIT=1a7cada09754be3ccf60c2698305a4c020b52e28   # tag IMB-v2021.11

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH]

Builds IMB-MPI1 (make IMB-MPI1 CC=mpicc.mpich CXX=mpicxx.mpich).

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; the executable goes to DIR/bin/IMB-MPI1
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT, IMB-v2021.11)
  -j, --jobs N      parallel make jobs (default: nproc)
  -h, --help        this text

Installs missing Debian packages with apt-get: make, gcc, g++, mpich, libmpich-dev.
EOF
}

parse_args "$@"
need_packages make gcc g++ mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
[ -f "$OUT/src/Makefile" ] && [ -d "$OUT/src/src_cpp" ] ||
  die "the source has no Makefile or src_cpp: is --src the Intel MPI Benchmarks?"

# IMB's makefile adds -Werror; MPICH 4 marks MPI_Info_get and friends deprecated (MPI-4.0),
# which this release still calls: keep those warnings from failing the build.
log "building IMB-MPI1 (log: $OUT/make.log)"
make -C "$OUT/src" -j "$JOBS" IMB-MPI1 CC=mpicc.mpich CXX=mpicxx.mpich \
  CXXFLAGS="-Wno-error=deprecated-declarations" CFLAGS="-Wno-error=deprecated-declarations" \
  >"$OUT/make.log" 2>&1 || { tail -30 "$OUT/make.log" >&2; die "make IMB-MPI1 failed (log: $OUT/make.log)"; }
[ -x "$OUT/src/IMB-MPI1" ] || die "no IMB-MPI1 after the build"
mkdir -p "$OUT/bin"
cp "$OUT/src/IMB-MPI1" "$OUT/bin/"
write_provenance
