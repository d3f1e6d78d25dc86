#!/usr/bin/env python3
"""tnbc-sim's plan prediction against the measured plan of docs/measurements/replay-overlap.md.

For every row of the measured tables (spinning work; the rows with work that sleeps are left
out), runs `tnbc-sim --json --scenario S --parts N --placement P --work-ms <the row's Tcomm>`
on the cluster the page was measured on (its nodes, ranks per node, link rate and block, from
the page's text: `bench/overlap.py --nodes 4 --rate 100mbit --block 262144 --out X.md` gives a
page this reads with `--measured X.md`)
with per-node turns (the default of the fluid model) and with `--per-node off`, and prints a
Markdown table: the measured "tnbc, plan", "engine alone" and "plain" medians beside the
predictions, and the share of rows (the plan) and of cells (all three) within 15%.
docs/measurements/scale-overlap.md holds its output for the pages of 2 nodes x 2 ranks, 4 x 2
and 8 x 2.  Needs build/tools/tnbc-sim (`tools/build`); takes a few seconds.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


NEEDED_COLUMNS = ("tnbc, plan", "Tcomm (row)", "engine alone", "plain")  # headings of the page's tables


def measured_rows(path):
    """(placement, parts, scenario, plan ms, row Tcomm ms, engine alone ms, plain ms) of each measured row,
    the columns found by their headings (bench/overlap.py adds columns now and then)."""
    rows, section, col = [], None, None
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.match(r"## Placement (\w+), blocks read in (\d+) part", line)
        if m:
            section = None if "sleeps" in line else (m.group(1), int(m.group(2)))
            continue
        if line.startswith("## "):
            section = None
        if not section or not line.startswith("| ") or line.startswith("|---"):
            continue
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if c[0] == "scenario":
            col = {h: i for i, h in enumerate(c)}
            continue
        if not col or any(h not in col for h in NEEDED_COLUMNS):
            continue
        ms = lambda h: float(c[col[h]].split()[0])
        rows.append((section[0], section[1], c[0].split(":")[0], ms("tnbc, plan"), ms("Tcomm (row)"),
                     ms("engine alone"), ms("plain")))
    return rows


def platform_of(path):
    """tnbc-sim's platform options for the cluster a bench/overlap.py page was measured on."""
    m = re.search(r"emulated cluster: (\d+) nodes x (\d+) ranks, (\S+) per node and direction, "
                  r"MPI_Alltoall of (\d+) KiB blocks", open(path, encoding="utf-8").read())
    if not m:
        sys.exit(f"sim_vs_measured.py: {path} does not say its cluster (\"emulated cluster: N nodes x P "
                 "ranks, RATE per node and direction, MPI_Alltoall of B KiB blocks\")")
    return ["--nodes", m.group(1), "--ppn", m.group(2), "--link", m.group(3), "--bytes", int(m.group(4)) * 1024]


def sim_json(sim, *args, who="sim_vs_measured.py"):
    """The JSON object `tnbc-sim --json ARGS...` prints; exits with its error if it fails."""
    cmd = [sim, "--json", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)}: {r.stderr}")
    return json.loads(r.stdout)


def predict(sim, platform, placement, parts, scenario, tcomm, per_node):
    return sim_json(sim, *platform, "--scenario", scenario, "--parts", parts, "--placement", placement,
                    "--work-ms", tcomm, "--per-node", per_node)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder (default build/)")
    ap.add_argument("--measured", default=os.path.join(ROOT, "docs", "measurements", "replay-overlap.md"),
                    help="the measured tables (default docs/measurements/replay-overlap.md)")
    a = ap.parse_args()
    sim = os.path.join(a.build, "tools", "tnbc-sim")
    if not os.path.exists(sim):
        sys.exit(f"sim_vs_measured.py: missing {sim} (build first: tools/build)")
    platform = platform_of(a.measured)
    rows = measured_rows(a.measured)
    if not rows:
        sys.exit(f"sim_vs_measured.py: no measured rows in {a.measured}")
    print(f"tnbc-sim {' '.join(map(str, platform))}\n")
    print("| placement | parts | scenario | plan, measured | plan with turns, predicted | miss "
          "| plan without turns, predicted | engine alone, measured | no plan, predicted | miss "
          "| plain, measured | plain, predicted | miss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    misses, cells = [], []
    for placement, parts, scenario, plan, tcomm, engine, plain in rows:
        on = predict(sim, platform, placement, parts, scenario, tcomm, "on")
        off = predict(sim, platform, placement, parts, scenario, tcomm, "off")
        miss = (on["tnbc_plan_ms"] - plan) / plan
        engine_miss = (on["tnbc_ms"] - engine) / engine
        plain_miss = (on["plain_ms"] - plain) / plain
        misses.append(miss)
        cells += [miss, engine_miss, plain_miss]
        print(f"| {placement} | {parts} | {scenario} | {plan:.1f} ms | {on['tnbc_plan_ms']:.1f} ms | {miss:+.0%} "
              f"| {off['tnbc_plan_ms']:.1f} ms | {engine:.1f} ms | {on['tnbc_ms']:.1f} ms | {engine_miss:+.0%} "
              f"| {plain:.1f} ms | {on['plain_ms']:.1f} ms | {plain_miss:+.0%} |")
    within = sum(abs(m) <= 0.15 for m in misses)
    print(f"\nThe plan: {within} of {len(misses)} rows within 15%, {max(abs(m) for m in misses):.0%} at most.  "
          f"Every cell (the plan, the engine alone, plain MPICH): {sum(abs(m) <= 0.15 for m in cells)} of "
          f"{len(cells)} within 15%, {max(abs(m) for m in cells):.0%} at most.")


if __name__ == "__main__":
    main()
