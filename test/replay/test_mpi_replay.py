#!/usr/bin/env python3
"""Replay mode's differential suite: test/mpi/replay_diff (alltoall from 1 byte to 8 MiB, aligned
and not, collectives in flight together, split and dup'ed communicators, alltoallv with gaps,
derived datatypes, MPI_IN_PLACE, received data handed to MPI, write(), free() and realloc(),
several reader threads, bcast from several roots, on the stack and in mmap'd memory) must print
exactly what plain MPICH prints, on one node and on the emulated cluster, and the engine must
really have returned early (statistics), or the comparison proves nothing."""

import os
import tempfile

from tnbc_testlib import BUILD, Suite, cluster_run, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "replay_diff")
MIXED_F = os.path.join(BUILD, "test", "mpi", "mixed_f")


def lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def check_stats(prefix, ranks):
    for r in range(ranks):
        d = read_json(f"{prefix}.{r}.json")
        expect(d["alltoall"]["early_return"] >= 10, f"rank {r}: alltoall hardly returned early: {d['alltoall']}")
        expect(d["bcast"]["early_return"] >= 5, f"rank {r}: bcast hardly returned early: {d['bcast']}")
        expect(d["init_us"] > 0, f"rank {r}: no Tinit measured: {d}")


def main():
    s = Suite("mpi-replay")
    tmp = tempfile.mkdtemp(prefix="tnbc_replay_")
    ref = {}

    def plain():
        ref["out"] = lines(mpirun(PROG, 4, args=[tmp], timeout=120).stdout)
        expect(len(ref["out"]) > 100, f"too little output: {len(ref['out'])} lines")
    s.check("plain MPICH, 4 ranks", plain)

    def replay_local():
        prefix = os.path.join(tmp, "local")
        out = lines(mpirun(PROG, 4, preload="tnbc", env={"TNBC_STATS": prefix}, args=[tmp], timeout=120).stdout)
        diff = sorted(set(out) ^ set(ref.get("out", [])))
        expect(out == ref.get("out"), f"differs from plain MPICH: {diff[:10]}")
        check_stats(prefix, 4)
    s.check("libtnbc.so, 4 ranks: identical bytes, early returns happened", replay_local)

    def replay_odd_ranks():
        a = lines(mpirun(PROG, 3, args=[tmp, "alltoall_sizes", "bcasts"], timeout=120).stdout)
        b = lines(mpirun(PROG, 3, preload="tnbc", args=[tmp, "alltoall_sizes", "bcasts"], timeout=120).stdout)
        expect(a == b, f"differs from plain MPICH: {sorted(set(a) ^ set(b))[:10]}")
    s.check("libtnbc.so, 3 ranks: identical bytes", replay_odd_ranks)

    def tiny_threshold():
        env = {"TNBC_MIN_BYTES": "1"}
        a = lines(mpirun(PROG, 2, args=[tmp, "alltoall_sizes", "comms_and_v", "bcasts"], timeout=120).stdout)
        b = lines(mpirun(PROG, 2, preload="tnbc", env=env, args=[tmp, "alltoall_sizes", "comms_and_v", "bcasts"],
                         timeout=120).stdout)
        expect(a == b, f"differs from plain MPICH: {sorted(set(a) ^ set(b))[:10]}")
    s.check("TNBC_MIN_BYTES=1 (every size through the engine): identical bytes", tiny_threshold)

    def fortran():
        a = lines(mpirun(MIXED_F, 4, timeout=60).stdout)
        b = lines(mpirun(MIXED_F, 4, preload="tnbc", env={"TNBC_MIN_BYTES": "4K"}, timeout=60).stdout)
        expect(a and a == b, f"Fortran output differs: {a} vs {b}")
    s.check("Fortran program under libtnbc.so: identical output", fortran)

    def on_cluster():
        prefix = os.path.join(tmp, "cluster")
        out = lines(cluster_run(PROG, args=[tmp], preload="tnbc", env={"TNBC_STATS": prefix}, timeout=240).stdout)
        expect(out == ref.get("out"), f"2 x 2 ranks differ from plain: {sorted(set(out) ^ set(ref.get('out', [])))[:10]}")
        check_stats(prefix, 4)
    if os.geteuid() == 0:
        s.check("libtnbc.so on 2 emulated nodes x 2 ranks: identical bytes", on_cluster)
    s.finish()


if __name__ == "__main__":
    main()
