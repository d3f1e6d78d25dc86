# shellcheck shell=bash
# common.sh: shared by build-*.sh (sourced, not run).  Argument parsing, package checks,
# MPICH compiler wrappers, unpacking the source at the documented commit, building a CMake
# target and installing an executable built with MPICH.
#
# A script sets PROGRAM and DEFAULT_COMMIT (and TARGETS, its default, where it takes
# --targets "LIST"), defines usage() (and optionally handle_option NAME VALUE for its own
# options, returning 1 for unknown ones), then calls parse_args "$@".

die() { echo "${0##*/}: error: $*" >&2; exit 1; }
log() { echo "${0##*/}: $*" >&2; }

SRC="" OUT="" COMMIT="" JOBS=$(nproc 2>/dev/null || echo 2)

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --src) SRC=${2:?--src needs a folder}; shift 2 ;;
      --out) OUT=${2:?--out needs a folder}; shift 2 ;;
      --commit) COMMIT=${2:?--commit needs a hash}; shift 2 ;;
      -j|--jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
      --targets) [ -n "${TARGETS+set}" ] && [ $# -ge 2 ] ||
                   die "unknown option '$1' or missing value (see --help)"
                 TARGETS=$2; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      --*) declare -F handle_option >/dev/null && [ $# -ge 2 ] && handle_option "$1" "$2" ||
             die "unknown option '$1' or missing value (see --help)"
           shift 2 ;;
      *) die "unexpected argument '$1' (see --help)" ;;
    esac
  done
  [ -n "$SRC" ] || die "--src is required (see --help)"
  [ -n "$OUT" ] || die "--out is required (see --help)"
  [ -d "$SRC" ] || die "--src '$SRC' is not a folder"
  SRC=$(cd "$SRC" && pwd)
  mkdir -p "$OUT" || die "cannot create --out '$OUT'"
  OUT=$(cd "$OUT" && pwd)
  case "$OUT/" in "$SRC"/*) die "--out must not be inside --src" ;; esac
  [ -n "$COMMIT" ] || COMMIT=$DEFAULT_COMMIT
  [[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive number"
}

# Builds CMake target $2 in the build folder $1, its output in the log $3 (its tail shown when
# the build fails).
build_target() {
  local dir=$1 target=$2 logf=$3
  log "building $target (log: $logf)"
  cmake --build "$dir" --target "$target" -j "$JOBS" >"$logf" 2>&1 ||
    { tail -30 "$logf" >&2; die "building $target failed (log: $logf)"; }
}

# Copies the executable $1 to $OUT/bin/$2, refusing one that links Open MPI's libmpi.
install_executable() {
  local exe=$1 name=$2
  [ -x "$exe" ] || die "no $exe after the build"
  mkdir -p "$OUT/bin"
  cp "$exe" "$OUT/bin/$name"
  ! ldd "$OUT/bin/$name" | grep -q 'libmpi\.so' ||
    die "$name links Open MPI's libmpi: $(ldd "$OUT/bin/$name" | grep 'libmpi\.so')"
}

# Install the Debian packages in $@ that are missing (apt-get, needs root).
need_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]} (install them, or run as root)"
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
    die "apt-get install ${missing[*]} failed (try apt-get update first)"
}

# The MPICH wrappers, by their explicit names: plain mpicc may be Open MPI's.
check_mpich() {
  local w
  for w in mpicc.mpich mpicxx.mpich mpif90.mpich mpiexec.mpich; do
    command -v "$w" >/dev/null || die "no $w (Debian packages mpich, libmpich-dev)"
  done
  mpicc.mpich -show 2>/dev/null | grep -q mpich ||
    die "mpicc.mpich does not link MPICH: $(mpicc.mpich -show 2>&1)"
}

# Unpack the source into $1 (emptied first).  From a git folder (bare or a checkout) the
# commit $COMMIT is exported with git archive; a plain folder is copied as it is.
SOURCE_DESC=""
unpack_source() {
  local dest=$1 gitdir=""
  # A bare git folder (HEAD, objects/; a config file is optional) or a checkout's .git.
  if [ -f "$SRC/HEAD" ] && [ -d "$SRC/objects" ] && git --git-dir="$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    gitdir=$SRC
  elif [ -e "$SRC/.git" ]; then
    gitdir=$(git -C "$SRC" rev-parse --absolute-git-dir 2>/dev/null) || die "'$SRC/.git' is not a git folder"
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  if [ -n "$gitdir" ]; then
    command -v git >/dev/null || die "git is needed to export from '$SRC'"
    local full
    full=$(git --git-dir="$gitdir" rev-parse --verify --quiet "$COMMIT^{commit}") ||
      die "commit $COMMIT is not in '$SRC' (fetch it, or pass --commit)"
    [ "$full" = "$DEFAULT_COMMIT" ] || log "warning: building $full, not the documented $DEFAULT_COMMIT"
    git --git-dir="$gitdir" archive --format=tar "$full" | tar -x -C "$dest" ||
      die "git archive $full failed"
    SOURCE_DESC="git $SRC, commit $full"
  else
    [ "$COMMIT" = "$DEFAULT_COMMIT" ] ||
      log "warning: --commit $COMMIT ignored: '$SRC' is a plain folder, built as it is"
    cp -a "$SRC/." "$dest/"
    SOURCE_DESC="plain folder $SRC (assumed to be commit $DEFAULT_COMMIT)"
  fi
  log "source: $SOURCE_DESC -> $dest"
}

# Succeeds where the executable $1 calls the MPI function $2 (an undefined dynamic symbol).  The
# symbols are read whole first: grep -q would end the pipe early, and pipefail count nm's SIGPIPE.
calls_mpi() {
  local syms
  syms=$(nm -D -u "$1" 2>/dev/null | awk '{print $NF}')
  grep -qx "$2" <<<"$syms"
}
# Runs the short check "$@" (its output in $OUT/check.log, 300 s at most) and shows the line of
# the log matching the regex $CHECK_LINE, or its tail and an error where the run failed or printed
# no such line.
check_run() {
  log "checking: ${*/#$OUT\/bin\//}"
  timeout 300 "$@" >"$OUT/check.log" 2>&1 && grep -q "$CHECK_LINE" "$OUT/check.log" ||
    { tail -20 "$OUT/check.log" >&2; die "the check run failed (log: $OUT/check.log)"; }
  log "ok: $(grep -m1 "$CHECK_LINE" "$OUT/check.log")"
}
# OUT/SOURCE.txt: what was built from what, with which compilers.
write_provenance() {
  {
    echo "program: $PROGRAM"
    echo "source: $SOURCE_DESC"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "mpicc.mpich: $(mpicc.mpich -show 2>&1 | head -1)"
    echo "compiler: $(gcc --version | head -1)"
    echo "executables:"
    (cd "$OUT/bin" && ls -1 | sed 's/^/  /')
  } >"$OUT/SOURCE.txt"
  log "done: executables in $OUT/bin (see $OUT/SOURCE.txt)"
}
