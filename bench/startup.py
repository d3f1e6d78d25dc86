#!/usr/bin/env python3
"""What a run pays for the library's start and end: bench/startup (MPI_Init, CALLS rounds of a
barrier and an 8-byte Alltoall, MPI_Finalize) on one node or on the emulated nodes of
tnbc-cluster, plain MPICH beside libtnbc.so, in alternating rounds (the order reversed every
second round).

    bench/startup.py --lib build/shim/replay/libtnbc.so --rounds 16
    bench/startup.py --lib ... --cluster build/tools/tnbc-cluster --rate none --prefix su --subnet 10.231.0

Configurations: plain; mt (plain MPICH asked for MPI_THREAD_MULTIPLE, the level the library asks
for); disable (the library with TNBC_DISABLE=1); tnbc (its defaults); nochoice (every choice
off: TNBC_BLOCKING=mpi TNBC_ALGORITHMS=0 TNBC_LEARN=0); mpichbarrier (its defaults but MPICH's
MPI_Barrier: TNBC_BARRIER_ALGO=mpich, so its shared-memory barrier, built once a communicator's
MPICH barriers have cost a build (TNBC_BARRIER_AFTER), never is); with --other NAME=LIB, NAME: another
build of the library with its defaults, in the same rounds (to compare two).  Per configuration, the median (min-max)
over the rounds of: the run's wall time (mpiexec start to exit), the CPU of every process of the
run (user + system, getrusage(RUSAGE_CHILDREN); on the emulated nodes the ranks are the
launcher's descendants too), and the program's phases, each the slowest rank's.  With
--cluster, the runs go through `tnbc-cluster run` (2 nodes x 2 ranks by default; its nodes are
brought up first and removed at the end unless they were up), the library by `--preload`, the
settings by `--env`.  Prints a Markdown table; exit 1 when a run failed.  Python 3 standard library only."""

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
        "mpichbarrier": {"LD_PRELOAD": lib, "TNBC_BARRIER_ALGO": "mpich"},
    }


def launch(args, env):
    """The command that runs the program with `env` (LD_PRELOAD: the library) on every rank."""
    if not args.cluster:
        cmd = [args.mpiexec, "-n", str(args.ranks)]
        for k, v in env.items():
            cmd += ["-genv", k, v]
        return cmd + [args.program, str(args.calls)]
    cmd = cluster_cmd(args) + ["run", "--timeout", str(RUN_LIMIT_S + hung_job.CLUSTER_LIMIT_MARGIN_S), "--ppn", str(args.ranks // args.nodes)]
    for k, v in env.items():
        cmd += ["--preload", v] if k == "LD_PRELOAD" else ["--env", f"{k}={v}"]
    return cmd + ["--", args.program, str(args.calls)]


def cluster_cmd(args, rate=False):
    """tnbc-cluster with the cluster's options; `rate`: with --rate too (only for `up`: given to
    `run`, it would shape every node's links again before each run, inside the timed wall)."""
    return [args.cluster, "--nodes", str(args.nodes), "--prefix", args.prefix, "--subnet", args.subnet] + \
        (["--rate", args.rate] if rate else [])


def bring_up(args):
    """Brings the cluster up with --rate unless it is up (then --rate is not applied, as in
    apps/run.py); returns whether it did."""
    st = subprocess.run(cluster_cmd(args) + ["status"], capture_output=True, text=True)
    if st.returncode == 0 and "no cluster" not in (st.stdout + st.stderr).lower():
        print(f"startup.py: cluster {args.prefix} already up: --rate not applied", file=sys.stderr)
        return False
    up = subprocess.run(cluster_cmd(args, rate=True) + ["up"], capture_output=True, text=True)
    if up.returncode != 0:
        subprocess.run(cluster_cmd(args) + ["down"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sys.exit(f"startup.py: tnbc-cluster up failed:\n{up.stdout}{up.stderr}")
    return True


def one_run(cmd, program):
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
    ap.add_argument("--other", action="append", default=[], metavar="NAME=LIB",
                    help="also run LIB (another libtnbc.so) with its defaults as configuration NAME (repeatable)")
    ap.add_argument("--cluster", default="", help="tnbc-cluster: run on its emulated nodes instead of one node")
    ap.add_argument("--nodes", type=int, default=2, help="with --cluster: nodes (default 2; --ranks split evenly)")
    ap.add_argument("--rate", default="200mbit", help="with --cluster: link rate (default 200mbit; none: unshaped)")
    ap.add_argument("--prefix", default="tnbcsu", help="with --cluster: its --prefix (default tnbcsu)")
    ap.add_argument("--subnet", default="10.219.0", help="with --cluster: its --subnet (default 10.219.0)")
    args = ap.parse_args()
    if args.rounds < 1 or args.ranks < 1 or args.calls < 0:
        ap.error("--rounds and --ranks must be 1 or more, --calls 0 or more")
    if args.cluster and (args.nodes < 1 or args.ranks % args.nodes):
        ap.error(f"--ranks {args.ranks} does not split evenly over --nodes {args.nodes}")
    for path, what in ((args.lib, "--lib"), (args.program, "--program")) + (((args.cluster, "--cluster"),) if args.cluster else ()):
        if not os.path.isfile(path):
            ap.error(f"{what} {path}: no such file")
    lib = os.path.abspath(args.lib)
    table = configs(lib)
    for other in args.other:
        name, _, path = other.partition("=")
        if not name or not os.path.isfile(path) or name in table:
            ap.error(f"--other {other}: expected a new NAME=LIB, LIB an existing file")
        table[name] = {"LD_PRELOAD": os.path.abspath(path)}
    if args.only:
        unknown = set(args.only.split(",")) - set(table)
        if unknown:
            ap.error(f"--only: unknown configurations {', '.join(sorted(unknown))} (known: {', '.join(table)})")
        table = {k: v for k, v in table.items() if k in args.only.split(",")}
    names = list(table)
    runs = {k: [] for k in names}
    brought_up = bool(args.cluster) and bring_up(args)
    try:
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                runs[name].append(one_run(launch(args, table[name]), args.program))
    finally:
        if brought_up:
            subprocess.run(cluster_cmd(args) + ["down"], stdout=subprocess.DEVNULL)
    cols = [("wall", "wall ms"), ("cpu", f"CPU ms ({args.ranks} ranks)"), ("init", "`MPI_Init` ms"),
            ("calls", f"{args.calls} rounds of calls ms"), ("finalize", "`MPI_Finalize` ms")]
    where = (f"{args.nodes} emulated nodes x {args.ranks // args.nodes} ranks, links {args.rate}" if args.cluster
             else f"one node x {args.ranks} ranks")
    print(f"{args.rounds} rounds, {where}, library {lib}")
    print()
    print("| configuration | " + " | ".join(c for _, c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name in names:
        print(f"| {name} | " + " | ".join(cell([x[k] for x in runs[name]]) for k, _ in cols) + " |")


if __name__ == "__main__":
    main()
