#!/usr/bin/env python3
"""Per-iteration costs of bench/overlap runs: where a run without a plan loses against a plan.

Reads the output of `bench/overlap` runs made with OVERLAP_ITER_TIMES=1 (a line
`iter rank=R i=I total_ms=T ...` per rank and timed iteration) and takes the slowest rank of
each iteration, as the benchmark does.  For every file it prints the mean per iteration, and
against the mean of the --plan files' calls from --steady-from on (the plan's early calls):

  the mean of the calls that are not measuring calls (--measuring), and
  the price of the measuring calls: the sum of their excess over the plan's mean.

The default --measuring is what the per-call decision (shim/replay/adapt/policy.hpp, default Policy) spends
measuring in up to 1000 calls of overlap scenario b, where its decisions are wide (early saves
more than 10%: Policy::wide_gain), as TNBC_LOG=debug shows it: the 3 blocking warm-up calls
(its reads leave room to overlap: the warm-up ends at its room point) and the first early
probe of one round of per-node turns (calls 0-7), the blocking probes with the call after them
(72-74, 330-332) and the calls without turns of the comparison at the end of the second run
(327-328): the first decision of the turns is wide there and counts as a confirmation, so the
first run does not compare them.  Before the room point (2026-11-26) the warm-up was 6 calls
and every later call 3 calls later (--measuring 0-10,75-77,330-331,333-335, as in
docs/measurements/learn-overlap.md, "A wide first decision of the turns is a confirmation").  Before that
(2026-11-25, 06:00 UTC) the first run compared them at its end (72-73: --measuring
0-10,72-73,75-77,333-335, as in docs/measurements/learn-overlap.md, "Turns compared at the end of a run"), and before 2026-11-25 in its
first calls (13-14: --measuring 0-10,13-14,75-77,333-335, as in the sections below that one).
Before wide decisions (TNBC_ADAPT_WIDE=0, as in docs/measurements/learn-overlap.md up to "1000 calls")
the measuring calls of 450 calls were
0-14,17-18,47-49,113-115,117-118,243-248.  docs/measurements/learn-overlap.md, "450 calls", was made this
way (before wide decisions, hence its --measuring):

  tnbc-cluster run --ppn 2 --placement cyclic --timeout 600 --env OVERLAP_SKIP_TCOMM=1 \\
      --env OVERLAP_ITER_TIMES=1 --env TNBC_PLAN=PLAN --preload build/shim/replay/libtnbc.so \\
      -- build/bench/overlap 1048576 450 blocking 0 244400 1 > plan1.txt
  (the same with --env TNBC_LEARN=1 instead of TNBC_PLAN, > learn1.txt; in turn, 3 times each;
   PLAN from `bench/overlap.py`, which writes it in its work folder, or `tnbc-order plan`)
  python3 bench/iter_costs.py --measuring 0-14,17-18,47-49,113-115,117-118,243-248 \\
      --plan plan1.txt plan2.txt plan3.txt -- learn1.txt learn2.txt learn3.txt
"""

import argparse
import re
import sys

LINE = re.compile(r"iter rank=(\d+) i=(\d+) total_ms=([0-9.]+)")
DEFAULT_MEASURING = "0-7,72-74,327-328,330-332"


def slowest_per_iteration(path):
    """The slowest rank's time (ms) of each timed iteration, in order."""
    per = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                per.setdefault(int(m[2]), {})[int(m[1])] = float(m[3])
    if not per:
        raise SystemExit(f"{path}: no 'iter rank=... total_ms=...' lines (run with OVERLAP_ITER_TIMES=1)")
    if sorted(per) != list(range(len(per))):
        raise SystemExit(f"{path}: iterations missing (a run cut short?)")
    return [max(per[i].values()) for i in range(len(per))]


def parse_ranges(text):
    calls = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise SystemExit(f"--measuring: '{part}' is not a call or a range of calls (e.g. 0-14)")
        if lo < 0 or hi < lo:
            raise SystemExit(f"--measuring: '{part}' is not a range of calls")
        calls.update(range(lo, hi + 1))
    return calls


def reference(plans, steady_from):
    """The mean of the plan runs' calls from `steady_from` on (ms)."""
    steady = [t for p in plans for t in p[steady_from:]]
    if not steady:
        raise SystemExit(f"--plan: no calls from call {steady_from} on")
    return sum(steady) / len(steady)


def costs(run, measuring, ref):
    """(mean per call, mean of the calls not in `measuring` or None, price of the measuring
    calls in s above `ref`, number of measuring calls) of one run's per-iteration times."""
    fixed = [i for i in sorted(measuring) if i < len(run)]
    rest = [t for i, t in enumerate(run) if i not in measuring]
    price = sum(run[i] - ref for i in fixed) / 1e3
    return sum(run) / len(run), (sum(rest) / len(rest) if rest else None), price, len(fixed)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", nargs="+", required=True, help="output files of runs with the plan")
    ap.add_argument("--steady-from", type=int, default=15,
                    help="the plan's calls from this one on give the reference mean (default 15)")
    ap.add_argument("--measuring", default=DEFAULT_MEASURING,
                    help=f"calls the per-call decision spends measuring (default {DEFAULT_MEASURING})")
    ap.add_argument("runs", nargs="+", help="output files of runs without a plan (e.g. TNBC_LEARN=1)")
    args = ap.parse_args()
    measuring = parse_ranges(args.measuring)

    plans = [slowest_per_iteration(p) for p in args.plan]
    ref = reference(plans, args.steady_from)
    for path, p in zip(args.plan, plans):
        print(f"{path}: plan, {len(p)} calls, mean {sum(p) / len(p):.1f} ms, "
              f"calls {args.steady_from}- {sum(p[args.steady_from:]) / len(p[args.steady_from:]):.1f} ms")
    print(f"reference: the plan's calls from call {args.steady_from} on, {ref:.1f} ms")
    for path in args.runs:
        r = slowest_per_iteration(path)
        mean, rest, price, n = costs(r, measuring, ref)
        rest_text = "none" if rest is None else f"{rest:.1f} ms"
        print(f"{path}: {len(r)} calls, mean {mean:.1f} ms; the {len(r) - n} calls that are not "
              f"measuring {rest_text}; the {n} measuring calls cost {price:.2f} s above the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
