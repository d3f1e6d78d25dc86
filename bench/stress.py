#!/usr/bin/env python3
"""Runs one job many times and counts the runs that hang, fail or call the library's watchdog.

    bench/stress.py --runs 200 --program /work/apps/heffte/bin/speed3d_c2c --name heffte-a2a \\
        -- build/tools/tnbc-cluster --rate none run --timeout 600 \\
           --preload build/shim/replay/libtnbc.so -- /work/apps/heffte/bin/speed3d_c2c fftw double 128 128 128 -a2a -n50

The time limit of a run is --factor (default 4) times the median wall time of the first
--calibrate runs (default 3, run with a limit of 600 s), or --limit seconds.  A run past it is a
hang: bench/hung_job.py saves the kernel's view of every thread of the processes running
--program (name, wchan, kernel stack), their stacks by gdb and the job's output into --out, then
ends the job, and the next run starts.  A job launched through tnbc-cluster should have its own
--timeout well behind the limit (hung_job.CLUSTER_LIMIT_MARGIN_S), so that this driver finds it.

A run that ends with exit code 0 can still be wrong: with --verify NAME each run's output (stdout
and stderr) must pass the verification of the corpus program NAME (bench/apps/programs.py, as
bench/apps/run.py checks it: NPB's "Verification = SUCCESSFUL", heFFTe's error within its
tolerance, ...), with --expect REGEX it must match REGEX (a job outside the corpus); a run that
does not is counted wrong and its output saved.

Prints one line per run and a summary; writes --out/summary.json.  Exit 1 when a run hung,
failed or was wrong.  Python 3 standard library only.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import hung_job  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps"))
import programs as corpus  # noqa: E402


def checker(a, ap):
    """What a run's output must pass: (output) -> (ok, reason), from --verify or --expect, or None."""
    if a.verify and a.expect:
        ap.error("give --verify or --expect, not both")
    if a.verify:
        prog = corpus.BY_NAME.get(a.verify)
        if prog is None:
            ap.error(f"--verify {a.verify}: not a corpus program ({', '.join(sorted(corpus.BY_NAME))})")
        return lambda output: corpus.verify(prog, 0, output)
    if a.expect:
        try:
            pattern = re.compile(a.expect, re.MULTILINE)
        except re.error as e:
            ap.error(f"--expect {a.expect!r}: {e}")
        return lambda output: (True, "ok") if pattern.search(output) else (False, f"output does not match {a.expect!r}")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--runs", type=int, default=100, help="runs, calibration included (default 100)")
    ap.add_argument("--program", required=True, help="path of the ranks' executable, whose threads a hang's report shows")
    ap.add_argument("--name", default="job", help="the configuration's name in the output")
    ap.add_argument("--limit", type=float, help="seconds a run may take (default: --factor x calibration)")
    ap.add_argument("--factor", type=float, default=4.0)
    ap.add_argument("--calibrate", type=int, default=3)
    ap.add_argument("--out", help="folder for reports and summary.json (default: a new /tmp/tnbc-stress-*)")
    ap.add_argument("--verify", metavar="NAME", help="each run's output must pass the corpus program NAME's verification")
    ap.add_argument("--expect", metavar="REGEX", help="each run's output must match REGEX (multiline)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the job's command")
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd or a.runs < 1 or a.factor <= 1 or a.calibrate < 1 or (a.limit is not None and a.limit <= 0):
        ap.error("give the job's command after --, --runs >= 1, --factor > 1, --calibrate >= 1, --limit > 0")
    if not os.path.isfile(a.program):
        ap.error(f"--program {a.program}: no such file")
    check = checker(a, ap)
    out = a.out or tempfile.mkdtemp(prefix="tnbc-stress-")
    os.makedirs(out, exist_ok=True)
    limit = a.limit
    walls, hung, failed, wrong, watchdog = [], [], [], [], 0
    for i in range(a.runs):
        run_limit = limit if limit is not None else 600.0
        t0 = time.monotonic()
        try:
            r = hung_job.run(cmd, run_limit, a.program, report_dir=out)
            wall = time.monotonic() - t0
            walls.append(wall)
            said = ": watchdog: " in r.stderr
            watchdog += said
            ok, reason = check(r.stdout + r.stderr) if check else (True, "")
            if ok:
                status = f"ok {wall:.2f} s" + (" (watchdog)" if said else "")
            else:
                path = os.path.join(out, f"wrong-{i}.txt")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(f"{reason}\n=== stdout\n{r.stdout}\n=== stderr\n{r.stderr}\n")
                wrong.append(path)
                status = f"WRONG ({reason}): {path}"
        except hung_job.HungJob as e:
            hung.append(e.report)
            status = f"HUNG past {run_limit:.0f} s: {e.report}"
        except subprocess.CalledProcessError as e:
            path = os.path.join(out, f"failed-{i}.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"exit {e.returncode}\n=== stdout\n{e.stdout}\n=== stderr\n{e.stderr}\n")
            failed.append(path)
            status = f"FAILED (exit {e.returncode}): {path}"
        print(f"{a.name} run {i + 1}/{a.runs}: {status}", flush=True)
        if limit is None and len(walls) >= a.calibrate:
            limit = a.factor * statistics.median(walls[:a.calibrate])
            print(f"{a.name}: limit {limit:.1f} s ({a.factor:g} x the median of the first {a.calibrate} runs)", flush=True)
    summary = {"name": a.name, "runs": a.runs, "hung": len(hung), "failed": len(failed), "wrong": len(wrong),
               "watchdog": watchdog, "limit_s": limit, "median_s": statistics.median(walls) if walls else None,
               "verified": a.verify or a.expect or None, "hung_reports": hung, "failed_reports": failed,
               "wrong_reports": wrong, "command": cmd}
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    median = f"{summary['median_s']:.2f} s" if walls else "-"
    checked = f"{len(wrong)} wrong" if check else "output not verified"
    print(f"stress {a.name}: {a.runs} runs, {len(hung)} hung, {len(failed)} failed, {checked}, {watchdog} with a "
          f"watchdog report; median {median}; reports in {out}")
    return 1 if hung or failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
