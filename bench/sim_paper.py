#!/usr/bin/env python3
"""tnbc-sim against the T-NBC paper's 64-process MPI_Alltoall (section 6; ../shared/SEEDS.md).

The paper measured, on 8 nodes x 8 processes (of its 16-node cluster) over InfiniBand QDR under
MVAPICH, a 1 MB Alltoall with Tcomm 268 ms and Tinit 60 ms (22 %, mostly the send copy), and found
the overlap of its five CURC/CRC scenarios to match formula (3):
    Toverlap = min(Tcomm - Tinit, TCURC + TCRC)
(TCRC = Tcomm * Rcomm / RCRC: the time the CRC takes on the whole buffer).

The simulator knows neither the paper's NICs nor MVAPICH, so this script calibrates the two
numbers it cannot know from the paper's own: the link rate, so that plain MPICH's predicted
exchange takes the paper's Tcomm, and the memory bandwidth, so that libtnbc.so's predicted Tinit
is the paper's.  It then predicts the five scenarios (the fractions of bench/overlap.py, each
block read whole) in block placement (ranks 0-7 on node 0) and cyclic (rank r on node r mod 8)
and prints a Markdown table of the overlap predicted (plain MPICH's total minus libtnbc.so's)
against formula (3), without a plan and with the plan (blocks 0..p-1, per-node turns).
docs/measurements/scale.md, "Against the T-NBC paper", holds its output; bench/sim_npb.py takes
its calibration for the paper's NPB runs.  Needs build/tools/tnbc-sim (`tools/build`); takes
about 15 seconds.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from overlap import SCENARIOS  # noqa: E402  (the scenarios' fractions of Tcomm, one table)

PAPER_TCOMM_MS = 268.0
PAPER_TINIT_MS = 60.0
NODES, PPN, BLOCK = 8, 8, 1 << 20


def predict(sim, extra):
    cmd = [sim, "--json", "--nodes", str(NODES), "--ppn", str(PPN), "--bytes", str(BLOCK),
           "--latency", "1us", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"sim_paper.py: {' '.join(cmd)}: {r.stderr}")
    return json.loads(r.stdout)


def calibrate(sim, start, field, target, flag, fixed):
    """Scales `flag`'s rate (bytes/s) until `field` of the prediction is `target` ms (times
    inversely proportional to the rate, nearly; a few rounds)."""
    rate = start
    for _ in range(6):
        got = predict(sim, [*fixed, flag, f"{rate:.0f}bps"])[field]
        if abs(got - target) < 0.002 * target:
            break
        rate *= got / target
    return rate


def paper_platform(sim):
    """The link and memory rates (bytes/s) at which plain MPICH's 1 MB exchange on the paper's 8 x 8
    takes its Tcomm and libtnbc.so's call its Tinit.  The memory bandwidth also carries plain MPICH's
    copies within a node: the two are calibrated in turn until both hold."""
    link, mem = 4e9, 8e9
    for _ in range(4):
        link = calibrate(sim, link, "plain_exchange_ms", PAPER_TCOMM_MS, "--link", ["--mem-bw", f"{mem:.0f}bps"])
        mem = calibrate(sim, mem, "tnbc_init_ms", PAPER_TINIT_MS, "--mem-bw", ["--link", f"{link:.0f}bps"])
    return link, mem


def simulator(build):
    sim = os.path.join(build, "tools", "tnbc-sim")
    if not os.path.exists(sim):
        sys.exit(f"missing {sim} (build first: tools/build)")
    return sim


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder (default build/)")
    a = ap.parse_args()
    sim = simulator(a.build)
    link, mem = paper_platform(sim)
    fixed = ["--link", f"{link:.0f}bps", "--mem-bw", f"{mem:.0f}bps", "--work-ms", str(PAPER_TCOMM_MS)]
    base = predict(sim, fixed)
    print(f"Calibrated: links {link * 8 / 1e9:.2f} Gbit/s each way (plain MPICH's {base['plain_algorithm']} "
          f"exchange {base['plain_exchange_ms']:.1f} ms), memory {mem / 1e9:.2f} GB/s (Tinit "
          f"{base['tnbc_init_ms']:.1f} ms); work sized by the paper's Tcomm, {PAPER_TCOMM_MS:.0f} ms.")
    for placement in ("block", "cyclic"):
        print(f"\nPlacement {placement}:\n")
        print("| scenario | TCURC | TCRC | plain | tnbc, no plan | tnbc, plan | formula (3) | overlap, no plan | "
              "overlap, plan | link bound's overlap |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, desc, fc, fr in SCENARIOS:
            if name == "none":
                continue
            d = predict(sim, [*fixed, "--scenario", name, "--placement", placement])
            curc, crc = fc * PAPER_TCOMM_MS, fr * PAPER_TCOMM_MS
            tcomm, tinit = d["plain_exchange_ms"], d["tnbc_init_ms"]
            formula = min(tcomm - tinit, curc + crc)
            ov, ovp, ovb = (d["plain_ms"] - d[k] for k in ("tnbc_ms", "tnbc_plan_ms", "link_bound_ms"))
            print(f"| {name}: {desc} | {curc:.0f} ms | {crc:.0f} ms | {d['plain_ms']:.1f} ms | {d['tnbc_ms']:.1f} ms | "
                  f"{d['tnbc_plan_ms']:.1f} ms | {formula:.1f} ms | {ov:.1f} ms ({ov / formula:.0%}) | "
                  f"{ovp:.1f} ms ({ovp / formula:.0%}) | {ovb:.1f} ms |")


if __name__ == "__main__":
    main()
