#!/usr/bin/env python3
"""libtnbc_trace.so under real MPI processes: known access orders are recovered exactly from the
trace files, the traced program computes what the plain one does, signal handling stays the
program's own, and an unusable trace folder costs one message, not the run."""

import glob
import json
import os
import shutil
import subprocess
import tempfile

from tnbc_testlib import BUILD, Failure, Suite, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi")
ORDER = os.path.join(PROG, "trace_order")
OWN_HANDLER = os.path.join(PROG, "trace_own_handler")
CRASH = os.path.join(PROG, "trace_crash")
LOST_DIR = os.path.join(PROG, "trace_lost_dir")
DUMP = os.path.join(BUILD, "test", "trace", "trace_dump")
NPROCS = 4


def dump(path):
    res = subprocess.run([DUMP, path], capture_output=True, text=True, timeout=60)
    return json.loads(res.stdout), res.returncode


def load_traces(folder, n):
    files = sorted(glob.glob(os.path.join(folder, "*.tnbct")))
    expect(len(files) == n, f"expected {n} trace files in {folder}, found {files}")
    traces = {}
    for f in files:
        d, rc = dump(f)
        expect(rc == 0 and "error" not in d, f"{f} not readable: {d}")
        traces[d["rank"]] = d
    expect(sorted(traces) == list(range(n)), f"ranks {sorted(traces)}")
    return traces


def order(trace, call):
    """Sub-messages of `call` in the order of their first touches."""
    return [t["sub"] for t in sorted((t for t in trace["touches"] if t["call"] == call), key=lambda t: t["seq"])]


def tnbc_lines(res):
    return [l for l in res.stderr.splitlines() if l.startswith("tnbc[")]


def main():
    s = Suite("mpi-trace")
    tmp = tempfile.mkdtemp(prefix="tnbc_trace_")
    p = NPROCS
    state = {}

    def plain_run():
        res = mpirun(ORDER, p, args=[os.path.join(tmp, "plain")], timeout=90, cwd=tmp)
        state["plain"] = sorted(res.stdout.splitlines())
        expect(len(state["plain"]) == 13 * p, f"unexpected output: {state['plain']}")
    s.check("trace_order runs under plain MPICH", plain_run)

    def traced_run():
        folder = os.path.join(tmp, "run1")
        res = mpirun(ORDER, p, preload="tnbc_trace", timeout=90, cwd=tmp,
                     env={"TNBC_TRACE_DIR": folder, "TNBC_STATS": os.path.join(tmp, "stats")},
                     args=[os.path.join(tmp, "traced")])
        state["traced"] = sorted(res.stdout.splitlines())
        state["traces"] = load_traces(folder, p)
    s.check("trace_order runs under libtnbc_trace.so and writes one trace per rank", traced_run)

    def same_data():
        expect(state.get("traced") == state.get("plain"),
               f"received data differ from the plain run:\n{state.get('traced')}\nvs\n{state.get('plain')}")
    s.check("received data are identical to a plain run", same_data)

    def traces():
        expect("traces" in state, "no traces")
        return state["traces"]

    def header():
        job = {t["job_id"] for t in traces().values()}
        expect(len(job) == 1 and job != {""}, f"job ids differ or are empty: {job}")
        for r, t in traces().items():
            expect(t["size"] == p and t["page_size"] > 0 and t["ticks_per_us"] > 0, f"header of rank {r}: {t}")
            expect(t["node_id"] == 0, f"one node, but rank {r} says node {t['node_id']}")
            expect(len(t["calls"]) == 14, f"rank {r}: {len(t['calls'])} calls, expected 14")
    s.check("headers: size, page size, clock rate, one job id, one node", header)

    def rev(n):
        return list(range(n - 1, -1, -1))

    expected = {
        0: lambda r: rev(p),
        1: lambda r: [(r + k) % p for k in range(p)],
        2: lambda r: list(range(p)),
        3: lambda r: [(5 * k) % 16 for k in range(16)],
        4: lambda r: rev(p),
        5: lambda r: list(range(p)),
        6: lambda r: list(range(16)),
        7: lambda r: list(range(p)),
        13: lambda r: rev(p),
    }
    labels = {0: "Alltoall, reversed", 1: "Alltoall at a second call site, rotated by rank",
              2: "Alltoallv stored in reverse, read in source order", 3: "Bcast units in the order 5k mod 16",
              4: "Alltoall into a stack buffer sharing pages with live data",
              5: "Alltoall followed by a Bcast before any touch (the Alltoall)",
              6: "Alltoall followed by a Bcast before any touch (the Bcast)",
              7: "write() of a received buffer counts as its touch",
              13: "Alltoall with MPI_IN_PLACE"}
    for call, fn in expected.items():
        def check_order(call=call, fn=fn):
            for r, t in traces().items():
                c = t["calls"][call]
                root = {3: 1, 6: 0}.get(call)
                if root == r:
                    expect(not c["traced"], f"rank {r} is the root of call {call}: it receives nothing")
                    continue
                expect(c["traced"], f"rank {r} call {call} not traced: {c}")
                expect(all(sub["observable"] for sub in c["subs"]), f"rank {r} call {call}: {c['subs']}")
                got, want = order(t, call), fn(r)
                expect(got == want, f"rank {r} call {call}: order {got}, expected {want}")
                expect(all(sub["outcome"] == "touched" for sub in c["subs"]), f"rank {r} call {call}: {c['subs']}")
        s.check(f"call {call}: {labels[call]}: order recovered exactly", check_order)

    def ops():
        want = ["alltoall", "alltoall", "alltoallv", "bcast", "alltoall", "alltoall", "bcast", "alltoall",
                "alltoall", "alltoall", "alltoall", "alltoall", "alltoall", "alltoall"]
        for r, t in traces().items():
            expect([c["op"] for c in t["calls"]] == want, f"rank {r}: {[c['op'] for c in t['calls']]}")
            expect(len(t["calls"][3]["subs"]) == 16, "Bcast of 1 MiB: 16 units by default")
            expect(all(len(t["calls"][i]["subs"]) == p for i in (0, 1, 2, 4)), "one sub-message per source")
            expect(t["calls"][2]["subs"][p - 1]["offset"] == 0, "Alltoallv: the last source is stored first")
    s.check("operations, sub-message counts and offsets", ops)

    def callsites():
        ts = traces()
        for r, t in ts.items():
            ids = [t["callsites"][c["callsite"]]["id"] for c in t["calls"]]
            expect(len(set(ids)) == len(ids), f"rank {r}: call sites not distinct: {ids}")
            expect(ids == [ts[0]["callsites"][c["callsite"]]["id"] for c in ts[0]["calls"]],
                   f"rank {r}: call-site ids differ from rank 0's")
            frame = t["callsites"][t["calls"][0]["callsite"]]["frames"][0]
            expect(frame["module"].endswith("trace_order"), f"innermost frame not in the program: {frame}")
            expect(frame["symbol"] == "main", f"innermost frame not named after its function: {frame}")
    s.check("call sites: distinct per site, equal on every rank, innermost frame is main()", callsites)

    def threads():
        for r, t in traces().items():
            touches = {x["sub"]: x["thread"] for x in t["touches"] if x["call"] == 8}
            expect(sorted(touches) == list(range(p)), f"rank {r}: touched {sorted(touches)}")
            even = {touches[i] for i in range(0, p, 2)}
            odd = {touches[i] for i in range(1, p, 2)}
            main_tid = {x["thread"] for x in t["touches"] if x["call"] == 0}
            expect(len(even) == 1 and len(odd) == 1 and even != odd, f"rank {r}: threads {touches}")
            expect(not (even | odd) & main_tid, f"rank {r}: reader threads recorded as the main thread")
    s.check("several threads touching received data: each touch has its thread", threads)

    def datatype():
        for r, t in traces().items():
            expect(not t["calls"][9]["traced"], f"rank {r}: a strided receive type was traced")
        st = read_json(os.path.join(tmp, "stats.1.json"))
        expect(st["alltoall"]["fallback_reasons"].get("datatype") == 1, f"statistics: {st['alltoall']}")
        expect(st["bcast"]["fallback_reasons"].get("root") == 1, f"statistics: {st['bcast']}")
    s.check("a non-contiguous receive type: recorded, not traced, counted as 'datatype'", datatype)

    def handed_to_mpi():
        for r, t in traces().items():
            c = t["calls"][10]
            expect(c["traced"] and all(sub["outcome"] == "unobserved" for sub in c["subs"]),
                   f"rank {r}: blocks handed unread to MPI_Sendrecv: {c['subs']}")
            expect(order(t, 10) == [], f"rank {r}: MPI's own reads recorded as touches: {order(t, 10)}")
        st = read_json(os.path.join(tmp, "stats.0.json"))
        expect(st["faults"] == sum(1 for x in traces()[0]["touches"]), f"statistics: faults {st['faults']}")
    s.check("received data handed unread to MPI point-to-point: delivered, marked unobserved", handed_to_mpi)

    def given_back_unread():
        for call, how in ((11, "freed"), (12, "unmapped")):
            for r, t in traces().items():
                c = t["calls"][call]
                observable = [sub for sub in c["subs"] if sub["observable"]]
                expect(c["traced"] and len(observable) >= p - 1, f"rank {r}: {c['subs']}")
                expect(all(sub["outcome"] == "released" for sub in observable), f"rank {r}: {how} unread: {c['subs']}")
                expect(order(t, call) == [], f"rank {r}: the next owner's writes recorded as touches: {order(t, call)}")
    s.check("a received buffer freed or unmapped unread: released, and the next owner runs untroubled",
            given_back_unread)

    def default_folder():
        cwd = tempfile.mkdtemp(prefix="cwd_", dir=tmp)
        res = mpirun(ORDER, 2, preload="tnbc_trace", timeout=90, cwd=cwd,
                     env={"TNBC_TRACE_BCAST_UNITS": "4"}, args=[os.path.join(cwd, "x")])
        folders = glob.glob(os.path.join(cwd, "tnbc-trace-*"))
        expect(len(folders) == 1, f"expected one new trace folder, found {folders}")
        ts = load_traces(folders[0], 2)
        expect(folders[0].endswith(ts[0]["job_id"]), f"folder {folders[0]} not named after job {ts[0]['job_id']}")
        expect(len(ts[0]["calls"][3]["subs"]) == 4, "TNBC_TRACE_BCAST_UNITS=4 not applied")
        expect(order(ts[0], 3) == [0, 1, 2, 3], f"4 units read as (5k mod 16) units: {order(ts[0], 3)}")
        expect(any("trace written to" in l for l in tnbc_lines(res)), res.stderr)
    s.check("without TNBC_TRACE_DIR: one new tnbc-trace-<job> folder in the working directory", default_folder)

    def unwritable():
        res = mpirun(ORDER, p, preload="tnbc_trace", timeout=90, cwd=tmp,
                     env={"TNBC_TRACE_DIR": "/etc/passwd/trace"}, args=[os.path.join(tmp, "u")])
        msgs = tnbc_lines(res)
        expect(msgs == ["tnbc[0]: trace disabled, the program runs untraced: cannot create /etc/passwd/trace: "
                        "Not a directory"], f"messages: {msgs}")
        expect(sorted(res.stdout.splitlines()) == state.get("plain"), "output differs from the plain run")
    s.check("an unwritable TNBC_TRACE_DIR: one message from rank 0 and a correct run", unwritable)

    def open_folder():
        folder = os.path.join(tmp, "open")
        os.mkdir(folder)
        os.chmod(folder, 0o777)  # anyone could plant links under the names the job writes
        res = mpirun(ORDER, p, preload="tnbc_trace", timeout=90, cwd=tmp,
                     env={"TNBC_TRACE_DIR": folder}, args=[os.path.join(tmp, "w")])
        msgs = tnbc_lines(res)
        expect(msgs == [f"tnbc[0]: trace disabled, the program runs untraced: {folder} is writable by others "
                        f"(mode 0777): they could plant files or links in it; chmod go-w {folder}"],
               f"messages: {msgs}")
        expect(os.listdir(folder) == [], f"files written into the refused folder: {os.listdir(folder)}")
        expect(sorted(res.stdout.splitlines()) == state.get("plain"), "output differs from the plain run")
    s.check("a TNBC_TRACE_DIR others can write to: refused with one message, a correct untraced run",
            open_folder)

    def lost_dir():
        folder = os.path.join(tmp, "lost")
        res = mpirun(LOST_DIR, p, preload="tnbc_trace", timeout=60, cwd=tmp, env={"TNBC_TRACE_DIR": folder})
        expect(len(res.stdout.splitlines()) == p, f"output: {res.stdout}")
        msgs = [l for l in tnbc_lines(res) if "trace not written" in l]
        expect(len(msgs) == 1 and msgs[0].startswith("tnbc[0]: trace not written: cannot create "),
               f"expected one message from rank 0: {tnbc_lines(res)}")
        expect(os.path.isfile(folder), "the file that replaced the folder is gone")
    s.check("no rank can write its trace: one message from rank 0, the program ends normally", lost_dir)

    def own_handler():
        for lib in (None, "tnbc_trace"):
            res = mpirun(OWN_HANDLER, 2, preload=lib, timeout=60, cwd=tmp,
                         env={"TNBC_TRACE_DIR": os.path.join(tmp, "own")} if lib else None)
            out = sorted(res.stdout.splitlines())
            expect(len(out) == 2 and all(" own handler: 1 " in l for l in out), f"{lib}: {out}\n{res.stderr}")
        ts = load_traces(os.path.join(tmp, "own"), 2)
        expect(order(ts[0], 0) == [0, 1], f"traced faults not recorded: {ts[0]['touches']}")
    s.check("a program's own SIGSEGV handler keeps its faults, ours are recorded", own_handler)

    def crash():
        for lib in (None, "tnbc_trace"):
            res = mpirun(CRASH, 2, preload=lib, timeout=60, cwd=tmp, check=False,
                         env={"TNBC_TRACE_DIR": os.path.join(tmp, "crash")} if lib else None)
            expect(res.returncode != 0, f"{lib}: a crashing program exited 0")
            expect("signal 11" in res.stdout + res.stderr, f"{lib}: not killed by SIGSEGV:\n{res.stdout}\n{res.stderr}")
    s.check("a program that really crashes still dies by SIGSEGV", crash)

    def corrupt():
        src = os.path.join(tmp, "run1", "0.tnbct")
        data = open(src, "rb").read()
        bad = os.path.join(tmp, "cut.tnbct")
        with open(bad, "wb") as f:
            f.write(data[:-5])
        d, rc = dump(bad)
        expect(rc == 1, f"a truncated file was accepted: {d}")
        expect(d["error"] == f"{bad}: truncated: the header gives {len(data)} bytes, the file has {len(data) - 5}",
               d["error"])
    s.check("a truncated trace from a real run is rejected with its name and size", corrupt)

    if s.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # kept when something failed, for inspection
    s.finish()


if __name__ == "__main__":
    main()
