#!/usr/bin/env python3
"""MPI_Barrier latency under libtnbc.so, every algorithm against MPICH's own barrier, at 2 and
4 ranks (4 is oversubscribed on 2 cores).  Configurations are interleaved over several rounds
in one run, so machine load hits them alike; the median per configuration is reported with its
ratio to MPICH.  Benchmark, not a test: run from the build directory

    TNBCTEST_BUILD_ROOT=$PWD PYTHONPATH=../test python3 ../test/barrier/bench_mpi_barrier.py
"""

import os
import statistics
import sys

from tnbc_testlib import BARRIER_ALGOS as ALGOS, BUILD, mpirun

PROGRAM = os.path.join(BUILD, "test", "mpi", "barrier_latency")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    results = {}
    for _ in range(rounds):
        for n in (2, 4):
            for algo in ["mpich"] + ALGOS:
                # MPICH's barrier takes milliseconds per call when ranks outnumber cores.
                iterations, warmup = (300, 100) if algo == "mpich" and n > 2 else (20000, 2000)
                res = mpirun(PROGRAM, n, preload="tnbc", args=[iterations, warmup], timeout=120,
                             env={"TNBC_BARRIER_ALGO": algo})
                results.setdefault((n, algo), []).append(float(res.stdout.split()[1]))
    for n in (2, 4):
        base = statistics.median(results[(n, "mpich")])
        print(f"\n{n} ranks ({rounds} rounds, median of max-over-ranks mean latency)")
        print(f"{'algorithm':<22} {'us/barrier':>11} {'vs mpich':>9}")
        for algo in ["mpich"] + ALGOS:
            us = statistics.median(results[(n, algo)])
            print(f"{algo:<22} {us:>11.2f} {us / base:>8.3f}x")


if __name__ == "__main__":
    main()
