#!/usr/bin/env python3
"""The application kernels (bench/ft, bench/is, class S, 4 ranks on one node) print the same
checksum plain, under libtnbc.so and in their hand-written MPI-3 version, in natural and permuted
read order; under libtnbc.so the engine really returned early (statistics), or the comparison
proves nothing.  Also: tools/tnbc-bench --quick --dry-run lists its runs and exits 0, and
bench/overlap counts only the calls after OVERLAP_WARMUP and tests only in its mpi3test mode.
tools/tnbc-bench launches MPICH (mpiexec, the emulated cluster): an Open MPI build runs only
the kernels' checks."""

import os
import re
import subprocess
import sys
import tempfile

from tnbc_testlib import BUILD, MPI, SOURCE, Suite, expect, mpirun, read_json

KERNELS = {k: os.path.join(BUILD, "bench", k) for k in ("ft", "is")}
# Every Alltoall(v) of class S moves >= 4 KiB per rank, so the engine handles them all but the
# IS counts.
# TNBC_ADAPT=off: these runs check the engine itself, which the default would skip on one node.
REPLAY_ENV = {"TNBC_MIN_BYTES": "4K", "TNBC_ADAPT": "off"}


def result(out):
    """The fields of the kernel's closing 'result ...' line."""
    lines = [l for l in out.splitlines() if l.startswith("result ")]
    expect(len(lines) == 1, f"expected one result line, got: {out!r}")
    return dict(f.split("=", 1) for f in lines[0].split()[1:])


def main():
    s = Suite("bench-kernels")
    tmp = tempfile.mkdtemp(prefix="tnbc_kernels_")
    for name, prog in KERNELS.items():
        ref = {}

        def plain(prog=prog, ref=ref):
            r = result(mpirun(prog, 4, args=["--class", "S"], timeout=60).stdout)
            expect(r["verified"] == "yes", f"plain run not verified: {r}")
            ref.update(r)
        s.check(f"{name}: plain {MPI}, class S, verified", plain)

        for order, extra in (("natural", []), ("reverse", []), ("stride", ["--page-aligned"])):
            def replay(prog=prog, ref=ref, order=order, name=name, extra=extra):
                prefix = os.path.join(tmp, f"{name}_{order}")
                env = dict(REPLAY_ENV, TNBC_STATS=prefix)
                r = result(mpirun(prog, 4, preload="tnbc", env=env, args=["--class", "S", "--order", order, *extra],
                                  timeout=60).stdout)
                expect(r["checksum"] == ref.get("checksum"), f"checksum {r['checksum']} != plain {ref.get('checksum')}")
                expect(r["verified"] == "yes", f"not verified: {r}")
                for rank in range(4):
                    st = read_json(f"{prefix}.{rank}.json")
                    early = st["alltoall"]["early_return"] + st["alltoallv"]["early_return"]
                    expect(early > 0, f"rank {rank}: no early return: {st}")
            s.check(f"{name}: libtnbc.so, {order} order{', page-aligned' if extra else ''}: same checksum, "
                    "early returns", replay)

        def mpi3(prog=prog, ref=ref):
            r = result(mpirun(prog, 4, args=["--class", "S", "--mpi3", "--order", "stride"], timeout=60).stdout)
            expect(r["mode"] == "mpi3", f"not the MPI-3 version: {r}")
            expect(r["checksum"] == ref.get("checksum"), f"checksum {r['checksum']} != plain {ref.get('checksum')}")
        s.check(f"{name}: MPI-3 version, stride order: same checksum", mpi3)

    def curc_modes():
        # bench/curc: the blocking call, MPI-3 with MPI_Wait and MPI-3 with MPI_Test between
        # slices of the work receive the same bytes; only mpi3test tests (4 ranks x 4 calls at
        # least, one per call before its exchange completes); a bad mode is refused.
        prog = os.path.join(BUILD, "bench", "curc")
        got = {}
        for mode in ("blocking", "mpi3", "mpi3test"):
            env = {"CURC_TEST_LOOPS": "1000"} if mode == "mpi3test" else {}
            got[mode] = result(mpirun(prog, 4, env=env, args=["65536", "3", mode, "200000"], timeout=60).stdout)
            expect(got[mode]["mode"] == mode, f"{mode}: {got[mode]}")
        expect(len({r["checksum"] for r in got.values()}) == 1, f"checksums differ: {got}")
        expect(int(got["mpi3test"]["tests"]) >= 16 and got["mpi3"]["tests"] == got["blocking"]["tests"] == "0",
               f"MPI_Test calls: {got}")
        # none: the same work and reads without any exchange (the floor), so nothing arrives.
        none = result(mpirun(prog, 4, args=["65536", "3", "none", "200000"], timeout=60).stdout)
        expect(none["mode"] == "none" and none["tests"] == "0", f"none: {none}")
        expect(none["checksum"] != got["blocking"]["checksum"], f"none received the exchange's bytes: {none}")
        bad = mpirun(prog, 4, args=["65536", "3", "mpi4", "0"], timeout=60, check=False)
        expect(bad.returncode != 0 and "MODE must be" in bad.stderr, f"a bad mode accepted: {bad}")
        bad = mpirun(prog, 4, env={"CURC_TEST_LOOPS": "x"}, args=["65536", "3", "mpi3test", "0"], timeout=60, check=False)
        expect(bad.returncode != 0 and "CURC_TEST_LOOPS" in bad.stderr, f"a bad CURC_TEST_LOOPS accepted: {bad}")
    s.check("curc: blocking, MPI-3 and MPI-3 with MPI_Test receive the same bytes; only mpi3test tests; "
            "none exchanges nothing", curc_modes)

    def overlap_warmup():
        # bench/overlap.py --warmup: the program makes OVERLAP_WARMUP calls more, and its result
        # line's total is the slowest rank's median of the counted calls only.
        prog = os.path.join(BUILD, "bench", "overlap")
        env = {"OVERLAP_SKIP_TCOMM": "1", "OVERLAP_ITER_TIMES": "1", "OVERLAP_WARMUP": "2"}
        res = mpirun(prog, 4, env=env, args=["65536", "3", "blocking", "0", "2000", "1"], timeout=60)
        calls, lates = {}, {}
        for m in re.finditer(r"iter rank=(\d+) i=(\d+) total_ms=([\d.]+) init_ms=[\d.]+ late_ms=(-?[\d.]+)", res.stderr):
            calls.setdefault(int(m[1]), {})[int(m[2])] = float(m[3])
            lates.setdefault(int(m[1]), {})[int(m[2])] = float(m[4])
        expect(sorted(calls) == [0, 1, 2, 3] and all(sorted(c) == [0, 1, 2, 3, 4] for c in calls.values()),
               f"expected calls 0-4 on every rank: {calls}")
        want = max(sorted(c[i] for i in (2, 3, 4))[1] for c in calls.values())
        got = float(result(res.stdout)["total_us"]) / 1e3
        expect(abs(got - want) < 0.02, f"total {got} ms, the counted calls' median {want} ms")
        # late: how long after its deadline the last share of work ended (never before it), the
        # largest over ranks of a rank's median over the counted calls.
        expect(all(v >= 0 for c in lates.values() for v in c.values()), f"a share ended before its deadline: {lates}")
        want = max(sorted(c[i] for i in (2, 3, 4))[1] for c in lates.values())
        got = float(result(res.stdout)["late_us"]) / 1e3
        expect(abs(got - want) < 0.02, f"late {got} ms, the counted calls' median {want} ms")
        bad = mpirun(prog, 4, env={"OVERLAP_WARMUP": "-1"}, args=["65536", "3", "blocking", "0", "0"],
                     timeout=60, check=False)
        expect(bad.returncode != 0 and "OVERLAP_WARMUP" in bad.stderr, f"a negative warm-up accepted: {bad}")
    s.check("overlap: OVERLAP_WARMUP's calls run, the result counts the others (total and lateness)", overlap_warmup)

    def overlap_mpi3test():
        # bench/overlap's mpi3test: MPI_Test between slices of the work before the reads.  A
        # slice longer than the work makes exactly one test per counted call and rank (the
        # warm-up's not counted); the other modes make none; a bad mode or slice is refused.
        prog = os.path.join(BUILD, "bench", "overlap")
        env = {"OVERLAP_SKIP_TCOMM": "1", "OVERLAP_WARMUP": "2"}
        got = {}
        for mode in ("blocking", "mpi3", "mpi3test"):
            e = {**env, "OVERLAP_TEST_US": "1e9"} if mode == "mpi3test" else env
            got[mode] = result(mpirun(prog, 4, env=e, args=["65536", "3", mode, "2000", "2000"], timeout=60).stdout)
            expect(got[mode]["mode"] == mode, f"{mode}: {got[mode]}")
        expect(got["mpi3test"]["tests"] == "12" and got["mpi3"]["tests"] == got["blocking"]["tests"] == "0",
               f"MPI_Test calls (4 ranks x 3 counted calls): {got}")
        bad = mpirun(prog, 4, args=["65536", "3", "mpi4", "0", "0"], timeout=60, check=False)
        expect(bad.returncode != 0 and "MODE must be" in bad.stderr, f"a bad mode accepted: {bad}")
        bad = mpirun(prog, 4, env={"OVERLAP_TEST_US": "0"}, args=["65536", "3", "mpi3test", "0", "0"],
                     timeout=60, check=False)
        expect(bad.returncode != 0 and "OVERLAP_TEST_US" in bad.stderr, f"OVERLAP_TEST_US=0 accepted: {bad}")
    s.check("overlap: mpi3test tests once per slice of the work, the other modes never", overlap_mpi3test)

    def bad_args():
        res = mpirun(KERNELS["ft"], 1, args=["--class", "Z"], timeout=30, check=False)
        expect(res.returncode != 0 and "usage" in res.stderr, f"bad class accepted: {res}")
    s.check("a bad class is refused with a usage line", bad_args)

    def bench_dry_run():
        res = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "tnbc-bench"), "--quick", "--dry-run",
                              "--build", BUILD, "--out", tmp], capture_output=True, text=True, timeout=60)
        expect(res.returncode == 0, f"exit {res.returncode}: {res.stderr}")
        expect(re.search(r"tnbc-cluster .*run .*bench/ft", res.stdout), f"no ft run listed: {res.stdout}")
        expect("--mpi3" in res.stdout and "libtnbc.so" in res.stdout, f"configurations missing: {res.stdout}")
    if MPI == "mpich":
        s.check("tools/tnbc-bench --quick --dry-run lists its runs", bench_dry_run)

    def bench_local():
        # A real run without the cluster (--rates local): no root needed, the report gets its
        # one-node section and libtnbc.so's checksum equals plain MPICH's.
        out = os.path.join(tmp, "local")
        res = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "tnbc-bench"), "--quick", "--rates", "local",
                              "--kernels", "ft", "--configs", "plain,tnbc", "--build", BUILD, "--out", out],
                             capture_output=True, text=True, timeout=240)
        expect(res.returncode == 0, f"exit {res.returncode}: {res.stderr[-500:]}")
        with open(os.path.join(out, "results.md"), encoding="utf-8") as f:
            report = f.read()
        expect("## 4 ranks on one node" in report, f"no one-node section: {report[:400]}")
        # Under its title, the header line every report opens with (docs/measurements/README.md).
        head = report.splitlines()[:3]
        expect(len(head) == 3 and re.match(r"Ran: \d{4}-\d\d-\d\d · commit \S+ · one node x 4 ranks · no links · "
                                           r"no links · unpinned · \d+ rounds$", head[2]), f"header: {head}")
        rows = [l for l in report.splitlines() if l.startswith("| ft | S |")]
        expect(len(rows) == 2 and all(l.rstrip().endswith("| same |") for l in rows), f"rows: {rows}")
    if MPI == "mpich":
        s.check("tools/tnbc-bench --rates local runs the kernels on one node, checksums equal", bench_local)

    def demo_dry_run():
        res = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "tnbc-bench"), "--demo", "--dry-run",
                              "--build", BUILD, "--prefix", "tnbcdemo", "--subnet", "10.219.0"],
                             capture_output=True, text=True, timeout=60)
        expect(res.returncode == 0, f"exit {res.returncode}: {res.stderr}")
        expect("TNBC_TRACE_DIR=" in res.stdout and "libtnbc.so" in res.stdout, f"demo steps missing: {res.stdout}")
        # Every use of the cluster names this job's own (two jobs on one machine must not share one).
        cluster = [l for l in res.stdout.splitlines() if "tnbc-cluster " in l]
        expect(cluster and all(" --prefix tnbcdemo --subnet 10.219.0 " in l for l in cluster),
               f"cluster commands without --prefix/--subnet: {cluster}")
    if MPI == "mpich":
        s.check("tools/tnbc-bench --demo --dry-run lists its steps", demo_dry_run)

    def per_node_plans():
        # Regression: a per-node plan for IS's Alltoallv hung (ranks of a node disagreed on the
        # plan entry, chosen by each rank's own receive size).  Trace, plan --per-node, replay
        # on 2 emulated nodes, each run limited to 60 s; results must match plain MPICH.
        out = os.path.join(tmp, "pernode")
        res = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "tnbc-bench"), "--quick",
                              "--kernels", "ft,is", "--rates", "200mbit", "--configs", "node", "--timeout", "60",
                              "--build", BUILD, "--out", out], capture_output=True, text=True, timeout=240)
        expect(res.returncode == 0, f"exit {res.returncode}: {res.stderr[-500:]}")
        with open(os.path.join(out, "results.md"), encoding="utf-8") as f:
            rows = [l for l in f if l.startswith("| ft |") or l.startswith("| is |")]
        node = [l for l in rows if "plan + per-node" in l]
        expect(len(node) == 2, f"expected a per-node row for ft and is: {rows}")
        expect(all("FAILED" not in l and l.rstrip().endswith("same |") for l in node), f"per-node runs: {node}")
    root = os.geteuid() == 0 and MPI == "mpich"
    if root:
        s.check("per-node plans for FT (Alltoall) and IS (Alltoallv) on 2 nodes: finish, same results",
                per_node_plans)
    if MPI != "mpich":
        # Not a partial run: tools/tnbc-bench's checks belong to the MPICH build.
        print(f"     tools/tnbc-bench's checks run in the MPICH build (it launches MPICH), not under {MPI}",
              flush=True)
    s.finish(skipped=None if root or MPI != "mpich" else
             "the 2-node per-node plan check (it needs root for network namespaces)")


if __name__ == "__main__":
    main()
