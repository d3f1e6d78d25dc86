#!/usr/bin/env python3
"""tnbc-stats on statistics files written by hand: per-key means over the ranks, per-call costs,
the table and --json, and clear errors for missing or foreign files."""

import json
import os
import subprocess
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

TOOL = os.path.join(SOURCE, "tools", "tnbc-stats")


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def key(early_calls, blocking_calls, init_us, blocking_us, path="early", decisions=3, comm=0, op="alltoall"):
    return {"comm": comm, "comm_size": 2, "op": op, "size_class": 21, "one_node": False, "path": path,
            "decisions": decisions, "switches": 1, "early_calls": early_calls, "blocking_calls": blocking_calls,
            "init_us": init_us, "wait_us": 2000.0, "progress_cpu_us": 4000.0, "blocking_us": blocking_us,
            "early_interval_us": 10000.0, "blocking_interval_us": 12000.0,
            "setup_us": init_us / 2, "send_copy_us": init_us / 4, "inside_wait_us": init_us / 4, "publish_us": 30.0}


def write(prefix, rank, keys):
    doc = {"rank": rank, "library": "tnbc", "version": "x", "faults": 3, "fault_wait_us": 1000.0,
           "fence_wait_us": 500.0, "progress": {"cpu_us": 8000.0, "rounds": 10},
           "adapt": {"enabled": True, "keys": keys}}
    with open(f"{prefix}.{rank}.json", "w", encoding="utf-8") as f:
        json.dump(doc, f)


def main():
    s = Suite("tnbc-stats")
    tmp = tempfile.mkdtemp(prefix="tnbc_stats_")
    prefix = os.path.join(tmp, "run")
    # Rank 0: 4 early calls, 2000 us inside in all; rank 1: 2 early calls, 4000 us.  Means over
    # the ranks: 3 early calls, 3000 us inside -> 1 ms per early call.
    write(prefix, 0, [key(4, 6, 2000.0, 6000.0), key(1, 9, 100.0, 900.0, path="blocking", op="bcast")])
    write(prefix, 1, [key(2, 8, 4000.0, 8000.0), key(1, 9, 100.0, 900.0, path="blocking", op="bcast")])

    def as_json():
        r = run("--json", prefix)
        expect(r.returncode == 0, r.stderr)
        d = json.loads(r.stdout)
        expect(d["ranks"] == 2 and len(d["keys"]) == 2, d)
        a2a = next(k for k in d["keys"] if k["op"] == "alltoall")
        expect(a2a["early_calls"] == 3 and a2a["blocking_calls"] == 7, a2a)
        expect(abs(a2a["inside_ms"] - 1.0) < 1e-9, f"inside per early call: {a2a['inside_ms']}")
        expect(abs(a2a["setup_ms"] - 0.5) < 1e-9 and abs(a2a["send_copy_ms"] - 0.25) < 1e-9, a2a)
        expect(abs(a2a["blocking_ms"] - 1.0) < 1e-9, f"per blocking call: {a2a['blocking_ms']}")
        expect(a2a["early_interval_ms"] == 10.0 and a2a["blocking_interval_ms"] == 12.0, a2a)
        expect(next(k for k in d["keys"] if k["op"] == "bcast")["path"] == "blocking", d)
    s.check("--json: means over ranks, costs per call", as_json)

    def as_table():
        r = run(prefix)
        expect(r.returncode == 0, r.stderr)
        expect("2 ranks, tnbc" in r.stdout and "progress thread 8.0 ms CPU" in r.stdout, r.stdout)
        rows = [l for l in r.stdout.splitlines() if l.startswith("0 ")]
        expect(len(rows) == 2 and any("alltoall" in l and "early" in l for l in rows), r.stdout)
    s.check("table: one row per key", as_table)

    def errors():
        r = run(os.path.join(tmp, "missing"))
        expect(r.returncode == 1 and "no statistics files" in r.stderr, r)
        with open(os.path.join(tmp, "foreign.0.json"), "w") as f:
            f.write("[1, 2")
        r = run(os.path.join(tmp, "foreign"))
        expect(r.returncode == 1 and "not a statistics file" in r.stderr, r)
        r = run("--help")
        expect(r.returncode == 0 and "usage: tnbc-stats" in r.stdout, r)
    s.check("missing and foreign files: one clear message, exit 1; --help", errors)
    s.finish()


if __name__ == "__main__":
    main()
