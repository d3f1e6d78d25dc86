#!/usr/bin/env python3
"""The soak of the long test mode (test/mpi/soak.c): batches of random collectives, sizes,
communicators, buffer memory and what the program does with the received bytes (read orders,
frees, reallocs, mprotect, fork, signals, threads), each run under plain MPICH, under libtnbc.so
with the early path forced, and (every few batches) under libtnbc_trace.so; every rank checks every
byte itself and the lines of a batch must be identical in all three.  A batch is a fixed number of
calls from one seed, so runs of different speeds are compared call for call; the soak runs batches
with new seeds until its time is up.

  TNBC_SOAK_SECONDS  total time (default 1800), split between one node (4 ranks) and, when it
                     can run (root: network namespaces), the emulated 2 nodes x 2 ranks
  TNBC_SOAK_CLUSTER  0: one node only, even as root (the emulated nodes busy with another job)
  TNBC_SOAK_SEED     first batch's seed (default: from the clock; printed, with each failing
                     batch's command line)

It ends with one line per place, "soak <place>: N batches, C calls, K calls and B bytes checked per
library, M mismatches, S s", the numbers docs/long-tests.md reports."""

import os
import shutil
import tempfile
import time

from tnbc_testlib import BUILD, Failure, Suite, cluster_run, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "soak")
RANKS = 4
# Force the early path (no per-call decision, no one-node rule) and let 4 KiB per rank take it.
REPLAY = {"TNBC_ADAPT": "off", "TNBC_MIN_BYTES": "4K"}
# Calls per batch, and the limits of one run: a broken collective hangs.  Plain MPICH runs a local
# batch in about 6 s; libtnbc.so with the early path forced on one node takes several times that.
LOCAL_CALLS, LOCAL_LIMIT = 200, 240
CLUSTER_CALLS, CLUSTER_LIMIT = 60, 300
TRACE_EVERY = 4  # batches


def result_lines(text):
    return sorted(l for l in text.splitlines() if l.startswith("soak rank "))


def totals(lines):
    """calls, checked calls, checked bytes and mismatches, summed over the ranks."""
    sums = [0, 0, 0, 0]
    for l in lines:
        f = l.split()
        for i, key in enumerate(("calls", "checked_calls", "checked_bytes", "mismatches")):
            sums[i] += int(f[f.index(key) + 1])
    return sums


class Place:
    """Where batches run: locally (mpirun) or on the emulated nodes (cluster_run)."""

    def __init__(self, name, calls, limit, run):
        self.name, self.calls, self.limit, self.run = name, calls, limit, run
        self.batches = self.checked_calls = self.checked_bytes = self.mismatches = 0
        self.rank_calls = 0  # calls summed over the ranks
        self.seconds = 0.0

    def batch(self, seed, tmp):
        args = [seed, self.calls, tmp]
        command = f"soak {seed} {self.calls} <tmpdir> on {RANKS} ranks ({self.name})"
        res = self.run(PROG, args=args, timeout=self.limit, check=False)
        plain = result_lines(res.stdout)
        if res.returncode != 0 or len(plain) != RANKS:
            raise Failure(f"plain MPICH failed ({command}), exit {res.returncode}:\n{res.stdout[-1500:]}\n"
                          f"{res.stderr[-2500:]}")
        runs = [("libtnbc.so", "tnbc", {**REPLAY, "TNBC_STATS": os.path.join(tmp, f"stats_{seed}")})]
        if self.batches % TRACE_EVERY == 0:
            runs.append(("libtnbc_trace.so", "tnbc_trace",
                         {"TNBC_MIN_BYTES": "4K", "TNBC_TRACE_DIR": os.path.join(tmp, f"trace_{seed}")}))
        for label, preload, env in runs:
            res = self.run(PROG, args=args, preload=preload, env=env, timeout=self.limit, check=False)
            got = result_lines(res.stdout)
            if res.returncode != 0 or got != plain:
                raise Failure(f"{label} differs from plain MPICH ({command}), exit {res.returncode}:\n"
                              f"plain: {plain}\n{label}: {got}\nstderr:\n{res.stderr[-3000:]}")
            calls, checked_calls, checked_bytes, mismatches = totals(got)
            self.checked_calls += checked_calls
            self.checked_bytes += checked_bytes
            self.mismatches += mismatches
            if preload == "tnbc":
                early = sum(read_json(f"{env['TNBC_STATS']}.{r}.json")[op]["early_return"]
                            for r in range(RANKS) for op in ("alltoall", "alltoallv", "bcast"))
                expect(early > 0, f"libtnbc.so never returned early ({command})")
            else:
                shutil.rmtree(env["TNBC_TRACE_DIR"], ignore_errors=True)
        self.rank_calls += totals(plain)[0]
        self.batches += 1

    def soak(self, seconds, first_seed, tmp):
        start = time.monotonic()
        seed = first_seed
        while self.batches == 0 or time.monotonic() - start < seconds:
            self.batch(seed, tmp)
            seed += 1
        self.seconds = time.monotonic() - start

    def summary(self):
        return (f"soak {self.name}: {self.batches} batches, {self.rank_calls} calls (summed over ranks), "
                f"{self.checked_calls} calls and {self.checked_bytes} bytes checked under the libraries, "
                f"{self.mismatches} mismatches, {self.seconds:.0f} s")


def main():
    seconds = float(os.environ.get("TNBC_SOAK_SECONDS", "1800"))
    first_seed = int(os.environ.get("TNBC_SOAK_SEED", str(int(time.time()) % 1000000 * 1000)))
    print(f"soak: {seconds:.0f} s, first seed {first_seed}", flush=True)
    s = Suite("soak")
    tmp = tempfile.mkdtemp(prefix="tnbc_soak_")
    on_cluster = os.geteuid() == 0 and os.environ.get("TNBC_SOAK_CLUSTER") != "0"
    places = [Place("4 ranks on one node", LOCAL_CALLS, LOCAL_LIMIT,
                    lambda prog, **kw: mpirun(prog, RANKS, **kw))]
    if on_cluster:
        places.append(Place("2 emulated nodes x 2 ranks", CLUSTER_CALLS, CLUSTER_LIMIT,
                            lambda prog, check, **kw: cluster_run(prog, ppn=RANKS // 2, **kw)))
    for i, place in enumerate(places):
        # Different seeds per place: together they cover more sequences.
        s.check(f"{place.name}: every byte as plain MPICH gives it, libtnbc.so and libtnbc_trace.so",
                lambda place=place, i=i: place.soak(seconds / len(places), first_seed + i * 100000, tmp))
        print(place.summary(), flush=True)
    s.finish(skipped=None if on_cluster else "the emulated nodes (need root; TNBC_SOAK_CLUSTER=0 leaves them out)")


if __name__ == "__main__":
    main()
