#!/usr/bin/env python3
"""tnbc-order on real traces: order_sites (known read orders at three call sites, three calls
each, and a fourth where every rank reads in its own order) runs under libtnbc_trace.so; `show --json` must give those orders exactly, `plan` a plan
whose priorities priority's parser reads back the same, `export --chrome` one process of events
per rank, `plot` a readable SVG; bad trace folders exit 2 with a message naming the file."""

import json
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET

from tnbc_testlib import BUILD, TRACE_PREFIX, Suite, expect, mpirun, reseal_trace

PROG = os.path.join(BUILD, "test", "mpi", "order_sites")
TOOL = os.path.join(BUILD, "tools", "tnbc-order")
PLAN_DUMP = os.path.join(BUILD, "test", "tools", "plan_dump")
P = 4
CALLS = 3
SVG = "{http://www.w3.org/2000/svg}"
# The header's u64 sync_stamp: after rank, size, node_id, page_size, ticks_per_us and tsc
# (docs/trace-format.md).
SYNC_FIELD = TRACE_PREFIX + 4 + 4 + 4 + 4 + 8 + 1


def tool(*args):
    return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=60)


def reverse(p):
    return list(range(p - 1, -1, -1))


def odd_first(p):
    return list(range(1, p, 2)) + list(range(0, p, 2))


UNITS = [(5 * k) % 16 for k in range(16)]


def main():
    s = Suite("tnbc-order-e2e")
    tmp = tempfile.mkdtemp(prefix="tnbc_order_e2e_")
    run1 = os.path.join(tmp, "run1")
    state = {}

    def traced_run():
        mpirun(PROG, P, preload="tnbc_trace", timeout=90, cwd=tmp, env={"TNBC_TRACE_DIR": run1})
        files = sorted(os.listdir(run1))
        expect(files == [f"{r}.tnbct" for r in range(P)], f"trace files: {files}")
    s.check("order_sites runs under libtnbc_trace.so", traced_run)

    def show_json():
        r = tool("show", "--json", run1)
        expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
        doc = json.loads(r.stdout)
        expect(doc["format"] == "tnbc-order/1" and doc["ranks"] == P, str(doc)[:300])
        sites = {c["frames"][0]: c for c in doc["callsites"]}
        expect(sorted(sites) == ["site_odd_first", "site_reverse", "site_rotated", "site_units"],
               f"innermost frames: {[c['frames'] for c in doc['callsites']]}")
        state["sites"] = sites
    s.check("show --json: one entry per call site, named after its function", show_json)

    want = {"site_reverse": ("alltoall", reverse(P), P, CALLS * P),
            "site_odd_first": ("alltoall", odd_first(P), P, CALLS * P),
            # The root of the broadcast receives nothing: its calls are not traced.
            "site_units": ("bcast", UNITS, 16, CALLS * (P - 1))}
    for name, (op, order, subs, calls) in want.items():
        def check_site(name=name, op=op, order=order, subs=subs, calls=calls):
            c = state["sites"][name]
            expect(c["op"] == op, f"{name}: op {c['op']}")
            expect(c["order"] == order, f"{name}: order {c['order']}, expected {order}")
            expect(c["submessages"] == subs and c["calls"] == calls,
                   f"{name}: {c['submessages']} sub-messages, {c['calls']} calls")
            expect(c["agreement"] == 1.0, f"{name}: agreement {c['agreement']}")
            ft = c["first_touch_us"]
            expect(len(ft) == subs and all(isinstance(x, (int, float)) and x >= 0 for x in ft),
                   f"{name}: first_touch_us {ft}")
            # The median delays follow the read order.
            expect([ft[i] for i in order] == sorted(ft), f"{name}: delays {ft} not in read order")
            expect(c["comm_us"] > 0, f"{name}: comm_us {c['comm_us']}")
            expect(c["verdict"] in ("crc", "curc") and c["disagreeing"] == [], f"{name}: {c}")
        s.check(f"show --json: {name}: the known order, exactly", check_site)

    def rotated():
        c = state["sites"]["site_rotated"]
        expect(sorted(c["order"]) == list(range(P)), f"order {c['order']} not a permutation")
        expect(c["agreement"] < 0.8 and c["disagreeing"], f"ranks reading in their own orders: {c}")
        out = os.path.join(tmp, "strict.plan")
        r = tool("plan", run1, "-o", out, "--strict")
        expect(r.returncode == 1 and "low agreement" in r.stderr and c["id"] in r.stderr,
               f"--strict: exit {r.returncode} {r.stderr}")
        expect(os.path.exists(out), "--strict with findings must still write the plan")
    s.check("ranks that disagree: low agreement, listed, and plan --strict exits 1", rotated)

    def show_text():
        r = tool("show", run1)
        expect(r.returncode == 0, r.stderr)
        for needle in ("site_reverse", "agreement  1.000", "verdict", "Tcomm", "overlap    formula (1)",
                       "disagreeing ranks: none", "order      3 2 1 0"):
            expect(needle in r.stdout, f"{needle!r} missing from:\n{r.stdout}")
    s.check("show: a readable table", show_text)

    def plan():
        out = os.path.join(tmp, "app.plan")
        r = tool("plan", run1, "-o", out)
        expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
        d = subprocess.run([PLAN_DUMP, out], capture_output=True, text=True, timeout=30)
        expect(d.returncode == 0, d.stderr)
        entries = [json.loads(l) for l in d.stdout.splitlines()]
        by_site = {e["site"]: e for e in entries}
        expect(len(entries) == 4, f"entries: {entries}")
        for name, c in state["sites"].items():
            e = by_site.get(c["id"])
            expect(e is not None, f"no plan entry for {name} ({c['id']})")
            if c["op"] == "bcast":
                # The plan keeps the read order of the traced units, grouped into its segments.
                expect(e["segments"] == len(e["order"]) and e["segments"] >= 1, str(e))
                continue
            prio = [c["order"].index(i) for i in range(P)]
            expect(e["order"] == c["order"] and e["priorities"] == prio,
                   f"{name}: plan order {e['order']} priorities {e['priorities']}, shown {c['order']}")
        expect(not any(f.startswith("app.plan.tmp") for f in os.listdir(tmp)), "temporary file left")
    s.check("plan: priority's parser reads back the shown orders", plan)

    def export():
        out = os.path.join(tmp, "trace.json")
        r = tool("export", "--chrome", run1, "-o", out)
        expect(r.returncode == 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
        for rank in range(P):
            mine = [e for e in events if e["pid"] == rank]
            names = [e for e in mine if e["ph"] == "M" and e["name"] == "process_name"]
            expect(len(names) == 1 and names[0]["args"]["name"].startswith(f"rank {rank}"), str(names))
            calls = [e for e in mine if e["ph"] == "X" and e["cat"] == "collective"]
            expect(len(calls) == 4 * CALLS, f"rank {rank}: {len(calls)} collectives")
            expect([c["name"] for c in calls] == ["alltoall", "alltoall", "bcast", "alltoall"] * CALLS,
                   str(calls))
            expect(all(c["ts"] >= 0 and c["dur"] >= 0 for c in calls), "negative times")
            # The program's work between its calls: one span per gap, from a return to the next call.
            work = [e for e in mine if e["ph"] == "X" and e["cat"] == "program"]
            expect(len(work) <= len(calls) - 1 and all(w["dur"] > 0 for w in work), f"rank {rank}: {work}")
            for w in work:
                before, after = calls[w["args"]["after_call"]], calls[w["args"]["after_call"] + 1]
                expect(abs(w["ts"] - (before["ts"] + before["dur"])) < 1e-2 and abs(w["ts"] + w["dur"] - after["ts"]) < 1e-2,
                       f"rank {rank}: {w} not between {before} and {after}")
            touches = [e for e in mine if e["ph"] == "i"]
            want_touches = CALLS * (3 * P + (0 if rank == 0 else 16))
            expect(len(touches) == want_touches, f"rank {rank}: {len(touches)} touches, want {want_touches}")
            # A first touch comes after the return of its collective.
            for t in touches:
                c = calls[t["args"]["call"]]
                expect(t["ts"] >= c["ts"] + c["dur"] - 1e-3, f"rank {rank}: touch {t} before return of {c}")
        # One clock for all ranks (each rank's sync stamp at MPI_Init): no rank's Alltoall returns
        # before every rank has started it (up to the barrier's skew on 4 ranks over 2 cores).
        per_rank = {r: [e for e in events if e["pid"] == r and e["ph"] == "X" and e["cat"] == "collective"]
                    for r in range(P)}
        for i, c in enumerate(per_rank[0]):
            if c["name"] != "alltoall":
                continue
            latest_start = max(per_rank[r][i]["ts"] for r in range(P))
            for r in range(P):
                end = per_rank[r][i]["ts"] + per_rank[r][i]["dur"]
                expect(end >= latest_start - 5000, f"call {i}: rank {r} returned at {end} us, before a rank "
                       f"started it at {latest_start} us: the ranks are not on one clock")
    s.check("export --chrome: one clock, a process per rank, collectives, the work between them, first touches",
            export)

    def export_without_sync():
        # Traces whose sync stamp is 0 (written by hand, not by libtnbc_trace.so): each rank keeps
        # its own origin, its earliest stamp, instead of counting from the clock's zero.
        d = os.path.join(tmp, "nosync")
        shutil.copytree(run1, d)
        for r in range(P):
            f = os.path.join(d, f"{r}.tnbct")
            with open(f, "rb") as h:
                b = bytearray(h.read())
            b[SYNC_FIELD:SYNC_FIELD + 8] = bytes(8)
            reseal_trace(b)
            with open(f, "wb") as h:
                h.write(b)
        out = os.path.join(tmp, "nosync.json")
        r = tool("export", "--chrome", d, "-o", out)
        expect(r.returncode == 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            events = [e for e in json.load(f)["traceEvents"] if e["ph"] != "M"]
        for rank in range(P):
            times = [e["ts"] for e in events if e["pid"] == rank]
            expect(times and min(times) == 0 and max(times) < 60e6,
                   f"rank {rank}: events from {min(times)} to {max(times)} us, not from its own earliest stamp")
    s.check("export --chrome of traces without a sync stamp: each rank from its earliest stamp", export_without_sync)

    def plot():
        out = os.path.join(tmp, "plot.svg")
        r = tool("plot", run1, "--callsite", state["sites"]["site_units"]["id"], "-o", out)
        expect(r.returncode == 0, r.stderr)
        root = ET.parse(out).getroot()
        expect(root.tag == SVG + "svg", root.tag)
        ids = {e.get("id") for e in root.iter()}
        for want_id in ("title", "axes", "xticks", "yticks", "xlabel", "ylabel", "marks", "median", "legend"):
            expect(want_id in ids, f"no element with id {want_id}")
        marks = [e for e in root.iter(SVG + "circle") if e.get("class") == "mark"]
        expect(len(marks) == CALLS * (P - 1) * 16, f"{len(marks)} marks")
        title = "".join(root.find(f".//{SVG}text[@id='title']").itertext())
        expect("site_units" in title and "bcast" in title, title)
        # Default: the call site with the most calls (an Alltoall, 12 calls).
        r = tool("plot", run1, "-o", out)
        expect(r.returncode == 0, r.stderr)
        marks = [e for e in ET.parse(out).getroot().iter(SVG + "circle") if e.get("class") == "mark"]
        expect(len(marks) == CALLS * P * P, f"default site: {len(marks)} marks")
        r = tool("plot", run1, "--callsite", "nope", "-o", out)
        expect(r.returncode == 2 and "no call site 'nope'" in r.stderr, r.stderr)
    s.check("plot: a standalone SVG with axes, marks, median and legend", plot)

    def bad(label, prepare):
        d = os.path.join(tmp, label)
        shutil.copytree(run1, d)
        culprit = prepare(d)
        r = tool("show", "--json", d)
        return r, culprit

    def empty_dir():
        d = os.path.join(tmp, "empty")
        os.mkdir(d)
        r = tool("show", d)
        expect(r.returncode == 2 and f"{d}: no trace files" in r.stderr, f"{r.returncode} {r.stderr}")
    s.check("an empty folder: exit 2, named", empty_dir)

    def truncated():
        def prep(d):
            f = os.path.join(d, "2.tnbct")
            with open(f, "r+b") as h:
                h.truncate(os.path.getsize(f) - 10)
            return f
        r, f = bad("truncated", prep)
        expect(r.returncode == 2 and f"{f}: truncated" in r.stderr, f"{r.returncode} {r.stderr}")
    s.check("a truncated file: exit 2, named", truncated)

    def foreign():
        def prep(d):
            f = os.path.join(d, "1.tnbct")
            with open(f, "r+b") as h:
                h.write(b"NOTATRCE")
            return f
        r, f = bad("foreign", prep)
        expect(r.returncode == 2 and f"{f}: not a tnbc trace file (bad magic number)" in r.stderr,
               f"{r.returncode} {r.stderr}")
    s.check("a foreign file: exit 2, named", foreign)

    def damaged():
        def prep(d):
            f = os.path.join(d, "2.tnbct")
            with open(f, "r+b") as h:
                h.seek(os.path.getsize(f) // 2)
                byte = h.read(1)
                h.seek(-1, os.SEEK_CUR)
                h.write(bytes([byte[0] ^ 0x04]))
            return f
        r, f = bad("damaged", prep)
        expect(r.returncode == 2 and f"{f}: corrupt: the checksum does not match the content" in r.stderr,
               f"{r.returncode} {r.stderr}")
    s.check("a damaged file (one bit flipped): exit 2, named", damaged)

    def mixed():
        # Rank 3's file from a second run of the same program: a whole, valid trace of another job.
        run2 = os.path.join(tmp, "run2")
        mpirun(PROG, P, preload="tnbc_trace", timeout=90, cwd=tmp, env={"TNBC_TRACE_DIR": run2})

        def prep(d):
            f = os.path.join(d, "3.tnbct")
            shutil.copyfile(os.path.join(run2, "3.tnbct"), f)
            return f
        r, f = bad("mixed", prep)
        expect(r.returncode == 2 and f"{f}: job id" in r.stderr
               and "traces of different runs" in r.stderr, f"{r.returncode} {r.stderr}")
    s.check("files of different jobs: exit 2, named", mixed)

    def missing():
        def prep(d):
            os.remove(os.path.join(d, "3.tnbct"))
            return d
        r, d = bad("missing", prep)
        expect(r.returncode == 2 and f"{d}: no trace file for rank 3 (job of 4 ranks)" in r.stderr,
               f"{r.returncode} {r.stderr}")
        r = tool("show", "--json", "--partial", d)
        expect(r.returncode == 0 and "warning" in r.stderr and f"{d}: no trace file for rank 3" in r.stderr,
               f"{r.returncode} {r.stderr}")
        doc = json.loads(r.stdout)
        sites = {c["frames"][0]: c for c in doc["callsites"]}
        expect(doc["ranks"] == P and doc["missing_ranks"] == [3], str(doc)[:200])
        expect(sites["site_reverse"]["order"] == reverse(P) and sites["site_reverse"]["calls"] == CALLS * (P - 1),
               str(sites["site_reverse"]))
    s.check("a missing rank: exit 2; with --partial a warning and the others' results", missing)

    s.finish()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
