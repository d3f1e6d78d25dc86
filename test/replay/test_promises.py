#!/usr/bin/env python3
"""Replay mode keeps the promises of blocking MPI (test/mpi/promises.c): a receive buffer in shared
memory, re-protected, handed to the kernel by fortified, vectored, message and raw system calls,
read by a fork()ed child, or a program's own SIGSEGV handler installed after MPI_Init.  Each
scenario prints exactly what plain MPICH prints, with no BAD line, and the statistics show the path
that was really taken: early returns where the buffer may be replaced, the in-place receive
("mapping") where it may not."""

import os
import tempfile

from tnbc_testlib import BUILD, Suite, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "promises")
RANKS = 4
ROUNDS = 4  # promises.c's ROUNDS
# Force the early path (no per-call decision) and let 64 KiB blocks take it.
REPLAY = {"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4K"}

# scenario -> the path each rank's Alltoalls must take: "early" (returned early at least once per
# round) or "mapping" (every call received in place because the memory is shared).
SCENARIOS = {
    "shared_file": "mapping",
    "shm_twice": "mapping",
    "win_shared": "mapping",
    "mprotect": "early",
    "read_chk": "early",
    "write_paths": "early",
    "message_paths": "early",
    "fork": "early",
    "own_handler": "early",
}


def result_lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def main():
    s = Suite("promises")
    tmp = tempfile.mkdtemp(prefix="tnbc_promises_")
    for scenario, path in SCENARIOS.items():
        def run(scenario=scenario, path=path):
            plain = result_lines(mpirun(PROG, RANKS, args=[scenario, tmp], timeout=60).stdout)
            expect(len(plain) >= RANKS * ROUNDS, f"plain MPICH printed {len(plain)} lines")
            expect(not [l for l in plain if l.endswith("BAD")], f"plain MPICH itself is wrong: {plain[:4]}")
            prefix = os.path.join(tmp, f"stats_{scenario}")
            res = mpirun(PROG, RANKS, preload="tnbc", env={**REPLAY, "TNBC_STATS": prefix},
                         args=[scenario, tmp], timeout=60)
            got = result_lines(res.stdout)
            bad = [l for l in got if l.endswith("BAD")]
            expect(not bad, f"wrong bytes with libtnbc.so: {bad[:6]}\nstderr:\n{res.stderr[-2000:]}")
            expect(got == plain, f"differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}")
            for r in range(RANKS):
                a = read_json(f"{prefix}.{r}.json")["alltoall"]
                if path == "early":
                    expect(a["early_return"] >= ROUNDS, f"rank {r}: the early path was not taken: {a}")
                else:
                    reasons = a["fallback_reasons"]
                    expect(reasons.get("mapping", 0) >= ROUNDS and a["early_return"] == 0,
                           f"rank {r}: shared memory was not received in place: {a}")
        s.check(f"{scenario}: same bytes as plain MPICH ({path})", run)

    for scenario in ("own_handler", "fork"):
        def traced(scenario=scenario):
            plain = result_lines(mpirun(PROG, RANKS, args=[scenario, tmp], timeout=60).stdout)
            trace_dir = os.path.join(tmp, f"trace_{scenario}")
            res = mpirun(PROG, RANKS, preload="tnbc_trace", env={"TNBC_TRACE_DIR": trace_dir, "TNBC_MIN_BYTES": "4K"},
                         args=[scenario, tmp], timeout=60)
            got = result_lines(res.stdout)
            expect(got == plain, f"trace mode differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}\n"
                                 f"stderr:\n{res.stderr[-2000:]}")
            expect(len(os.listdir(trace_dir)) >= RANKS, f"no trace written: {os.listdir(trace_dir)}")
        s.check(f"{scenario}: trace mode gives the same bytes as plain MPICH", traced)
    s.finish()


if __name__ == "__main__":
    main()
