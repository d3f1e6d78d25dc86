#!/usr/bin/env bash
# build-minivite.sh: miniVite (ECP-ExaGraph: one phase of distributed Louvain community
# detection) with MPICH, its vertex-community exchanges on MPI collectives.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="miniVite"
DEFAULT_COMMIT=4cbf5beb58c64c67ef3bb5b31305bb65d713b8b8   # master

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Compiles miniVite's main.cpp with mpicxx.mpich -std=c++11 -O3 -fopenmp -DPRINT_DIST_STATS, as
upstream's Makefile does for its Cray wrapper (CC), and -DUSE_MPI_COLLECTIVES: the
vertex-community exchanges become MPI_Alltoall of the counts, then MPI_Alltoallv with uneven
counts, instead of its default nonblocking point-to-point.

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of it
  --out DIR         build folder; the executable goes to DIR/bin/miniVite
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT)
  -j, --jobs N      accepted (one source file)
  -h, --help        this text

Installs missing Debian packages with apt-get: g++, mpich, libmpich-dev.  Ends with a short
checked run (mpiexec.mpich -n 4 miniVite -l -n 4096).
EOF
}

parse_args "$@"
need_packages g++ mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
[ -f "$OUT/src/main.cpp" ] && grep -q USE_MPI_COLLECTIVES "$OUT/src/dspl.hpp" 2>/dev/null ||
  die "the source has no main.cpp and dspl.hpp with USE_MPI_COLLECTIVES: is --src miniVite?"

log "compiling (log: $OUT/make.log)"
mpicxx.mpich -std=c++11 -O3 -fopenmp -DPRINT_DIST_STATS -DUSE_MPI_COLLECTIVES \
  -o "$OUT/src/miniVite" "$OUT/src/main.cpp" >"$OUT/make.log" 2>&1 ||
  { tail -30 "$OUT/make.log" >&2; die "compiling failed (log: $OUT/make.log)"; }
install_executable "$OUT/src/miniVite" miniVite
# The collectives build calls MPI_Alltoallv; upstream's default build does not.
calls_mpi "$OUT/bin/miniVite" MPI_Alltoallv || die "miniVite calls no MPI_Alltoallv: not the collectives build?"
write_provenance
CHECK_LINE='Modularity, #Iterations' OMP_NUM_THREADS=1 check_run mpiexec.mpich -n 4 "$OUT/bin/miniVite" -l -n 4096
