"""The corpus: third-party MPI programs that run.py times (see README.md).

Each entry names the executable relative to the bin/ folder of its build (BUILD/bin/EXE under
the apps folder, /work/apps by default: npb/, heffte/, 2decomp/, minivite/, fftmpi/, osu/, imb/ as the build-*.sh
scripts make them), its arguments, the rank count, the collectives it calls, how its output is
verified and which time it reports.  `Program.at(ranks)` gives it on another rank count (run.py
--ranks): the arguments that depend on the count (2DECOMP&FFT's process grid, IMB's -npmin) made
for it, or an error where the program cannot be verified there (miniVite).

Verification is one of
  regex:   the output must match `verify_regex` (and the exit code be 0);
  heffte:  speed3d prints "Max error: E" and "Tolerance: T" and passes when E <= T (it prints
           "ERROR: observed error ... exceeds the tolerance" and still exits 0 otherwise);
  max_error: group 1 of `verify_regex` (the program's own error after its check) at most
           `tolerance` (fftMPI's test3d -v prints the error and exits 0 whatever it is);
  exit:    exit code 0 and `verify_regex` (a line showing the benchmark ran to its end).

`times_call_only`: OSU and IMB time only the collective call itself, so their reported
latencies say nothing about what a library gains by overlapping; run.py times them by the
whole run's wall time and never uses their numbers.

`reported_regex` (group 1, seconds, times `reported_scale`) is the program's own timing of
its main loop, when it prints one.

`long`: takes minutes on 2 emulated nodes; run.py skips it unless named with --only or
given --long.
"""

from dataclasses import dataclass, field, replace
import re

# MPI collectives run.py can tune (MPIR_CVAR_<NAME>_INTRA_ALGORITHM) and libtnbc.so intercepts.
TUNABLE = ("alltoall", "alltoallv", "bcast")


@dataclass(frozen=True)
class Program:
    name: str
    build: str                     # folder under the apps folder: npb, heffte, 2decomp, minivite, fftmpi, osu, imb
    exe: str                       # relative to BUILD/bin
    args: tuple = ()
    ranks: int = 4
    collectives: tuple = ()        # MPI collectives it calls (lower case, without MPI_)
    tune: tuple = None             # collectives whose algorithm run.py tunes for "best"
                                   # (default: those of TUNABLE it calls)
    calls: str = ""                # how often, where known
    verify: str = "regex"          # regex | heffte | max_error | exit
    verify_regex: str = ""
    tolerance: float = 0.0         # max_error: group 1 of verify_regex at most this
    reported_regex: str = ""       # program-reported time (group 1)
    reported_scale: float = 1.0    # multiply group 1 by this to get seconds of the timed loop
    times_call_only: bool = False
    long: bool = False
    env: dict = field(default_factory=dict)   # variables every rank gets (all configurations)
    note: str = ""
    args_at: object = None         # function: rank count -> args, where the args depend on it
    only_at_ranks: str = ""        # why it runs only on `ranks` ranks, where it does
    powers_of_two: bool = False    # runs only on a power-of-two rank count

    def at(self, ranks):
        """This program on `ranks` ranks: its arguments made for that count, its `calls` marked as
        counted at `self.ranks`.  ValueError where it cannot run (or be verified) there."""
        if ranks == self.ranks:
            return self
        if self.only_at_ranks:
            raise ValueError(f"{self.name} runs only on {self.ranks} ranks: {self.only_at_ranks}")
        if self.powers_of_two and (ranks < 1 or ranks & (ranks - 1)):
            raise ValueError(f"{self.name} runs only on a power-of-two rank count, not {ranks}")
        args = self.args_at(ranks) if self.args_at else self.args
        return replace(self, ranks=ranks, args=tuple(args),
                       calls=f"counted on {self.ranks} ranks: {self.calls}" if self.calls else "")

    def tunable(self):
        if self.tune is not None:
            return list(self.tune)
        return [c for c in TUNABLE if c in self.collectives]


NPB_OK = r"Verification\s+=\s+SUCCESSFUL"
NPB_TIME = r"Time in seconds\s+=\s+([0-9.eE+-]+)"


def npb(kernel, cls, collectives, calls, tune, long=False, note=""):
    return Program(
        name=f"npb-{kernel}-{cls}", build="npb", exe=f"{kernel}.{cls}.x",
        collectives=collectives, calls=calls, tune=tune, verify="regex", verify_regex=NPB_OK,
        reported_regex=NPB_TIME, long=long, note=note,
        # NPB's MPI kernels split their grids or keys by powers of two (BT and SP, square
        # counts, are not in the corpus); EP would take any count, refused alike.
        powers_of_two=True)


HEFFTE_TIME = r"Time per run:\s+([0-9.eE+-]+)"


def heffte(name, n, runs, a2a, long=False, note="", extra=(), calls=None):
    """speed3d_c2c; `extra`: more of its options (-slabs, -pencils, -subcomm N ...), whose
    exchanges `calls` describes (default: heFFTe's default reshapes on 4 ranks)."""
    args = ("fftw", "double", str(n), str(n), str(n)) + (("-a2a",) if a2a else ()) + tuple(extra) + (f"-n{runs}",)
    coll = ("alltoall" if a2a else "alltoallv", "barrier", "reduce", "allreduce", "comm_split")
    return Program(
        name=name, build="heffte", exe="speed3d_c2c", args=args, collectives=coll,
        calls=calls or (f"{6 * (runs + 1)} {'MPI_Alltoall' if a2a else 'MPI_Alltoallv'} (3 reshapes per "
                        f"transform, forward+backward, {runs} timed pairs + 1 warm-up pair) on 6 "
                        "sub-communicators (4 of 2 ranks, 2 of 4 ranks)"),
        verify="heffte",
        # "Time per run" is one transform (forward or backward): the timed loop ran 2*runs.
        reported_regex=HEFFTE_TIME, reported_scale=2.0 * runs,
        long=long, env={"OMP_NUM_THREADS": "1"}, note=note)


# fft_c2c_x checks the result (forward then backward, normalised, against the input) and on
# success prints "error / mesh point: E", "Avg time (sec): ..." and "fft_c2c_x completed"; a
# too large error prints the error line and calls MPI_Abort (errorcode int(log10(E)), 0 for
# 0.1 < E < 10: the exit code alone may not say).  The EVEN build prints
# "Padded ALLTOALL optimisation on" at start; the default build must not (else the binaries
# are swapped).
D2D_OK = r"error / mesh point:\s+[0-9.eE+-]+\s+Avg time \(sec\):.*fft_c2c_x completed"


def pencil_grid(ranks):
    """The most nearly square p_row x p_col = ranks with p_row <= p_col (4: 2 x 2, 8: 2 x 4)."""
    p_row = max(d for d in range(1, int(ranks ** 0.5) + 1) if ranks % d == 0)
    return p_row, ranks // p_row


def decomp2d(name, even, n, iters, long=False, note=""):
    coll = "MPI_Alltoall" if even else "MPI_Alltoallv"

    def args_at(ranks):  # p_row p_col nx ny nz ntest
        return (*map(str, pencil_grid(ranks)), str(n), str(n), str(n), str(iters))
    return Program(
        name=name, build="2decomp", exe="fft_c2c_x_even" if even else "fft_c2c_x",
        # a 2 x 2 pencil grid on 4 ranks, every transpose on 2 ranks
        args=args_at(4), args_at=args_at,
        collectives=("alltoall" if even else "alltoallv", "allreduce", "cart_create", "cart_sub",
                     "comm_free"),
        calls=(f"{4 * (iters + 1)} {coll} ({n}^3 complex double: {n ** 3 * 16 / 8 / 2 ** 20:g} MB "
               f"per rank pair; 4 transposes per forward+backward pair, {iters} timed pairs + 1 "
               f"untimed) on 2 two-rank sub-communicators (row and column of the 2 x 2 grid)"),
        verify="regex",
        verify_regex=(r"(?s)Padded ALLTOALL optimisation on.*" if even
                      else r"(?s)\A(?!.*Padded ALLTOALL optimisation on).*") + D2D_OK,
        long=long, note=note)


# miniVite (-l: the graph from its LCG, the same every run; no -p, whose extra edges are seeded
# from the clock) prints the final modularity and the Louvain iterations, the same for every
# run of the same graph on 4 ranks, and the Louvain phase's time.
MINIVITE_OK = r"Modularity, #Iterations: 0\.759529, 18\b"
MINIVITE_TIME = r"Average total time \(in s\), #Processes:\s+([0-9.eE+-]+)"

# fftMPI's test3d with -v compares the grid after its forward and backward FFTs with the grid it
# initialised (-i SEED: random values) and prints "Max error = E"; with -c all its remaps call
# MPI_Alltoallv on a communicator of the ranks that exchange data (MPI_Comm_create once per
# plan).  Its own time: "Time for 3d FFTs = T secs" (the timed loop, set-up excluded).
FFTMPI_ERROR = r"(?m)^Max error = ([0-9.eE+-]+)$"
FFTMPI_TIME = r"(?m)^Time for 3d FFTs = ([0-9.eE+-]+) secs$"


def fftmpi(name, grid, loops, calls, long=False, note=""):
    """test3d: `loops` forward and backward FFTs of a `grid` (3 sizes, products of 2, 3 and 5),
    pencil to pencil, the remaps on MPI_Alltoallv, random values, checked."""
    return Program(
        name=name, build="fftmpi", exe="test3d",
        args=("-g", *map(str, grid), "-n", str(loops), "-m", "0", "-c", "all", "-e", "pencil",
              "-i", "82783", "-v"),
        collectives=("alltoallv", "allreduce", "allgather", "barrier", "comm_create", "comm_free"),
        calls=calls, verify="max_error", verify_regex=FFTMPI_ERROR, tolerance=1e-9,
        reported_regex=FFTMPI_TIME, long=long, note=note)


def imb_alltoall_args(ranks):
    """IMB-MPI1's Alltoall of 1 MiB; -npmin the rank count, so that IMB measures it alone.  -time
    60: IMB gives up on a message size after 10 s by default (it printed "time-out" on 2
    emulated nodes with -iter 50)."""
    return ("-msglog", "20:20", "-iter", "30", "-iter_policy", "off", "-zero_size", "off",
            "-time", "60", "-npmin", str(ranks), "Alltoall")


OSU_SIZE_LINE = r"(?m)^1048576\s+[0-9.]+"

PROGRAMS = [
    npb("is", "A", ("alltoall", "alltoallv", "allreduce", "reduce", "bcast"),
        "11 MPI_Alltoall (4 B per rank pair) + 11 MPI_Alltoallv (~2 MB per rank pair): one "
        "each per ranking, 1 untimed + 10 timed; 1 MPI_Bcast", ("alltoall", "alltoallv")),
    npb("is", "B", ("alltoall", "alltoallv", "allreduce", "reduce", "bcast"),
        "as npb-is-A, 4x the keys (~8 MB per rank pair per MPI_Alltoallv)", ("alltoall", "alltoallv")),
    npb("ft", "A", ("alltoall", "bcast", "barrier", "reduce", "comm_split"),
        "8 MPI_Alltoall of 8 MB per rank pair (6 iterations, set-up and warm-up), "
        "5 small MPI_Bcast, 1 MPI_Barrier", ("alltoall",)),
    npb("ft", "B", ("alltoall", "bcast", "barrier", "reduce", "comm_split"),
        "22 MPI_Alltoall of 32 MB per rank pair (20 iterations, set-up and warm-up)", ("alltoall",), long=True,
        note="minutes on 2 emulated nodes"),
    npb("cg", "A", ("bcast", "barrier", "allreduce", "reduce"),
        "no all-to-all: point-to-point (send/irecv) and small reductions; 1 MPI_Bcast, 1 MPI_Barrier", (),
        note="control: calls no MPI_Alltoall(v)"),
    npb("mg", "A", ("bcast", "barrier", "allreduce", "reduce", "comm_split"),
        "no all-to-all: halo exchanges; 7 small MPI_Bcast, 6 MPI_Barrier", (),
        note="control: calls no MPI_Alltoall(v)"),
    npb("lu", "A", ("bcast", "barrier", "allreduce", "reduce"),
        "no all-to-all: pipelined point-to-point; 10 small MPI_Bcast, 2 MPI_Barrier", (),
        note="control: calls no MPI_Alltoall(v)"),
    npb("ep", "A", ("bcast", "barrier", "allreduce", "reduce"),
        "no all-to-all: compute only, reductions at the end; 1 MPI_Bcast, 1 MPI_Barrier", (),
        note="control: calls no MPI_Alltoall(v)"),
    heffte("heffte-a2a", 64, 50, True,
           note="64^3, not 128^3: 128^3 -n50 takes ~3 min on 2 emulated nodes (heffte-a2a-128)"),
    heffte("heffte-a2av", 64, 50, False, note="as heffte-a2a with MPI_Alltoallv (heFFTe's default)"),
    # Slab reshapes: 4 communicators of all 4 ranks, one reshape each per transform.
    heffte("heffte-a2a-slabs", 64, 50, True, extra=("-slabs",),
           calls="204 MPI_Alltoall of 1 MB (4 reshapes per transform, forward+backward, 50 timed pairs "
                 "+ 1 warm-up pair) on 4 communicators of 4 ranks",
           note="slab decomposition (-slabs), added 2026-11-29: first contact in docs/apps.md"),
    heffte("heffte-a2av-slabs", 64, 50, False, extra=("-slabs",),
           calls="204 MPI_Alltoallv (as heffte-a2a-slabs)",
           note="as heffte-a2a-slabs with MPI_Alltoallv"),
    heffte("heffte-a2a-128", 128, 50, True, long=True, note="minutes on 2 emulated nodes"),
    heffte("heffte-a2av-128", 128, 50, False, long=True, note="minutes on 2 emulated nodes"),
    # 50 pairs, as heFFTe's -n50: start-up (FFTW_MEASURE planning) takes ~4-5 s of a run on
    # one node, and 10 pairs only ~1 s.
    decomp2d("2decomp-c2c", False, 128, 50,
             note="2DECOMP&FFT's default transposes (MPI_Alltoallv)"),
    decomp2d("2decomp-c2c-even", True, 128, 50,
             note="as 2decomp-c2c, built with -DEVEN=ON (padded MPI_Alltoall)"),
    # Louvain on a random geometric graph of 65536 vertices cut in 4 strips: a rank exchanges
    # ghost vertices' communities with its neighbour strips only.  Added 2026-11-29: first
    # contact in docs/apps.md.
    Program(name="minivite", build="minivite", exe="miniVite", args=("-l", "-n", "65536"),
            collectives=("alltoall", "alltoallv", "allreduce", "barrier", "reduce"),
            calls="37 MPI_Alltoall of counts (8 B a rank pair) and 55 MPI_Alltoallv with uneven counts (1-4 KiB "
                  "received a call, none from strips that do not touch): 3 of each per Louvain iteration "
                  "(18), the rest at set-up; MPI_Allreduce",
            verify="regex", verify_regex=MINIVITE_OK, reported_regex=MINIVITE_TIME,
            env={"OMP_NUM_THREADS": "1"},
            only_at_ranks="its verification is the modularity and iteration count of the 4-rank run",
            note="short run of small uneven MPI_Alltoallv, each right after a small MPI_Alltoall"),
    # fftMPI (Sandia; LAMMPS's KSpace FFTs), new to the corpus 2026-11-30: first contact in
    # docs/apps.md.  On 4 ranks its x, y and z pencils lie on 1 x 2 x 2, 2 x 1 x 2 and 2 x 2 x 1
    # grids: x to y and y to z remap within pairs of ranks, z back to x among all 4.
    fftmpi("fftmpi-pencil", (64, 64, 64), 50,
           calls="300 MPI_Alltoallv (3 remaps per transform, forward+backward, 50 pairs; 1 MiB per rank a "
                 "call) on 3 communicators made by MPI_Comm_create: 2 of 2 ranks, 1 of 4"),
    fftmpi("fftmpi-uneven", (75, 81, 90), 50,
           calls="as fftmpi-pencil on a 75 x 81 x 90 grid: odd sizes split unevenly, so the ranks' "
                 "MPI_Alltoallv counts differ (1.0-2.1 MiB a call)",
           note="uneven MPI_Alltoallv counts"),
    # 500 pairs: on unshaped links the 50-pair runs last 1.7 s, plain MPICH's own runs 1.5-2.0 s,
    # and 5 rounds do not resolve 2% (docs/measurements/apps/unshaped-53f6c2f.md).
    fftmpi("fftmpi-pencil-long", (64, 64, 64), 500, long=True,
           calls="as fftmpi-pencil with 500 pairs: 3000 MPI_Alltoallv",
           note="unshaped links: runs long enough to resolve 2%; minutes at 200 Mbit/s"),
    fftmpi("fftmpi-uneven-long", (75, 81, 90), 500, long=True,
           calls="as fftmpi-uneven with 500 pairs: 3000 MPI_Alltoallv",
           note="as fftmpi-pencil-long on the uneven grid"),
    Program(name="osu-alltoall-1M", build="osu", exe="osu_alltoall",
            args=("-m", "1048576:1048576", "-i", "100", "-x", "10"),
            collectives=("alltoall", "barrier", "reduce"),
            calls="110 MPI_Alltoall of 1 MB per rank pair, each followed by MPI_Barrier (112)",
            verify="exit", verify_regex=OSU_SIZE_LINE, times_call_only=True),
    Program(name="osu-alltoallv-1M", build="osu", exe="osu_alltoallv",
            args=("-m", "1048576:1048576", "-i", "100", "-x", "10"),
            collectives=("alltoallv", "barrier", "reduce"),
            calls="110 MPI_Alltoallv of 1 MB per rank pair, each followed by MPI_Barrier (114)",
            verify="exit", verify_regex=OSU_SIZE_LINE, times_call_only=True),
    Program(name="osu-bcast-1M", build="osu", exe="osu_bcast",
            args=("-m", "1048576:1048576", "-i", "100", "-x", "10"),
            collectives=("bcast", "barrier", "reduce"),
            calls="110 MPI_Bcast of 1 MB from rank 0, each followed by MPI_Barrier (111)",
            verify="exit", verify_regex=OSU_SIZE_LINE, times_call_only=True),
    # -c: OSU checks the received data of every call (and adds a barrier and buffer fills
    # between calls); the check that a library returning early still delivers right data.
    Program(name="osu-alltoall-1M-check", build="osu", exe="osu_alltoall",
            args=("-m", "1048576:1048576", "-i", "50", "-x", "5", "-c", "-u", "0"),
            collectives=("alltoall", "barrier", "reduce", "allreduce"),
            calls="55 MPI_Alltoall of 1 MB per rank pair, data checked after each",
            verify="regex", verify_regex=r"(?m)^1048576\s+[0-9.]+\s+Pass\s*$",
            times_call_only=True),
    Program(name="osu-alltoallv-1M-check", build="osu", exe="osu_alltoallv",
            args=("-m", "1048576:1048576", "-i", "50", "-x", "5", "-c", "-u", "0"),
            collectives=("alltoallv", "barrier", "reduce", "allreduce"),
            calls="55 MPI_Alltoallv of 1 MB per rank pair, data checked after each",
            verify="regex", verify_regex=r"(?m)^1048576\s+[0-9.]+\s+Pass\s*$",
            times_call_only=True),
    Program(name="imb-alltoall", build="imb", exe="IMB-MPI1",
            args=imb_alltoall_args(4), args_at=imb_alltoall_args,
            collectives=("alltoall", "barrier", "bcast", "reduce", "allreduce"),
            calls="63 MPI_Alltoall of 1 MB per rank pair (IMB's warm-up and 30 timed), barriers",
            tune=("alltoall",),
            verify="exit", verify_regex=r"(?m)^\s+1048576\s+30\s+[0-9.]+",
            times_call_only=True),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"


def verify(prog, rc, output):
    """(ok, reason) for one run's exit code and combined output."""
    if rc != 0:
        return False, f"exit code {rc}"
    if prog.verify in ("regex", "exit"):
        if prog.verify_regex and not re.search(prog.verify_regex, output):
            return False, f"output does not match {prog.verify_regex!r}"
        return True, "ok"
    if prog.verify == "max_error":
        m = re.search(prog.verify_regex, output)
        if not m:
            return False, f"no error line matching {prog.verify_regex!r}"
        err = float(m.group(1))
        if not err <= prog.tolerance:
            return False, f"max error {err:g} > tolerance {prog.tolerance:g}"
        return True, f"max error {err:.3g} <= {prog.tolerance:g}"
    if prog.verify == "heffte":
        if "ERROR: observed error" in output:
            return False, "heFFTe: error exceeds the tolerance"
        e = re.search(r"Max error:\s+([0-9.eE+-]+)", output)
        t = re.search(r"Tolerance:\s+([0-9.eE+-]+)", output)
        if not e or not t:
            return False, "heFFTe: no 'Max error'/'Tolerance' line"
        err, tol = float(e.group(1)), float(t.group(1))
        if not err <= tol:
            return False, f"heFFTe: max error {err:g} > tolerance {tol:g}"
        return True, f"max error {err:.3g} <= {tol:g}"
    return False, f"unknown verification kind {prog.verify!r}"


def reported_time(prog, output):
    """The program's own time of its main loop in seconds, or None."""
    if not prog.reported_regex:
        return None
    m = re.search(prog.reported_regex, output)
    return float(m.group(1)) * prog.reported_scale if m else None
