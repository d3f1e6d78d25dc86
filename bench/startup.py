#!/usr/bin/env python3
"""What a run pays for the library's start and end: bench/startup (MPI_Init, CALLS rounds of a
barrier and an 8-byte Alltoall, MPI_Finalize) on one node, plain MPICH beside libtnbc.so, in
alternating rounds (the order reversed every second round).

    bench/startup.py --lib build/shim/replay/libtnbc.so --rounds 16

Configurations: plain; mt (plain MPICH asked for MPI_THREAD_MULTIPLE, the level the library asks
for); disable (the library with TNBC_DISABLE=1); tnbc (its defaults); nochoice (every choice
off: TNBC_BLOCKING=mpi TNBC_ALGORITHMS=0 TNBC_LEARN=0).  Per configuration, the median (min-max)
over the rounds of: the run's wall time (mpiexec start to exit), the CPU of every process of the
run (user + system, getrusage(RUSAGE_CHILDREN)), and the program's phases, each the slowest
rank's.  Prints a Markdown table; exit 1 when a run failed.  Python 3 standard library only."""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import hung_job
from lib_settings import CHOICES_OFF

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_LIMIT_S = 300  # a run takes under a second


def configs(lib):
    return {
        "plain": {},
        "mt": {"MPIR_CVAR_DEFAULT_THREAD_LEVEL": "MPI_THREAD_MULTIPLE"},
        "disable": {"LD_PRELOAD": lib, "TNBC_DISABLE": "1"},
        "tnbc": {"LD_PRELOAD": lib},
        "nochoice": {"LD_PRELOAD": lib, **CHOICES_OFF},
    }


def one_run(mpiexec, ranks, program, calls, env):
    cmd = [mpiexec, "-n", str(ranks)]
    for k, v in env.items():
        cmd += ["-genv", k, v]
    cmd += [program, str(calls)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:  # past the limit: the ranks' stacks saved, the job ended (bench/hung_job.py)
        out = hung_job.run(cmd, RUN_LIMIT_S, program).stdout
    except hung_job.HungJob as e:
        sys.exit(f"startup.py: {e}")
    except subprocess.CalledProcessError as e:
        sys.exit(f"startup.py: {' '.join(cmd)} failed (exit {e.returncode}):\n{e.stdout}{e.stderr}")
    wall = (time.monotonic() - t0) * 1e3
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3
    fields = dict(re.findall(r"(\w+)_ms=([\d.]+)", out))
    if "total" not in fields:
        sys.exit(f"startup.py: no result line from {' '.join(cmd)}:\n{out}")
    return {"wall": wall, "cpu": cpu, **{k: float(v) for k, v in fields.items()}}


def cell(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.0f}-{max(xs):.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libtnbc.so to preload (copy it aside first)")
    ap.add_argument("--rounds", type=int, default=16, help="alternating rounds (default 16)")
    ap.add_argument("--ranks", type=int, default=4, help="ranks (default 4)")
    ap.add_argument("--calls", type=int, default=2, help="rounds of calls between MPI_Init and MPI_Finalize (default 2)")
    ap.add_argument("--program", default=os.path.join(HERE, "..", "build", "bench", "startup"),
                    help="the startup executable (default build/bench/startup)")
    ap.add_argument("--mpiexec", default="mpiexec.mpich", help="launcher (default mpiexec.mpich)")
    ap.add_argument("--only", default="", help="comma-separated configurations (default: all)")
    args = ap.parse_args()
    if args.rounds < 1 or args.ranks < 1 or args.calls < 0:
        ap.error("--rounds and --ranks must be 1 or more, --calls 0 or more")
    for path, what in ((args.lib, "--lib"), (args.program, "--program")):
        if not os.path.isfile(path):
            ap.error(f"{what} {path}: no such file")
    lib = os.path.abspath(args.lib)
    table = configs(lib)
    if args.only:
        unknown = set(args.only.split(",")) - set(table)
        if unknown:
            ap.error(f"--only: unknown configurations {', '.join(sorted(unknown))} (known: {', '.join(table)})")
        table = {k: v for k, v in table.items() if k in args.only.split(",")}
    names = list(table)
    runs = {k: [] for k in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            runs[name].append(one_run(args.mpiexec, args.ranks, args.program, args.calls, table[name]))
    cols = [("wall", "wall ms"), ("cpu", f"CPU ms ({args.ranks} ranks)"), ("init", "`MPI_Init` ms"),
            ("calls", f"{args.calls} rounds of calls ms"), ("finalize", "`MPI_Finalize` ms")]
    print(f"{args.rounds} rounds, {args.ranks} ranks, library {lib}")
    print()
    print("| configuration | " + " | ".join(c for _, c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name in names:
        print(f"| {name} | " + " | ".join(cell([x[k] for x in runs[name]]) for k, _ in cols) + " |")


if __name__ == "__main__":
    main()
