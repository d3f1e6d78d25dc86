#!/usr/bin/env python3
"""Settings that differ between ranks (an MPMD launch gives each rank its own environment): every
setting that must agree (docs/config.md) is checked at MPI_Init in its one collective, and when one
differs every rank passes every call straight to MPICH.  Each run must finish within a short limit,
print exactly what plain MPICH prints, and rank 0 must name the setting, once.  Without the check
these runs give wrong data (TNBC_CHUNK_BYTES), abort (TNBC_BCAST_SEGMENTS) or hang (the others).
Values that differ in spelling only, and a plan with the same bytes under two paths, agree."""

import os
import tempfile

from tnbc_testlib import BUILD, Suite, expect, mpirun, read_json

DIFF = os.path.join(BUILD, "test", "mpi", "replay_diff")
BARRIER = os.path.join(BUILD, "test", "mpi", "barrier_check")
LIMIT = 30  # seconds per run: a mismatch that slips through hangs
# The engine's path is forced (no per-call decision), so that a mismatch would really bite.
ENGINE = {"TNBC_ADAPT": "off"}
SCENARIOS = ["alltoall_sizes", "bcasts"]
MESSAGE = "settings differ between ranks: "


def lines(text):
    """The output lines, sorted: ranks print in any order."""
    return sorted(l for l in text.splitlines() if l)


def mismatch_lines(res):
    return [l for l in res.stderr.splitlines() if MESSAGE in l]


def expect_named(res, names):
    found = mismatch_lines(res)
    expect(len(found) == 1 and found[0].startswith("tnbc[0]: "),
           f"expected one message from rank 0, got: {res.stderr}")
    named = found[0].split(MESSAGE, 1)[1].split(";", 1)[0].split(", ")
    expect(named == names, f"names {named}, expected {names}: {found[0]}")


def main():
    s = Suite("mpi-agree")
    tmp = tempfile.mkdtemp(prefix="tnbc_agree_")
    ref = {}

    def plain():
        ref["diff2"] = lines(mpirun(DIFF, 2, args=[tmp, *SCENARIOS], timeout=LIMIT * 2).stdout)
        ref["barrier2"] = lines(mpirun(BARRIER, 2, args=[200], timeout=LIMIT).stdout)
        ref["barrier4"] = lines(mpirun(BARRIER, 4, args=[100], timeout=LIMIT).stdout)
        expect(len(ref["diff2"]) > 20, f"too little output: {ref['diff2']}")
    s.check("plain MPICH, reference outputs", plain)

    def differing(rank_envs, names, program=DIFF, key="diff2"):
        n = len(rank_envs)
        args = [tmp, *SCENARIOS] if program == DIFF else [200 if n == 2 else 100]
        res = mpirun(program, n, preload="tnbc", env=ENGINE, args=args, timeout=LIMIT,
                     rank_env=rank_envs)
        expect(lines(res.stdout) == ref.get(key), f"output differs from plain MPICH:\n{res.stdout}\n{res.stderr}")
        expect_named(res, names)

    # The settings of the issue, each differing alone between two ranks.
    for name, a, b in [("TNBC_CHUNK_BYTES", "5000", "64K"),
                       ("TNBC_BCAST_SEGMENTS", "2", "7"),
                       ("TNBC_MIN_BYTES", "4K", "1M"),
                       ("TNBC_DISABLE", "0", "1")]:
        s.check(f"{name}={a} on rank 0, {b} on rank 1: MPICH's bytes, named by rank 0",
                lambda name=name, a=a, b=b: differing([{name: a}, {name: b}], [name]))

    s.check("TNBC_BARRIER_ALGO=mpich on rank 0 only: barrier property, named by rank 0",
            lambda: differing([{"TNBC_BARRIER_ALGO": "mpich"}, {}], ["TNBC_BARRIER_ALGO"],
                              program=BARRIER, key="barrier2"))

    # Two matrices that root the barrier on different ranks (MinNumaDist: rank 1 under the
    # first, rank 0 under the second), given to two ranks each: set up apart, they hang.
    topo = {}
    for label, matrix in (("a", "10 21\n21 10"), ("b", "10 21\n21 40")):
        topo[label] = os.path.join(tmp, f"{label}.topo")
        with open(topo[label], "w") as f:
            f.write(f"distances\n{matrix}\nranks 0 1 1 1\n")
    s.check("TNBC_NUMA_TOPOLOGY files that differ: barrier property, named by rank 0",
            lambda: differing([{"TNBC_NUMA_TOPOLOGY": topo[x]} for x in "aabb"],
                              ["TNBC_NUMA_TOPOLOGY"], program=BARRIER, key="barrier4"))

    def several():
        differing([{"TNBC_MIN_BYTES": "4K", "TNBC_BARRIER_ALGO": "mcs"},
                   {"TNBC_MIN_BYTES": "8K", "TNBC_LOG": "quiet"}],
                  ["TNBC_MIN_BYTES", "TNBC_BARRIER_ALGO"])
    s.check("two settings differ (and a rank-local one): both named, once", several)

    def trace_mode():
        # libtnbc_trace.so checks too: rank 0 would otherwise wait for the others in the
        # broadcast of the trace folder.  Passive, it writes no folder.
        res = mpirun(DIFF, 2, preload="tnbc_trace", args=[tmp, *SCENARIOS], timeout=LIMIT, cwd=tmp,
                     rank_env=[{}, {"TNBC_DISABLE": "1"}])
        expect(lines(res.stdout) == ref.get("diff2"), f"output differs from plain MPICH: {res.stdout}")
        expect_named(res, ["TNBC_DISABLE"])
    s.check("libtnbc_trace.so, TNBC_DISABLE=1 on rank 1 only: MPICH's bytes, named by rank 0", trace_mode)

    def plan_unreadable():
        plan = os.path.join(tmp, "plan.txt")
        with open(plan, "w") as f:
            f.write("any bytes: only rank 0 can read them\n")
        differing([{"TNBC_PLAN": plan}, {"TNBC_PLAN": os.path.join(tmp, "missing")}], ["TNBC_PLAN"])
    s.check("TNBC_PLAN readable on rank 0 only: named by rank 0", plan_unreadable)

    def agreeing():
        # 64K and 65536 are one value; the same plan bytes under two paths are one plan; rank-
        # local settings may differ.  The engine must then run (early returns), silently.
        plans = []
        for i in range(2):
            plans.append(os.path.join(tmp, f"same{i}.plan"))
            with open(plans[-1], "w") as f:
                f.write("not a plan\n")
        prefix = os.path.join(tmp, "agree")
        res = mpirun(DIFF, 2, preload="tnbc", env={**ENGINE, "TNBC_STATS": prefix},
                     args=[tmp, *SCENARIOS], timeout=LIMIT,
                     rank_env=[{"TNBC_MIN_BYTES": "64K", "TNBC_PLAN": plans[0],
                                "TNBC_PROGRESS_SLEEP_US": "5"},
                               {"TNBC_MIN_BYTES": "65536", "TNBC_PLAN": plans[1],
                                "TNBC_LOG": "quiet"}])
        expect(lines(res.stdout) == ref.get("diff2"), f"output differs from plain MPICH: {res.stdout}")
        expect(not mismatch_lines(res), f"unexpected mismatch: {res.stderr}")
        for r in range(2):
            d = read_json(f"{prefix}.{r}.json")
            expect(d["alltoall"]["early_return"] > 0, f"rank {r}: the engine did not run: {d['alltoall']}")
    s.check("settings equal in effect, and rank-local ones: no message, the engine runs", agreeing)

    s.finish()


if __name__ == "__main__":
    main()
