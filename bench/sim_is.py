#!/usr/bin/env python3
"""tnbc-sim's MPI_Alltoallv predictions (`--op alltoallv`) against the emulated cluster.

bench/overlap with OVERLAP_COUNTS=is runs an MPI_Alltoallv with bench/is's key spread (1 MiB per
block on average: the middle ranks receive 11/6 MiB blocks, the others 1/6 MiB on 2 x 2 ranks)
followed by the work of bench/overlap.py's scenarios, each rank's reading work in proportion to
its bytes.  For each placement and scenario it measures, in rounds (each round runs every
configuration once): plain MPICH, libtnbc.so's engine alone (TNBC_ADAPT=off: every call returns
early, what tnbc-sim's "tnbc, no plan" models) and libtnbc.so with a plan of a traced run
(blocks read 0..p-1, per-node turns, `return early`: tnbc-sim's "tnbc, plan").  Then it asks
`tnbc-sim --op alltoallv --json` for the same rows, with the work sized by the Tcomm measured
for the placement (`--work-ms`), and prints a Markdown table of measured medians beside the
predictions, each miss, and whether the three configurations rank the same.

docs/measurements/scale.md, "MPI_Alltoallv: bench/is's counts", holds its output.  Needs root (network
namespaces) and a build (`tools/build`); takes about 15 minutes with the defaults.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import overlap
import sim_vs_measured

ROOT = overlap.ROOT
CONFIGS = (("plain", False, None), ("engine", True, {"TNBC_ADAPT": "off"}), ("plan", True, None))
SIM_FIELD = {"plain": "plain_ms", "engine": "tnbc_ms", "plan": "tnbc_plan_ms"}
COUNTS = {"OVERLAP_COUNTS": "is"}


def predict(sim, rate, placement, scenario, tcomm_ms, block):
    return sim_vs_measured.sim_json(sim, "--op", "alltoallv", "--bytes", block, "--link", rate, "--placement", placement,
                                    "--scenario", scenario, "--work-ms", f"{tcomm_ms:.3f}", who="sim_is.py")


def same_ranking(measured, predicted, tie=0.03):
    """True when every two configurations whose predictions differ by more than `tie` (a share
    of the smaller) were measured in the same order; closer predictions claim no order."""
    keys = list(measured)
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            px, py = predicted[x], predicted[y]
            if abs(px - py) > tie * min(px, py) and (px < py) != (measured[x] < measured[y]):
                return False
    return True


def parse_args(doc, who, block_help="mean block bytes (default 1 MiB)", iters_help="iterations per run (median taken)"):
    """The options sim_is.py and sim_trace.py share, checked: (args, chosen scenarios, placements,
    the tnbc-sim binary).  Exits with a message without a build or root."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--block", type=int, default=1 << 20, help=block_help)
    ap.add_argument("--iters", type=int, default=5, help=iters_help)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (median taken)")
    ap.add_argument("--rate", default="200mbit", help="link rate per node and direction (default 200mbit)")
    ap.add_argument("--placement", default="cyclic,block", help="rank placements (default cyclic,block)")
    ap.add_argument("--scenarios", default="a,b,c,d,e,none", help="bench/overlap.py's scenarios (default all)")
    args = ap.parse_args()
    names = [sc[0] for sc in overlap.SCENARIOS]
    chosen = args.scenarios.split(",")
    if any(x not in names for x in chosen):
        ap.error(f"--scenarios: scenario names ({', '.join(names)}), not {args.scenarios!r}")
    placements = args.placement.split(",")
    if any(p not in ("block", "cyclic") for p in placements):
        ap.error(f"--placement: block and/or cyclic, not {args.placement!r}")
    sim = os.path.join(overlap.BUILD, "tools", "tnbc-sim")
    for path in (overlap.CLUSTER, overlap.PROG, overlap.LIB, overlap.TRACE_LIB, sim):
        if not os.path.exists(path):
            sys.exit(f"{who}: missing {path} (build first: tools/build)")
    if os.geteuid() != 0:
        sys.exit(f"{who}: needs root (network namespaces)")
    return args, chosen, placements, sim


def report(rows, extra_heads=()):
    """The Markdown table of measured medians beside predictions: rows of (placement, scenario,
    Tcomm ms, extra cells after Tcomm, measured {plain, engine, plan}, predicted the same), then
    the share within 15% and of the same ranking."""
    print("| placement | scenario | Tcomm | " + "".join(f"{h} | " for h in extra_heads) +
          "plain: measured / predicted | miss | engine alone: measured / tnbc, no plan predicted | miss "
          "| plan: measured / predicted | miss | same ranking |")
    print("|---" * (10 + len(extra_heads)) + "|")
    misses, same = [], 0
    for placement, name, tcomm, extra, m, p in rows:
        cells = []
        for k in ("plain", "engine", "plan"):
            miss = (p[k] - m[k]) / m[k]
            misses.append(miss)
            cells.append(f"{m[k]:.1f} / {p[k]:.1f} ms | {miss:+.0%}")
        ranked = same_ranking(m, p)
        same += ranked
        print(f"| {placement} | {name} | {tcomm:.1f} ms | " + "".join(f"{c} | " for c in extra) + " | ".join(cells) +
              f" | {'yes' if ranked else 'no'} |")
    within = sum(abs(x) <= 0.15 for x in misses)
    print(f"\n{within} of {len(misses)} predictions within 15% of the measured median "
          f"({max(abs(x) for x in misses):.0%} at most); the same ranking in {same} of {len(rows)} rows "
          "(configurations predicted within 3% of each other count as tied).")


def main():
    args, chosen, placements, sim = parse_args(__doc__, "sim_is.py")

    subprocess.run([overlap.CLUSTER, "--nodes", str(overlap.NODES), "--rate", args.rate, "up"], check=True)
    rows = []
    try:
        plan = overlap.make_plan(args, tempfile.mkdtemp(prefix="tnbc_sim_is_"), op="alltoallv", env=COUNTS)
        for placement in placements:
            tcomm = statistics.median(
                overlap.run("blocking", False, 0, 0, args, placement=placement, env=COUNTS, timed=False)["tcomm_us"]
                for _ in range(args.repeat)) / 1e3
            for name, _desc, fc, fr in overlap.SCENARIOS:
                if name not in chosen:
                    continue
                runs = {label: [] for label, *_ in CONFIGS}
                for _ in range(args.repeat):
                    for label, preload, env in CONFIGS:
                        r = overlap.run("blocking", preload, fc * tcomm * 1e3, fr * tcomm * 1e3, args,
                                        plan=plan if label == "plan" else None, placement=placement,
                                        env={**COUNTS, **(env or {})})
                        runs[label].append(r["total_us"] / 1e3)
                measured = {label: statistics.median(v) for label, v in runs.items()}
                d = predict(sim, args.rate, placement, name, tcomm, args.block)
                rows.append((placement, name, tcomm, measured, {k: d[f] for k, f in SIM_FIELD.items()}))
                print(f"{placement:<6} {name:>4} " + "  ".join(
                    f"{k} {measured[k]:.1f}/{rows[-1][4][k]:.1f} ms" for k in measured), file=sys.stderr, flush=True)
    finally:
        subprocess.run([overlap.CLUSTER, "down"], check=False)

    report([(placement, name, tcomm, [], m, p) for placement, name, tcomm, m, p in rows])

if __name__ == "__main__":
    main()
