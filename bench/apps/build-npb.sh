#!/usr/bin/env bash
# build-npb.sh: NAS Parallel Benchmarks 3.4 (MPI) with Debian's MPICH.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

PROGRAM="NPB 3.4 MPI"
DEFAULT_COMMIT=6f8ec75d6951629d2eb7e3001433295d407230aa
KERNELS="is ft cg mg lu ep"
CLASSES="A B"

usage() {
  cat <<EOF
usage: ${0##*/} --src GIT_DIR_OR_FOLDER --out DIR [--commit HASH] [options]

Builds the MPI versions of NPB 3.4 (folder NPB3.4-MPI of the source) with mpif90.mpich and
mpicc.mpich at -O2.  The process count is chosen at run time (NPB 3.4), so one executable
per kernel and class serves any rank count the kernel accepts (4 here).

  --src DIR         a git folder (bare or a checkout) holding commit HASH, or a plain copy of
                    that commit (the repository root, or its NPB3.4-MPI folder)
  --out DIR         build folder; executables go to DIR/bin (<kernel>.<class>.x)
  --commit HASH     commit to export from a git --src (default $DEFAULT_COMMIT)
  --kernels "LIST"  kernels to build (default "$KERNELS")
  --classes "LIST"  problem classes (default "$CLASSES")
  -j, --jobs N      ignored (the NPB makefiles build serially)
  -h, --help        this text

Installs missing Debian packages with apt-get: gfortran, mpich, libmpich-dev, make.
EOF
}

handle_option() {
  case "$1" in
    --kernels) KERNELS=$2 ;;
    --classes) CLASSES=$2 ;;
    *) return 1 ;;
  esac
}

parse_args "$@"
need_packages make gcc gfortran mpich libmpich-dev
check_mpich

unpack_source "$OUT/src"
if [ -f "$OUT/src/NPB3.4-MPI/config/make.def.template" ]; then
  npb=$OUT/src/NPB3.4-MPI
elif [ -f "$OUT/src/config/make.def.template" ]; then
  npb=$OUT/src
else
  die "no NPB3.4-MPI/config/make.def.template in the source: is --src NPB 3.4?"
fi

# gfortran >= 10 rejects the MPI calls with mismatched buffer types unless told otherwise.
fflags="-O2"
gfv=$(gfortran -dumpversion | cut -d. -f1)
[ "$gfv" -ge 10 ] && fflags+=" -fallow-argument-mismatch"

cat >"$npb/config/make.def" <<EOF
# written by build-npb.sh (from make.def.template)
MPIFC = mpif90.mpich
FLINK = \$(MPIFC)
FMPI_LIB =
FMPI_INC =
FFLAGS = $fflags
FLINKFLAGS = \$(FFLAGS)
MPICC = mpicc.mpich
CLINK = \$(MPICC)
CMPI_LIB =
CMPI_INC =
CFLAGS = -O2
CLINKFLAGS = \$(CFLAGS)
CC = gcc -g
BINDIR = ../bin
CONVERTFLAG = -DFORTRAN_REC_SIZE=1
RAND = randi8
EOF

mkdir -p "$OUT/bin" "$npb/bin"   # bin/ is not in the repository
for k in $KERNELS; do
  case "$k" in is|ft|cg|mg|lu|ep|bt|sp) ;; *) die "unknown kernel '$k'" ;; esac
  for c in $CLASSES; do
    case "$c" in S|W|A|B|C|D|E) ;; *) die "unknown class '$c'" ;; esac
    log "building $k class $c"
    make -C "$npb" clean >/dev/null
    # serial: the NPB makefiles race (setparams, Fortran modules) under -j
    make -C "$npb" "$k" CLASS="$c" >"$OUT/make-$k.$c.log" 2>&1 ||
      { tail -30 "$OUT/make-$k.$c.log" >&2; die "make $k CLASS=$c failed (log: $OUT/make-$k.$c.log)"; }
    [ -x "$npb/bin/$k.$c.x" ] || die "make $k CLASS=$c left no $npb/bin/$k.$c.x"
    cp "$npb/bin/$k.$c.x" "$OUT/bin/"
  done
done
write_provenance
