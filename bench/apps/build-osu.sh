#!/usr/bin/env bash
# build-osu.sh: OSU Micro-Benchmarks 7.2 (the blocking collectives) with MPICH.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="OSU Micro-Benchmarks 7.2"
DEFAULT_COMMIT=b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0   # branch release/7.2
TARGETS="osu_alltoall osu_alltoallv osu_bcast"

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Runs the release's configure with CC=mpicc.mpich CXX=mpicxx.mpich and builds the blocking
collective benchmarks (c/mpi/collective, which compiles the utility code it uses).

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; executables go to DIR/bin
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT, release/7.2)
  --targets "LIST"  executables to copy to DIR/bin (default "$TARGETS")
  -j, --jobs N      parallel make jobs (default: nproc)
  -h, --help        this text

Installs missing Debian packages with apt-get: make, gcc, g++, mpich, libmpich-dev.
EOF
}

parse_args "$@"
need_packages make gcc g++ mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
[ -x "$OUT/src/configure" ] && [ -d "$OUT/src/c/mpi/collective" ] ||
  die "the source has no configure or c/mpi/collective: is --src OSU 7.x?"

cd "$OUT/src"
# git archive does not keep timestamps in a way make trusts for autotools outputs: make the
# generated files newer than their inputs so that make does not try to rerun automake.
find . \( -name configure -o -name 'Makefile.in' -o -name aclocal.m4 -o -name 'config.h.in' \) \
  -exec touch {} +
log "configuring (log: $OUT/configure.log)"
./configure CC=mpicc.mpich CXX=mpicxx.mpich --prefix="$OUT/install" >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log" >&2; die "configure failed (log: $OUT/configure.log)"; }
log "building (log: $OUT/make.log)"
make -C c/mpi/collective -j "$JOBS" >"$OUT/make.log" 2>&1 ||
  { tail -30 "$OUT/make.log" >&2; die "make failed (log: $OUT/make.log)"; }

mkdir -p "$OUT/bin"
for t in $TARGETS; do
  f=$(find c/mpi/collective -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] || die "no executable $t after the build"
  cp "$f" "$OUT/bin/"
done
write_provenance
