#!/usr/bin/env python3
"""tnbc-sim for the T-NBC paper's NPB runs: FT class C on 64 ranks and IS class D on 128.

The paper (section 6.3; ../shared/SEEDS.md) ran ft.C.64 and is.D.128 on its 16-node InfiniBand
QDR cluster under MVAPICH and reports, against blocking collectives: FT 18% of the Alltoall time
hidden and +5% performance, IS 45% of the Alltoallv time hidden and +36%.  It does not give the
ranks per node of these runs; its 64-rank micro-benchmark ran 8 per node.

This script predicts both with tnbc-sim, each iteration's collective and the work after it until
the next call, under plain MPICH, libtnbc.so without a plan, and with the plan (the trace's order)
with per-node turns and with per-message priorities only:

- **The work** comes from a trace of the same program at a size this 2-core machine runs without
  sharing a core: NPB FT class A and IS class B on 2 ranks (libtnbc_trace.so, one node).  A rank
  of ft.A.2 holds twice the grid points of a rank of ft.C.64 (256 x 256 x 128 over 2 against
  512^3 over 64), a rank of is.B.2 as many keys as one of is.D.128 (2^25 over 2, 2^31 over 128),
  so the work is taken per byte received (`--trace-work per-byte`): the traced rank's reading
  and other work, times the bytes the simulated rank receives over the traced rank's.
- **IS's counts** are NPB IS's key spread at 128 ranks (`--counts is`): 2 traced ranks cannot show
  how uneven the spread becomes (the middle ranks receive most).
- **The platform** is bench/sim_paper.py's calibration to the paper's own micro-benchmark (plain
  MPICH's 1 MB exchange on 8 x 8 takes its 268 ms, libtnbc.so's call its 60 ms), 1 us latency.
- **The core**: the paper's Xeon X5650 (2010) is slower than this machine's; the work is also
  predicted at twice the traced time (`--trace-work-scale 2`).

Prints the traces' facts and a Markdown table; docs/measurements/scale.md, "The paper's NPB
runs", holds its output.  Needs a build (`tools/build`), MPICH's mpiexec and the NPB binaries
bench/apps builds (bench/apps/build-npb.sh; --npb names their folder); takes about a minute.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import sim_paper

ROOT = sim_paper.ROOT
PAPER = {"ft": {"hidden": 0.18, "gain": 0.05, "what": "ft.C.64"},
         "is": {"hidden": 0.45, "gain": 0.36, "what": "is.D.128"}}
# (program, traced binary, bytes per pair simulated, platforms (nodes, ppn), extra tnbc-sim options)
RUNS = (("ft", "ft.A.x", 512 * 512 * 512 * 16 // 64 // 64, ((8, 8), (16, 4)), []),
        ("is", "is.B.x", (1 << 31) * 4 // 128 // 128, ((16, 8),), ["--counts", "is"]))
TRACED_RANKS = 2


def trace(npb, exe, out, build):
    """Runs `exe` on 2 local ranks under libtnbc_trace.so into `out`; its verification must pass."""
    lib = os.path.join(build, "trace", "libtnbc_trace.so")
    cmd = ["mpiexec", "-n", str(TRACED_RANKS), "-env", "LD_PRELOAD", lib, "-env", "TNBC_TRACE_DIR", out,
           os.path.join(npb, exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not re.search(r"Verification\s+=\s+SUCCESSFUL", r.stdout):
        sys.exit(f"sim_npb.py: {' '.join(cmd)}: exit {r.returncode}, not verified:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    m = re.search(r"Time in seconds\s+=\s+([0-9.]+)", r.stdout)
    return float(m.group(1)) if m else float("nan")


def predict(sim, trace_dir, extra):
    cmd = [sim, "--json", "--trace", trace_dir, "--trace-work", "per-byte", "--latency", "1us", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"sim_npb.py: {' '.join(cmd)}: {r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder (default build/)")
    ap.add_argument("--npb", default="/work/apps/npb/bin",
                    help="NPB's binaries, ft.A.x and is.B.x (default /work/apps/npb/bin, as bench/apps builds them)")
    ap.add_argument("--scales", default="1,2", help="the work's factors, one row each (default 1,2)")
    a = ap.parse_args()
    sim = sim_paper.simulator(a.build)
    scales = [float(x) for x in a.scales.split(",")]
    for _, exe, _, _, _ in RUNS:
        if not os.path.exists(os.path.join(a.npb, exe)):
            sys.exit(f"sim_npb.py: missing {os.path.join(a.npb, exe)} (bench/apps/build-npb.sh builds it; --npb)")
    link, mem = sim_paper.paper_platform(sim)
    platform = ["--link", f"{link:.0f}bps", "--mem-bw", f"{mem:.0f}bps"]
    print(f"Platform: bench/sim_paper.py's calibration, links {link * 8 / 1e9:.2f} Gbit/s each way, memory "
          f"{mem / 1e9:.2f} GB/s, latency 1 us.\n")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sim_npb_") as tmp:
        for prog, exe, block, platforms, extra in RUNS:
            tdir = os.path.join(tmp, prog)
            seconds = trace(a.npb, exe, tdir, a.build)
            print(f"Trace: {exe} on {TRACED_RANKS} ranks, one node, its timed loop {seconds:.2f} s.")
            for nodes, ppn in platforms:
                for placement in ("block", "cyclic"):
                    for scale in scales:
                        common = [*platform, "--nodes", str(nodes), "--ppn", str(ppn), "--placement", placement,
                                  "--bytes", str(block), "--trace-work-scale", f"{scale:g}", *extra]
                        turns = predict(sim, tdir, common)
                        message = predict(sim, tdir, [*common, "--per-node", "off"])
                        rows.append((prog, nodes, ppn, placement, scale, turns, message))
    print("\n| run | nodes x ranks | placement | core | plain MPICH: a call (its exchange) | work a call | "
          "tnbc, no plan | plan, per-node turns | plan, per-message | link bound | best: hidden, performance | "
          "the paper |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for prog, nodes, ppn, placement, scale, turns, message in rows:
        plain, tcomm = turns["plain_ms"], turns["plain_exchange_ms"]
        work = turns["curc_ms"] + turns["crc_ms"]
        cells = [(turns["tnbc_ms"], turns["tnbc_exchange_ms"]), (turns["tnbc_plan_ms"], turns["tnbc_plan_exchange_ms"]),
                 (message["tnbc_plan_ms"], message["tnbc_plan_exchange_ms"])]
        best = min(t for t, _ in cells)
        p = PAPER[prog]
        print(f"| {p['what']} | {nodes} x {ppn} | {placement} | x{scale:g} | {plain:.1f} ms ({tcomm:.1f}) | {work:.1f} ms | "
              + " | ".join(f"{t / plain:.3f} ({x:.1f})" for t, x in cells) +
              f" | {turns['link_bound_ms'] / plain:.3f} | {(plain - best) / tcomm:.0%}, {plain / best - 1:+.0%} | "
              f"{p['hidden']:.0%}, {p['gain']:+.0%} |")
    print("\n(time for the call and the work until the next call, of the slowest rank, / plain MPICH's, and in "
          "parentheses the exchange's end in ms; work: the mean rank's; hidden: plain's time less the best "
          "configuration's, over plain's exchange, as the paper counts it; performance: plain's time / the "
          "best's - 1, as NPB's Mop/s compare)")


if __name__ == "__main__":
    main()
