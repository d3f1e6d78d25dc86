#!/usr/bin/env python3
"""tnbc-sim --op bcast against the emulated cluster: one MPI_Bcast, the data read at once.

bench/bcast (MPI_Bcast from rank 0, then every byte read; the slowest rank's time from a
barrier to the end of its read, median over the iterations) runs on the emulated cluster
(2 nodes x 2 ranks) in rounds, each round plain MPICH and libtnbc.so's engine
(TNBC_ADAPT=off: every call returns early, tnbc-sim's "tnbc" in the shape the engine picks by
default), for each placement and size.  Then `tnbc-sim --op bcast --json` predicts the same
(`plain_ms`, `tnbc_ms`: when the slowest rank has all of the data), and a Markdown table
prints measured medians beside the predictions, each miss, and whether the two rank the same.

docs/measurements/scale.md, "MPI_Bcast: seed 003's k chains", holds its output.  Needs root (network
namespaces) and a build (`tools/build`); takes a few minutes with the defaults.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import overlap
import sim_is

PROG = os.path.join(overlap.BUILD, "bench", "bcast")
SIM = os.path.join(overlap.BUILD, "tools", "tnbc-sim")
CONFIGS = (("plain", False), ("engine", True))


def measure(size, iters, placement):
    """{config: the slowest rank's median time in ms} of one round, and the checksums."""
    out, sums = {}, set()
    for label, preload in CONFIGS:
        cmd = [overlap.CLUSTER, "run", "--mpi", overlap.MPI, "--ppn", str(overlap.PPN), "--placement", placement,
               "--timeout", "300"]
        if preload:
            cmd += ["--preload", overlap.LIB, "--env", "TNBC_ADAPT=off"]
        cmd += ["--", PROG, str(size), str(iters)]
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=True).stdout
        m = re.search(r"result .*median_us=([0-9.]+) .*checksum=(\w+)(.*)", text)
        if not m or m.group(3).strip():
            sys.exit(f"sim_bcast.py: no result, or wrong bytes read, from {' '.join(cmd)}:\n{text}")
        out[label] = float(m.group(1)) / 1e3
        sums.add(m.group(2))
    if len(sums) != 1:
        sys.exit(f"sim_bcast.py: plain MPICH and libtnbc.so read different bytes ({sums})")
    return out


def predict(size, placement, rate):
    r = subprocess.run([SIM, "--json", "--op", "bcast", "--bytes", str(size), "--placement", placement, "--link", rate],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"sim_bcast.py: tnbc-sim: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="65536,1048576,4194304", help="buffer bytes (default 64 KiB, 1 MiB, 4 MiB)")
    ap.add_argument("--iters", type=int, default=11, help="iterations per run (the first left out; median taken)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (median taken)")
    ap.add_argument("--rate", default="200mbit", help="link rate per node and direction (default 200mbit)")
    ap.add_argument("--placement", default="block,cyclic", help="rank placements (default block,cyclic)")
    args = ap.parse_args()
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: byte counts, not {args.sizes!r}")
    placements = args.placement.split(",")
    if any(p not in ("block", "cyclic") for p in placements):
        ap.error(f"--placement: block and/or cyclic, not {args.placement!r}")
    for path in (overlap.CLUSTER, PROG, overlap.LIB, SIM):
        if not os.path.exists(path):
            sys.exit(f"sim_bcast.py: missing {path} (build first: tools/build)")
    if os.geteuid() != 0:
        sys.exit("sim_bcast.py: needs root (network namespaces)")

    subprocess.run([overlap.CLUSTER, "--nodes", str(overlap.NODES), "--rate", args.rate, "up"], check=True)
    rows = []
    try:
        for placement in placements:
            for size in sizes:
                runs = [measure(size, args.iters, placement) for _ in range(args.repeat)]
                measured = {label: statistics.median(r[label] for r in runs) for label, _ in CONFIGS}
                d = predict(size, placement, args.rate)
                rows.append((placement, size, measured, d))
                print(f"{placement:<6} {size:>8} plain {measured['plain']:.2f}/{d['plain_ms']:.2f} ms  engine "
                      f"{measured['engine']:.2f}/{d['tnbc_ms']:.2f} ms", file=sys.stderr, flush=True)
    finally:
        subprocess.run([overlap.CLUSTER, "down"], check=False)

    print("| placement | bytes | plain MPICH's algorithm | engine's shape | plain: measured / predicted | miss "
          "| engine alone: measured / predicted | miss | same ranking |")
    print("|---|---|---|---|---|---|---|---|---|")
    misses, same = [], 0
    for placement, size, m, d in rows:
        p = {"plain": d["plain_ms"], "engine": d["tnbc_ms"]}
        cells = []
        for k in ("plain", "engine"):
            miss = (p[k] - m[k]) / m[k]
            misses.append(miss)
            cells.append(f"{m[k]:.2f} / {p[k]:.2f} ms | {miss:+.0%}")
        ranked = sim_is.same_ranking(m, p)
        same += ranked
        tree = f"{d['chains']} chains" if d["chains"] > 0 else "binomial"
        print(f"| {placement} | {size} | {d['plain_algorithm']} | {d['segments']} segment(s), {tree} | "
              + " | ".join(cells) + f" | {'yes' if ranked else 'no'} |")
    within = sum(abs(x) <= 0.15 for x in misses)
    print(f"\n{within} of {len(misses)} predictions within 15% of the measured median "
          f"({max(abs(x) for x in misses):.0%} at most); the same ranking in {same} of {len(rows)} rows "
          "(predictions within 3% of each other count as tied).")


if __name__ == "__main__":
    main()
