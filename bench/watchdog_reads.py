#!/usr/bin/env python3
"""What the watchdog's clock reads cost the runs of bench/apps/run.py (docs/measurements/watchdog-cost.md).

    bench/watchdog_reads.py NS_PER_READ WORKDIR [WORKDIR ...]

WORKDIR: a run.py --workdir (its run.json beside it, as run.py --json D/run.json --workdir D/work
writes them).  For every rank-run of the `tnbc` configuration, from its TNBC_STATS file: the progress
thread's rounds plus the calls it ran (early returns of alltoall, alltoallv and bcast, and the keys'
engine_blocking_calls), one CLOCK_MONOTONIC read each; times NS_PER_READ (bench/clock_cost), against
the run's wall time.  Prints one markdown row per program: the medians and the highest share.
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(sys.argv) < 3 else sys.stdout)
        sys.exit(2 if len(sys.argv) < 3 else 0)
    try:
        ns = float(sys.argv[1])
    except ValueError:
        sys.exit(f"watchdog_reads.py: NS_PER_READ must be a number, got '{sys.argv[1]}'")
    print("| workdir | program | rank-runs | clock reads a rank | their time a rank (µs) "
          "| progress thread's CPU a rank (ms) | share of the run's wall time, highest |")
    print("|---|---|---|---|---|---|---|")
    for work in sys.argv[2:]:
        try:
            with open(os.path.join(os.path.dirname(os.path.abspath(work)), "run.json")) as f:
                runs = json.load(f)["runs"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"watchdog_reads.py: {work}: no run.json beside it ({e})")
        wall = {os.path.basename(r["log"])[:-4]: r["wall_s"] for r in runs if r.get("config") == "tnbc" and r.get("ok")}
        rows = {}
        for run in sorted(glob.glob(os.path.join(work, "stats", "*-tnbc-round*"))):
            name = os.path.basename(run)
            prog = re.sub(r"-(local|cluster)-tnbc-round\d+$", "", re.sub(r"^\d+-", "", name))
            for path in glob.glob(os.path.join(run, "*.json")):
                with open(path) as f:
                    s = json.load(f)
                p = s.get("progress") or {}
                calls = sum((s.get(op) or {}).get("early_return", 0) for op in ("alltoall", "alltoallv", "bcast"))
                calls += sum(k.get("engine_blocking_calls", 0) for k in (s.get("adapt") or {}).get("keys", []))
                reads = p.get("rounds", 0) + calls
                share = reads * ns / 1e9 / wall[name] if name in wall else None
                rows.setdefault(prog, []).append((reads, p.get("cpu_us", 0) / 1e3, share))
        for prog, v in sorted(rows.items()):
            reads = statistics.median(x[0] for x in v)
            shares = [x[2] for x in v if x[2] is not None]
            print(f"| {work} | {prog} | {len(v)} | {reads:.0f} | {reads * ns / 1e3:.0f} "
                  f"| {statistics.median(x[1] for x in v):.1f} | {100 * max(shares, default=0):.4f}% |")


if __name__ == "__main__":
    main()
