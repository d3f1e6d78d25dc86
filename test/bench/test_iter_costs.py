#!/usr/bin/env python3
"""bench/iter_costs.py against runs made up by hand: the slowest rank per iteration, the
reference from the plan's later calls, the mean of the calls that are not measuring and the
price of those that are; files without iteration lines or with an iteration missing, and bad
--measuring values, end with a message."""

import os
import subprocess
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

SCRIPT = os.path.join(SOURCE, "bench", "iter_costs.py")
sys.path.insert(0, os.path.join(SOURCE, "bench"))
import iter_costs as C  # noqa: E402


def write(folder, name, per_iteration):
    """An overlap output: per iteration, one line per rank (rank 1 the slower)."""
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("tnbc[0]: something else\n")
        for i, t in enumerate(per_iteration):
            f.write(f"iter rank=0 i={i} total_ms={t - 5:.3f} call_ms=1.0\n")
            f.write(f"iter rank=1 i={i} total_ms={t:.3f} call_ms=1.0\n")
        f.write("result mode=blocking\n")
    return path


def main():
    s = Suite("iter-costs")
    tmp = tempfile.mkdtemp(prefix="tnbc_iter_costs_")
    # The plan: 100 ms from call 2 on; learning: 150 ms in calls 0-1 and 5, 98 ms elsewhere.
    plan = write(tmp, "plan.txt", [300, 200] + [100] * 8)
    learn = write(tmp, "learn.txt", [150, 150, 98, 98, 98, 150, 98, 98, 98, 98])

    def slowest():
        expect(C.slowest_per_iteration(plan) == [300, 200] + [100] * 8, "not the slower rank per iteration")
    s.check("the slowest rank counts per iteration", slowest)

    def numbers():
        ref = C.reference([C.slowest_per_iteration(plan)], 2)
        expect(abs(ref - 100) < 1e-9, f"reference {ref}")
        mean, rest, price, n = C.costs(C.slowest_per_iteration(learn), C.parse_ranges("0-1,5"), ref)
        expect(abs(mean - 113.6) < 1e-9 and abs(rest - 98) < 1e-9 and abs(price - 0.15) < 1e-9 and n == 3,
               f"mean {mean}, rest {rest}, price {price}, measuring calls {n}")
        out = subprocess.run([sys.executable, SCRIPT, "--steady-from", "2", "--measuring", "0-1,5", "--plan", plan,
                              "--", learn], capture_output=True, text=True, check=True).stdout
        expect("reference: the plan's calls from call 2 on, 100.0 ms" in out
               and "the 7 calls that are not measuring 98.0 ms; the 3 measuring calls cost 0.15 s" in out, out)
    s.check("reference, calls not measuring, price of the measuring calls", numbers)

    def bad_input():
        empty = write(tmp, "empty.txt", [])
        gap = os.path.join(tmp, "gap.txt")
        with open(gap, "w", encoding="utf-8") as f:
            f.write("iter rank=0 i=0 total_ms=1.0\niter rank=0 i=2 total_ms=1.0\n")
        for argv, want in ((["--plan", empty, "--", learn], "no 'iter rank=... total_ms=...' lines"),
                           (["--plan", gap, "--", learn], "iterations missing"),
                           (["--measuring", "3-a", "--plan", plan, "--", learn], "'3-a' is not a call"),
                           (["--measuring", "5-2", "--plan", plan, "--", learn], "'5-2' is not a range"),
                           (["--steady-from", "20", "--plan", plan, "--", learn], "no calls from call 20 on")):
            res = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True)
            expect(res.returncode != 0 and want in res.stderr, f"{argv}: exit {res.returncode}, {res.stderr!r}")
    s.check("empty or gapped files, bad --measuring and --steady-from: a message and a failing exit", bad_input)
    s.finish()


if __name__ == "__main__":
    main()
