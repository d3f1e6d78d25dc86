#!/usr/bin/env python3
"""The preloadable libraries under real MPI processes: programs run unchanged (byte-identical
output to plain MPICH), statistics files, TNBC_DISABLE, and how bad settings are reported."""

import glob
import os
import tempfile

from tnbc_testlib import BUILD, LIBS, MPI, OTHER_MPI, Suite, expect, messages, mpirun, read_json

MIXED = os.path.join(BUILD, "test", "mpi", "mixed")
MIXED_F = os.path.join(BUILD, "test", "mpi", "mixed_f")
MIXED_F08 = os.path.join(BUILD, "test", "mpi", "mixed_f08")  # `use mpi_f08`; built under MPICH only
MIXED_OTHER = os.path.join(BUILD, "test", "mpi", "mixed_other_mpi")  # mixed.c for the other MPI
START = os.path.join(BUILD, "test", "mpi", "start_collectives")
COUNT = os.path.join(BUILD, "test", "mpi", "count_collectives.so")
BUILT_FOR = {"mpich": "MPICH", "openmpi": "Open MPI"}
STAT_KEYS = {"rank", "library", "version", "alltoall", "alltoallv", "bcast", "barrier", "faults",
             "fault_wait_us", "init_us"}


def lines(res):
    return sorted(res.stdout.splitlines())


def main():
    s = Suite("mpi-shim")
    tmp = tempfile.mkdtemp(prefix="tnbc_shim_")

    programs = [(MIXED, "C"), (MIXED_F, "Fortran")] + ([(MIXED_F08, "Fortran mpi_f08")] if MPI == "mpich" else [])
    for prog, label in programs:
        if not os.path.exists(prog):
            s.check(f"{label} program built", lambda: expect(False, f"{prog} missing"))
            continue
        for n in (2, 4):
            ref = {}

            def plain(prog=prog, n=n, ref=ref):
                ref["out"] = lines(mpirun(prog, n, args=[os.path.join(tmp, "plain.io")], timeout=60))
                expect(len(ref["out"]) >= 3 * n, f"too little output: {ref['out']}")
            s.check(f"{label} program, {n} ranks, plain {MPI}", plain)
            for lib in ("tnbc", "tnbc_trace"):
                def same(prog=prog, n=n, lib=lib, ref=ref):
                    # cwd: libtnbc_trace.so writes its trace folder into the working directory.
                    out = lines(mpirun(prog, n, preload=lib, args=[os.path.join(tmp, lib + ".io")], timeout=60,
                                       cwd=tmp))
                    expect(out == ref.get("out"), f"output differs from plain MPICH:\n{out}\nvs\n{ref.get('out')}")
                s.check(f"{label} program, {n} ranks, under {lib}: same output as plain", same)

    for lib in ("tnbc", "tnbc_trace"):
        def stats(lib=lib):
            prefix = os.path.join(tmp, f"stats_{lib}")
            mpirun(MIXED, 4, preload=lib, env={"TNBC_STATS": prefix}, args=[os.path.join(tmp, "s.io")], cwd=tmp)
            files = sorted(glob.glob(prefix + ".*.json"))
            expect(len(files) == 4, f"expected 4 statistics files, found {files}")
            for r in range(4):
                d = read_json(f"{prefix}.{r}.json")
                expect(STAT_KEYS <= set(d), f"missing keys {STAT_KEYS - set(d)}")
                expect(d["rank"] == r and d["library"] == lib, f"rank/library wrong: {d}")
                # mixed.c calls each collective once and MPI_Barrier three times.  Calls MPI makes
                # itself (ROMIO inside collective I/O) pass through and are not counted.
                for op in ("alltoall", "alltoallv", "bcast"):
                    expect(d[op]["calls"] == 1, f"{op} calls: {d[op]}")
                    expect(set(d[op]) >= {"early_return", "fallback", "fallback_reasons"}, f"{op}: {d[op]}")
                expect(d["barrier"]["calls"] == 3, f"barrier: {d['barrier']}")
        s.check(f"{lib}: TNBC_STATS writes one JSON file per rank with the counted calls", stats)

        def stats_folder(lib=lib):
            # As TNBC_TRACE_DIR, TNBC_STATS creates the folders its prefix names.
            prefix = os.path.join(tmp, f"new_{lib}", "sub", "stats")
            res = mpirun(MIXED, 4, preload=lib, env={"TNBC_STATS": prefix}, args=[os.path.join(tmp, "f.io")], cwd=tmp)
            files = sorted(glob.glob(prefix + ".*.json"))
            expect(len(files) == 4, f"expected 4 statistics files in a new folder, found {files}: {res.stderr[-800:]}")
        s.check(f"{lib}: TNBC_STATS=<new folder>/<prefix> creates the folder", stats_folder)

    if os.path.exists(MIXED_F) and MPI == "openmpi":
        # Open MPI's Fortran bindings (libmpi_mpifh) call PMPI_* directly, MPI_Init included: a C
        # PMPI library sees nothing of a Fortran program, which runs as without it (above).
        def fortran_passes():
            prefix = os.path.join(tmp, "stats_f")
            res = mpirun(MIXED_F, 2, preload="tnbc", env={"TNBC_STATS": prefix})
            expect(not glob.glob(prefix + "*"), "statistics written: the Fortran calls reached the library")
            expect(not [l for l in res.stderr.splitlines() if l.startswith("tnbc[")], f"messages: {res.stderr}")
        s.check("Fortran under Open MPI: its bindings call PMPI_*, the library stays out", fortran_passes)
    elif os.path.exists(MIXED_F):
        def fortran_caught():
            prefix = os.path.join(tmp, "stats_f")
            mpirun(MIXED_F, 2, preload="tnbc", env={"TNBC_STATS": prefix})
            d = read_json(prefix + ".1.json")
            expect(d["alltoall"]["calls"] == 1 and d["bcast"]["calls"] == 1 and d["barrier"]["calls"] == 1,
                   f"Fortran collectives not caught: {d}")
        s.check("Fortran collectives reach the C wrappers", fortran_caught)

        def f08_caught():
            # MPICH's mpi_f08 bindings call PMPI_Init and PMPI_Finalize themselves: the library
            # sets up there, and the collectives (through the C symbols) return early, forced.
            prefix = os.path.join(tmp, "stats_f08")
            mpirun(MIXED_F08, 2, preload="tnbc", env={"TNBC_STATS": prefix, "TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4"})
            for r in range(2):
                d = read_json(f"{prefix}.{r}.json")
                expect(d["alltoall"]["calls"] == 4 and d["alltoall"]["early_return"] == 4 and d["bcast"]["calls"] == 1,
                       f"mpi_f08 collectives not caught: {d}")
        if MPI == "mpich":
            s.check("Fortran mpi_f08: set up through PMPI_Init, its collectives caught", f08_caught)

    if os.path.exists(MIXED_OTHER):
        other_ref = {}

        def other_plain():
            other_ref["out"] = lines(mpirun(MIXED_OTHER, 4, args=[os.path.join(tmp, "o.io")], mpi=OTHER_MPI))
            expect(len(other_ref["out"]) >= 12, f"too little output: {other_ref['out']}")
        s.check(f"C program for {OTHER_MPI}, 4 ranks, plain {OTHER_MPI}", other_plain)
        for lib in ("tnbc", "tnbc_trace"):
            def wrong_mpi(lib=lib):
                # The library built for this build's MPI, preloaded under the other one: one
                # message, from rank 0, and every call passes through (no statistics).
                prefix = os.path.join(tmp, f"wrong_{lib}")
                res = mpirun(MIXED_OTHER, 4, preload=lib, env={"TNBC_STATS": prefix}, mpi=OTHER_MPI,
                             args=[os.path.join(tmp, f"w_{lib}.io")], cwd=tmp)
                expect(lines(res) == other_ref.get("out"), f"output differs from plain {OTHER_MPI}")
                msgs = [l for l in res.stderr.splitlines() if l.startswith("tnbc[")]
                expect(len(msgs) == 1 and msgs[0].startswith("tnbc[0]: ")
                       and f"is built for {BUILT_FOR[MPI]} but runs under {BUILT_FOR[OTHER_MPI]}" in msgs[0]
                       and "every call passes straight to MPI" in msgs[0], f"messages: {msgs}")
                expect(not glob.glob(prefix + "*"), "statistics written under the wrong MPI")
            s.check(f"{lib} built for {MPI} under {OTHER_MPI}: one message, passes through, same output",
                    wrong_mpi)

    def disable():
        prefix = os.path.join(tmp, "stats_disabled")
        res = mpirun(MIXED, 2, preload="tnbc", env={"TNBC_STATS": prefix, "TNBC_DISABLE": "1"},
                     args=[os.path.join(tmp, "d.io")])
        expect(not glob.glob(prefix + "*"), "TNBC_DISABLE=1 still wrote statistics")
        msgs = [l for l in res.stderr.splitlines() if l.startswith("tnbc[")]
        expect(len(msgs) == 1 and msgs[0].startswith("tnbc[0]: TNBC_DISABLE=1:"),
               f"expected only rank 0's note that the library is disabled: {msgs}")
    s.check("TNBC_DISABLE=1 is a pure pass-through", disable)

    def bad_settings():
        res = mpirun(MIXED, 4, preload="tnbc", env={"TNBC_LOG": "loud", "TNBC_FROBNICATE": "1"},
                     args=[os.path.join(tmp, "b.io")])
        msgs = messages(res.stderr)
        expect(msgs == sorted(msgs) and len(msgs) == 2, f"expected two messages from rank 0 only: {msgs}")
        expect(any("TNBC_LOG=loud: expected one of quiet, info, debug; using the default (info)" in m for m in msgs), msgs)
        expect(any("unknown setting TNBC_FROBNICATE" in m for m in msgs), msgs)
        expect(all(m.startswith("tnbc[0]: ") for m in msgs), f"not from rank 0: {msgs}")
    s.check("bad settings: one message each, from rank 0, and the run goes on", bad_settings)

    def unwritable_stats():
        # A prefix whose folder cannot be made: its parent is a file (a missing folder is made).
        blocker = os.path.join(tmp, "a_file")
        open(blocker, "w").close()
        res = mpirun(MIXED, 2, preload="tnbc", env={"TNBC_STATS": os.path.join(blocker, "stats")},
                     args=[os.path.join(tmp, "u.io")])
        msgs = [l for l in res.stderr.splitlines() if "statistics not written" in l]
        expect(len(msgs) == 1, f"expected one message: {res.stderr}")
    s.check("an unwritable statistics prefix: one message, the program completes", unwritable_stats)

    def start_collectives(env):
        # The library's start (MPI_Init) makes one collective over MPI_COMM_WORLD: the node map,
        # the settings' agreement and the engine's start in one MPI_Iallgather (shim/node.hpp);
        # each collective more cost a run 10-12 ms on 2 emulated nodes.  count_collectives.so,
        # preloaded ahead of libtnbc.so, counts the PMPI collectives that reach MPI; the
        # program's own MPI_Allreduce afterwards shows that it counts.
        res = mpirun(START, 4, env={"LD_PRELOAD": f"{COUNT} {LIBS['tnbc']}", **env})
        counts = sorted(res.stdout.splitlines())
        expect(counts == [f"rank {r} start_collectives=1 allreduce_counted=1" for r in range(4)],
               f"expected one collective at each rank's start: {counts}")
    def plain_start():
        # The counter's premise: MPI's own start makes no call through a PMPI_ name, so what the
        # counter sees under the library is the library's.  (The program's MPI_Allreduce goes
        # to MPI directly here: 0 too.)
        res = mpirun(START, 4, env={"LD_PRELOAD": COUNT})
        counts = sorted(res.stdout.splitlines())
        expect(counts == [f"rank {r} start_collectives=0 allreduce_counted=0" for r in range(4)],
               f"plain MPICH's start counted: {counts}")
    # Under MPICH, whose MPI_Init makes no call through a PMPI_ name (the first check).
    if MPI == "mpich":
        s.check("plain MPICH's start: no collective counted (the counter's premise)", plain_start)
        s.check("the library's start: one collective (defaults)", lambda: start_collectives({}))
        s.check("the library's start: one collective (TNBC_DISABLE=1)",
                lambda: start_collectives({"TNBC_DISABLE": "1"}))

    s.finish()


if __name__ == "__main__":
    main()
