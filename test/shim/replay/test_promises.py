#!/usr/bin/env python3
"""Replay mode keeps the promises of blocking MPI (test/mpi/promises.c): a receive buffer in shared
memory, re-protected, handed to the kernel by fortified, vectored, message and raw system calls,
read by a fork()ed child, or a program's own SIGSEGV handler installed after MPI_Init.  Each
scenario prints exactly what plain MPICH prints, with no BAD line, whether pages are moved out and
back or protected and written (TNBC_PUBLISH), and the statistics show the path that was really taken: early returns where the buffer may be replaced, the in-place receive
("mapping") where it may not.  Memory: TNBC_MAX_MEMORY bounds what calls in flight hold, and a
program that fits under `ulimit -v` with plain MPICH fits with libtnbc.so too."""

import os
import re
import resource
import subprocess
import tempfile

from tnbc_testlib import BUILD, Suite, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "promises")
SITES = os.path.join(BUILD, "test", "mpi", "rank_sites")
ORDER = os.path.join(BUILD, "tools", "tnbc-order")
RANKS = 4
ROUNDS = 4  # promises.c's ROUNDS
# Force the early path (no per-call decision) and let 64 KiB blocks take it.
REPLAY = {"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4K"}

# scenario -> the path each rank's Alltoalls must take: "early" (returned early at least once per
# round), or a fallback reason every call must give: "mapping" (the memory is shared), "io_uring"
# (the kernel may use buffers behind the library's back).
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
    "io_uring": "io_uring",
    "mremap": "early",
    "printf": "early",
}


def result_lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def main():
    s = Suite("promises")
    tmp = tempfile.mkdtemp(prefix="tnbc_promises_")
    # Every scenario under both ways of guarding and publishing pages (receive_mirror.hpp): the
    # user's pages moved out and back (userfaultfd: a touch sleeps in the kernel), and protected
    # and written (a touch faults into the library's SIGSEGV handler).
    for scenario, path in SCENARIOS.items():
        for way in ("move", "write"):
            def run(scenario=scenario, path=path, way=way):
                plain = result_lines(mpirun(PROG, RANKS, args=[scenario, tmp], timeout=60).stdout)
                expect(len(plain) >= RANKS * ROUNDS, f"plain MPICH printed {len(plain)} lines")
                expect(not [l for l in plain if l.endswith("BAD")], f"plain MPICH itself is wrong: {plain[:4]}")
                prefix = os.path.join(tmp, f"stats_{scenario}_{way}")
                res = mpirun(PROG, RANKS, preload="tnbc", env={**REPLAY, "TNBC_PUBLISH": way, "TNBC_STATS": prefix},
                             args=[scenario, tmp], timeout=60)
                got = result_lines(res.stdout)
                bad = [l for l in got if l.endswith("BAD")]
                expect(not bad, f"wrong bytes with libtnbc.so: {bad[:6]}\nstderr:\n{res.stderr[-2000:]}")
                expect(got == plain, f"differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}")
                for r in range(RANKS):
                    d = read_json(f"{prefix}.{r}.json")
                    a = d["alltoall"]
                    expect(d["publish"] == way, f"rank {r}: pages published by {d['publish']!r}, not {way}")
                    if path == "early":
                        expect(a["early_return"] >= ROUNDS, f"rank {r}: the early path was not taken: {a}")
                    else:
                        reasons = a["fallback_reasons"]
                        expect(reasons.get(path, 0) >= ROUNDS and a["early_return"] == 0,
                               f"rank {r}: not received in place for reason {path}: {a}")
            s.check(f"{scenario}, pages by {way}: same bytes as plain MPICH ({path})", run)

    def kernel_gap():
        # The kernel writing into a page in flight (stat() into a gap of an Alltoallv's receive
        # page): with pages moved out, a process that may handle faults taken in the kernel (root)
        # makes the system call wait for the page as a thread does.  Protected pages give EFAULT
        # (docs/replay.md: not supported), so only the move way is held to it.
        plain = result_lines(mpirun(PROG, RANKS, args=["kernel_gap", tmp], timeout=60).stdout)
        expect(len(plain) == RANKS * ROUNDS and all(l.endswith(" ok") for l in plain), f"plain MPICH: {plain[:4]}")
        prefix = os.path.join(tmp, "stats_kernel_gap")
        res = mpirun(PROG, RANKS, preload="tnbc", env={**REPLAY, "TNBC_PUBLISH": "move", "TNBC_STATS": prefix},
                     args=["kernel_gap", tmp], timeout=60)
        got = result_lines(res.stdout)
        expect(got == plain, f"differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}\n{res.stderr[-1500:]}")
        for r in range(RANKS):
            a = read_json(f"{prefix}.{r}.json")["alltoallv"]
            expect(a["early_return"] >= ROUNDS, f"rank {r}: the early path was not taken: {a}")
    if os.geteuid() == 0:
        s.check("kernel_gap, pages by move: the kernel writing into a page in flight waits for it", kernel_gap)

    def memory_bound():
        plain = result_lines(mpirun(PROG, RANKS, args=["mprotect", tmp], timeout=60).stdout)
        prefix = os.path.join(tmp, "stats_bound")
        got = result_lines(mpirun(PROG, RANKS, preload="tnbc", args=["mprotect", tmp], timeout=60,
                                  env={**REPLAY, "TNBC_MAX_MEMORY": "64K", "TNBC_STATS": prefix}).stdout)
        expect(got == plain, f"differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}")
        for r in range(RANKS):
            a = read_json(f"{prefix}.{r}.json")["alltoall"]
            expect(a["fallback_reasons"].get("memory", 0) >= ROUNDS and a["early_return"] == 0,
                   f"rank {r}: calls over TNBC_MAX_MEMORY returned early: {a}")
    s.check("TNBC_MAX_MEMORY=64K: calls that would hold more complete in place, same bytes", memory_bound)

    def address_space_limit():
        args = ["big", tmp, 16]  # 16 MiB per peer: 64 MiB to send and to receive per rank
        res = mpirun(PROG, RANKS, args=args, timeout=120)
        peaks = [int(k) for k in re.findall(r"VmPeak:\s+(\d+) kB", res.stderr)]
        expect(len(peaks) == RANKS, f"no peak sizes printed: {res.stderr[-500:]}")
        plain = result_lines(res.stdout)
        # A limit plain MPICH fits in with a little room; the library's threads and its bounded
        # copies must fit too (an unbounded send copy and mirror did not: std::bad_alloc).
        limit = int(max(peaks) * 1.18) * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        try:
            got = mpirun(PROG, RANKS, preload="tnbc", args=args, timeout=120, check=False, env=REPLAY)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        expect(got.returncode == 0, f"exit {got.returncode} under ulimit -v {limit // 1024}: {got.stderr[-1500:]}")
        expect(result_lines(got.stdout) == plain, f"differs from plain MPICH: {result_lines(got.stdout)[:6]}")
    s.check("under an address-space limit plain MPICH fits in, libtnbc.so fits too", address_space_limit)

    def rank_dependent_sites():
        # The root calls MPI_Bcast from another place than the others: traced, only the others'
        # site gets an entry; its segment count (made to differ from the default) must not give
        # the root and the others different messages.
        plain = result_lines(mpirun(SITES, RANKS, timeout=60).stdout)
        trace_dir = os.path.join(tmp, "trace_sites")
        mpirun(SITES, RANKS, preload="tnbc_trace", env={"TNBC_TRACE_DIR": trace_dir, "TNBC_MIN_BYTES": "4K"},
               timeout=60)
        plan_path = os.path.join(tmp, "sites.plan")
        subprocess.run([ORDER, "plan", trace_dir, "-o", plan_path], check=True, capture_output=True, timeout=30)
        text = open(plan_path, encoding="utf-8").read()
        expect(text.count("\nsite ") == 1 and " bcast " in text, f"expected one bcast entry:\n{text}")
        # Edited by hand (so without its checksum): two segments, whatever the model chose.
        lines = text.split("\n")
        lines[0] = lines[0].split(" checksum=")[0]
        text = re.sub(r"  segments \d+\n", "  segments 2\n", re.sub(r"  order [0-9 ]+\n", "  order 0 1\n", "\n".join(lines)))
        with open(plan_path, "w", encoding="utf-8") as f:
            f.write(text)
        prefix = os.path.join(tmp, "stats_sites")
        res = mpirun(SITES, RANKS, preload="tnbc", timeout=60,
                     env={**REPLAY, "TNBC_PLAN": plan_path, "TNBC_STATS": prefix})
        got = result_lines(res.stdout)
        expect(got == plain, f"differs from plain MPICH: {sorted(set(got) ^ set(plain))[:6]}")
        expect("differ in segments" in res.stderr, f"no message about the entries: {res.stderr[-800:]}")
        planned = [read_json(f"{prefix}.{r}.json")["bcast"]["planned"] for r in range(RANKS)]
        expect(planned[0] == 0 and all(p > 0 for p in planned[1:]),
               f"the others must have found their entry and the root none: {planned}")
    s.check("a Bcast called from different call sites on different ranks: one shape for all, same bytes",
            rank_dependent_sites)

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
