#!/usr/bin/env python3
"""tnbc-sim --trace on a real trace: bench/overlap runs under libtnbc_trace.so on 4 local ranks
(64 KiB blocks, work that sleeps: 10 ms before the first read, 40 ms spread over the 4 blocks),
and tnbc-sim must read that work back from the trace (within what sleeping and first-touch
faults add), take the op, block size and the job's one node from it, scale it to more ranks
(the work per block as traced: twice the blocks, twice the reading work; or per byte received),
and refuse what does not fit with a message: another op, a scenario beside the trace, a folder
without traces, an unknown call site, NPB IS's counts for an MPI_Alltoall."""

import os
import tempfile

from tnbc_testlib import BUILD, Suite, expect, mpirun
from test_tnbc_sim_cli import predict, run

PROG = os.path.join(BUILD, "bench", "overlap")
P = 4
CURC_MS, CRC_MS = 10, 40


def main():
    s = Suite("tnbc-sim-trace")
    tmp = tempfile.mkdtemp(prefix="tnbc_sim_trace_")
    traces = os.path.join(tmp, "trace")

    def traced_run():
        mpirun(PROG, P, preload="tnbc_trace", timeout=90, cwd=tmp,
               env={"TNBC_TRACE_DIR": traces, "OVERLAP_SLEEP": "1", "OVERLAP_SKIP_TCOMM": "1"},
               args=(65536, 6, "blocking", CURC_MS * 1000, CRC_MS * 1000))
        expect(sorted(os.listdir(traces)) == [f"{r}.tnbct" for r in range(P)], f"trace files: {os.listdir(traces)}")
    s.check("bench/overlap runs under libtnbc_trace.so", traced_run)

    def from_trace():
        d = predict("--trace", traces)
        expect(d["trace"] == traces and d["scenario"] == "trace" and d["plan"] == "trace", f"what it came from: {d}")
        expect(d["op"] == "alltoall" and d["bytes"] == 65536 and d["trace_ranks"] == P, f"the site: {d}")
        expect((d["nodes"], d["ppn"], d["ranks"]) == (1, P, P), f"the traced job ran on one node: {d}")
        state["one"] = d
        # The work as the program did it: 10 ms before the first read; 40 ms of reading work and
        # the time to the next call after it (a barrier, a first-touch fault per block; more on
        # a loaded machine, where sleeping ranks wake late).
        expect(0.9 * CURC_MS <= d["curc_ms"] <= 2 * CURC_MS, f"work before the first read: {d['curc_ms']} ms")
        expect(0.9 * CRC_MS <= d["crc_ms"] <= 2 * CRC_MS, f"work after the first read: {d['crc_ms']} ms")
        expect(d["plain_ms"] >= d["curc_ms"] + d["crc_ms"] - 1e-6, f"plain MPICH below its work: {d}")
        expect(d["link_bound_ms"] <= min(d["plain_ms"], d["tnbc_ms"], d["tnbc_plan_ms"]) + 1e-6,
               f"a prediction below the link bound: {d}")
        text = run("--trace", traces)
        expect(text.returncode == 0 and "the work of trace" in text.stdout and "the trace's order" in text.stdout,
               f"the table: {text.stdout}{text.stderr}")
    state = {}
    s.check("--trace: the work, op, block and nodes of the traced job", from_trace)

    def scaled():
        one = state.get("one")
        expect(one is not None, "no prediction from the trace to scale")
        d = predict("--trace", traces, "--ppn", 4, "--sweep", "8,16")["sweep"]
        expect([x["ranks"] for x in d] == [8, 16], f"the sweep: {d}")
        for x in d:
            expect(abs(x["curc_ms"] - one["curc_ms"]) < 1e-3 * one["curc_ms"] + 1e-3, f"{x['ranks']} ranks: {x}")
        # The work after the first read is the blocks' work (per block: twice the blocks, twice
        # that) and the work after the last read (once): from 4 to 8 ranks it grows by the
        # blocks' work of 4 ranks, from 8 to 16 by twice that.
        w4, w8, w16 = one["crc_ms"], d[0]["crc_ms"], d[1]["crc_ms"]
        expect(w8 - w4 > 0.5 * CRC_MS and abs((w16 - w8) - 2 * (w8 - w4)) < 1e-3 * w16 + 1e-3,
               f"the reading work per block is not as traced: 4, 8, 16 ranks {w4}, {w8}, {w16} ms")
    s.check("--trace on 8 and 16 ranks: each block's work as traced, the tail once", scaled)

    def per_byte():
        one = state.get("one")
        expect(one is not None, "no prediction from the trace to scale")
        total = one["curc_ms"] + one["crc_ms"]
        # 16 ranks receiving a quarter of the block each: as many bytes a rank as traced, the
        # same work in all; with the whole block, 4 times the bytes and the work; times 2 with
        # --trace-work-scale 2.
        for extra, factor in (([], 1), (["--bytes", 65536 // 4], 1), (["--trace-work-scale", 2], 2)):
            args = ["--trace", traces, "--ppn", 4, "--nodes", 4, "--trace-work", "per-byte"] + extra
            d = predict(*args)
            want = total * factor * (4 if not extra or extra[0] == "--trace-work-scale" else 1)
            got = d["curc_ms"] + d["crc_ms"]
            expect(abs(got - want) < 1e-3 * want + 1e-3 and d["trace_work"] == "per-byte",
                   f"{args}: work {got} ms, want {want} ms: {d}")
    s.check("--trace-work per-byte: the work per byte received as traced; --trace-work-scale", per_byte)

    def refused():
        for args, code, msg in ((["--trace", traces, "--op", "alltoallv"], 2, "is an MPI_Alltoall"),
                                (["--trace", traces, "--scenario", "b"], 2, "the work comes from the trace"),
                                (["--site", "x+0x1"], 2, "--site: needs --trace"),
                                (["--trace", tmp], 3, "no trace files"),
                                (["--trace", traces, "--site", "nowhere+0x1"], 3, "no call site nowhere+0x1"),
                                (["--trace", traces, "--counts", "is"], 2, "is an MPI_Alltoall")):
            r = run(*args)
            expect(r.returncode == code and msg in r.stderr, f"{args}: {r.returncode} {r.stderr[:300]}")
    s.check("--trace refuses what does not fit, with a message", refused)
    return s.finish()


if __name__ == "__main__":
    raise SystemExit(main())
