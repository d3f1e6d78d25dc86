#!/usr/bin/env python3
"""bench/hung_job.py, the time limit of the benchmark drivers' runs (overlap.py, never_slower.py,
apps/run.py): a job within its limit gives its
output, a failing one its exit status, and one past its limit a report with the stacks of the
named program's processes and the output so far, every process of the job ended, those in
sessions of their own too, as hydra starts its ranks (no MPI); and bench/stress.py, which runs a
job many times with a limit calibrated on its first runs and counts what hung, what failed and
what gave output its check rejects."""

import json
import os
import subprocess
import sys
import tempfile
import time

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import hung_job  # noqa: E402

SLEEP = "/bin/sleep"


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main():
    s = Suite("hung-job")
    tmp = tempfile.mkdtemp(prefix="hung_job_test_")

    def within():
        r = hung_job.run(["sh", "-c", "echo out; echo err >&2"], 30, SLEEP)
        expect(r.stdout == "out\n" and r.stderr == "err\n", repr((r.stdout, r.stderr)))
        try:
            hung_job.run(["sh", "-c", "echo why >&2; exit 3"], 30, SLEEP)
        except subprocess.CalledProcessError as e:
            expect(e.returncode == 3 and e.stderr == "why\n", repr((e.returncode, e.stderr)))
        else:
            raise AssertionError("exit status 3 not raised")
    s.check("a job within its limit: its output; a failing one: its exit status and stderr", within)

    def past():
        # Three sleeps of the named program: one in the background, one in a session of its
        # own (as hydra starts each rank), and a line printed before the job hangs.
        cmd = ["sh", "-c", f"echo started; {SLEEP} 300 & echo $! > {tmp}/bg; "
               f"setsid {SLEEP} 302 & echo $! > {tmp}/own; exec {SLEEP} 301"]
        t0 = time.monotonic()
        try:
            hung_job.run(cmd, 2, SLEEP, tmp)
        except hung_job.HungJob as e:
            report = e.report
        else:
            raise AssertionError("a job past its limit was not reported")
        expect(time.monotonic() - t0 < 120, "ending the job took too long")
        text = open(report, encoding="utf-8").read()
        expect(os.path.dirname(report) == tmp, report)
        expect(text.count("=== pid ") == 3, f"not all three sleeps in the report:\n{text[:2000]}")
        expect(text.count("=== kernel view, pid ") == 3 and "wchan " in text,
               f"no kernel view of the three sleeps:\n{text[:2000]}")
        if os.geteuid() == 0:  # /proc/PID/stack is root's
            expect("nanosleep" in text.split("=== pid ")[0], f"no kernel stack:\n{text[:2000]}")
        expect("started" in text, "the output so far is missing")
        if os.geteuid() == 0 or "Thread 1" in text:  # gdb may attach only as root (ptrace scope)
            expect("nanosleep" in text or "no gdb" in text, f"no stack:\n{text[:2000]}")
        for what in ("bg", "own"):
            pid = int(open(f"{tmp}/{what}", encoding="utf-8").read())
            deadline = time.monotonic() + 10
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            expect(not alive(pid), f"the job's process {pid} ({what}) still runs")
    s.check("a job past its limit: the stacks of the program's processes and the output so far, "
            "every process of the job ended", past)

    def stress():
        # Runs 1-2 take 0.2 s (the calibration: a limit of 4 x 0.2 s), run 3 hangs, run 4 fails.
        count = os.path.join(tmp, "count")
        out = os.path.join(tmp, "stress")
        job = (f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}; "
               f"case $n in 3) exec {SLEEP} 60;; 4) echo broken >&2; exit 5;; *) exec {SLEEP} 0.2;; esac")
        r = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "stress.py"), "--runs", "4",
                            "--calibrate", "2", "--program", SLEEP, "--name", "t", "--out", out, "--", "sh", "-c", job],
                           capture_output=True, text=True, timeout=120, check=False)
        expect(r.returncode == 1, f"exit {r.returncode}: {r.stdout} {r.stderr}")
        expect("stress t: 4 runs, 1 hung, 1 failed" in r.stdout, r.stdout)
        summary = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
        expect(summary["hung"] == 1 and summary["failed"] == 1 and 0.4 < summary["limit_s"] < 2.0, f"{summary}")
        report = open(summary["hung_reports"][0], encoding="utf-8").read()
        expect("=== kernel view, pid " in report, f"no kernel view in the hang's report:\n{report[:1000]}")
        expect("broken" in open(summary["failed_reports"][0], encoding="utf-8").read(), "the failure's stderr is missing")
    s.check("stress.py: a run past 4 x the calibrated time is a hang with its report, a failing run is counted",
            stress)

    def stress_wrong():
        # Exit code 0 every time, but run 2's output lacks NPB's verification line: wrong.  The
        # same with --expect; and a name outside the corpus is refused before anything runs.
        for how in (["--verify", "npb-is-A"], ["--expect", r"^ Verification\s+=\s+SUCCESSFUL$"]):
            count = os.path.join(tmp, f"count-{how[0]}")
            out = os.path.join(tmp, f"stress-{how[0]}")
            job = (f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}; "
                   f"case $n in 2) echo ' Verification    =               UNSUCCESSFUL';; "
                   f"*) echo ' Verification    =               SUCCESSFUL';; esac")
            r = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "stress.py"), "--runs", "3",
                                "--limit", "30", "--program", SLEEP, "--name", "w", "--out", out, *how, "--",
                                "sh", "-c", job], capture_output=True, text=True, timeout=120, check=False)
            expect(r.returncode == 1, f"{how}: exit {r.returncode}: {r.stdout} {r.stderr}")
            expect("stress w: 3 runs, 0 hung, 0 failed, 1 wrong" in r.stdout, f"{how}: {r.stdout}")
            summary = json.load(open(os.path.join(out, "summary.json"), encoding="utf-8"))
            expect(summary["wrong"] == 1 and summary["wrong_reports"][0].endswith("wrong-1.txt"), f"{how}: {summary}")
            expect("UNSUCCESSFUL" in open(summary["wrong_reports"][0], encoding="utf-8").read(),
                   f"{how}: the wrong run's output is missing")
        r = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "stress.py"), "--runs", "1",
                            "--program", SLEEP, "--verify", "no-such-program", "--", "true"],
                           capture_output=True, text=True, timeout=60, check=False)
        expect(r.returncode == 2 and "not a corpus program" in r.stderr, f"exit {r.returncode}: {r.stderr}")
    s.check("stress.py --verify, --expect: a run that exits 0 with output that fails the check is wrong, "
            "its output saved", stress_wrong)
    return s.finish()


if __name__ == "__main__":
    raise SystemExit(main())
