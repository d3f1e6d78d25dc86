#!/usr/bin/env python3
"""The fuzzers of the long test mode, a third of the time each:
  - the trace reader and the plan parser in-process (trace_fuzz_driver, plan_fuzz_driver with
    --seconds: test/fuzz_driver.hpp fails any input that takes over 2 s, and ends a hang);
  - tnbc-order on corrupted trace folders, as a separate process: real traces of order_sites
    under libtnbc_trace.so, one file of the folder mutated at a time (bit flips, byte and
    boundary-value overwrites, insertions, deletions, truncation, duplicated ranges; half of them
    with the declared size and checksum made right again so that the mutation reaches the body),
    then `tnbc-order show`, `show --json`, `show --partial` or `plan`.  Every run must end within
    2 s with exit 0 or 2 (no signal, no other code).  Mutated folders are written to a temporary
    folder; a failing one is kept and named.

  TNBC_FUZZ_SECONDS  total time (default 600)
  TNBC_FUZZ_SEED     the generators' seed (default: from the clock; printed)"""

import os
import random
import shutil
import subprocess
import tempfile
import time

from tnbc_testlib import BUILD, Failure, Suite, expect, mpirun, reseal_trace

PROG = os.path.join(BUILD, "test", "mpi", "order_sites")
DRIVERS = [os.path.join(BUILD, "test", "trace", "trace_fuzz_driver"),
           os.path.join(BUILD, "test", "priority", "plan_fuzz_driver")]
TOOL = os.path.join(BUILD, "tools", "tnbc-order")
RANKS = 4
LIMIT = 2.0  # seconds per tnbc-order run
BOUNDARY = [0, 1, 2, 3, 4, 255, 256, 4096, 0x7fffffff, 0x80000000, 0xffffffff, 2**64 - 1, 2**63, 4097]
COMMANDS = [["show"], ["show", "--json"], ["show", "--partial"], ["plan", "-o", "-"]]


def mutate(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        if kind == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 2:
            width = 1 << rng.randrange(4)
            if len(b) >= width:
                at = rng.randrange(len(b) - width + 1)
                b[at:at + width] = (rng.choice(BOUNDARY) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        elif kind == 3:
            at = rng.randrange(len(b) + 1)
            b[at:at] = bytes([rng.randrange(256)]) * rng.randint(1, 8)
        elif kind == 4:
            at = rng.randrange(len(b) + 1)
            del b[at:at + rng.randint(1, 16)]
        elif kind == 5:
            del b[rng.randrange(len(b) + 1):]
        else:
            at = rng.randrange(len(b) + 1)
            piece = b[at:at + rng.randint(1, 24)]
            to = rng.randrange(len(b) + 1)
            b[to:to] = piece
    if rng.randrange(2):
        reseal_trace(b)
    return bytes(b)


def main():
    seconds = float(os.environ.get("TNBC_FUZZ_SECONDS", "600")) / 3
    seed = int(os.environ.get("TNBC_FUZZ_SEED", str(int(time.time()))))
    print(f"fuzz: {seconds:.0f} s per fuzzer, seed {seed}", flush=True)
    s = Suite("fuzz-long")

    for driver in DRIVERS:
        def in_process(driver=driver):
            # The driver ends a hung input itself; this limit only catches a driver that cannot.
            try:
                res = subprocess.run([driver, "--seconds", f"{seconds:.0f}", "--seed", str(seed)],
                                     capture_output=True, text=True, timeout=seconds + 120)
            except subprocess.TimeoutExpired:
                raise Failure(f"{driver} did not end")
            print(res.stdout.strip(), flush=True)
            expect(res.returncode == 0, f"exit {res.returncode}: {res.stderr[-1500:]}")
        s.check(f"{os.path.basename(driver)} for {seconds:.0f} s: no crash, no input over 2 s", in_process)

    tmp = tempfile.mkdtemp(prefix="tnbc_order_fuzz_")
    traces = os.path.join(tmp, "traces")
    originals = {}
    counts = {"runs": 0, 0: 0, 2: 0, "slowest": 0.0}

    def unmutated():
        mpirun(PROG, RANKS, preload="tnbc_trace", timeout=90, cwd=tmp, env={"TNBC_TRACE_DIR": traces})
        for r in range(RANKS):
            with open(os.path.join(traces, f"{r}.tnbct"), "rb") as f:
                originals[r] = f.read()
        res = subprocess.run([TOOL, "show", traces], capture_output=True, timeout=30)
        expect(res.returncode == 0, f"tnbc-order show of the real traces: exit {res.returncode}: {res.stderr[-500:]}")
    s.check("order_sites traced, its traces read by tnbc-order (exit 0)", unmutated)

    def fuzz():
        expect(len(originals) == RANKS, "no traces to mutate")
        rng = random.Random(seed)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            i = counts["runs"]
            folder = os.path.join(tmp, f"case{i}")
            shutil.copytree(traces, folder)
            victim = rng.randrange(RANKS)
            with open(os.path.join(folder, f"{victim}.tnbct"), "wb") as f:
                f.write(mutate(originals[victim], rng))
            command = [TOOL, *COMMANDS[rng.randrange(len(COMMANDS))]]
            command.insert(2, folder)
            start = time.monotonic()
            try:
                res = subprocess.run(command, capture_output=True, timeout=LIMIT)
            except subprocess.TimeoutExpired:
                raise Failure(f"over {LIMIT} s: {' '.join(command)} (seed {seed}, case {i}; folder kept)")
            took = time.monotonic() - start
            if res.returncode not in (0, 2):
                raise Failure(f"exit {res.returncode}: {' '.join(command)} (seed {seed}, case {i}; folder kept)\n"
                              f"{res.stderr.decode(errors='replace')[-1500:]}")
            if took > LIMIT:
                raise Failure(f"took {took:.2f} s: {' '.join(command)} (seed {seed}, case {i}; folder kept)")
            counts["runs"] += 1
            counts[res.returncode] += 1
            counts["slowest"] = max(counts["slowest"], took)
            shutil.rmtree(folder)
        expect(counts[2] > 0, "no mutated trace was refused: the mutations do not reach the reader")
    s.check("mutated traces: tnbc-order exits 0 or 2 within 2 s, never crashes", fuzz)
    print(f"tnbc-order fuzz: {counts['runs']} runs, {counts[0]} exit 0, {counts[2]} exit 2, "
          f"slowest {counts['slowest']:.3f} s", flush=True)
    s.finish()


if __name__ == "__main__":
    main()
