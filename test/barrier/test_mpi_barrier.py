#!/usr/bin/env python3
"""MPI_Barrier of libtnbc.so under real MPI processes: every algorithm x {2, 3, 4 ranks} x
{MPI_COMM_WORLD, split sub-communicators, an inter-communicator}, checked by barrier_check
(shared-window load/store: nobody leaves barrier k before all entered it); the statistics show
the algorithm and the root; MinNumaDist through TNBC_NUMA_TOPOLOGY; bad settings; no segment
left behind."""

import glob
import os
import tempfile

from tnbc_testlib import BARRIER_ALGOS as ALGOS, BUILD, Failure, Suite, expect, mpirun, read_json

CHECK = os.path.join(BUILD, "test", "mpi", "barrier_check")
AUTO = "central_counter"  # the documented auto rule for <= 8 ranks (docs/barrier.md)
LIMIT = 20  # seconds per run: a broken barrier hangs


def segments():
    return set(glob.glob("/dev/shm/tnbc-barrier-*"))


def tnbc_lines(res):
    return [l for l in res.stderr.splitlines() if l.startswith("tnbc[")]


def main():
    s = Suite("mpi-barrier")
    tmp = tempfile.mkdtemp(prefix="tnbc_barrier_")
    before = segments()

    for algo in ALGOS + ["auto", "mpich"]:
        for n in (2, 3, 4):
            def run(algo=algo, n=n):
                prefix = os.path.join(tmp, f"st_{algo}_{n}")
                # MPICH's own barrier crawls with 4 ranks on 2 cores (ms per call): fewer rounds.
                iterations = 100 if algo == "mpich" and n > 2 else 1000
                res = mpirun(CHECK, n, preload="tnbc", args=[iterations], timeout=LIMIT,
                             env={"TNBC_BARRIER_ALGO": algo, "TNBC_STATS": prefix})
                oks = [l for l in res.stdout.splitlines() if l.startswith("barrier_check ok")]
                expect(len(oks) == 4, f"expected world, two halves and inter: {res.stdout}")
                expect(not tnbc_lines(res), f"unexpected messages: {res.stderr}")
                for r in range(n):
                    d = read_json(f"{prefix}.{r}.json")["barrier"]
                    want = {"auto": AUTO}.get(algo, algo)
                    expect(d["algo"] == want and d["root"] == 0, f"rank {r}: {d}, want {want} root 0")
            s.check(f"{algo}, {n} ranks: barrier property on world, sub-communicators, inter", run)

    for algo in ALGOS:
        for n in (3, 4):
            def split(algo=algo, n=n):
                prefix = os.path.join(tmp, f"st_split_{algo}_{n}")
                res = mpirun(CHECK, n, preload="tnbc", args=[500], timeout=LIMIT,
                             env={"TNBC_BARRIER_ALGO": algo, "TNBC_BARRIER_SPLIT": "2",
                                  "TNBC_STATS": prefix})
                oks = [l for l in res.stdout.splitlines() if l.startswith("barrier_check ok")]
                expect(len(oks) == 4, f"expected world, two halves and inter: {res.stdout}")
                expect(not tnbc_lines(res), f"unexpected messages: {res.stderr}")
                # Emulated nodes {0,1} and {2,3} (or {2}): each rank reports its node's root.
                for r in range(n):
                    d = read_json(f"{prefix}.{r}.json")["barrier"]
                    expect(d["algo"] == algo and d["root"] == (r // 2) * 2, f"rank {r}: {d}")
            s.check(f"{algo}, {n} ranks as emulated nodes of 2 (TNBC_BARRIER_SPLIT): multi-node path", split)

    def fixed_root():
        prefix = os.path.join(tmp, "st_root")
        mpirun(CHECK, 4, preload="tnbc", args=[300], timeout=LIMIT,
               env={"TNBC_BARRIER_ALGO": "gather_release", "TNBC_BARRIER_ROOT": "2",
                    "TNBC_STATS": prefix})
        d = read_json(prefix + ".3.json")["barrier"]
        expect(d == {"calls": d["calls"], "algo": "gather_release", "root": 2}, f"{d}")
    s.check("TNBC_BARRIER_ROOT=2 roots the barrier at rank 2", fixed_root)

    def min_numa_dist():
        topo = os.path.join(tmp, "intel2.topo")
        with open(topo, "w") as f:
            f.write("# 2-socket Intel; rank 0 alone on socket 0\ndistances\n10 21\n21 10\nranks 0 1 1 1\n")
        for algo in ("flat_tree", "tournament"):
            prefix = os.path.join(tmp, f"st_numa_{algo}")
            res = mpirun(CHECK, 4, preload="tnbc", args=[300], timeout=LIMIT,
                         env={"TNBC_BARRIER_ALGO": algo, "TNBC_NUMA_TOPOLOGY": topo,
                              "TNBC_STATS": prefix})
            expect(not tnbc_lines(res), f"unexpected messages: {res.stderr}")
            for r in range(4):
                d = read_json(f"{prefix}.{r}.json")["barrier"]
                expect(d["root"] == 1 and d["algo"] == algo, f"rank {r}: {d}")
    s.check("MinNumaDist: rank 0 alone on one socket moves the root to rank 1", min_numa_dist)

    def bad_topology():
        topo = os.path.join(tmp, "bad.topo")
        with open(topo, "w") as f:
            f.write("distances\n10 21\n21\nranks 0 1\n")
        prefix = os.path.join(tmp, "st_badtopo")
        res = mpirun(CHECK, 3, preload="tnbc", args=[100], timeout=LIMIT,
                     env={"TNBC_NUMA_TOPOLOGY": topo, "TNBC_STATS": prefix})
        msgs = tnbc_lines(res)
        want = (f"tnbc[0]: TNBC_NUMA_TOPOLOGY={topo}: line 3: row 1 has 1 distances, expected 2 "
                "(one per NUMA node); using the host topology (libnuma)")
        expect(msgs == [want], f"expected one message from rank 0:\n{msgs}\nwant\n{want}")
        expect(read_json(prefix + ".0.json")["barrier"]["algo"] == AUTO, "not the default algorithm")
        short = os.path.join(tmp, "short.topo")
        with open(short, "w") as f:
            f.write("distances\n10\nranks 0 0\n")
        res = mpirun(CHECK, 3, preload="tnbc", args=[100], timeout=LIMIT,
                     env={"TNBC_NUMA_TOPOLOGY": short})
        expect(tnbc_lines(res) == [f"tnbc[0]: TNBC_NUMA_TOPOLOGY={short}: lists 2 ranks, "
                                   "MPI_COMM_WORLD has 3; using the host topology (libnuma)"],
               f"{tnbc_lines(res)}")
        # /dev/zero read naively grows without end inside MPI_Init.
        res = mpirun(CHECK, 3, preload="tnbc", args=[100], timeout=LIMIT,
                     env={"TNBC_NUMA_TOPOLOGY": "/dev/zero"})
        expect(tnbc_lines(res) == ["tnbc[0]: TNBC_NUMA_TOPOLOGY=/dev/zero: not a regular file (a character "
                                   "device); using the host topology (libnuma)"], f"{tnbc_lines(res)}")
    s.check("a bad topology file: one exact message from rank 0, defaults", bad_topology)

    def bad_values():
        prefix = os.path.join(tmp, "st_badval")
        res = mpirun(CHECK, 3, preload="tnbc", args=[100], timeout=LIMIT,
                     env={"TNBC_BARRIER_ALGO": "butterfly", "TNBC_BARRIER_ROOT": "-3",
                          "TNBC_STATS": prefix})
        msgs = tnbc_lines(res)
        expect(len(msgs) == 2 and all(m.startswith("tnbc[0]: ") for m in msgs), f"{msgs}")
        expect(any("TNBC_BARRIER_ALGO=butterfly: expected auto, mpich, central_counter, flat_tree, "
                   "gather_release, combining_tree, combining_tree_atomic, mcs, tournament, "
                   "dissemination; using the default (auto)" in m for m in msgs), f"{msgs}")
        expect(any("TNBC_BARRIER_ROOT=-3: expected auto or a local rank from 0 to 65535; "
                   "using the default (auto)" in m for m in msgs), f"{msgs}")
        d = read_json(prefix + ".2.json")["barrier"]
        expect(d["algo"] == AUTO and d["root"] == 0, f"{d}")
    s.check("bad TNBC_BARRIER_* values: one message each from rank 0, defaults", bad_values)

    def built_when_rent_paid():
        # TNBC_BARRIER_AFTER=auto (the default): MPICH's barrier, each one an agreement on what
        # they cost, until the communicator's barriers have cost a build, and at the latest at its
        # 10th call.  MPI_COMM_WORLD's is the job's first build (none measured): barrier_check
        # makes 1 + ITERATIONS barriers on it, so 8 iterations keep MPICH's and 9 build it; the
        # barrier property holds on the calls before the build too (the check runs on every one).
        for iterations, want in ((8, "mpich"), (9, AUTO)):
            prefix = os.path.join(tmp, f"st_rent_{iterations}")
            res = mpirun(CHECK, 4, preload="tnbc", args=[iterations], timeout=LIMIT, env={"TNBC_STATS": prefix})
            oks = [l for l in res.stdout.splitlines() if l.startswith("barrier_check ok")]
            expect(len(oks) == 4, f"{iterations} iterations: expected world, two halves and inter: {res.stdout}")
            for r in range(4):
                d = read_json(f"{prefix}.{r}.json")["barrier"]
                expect(d["algo"] == want, f"{1 + iterations} barriers on world, rank {r}: {d}, want {want}")
    s.check("TNBC_BARRIER_AFTER=auto: world's 9 barriers run MPICH's, its 10th builds the shared-memory one",
            built_when_rent_paid)

    def unused_when_never_called():
        # MPI_COMM_WORLD's barrier is built at its first MPI_Barrier, not at MPI_Init: a program
        # that never calls it pays nothing, and the statistics say so.
        prefix = os.path.join(tmp, "st_unused")
        mpirun(os.path.join(BUILD, "test", "mpi", "rank_sites"), 3, preload="tnbc", timeout=LIMIT,
               env={"TNBC_STATS": prefix})
        for r in range(3):
            d = read_json(f"{prefix}.{r}.json")["barrier"]
            expect(d == {"calls": 0, "algo": "unused", "root": 0}, f"rank {r}: {d}")
    s.check("a program without MPI_Barrier: nothing built, statistics say unused", unused_when_never_called)

    def trace_keeps_mpich():
        prefix = os.path.join(tmp, "st_trace")
        mpirun(CHECK, 2, preload="tnbc_trace", args=[100], timeout=LIMIT,
               env={"TNBC_BARRIER_ALGO": "flat_tree", "TNBC_STATS": prefix})
        expect(read_json(prefix + ".0.json")["barrier"]["algo"] == "mpich", "trace library changed the barrier")
    s.check("libtnbc_trace.so keeps MPICH's barrier", trace_keeps_mpich)

    def can_fail():
        try:
            res = mpirun(CHECK, 3, preload="tnbc", args=[300, "nobarrier"], timeout=LIMIT)
        except Failure as e:
            expect("after barrier" in str(e), f"failed, but not by the check: {e}")
            return
        raise AssertionError(f"the check passed without a barrier:\n{res.stdout}")
    s.check("the check fails when the barrier is left out", can_fail)

    def no_leftovers():
        left = segments() - before
        expect(not left, f"segments left in /dev/shm: {left}")
    s.check("no shared-memory segment is left behind", no_leftovers)

    s.finish()


if __name__ == "__main__":
    main()
