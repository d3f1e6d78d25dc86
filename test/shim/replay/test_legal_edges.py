#!/usr/bin/env python3
"""Legal MPI programs at the edges (test/mpi/legal_edges.c) behave under libtnbc.so and
libtnbc_trace.so exactly as under plain MPI: the error codes of arguments MPI refuses (with
MPI_ERRORS_RETURN), the thread level the program asked for, and MPI progress while a rank waits
in MPI_Barrier (a peer's synchronous send, a passive-target put), received data read with every
signal blocked, MPI functions that never wait fed from received data, a Bcast root buffer in
read-only memory while MPI's algorithms are tried, file names received and handed to the kernel
at once, requests posted before a collective on the gaps of its receive pages, small results the
kernel writes into those gaps and more file names handed to it, a received buffer passed on at
once as the send buffer of a call run to completion, pages between the blocks received that nothing
touched read at once while a rank comes late.  Each run has a
short limit: a
barrier that does not let MPI progress hangs."""

import os
import subprocess
import tempfile

from tnbc_testlib import BUILD, LIBS, Suite, cluster_run, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "legal_edges")
PROG_ASAN = os.path.join(BUILD, "test", "mpi", "legal_edges_asan")  # built where the compiler has ASan
RANKS = 4
# The library's configurations: the defaults, the engine forced even on one node, trace mode.
CONFIGS = {
    "libtnbc.so defaults": ("tnbc", {}),
    "libtnbc.so forced": ("tnbc", {"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4"}),
    # Pages protected rather than moved: the kernel then meets a guarded page as EFAULT, as it
    # meets a moved one in a process that may not handle the kernel's faults (not root).
    "libtnbc.so forced, pages written": ("tnbc", {"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4", "TNBC_PUBLISH": "write"}),
    "libtnbc_trace.so": ("tnbc_trace", {"TNBC_TRACE_DIR": "/tmp/tnbc_legal_edges_trace"}),
}
SCENARIOS = ["bad_args", "init_single", "init_funneled", "barrier_ssend", "barrier_rma", "blocked_signals",
             "local_calls", "rodata_bcast", "file_names", "pending_gaps", "kernel_writes", "chained_send",
             "untouched_gaps"]


def lines(res):
    return sorted(l for l in res.stdout.splitlines() if l and l[0].isdigit())


def main():
    s = Suite("legal-edges")
    for scenario in SCENARIOS:
        def run(scenario=scenario):
            # kernel_writes makes and removes files in a folder of its own.
            args = [scenario] + ([tempfile.mkdtemp(prefix="tnbc_legal_edges_")] if scenario == "kernel_writes" else [])
            plain = lines(mpirun(PROG, RANKS, args=args, timeout=30))
            expect(len(plain) >= RANKS, f"plain MPI printed {plain}")
            for name, (lib, env) in CONFIGS.items():
                res = mpirun(PROG, RANKS, args=args, preload=lib, env=env, timeout=30, check=False)
                expect(res.returncode == 0, f"{name}: exit {res.returncode}\n{res.stderr[-1500:]}")
                got = lines(res)
                expect(got == plain, f"{name} differs from plain MPI: {sorted(set(got) ^ set(plain))[:6]}")
        s.check(f"{scenario}: the same lines as plain MPI, with the defaults, forced and traced", run)

    def observed_syscalls():
        # The blocking calls learning observes guard their receive pages (learn.hpp): mlock,
        # fwrite and mremap right after them must wait for those pages as for the engine's.  On
        # one node learning needs a decision that measures, whose warm-up never ends here.
        tmp = tempfile.mkdtemp(prefix="tnbc_legal_edges_")
        args = ["syscalls_after", tmp]
        plain = lines(mpirun(PROG, RANKS, args=args, timeout=60))
        prefix = os.path.join(tmp, "stats")
        res = mpirun(PROG, RANKS, args=args, preload="tnbc", timeout=60, check=False,
                     env={"TNBC_ADAPT": "measure", "TNBC_MIN_BYTES": "4K", "TNBC_ADAPT_WARMUP": "1000",
                          "TNBC_STATS": prefix})
        expect(res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-1500:]}")
        got = lines(res)
        expect(got == plain, f"differs from plain MPI: {sorted(set(got) ^ set(plain))[:6]}")
        observed = sum(k["learning"]["observed"] for r in range(RANKS)
                       for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"])
        expect(observed > 0, "learning observed no call: the check checked nothing")
    s.check("mlock, fwrite and mremap right after calls learning observes: as plain MPI", observed_syscalls)

    def pending_in_place():
        # The rounds with requests pending on the receive pages receive in place; the others,
        # with every request complete (the persistent one inactive), still return early.
        prefix = os.path.join(tempfile.mkdtemp(prefix="tnbc_legal_edges_"), "stats")
        res = mpirun(PROG, RANKS, args=["pending_gaps"], preload="tnbc", timeout=30, check=False,
                     env={"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4", "TNBC_STATS": prefix})
        expect(res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-1500:]}")
        for r in range(RANKS):
            a2av = read_json(f"{prefix}.{r}.json")["alltoallv"]
            expect(a2av["fallback_reasons"].get("pending_request") == 4 and a2av["early_return"] == 4,
                   f"rank {r}: 4 of 8 calls in place for pending requests, 4 early expected: {a2av}")
    s.check("pending_gaps forced: in place exactly while requests are pending", pending_in_place)

    def gaps_in_flight():
        # untouched_gaps reads its gap pages while rank 0's block is on the way only where the
        # others returned early (every round but the first, whose call starts the engine) and
        # their pages moved: else it passes without testing what it names.
        prefix = os.path.join(tempfile.mkdtemp(prefix="tnbc_legal_edges_"), "stats")
        res = mpirun(PROG, RANKS, args=["untouched_gaps"], preload="tnbc", timeout=30, check=False,
                     env={"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4", "TNBC_STATS": prefix})
        expect(res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-1500:]}")
        for r in range(1, RANKS):
            st = read_json(f"{prefix}.{r}.json")
            expect(st["alltoallv"]["early_return"] >= 3, f"rank {r}: fewer than 3 of 4 calls early: {st['alltoallv']}")
            expect(st["publish"] == "move", f"rank {r}: pages published by {st['publish']}, not moved")
    s.check("untouched_gaps forced: the gaps read while a block is on the way, pages moved", gaps_in_flight)

    def asan():
        # An AddressSanitizer build: ASan must be first among the preloaded libraries (it refuses
        # to start otherwise, with or without tnbc), then it runs as plain.  MPICH's own leaks
        # fail the plain run too, so leak checking is off in both.
        libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        env = {"ASAN_OPTIONS": "detect_leaks=0"}
        for scenario in ("pending_gaps", "file_names", "blocked_signals"):
            plain = lines(mpirun(PROG_ASAN, RANKS, args=[scenario], env=env, timeout=60))
            expect(len(plain) >= RANKS, f"plain MPI printed {plain}")
            res = mpirun(PROG_ASAN, RANKS, args=[scenario], timeout=60, check=False,
                         env={**env, **CONFIGS["libtnbc.so forced"][1], "LD_PRELOAD": f"{libasan}:{LIBS['tnbc']}"})
            expect(res.returncode == 0, f"{scenario}: exit {res.returncode}\n{res.stderr[-1500:]}")
            expect(lines(res) == plain, f"{scenario} differs: {sorted(set(lines(res)) ^ set(plain))[:6]}")
    if os.path.exists(PROG_ASAN):
        s.check("an AddressSanitizer build, libasan preloaded first, forced: as plain MPI", asan)

    for scenario in ("barrier_ssend", "barrier_rma", "pending_gaps"):
        def on_cluster(scenario=scenario):
            plain = lines(cluster_run(PROG, args=[scenario], timeout=60))
            res = cluster_run(PROG, args=[scenario], preload="tnbc", timeout=60)
            expect(lines(res) == plain, f"differs from plain MPI on 2 nodes: {lines(res)} vs {plain}")
        if os.geteuid() == 0:
            s.check(f"{scenario} on 2 emulated nodes x 2 ranks: the same lines as plain MPI", on_cluster)
    s.finish(skipped=None if os.geteuid() == 0 else "the 2-node checks (they need root)")


if __name__ == "__main__":
    main()
