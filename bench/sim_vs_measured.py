#!/usr/bin/env python3
"""tnbc-sim's plan prediction against the measured plan of docs/measurements/replay-overlap.md.

For every row of the measured tables (spinning work; the rows with work that sleeps are left
out), runs `tnbc-sim --json --scenario S --parts N --placement P --work-ms <the row's Tcomm>`
with per-node turns (the default of the fluid model) and with `--per-node off`, and prints a
Markdown table: the measured "tnbc, plan" and "engine alone" medians beside the predictions,
and the share of rows within 15%.  docs/measurements/scale.md, "With the plan: per-node turns", holds its
output.  Needs build/tools/tnbc-sim (`tools/build`); takes a few seconds.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured_rows(path):
    """(placement, parts, scenario, plan ms, row Tcomm ms, engine alone ms) of each measured row."""
    rows, section = [], None
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.match(r"## Placement (\w+), blocks read in (\d+) part", line)
        if m:
            section = None if "sleeps" in line else (m.group(1), int(m.group(2)))
            continue
        if line.startswith("## "):
            section = None
        if not section or not line.startswith("| ") or line.startswith(("| scenario", "|---")):
            continue
        c = [x.strip() for x in line.strip("|").split("|")]
        if len(c) < 16:
            continue
        ms = lambda i: float(c[i].split()[0])
        # Columns: scenario, TCURC, TCRC, plain, no plan, engine, plan, ..., Tcomm (row) at 14.
        rows.append((section[0], section[1], c[0].split(":")[0], ms(6), ms(14), ms(5)))
    return rows


def sim_json(sim, *args, who="sim_vs_measured.py"):
    """The JSON object `tnbc-sim --json ARGS...` prints; exits with its error if it fails."""
    cmd = [sim, "--json", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)}: {r.stderr}")
    return json.loads(r.stdout)


def predict(sim, placement, parts, scenario, tcomm, per_node):
    return sim_json(sim, "--scenario", scenario, "--parts", parts, "--placement", placement, "--work-ms", tcomm,
                    "--per-node", per_node)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder (default build/)")
    ap.add_argument("--measured", default=os.path.join(ROOT, "docs", "measurements", "replay-overlap.md"),
                    help="the measured tables (default docs/measurements/replay-overlap.md)")
    a = ap.parse_args()
    sim = os.path.join(a.build, "tools", "tnbc-sim")
    if not os.path.exists(sim):
        sys.exit(f"sim_vs_measured.py: missing {sim} (build first: tools/build)")
    rows = measured_rows(a.measured)
    if not rows:
        sys.exit(f"sim_vs_measured.py: no measured rows in {a.measured}")
    print("| placement | parts | scenario | plan, measured | plan with turns, predicted | miss "
          "| plan without turns, predicted | engine alone, measured | no plan, predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    misses = []
    for placement, parts, scenario, plan, tcomm, engine in rows:
        on = predict(sim, placement, parts, scenario, tcomm, "on")
        off = predict(sim, placement, parts, scenario, tcomm, "off")
        miss = (on["tnbc_plan_ms"] - plan) / plan
        misses.append(miss)
        print(f"| {placement} | {parts} | {scenario} | {plan:.1f} ms | {on['tnbc_plan_ms']:.1f} ms | {miss:+.0%} "
              f"| {off['tnbc_plan_ms']:.1f} ms | {engine:.1f} ms | {on['tnbc_ms']:.1f} ms |")
    within = sum(abs(m) <= 0.15 for m in misses)
    print(f"\n{within} of {len(misses)} rows within 15%, {max(abs(m) for m in misses):.0%} at most.")


if __name__ == "__main__":
    main()
