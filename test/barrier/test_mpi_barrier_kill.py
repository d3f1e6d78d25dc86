#!/usr/bin/env python3
"""Barrier segments of jobs killed during start-up.  A node root creates /tnbc-barrier-* in
MPI_Init and unlinks it once every rank of its node has opened it; a rank killed inside that
window (or the root, killed while it waits for that rank) leaves the name behind, which cannot be
prevented (docs/barrier.md, "Segments of killed jobs").  The next run on the node removes such
names of dead creators.  Checked here:

- many short runs of barrier_check, each with one rank SIGKILLed at a random moment of start-up:
  what each leaves is removed by later runs, and after one more run nothing of theirs is left;
- the removal itself, on planted names: a dead creator's is removed; a live creator's, another
  pid namespace's and a name of another form are left alone."""

import os
import random
import signal
import subprocess
import time

from tnbc_testlib import BUILD, LIBS, Suite, expect, mpiexec_command, mpirun

CHECK = os.path.join(BUILD, "test", "mpi", "barrier_check")
SHM = "/dev/shm"
PREFIX = "tnbc-barrier-"
RUNS = 40
RANKS = 4
LIMIT = 20  # seconds per run


def names():
    return {n for n in os.listdir(SHM) if n.startswith(PREFIX)}


def pid_namespace():
    return os.stat("/proc/self/ns/pid").st_ino


def creator(name):
    """(pid namespace, pid) of a name of the form tnbc-barrier-<ns>-<pid>-<random>, else None."""
    parts = name[len(PREFIX):].split("-")
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale(name):
    """A name no live process of ours can still need: any other form (the form before names
    carried their creator), or its creator, in this pid namespace, is gone."""
    c = creator(name)
    return c is None or (c[0] == pid_namespace() and not alive(c[1]))


def children_of():
    """{parent pid: [child pids]} of every process, from /proc."""
    tree = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(d))
    return tree


def ranks_of(pid):
    """The barrier_check processes below `pid` (the ranks of this run only)."""
    tree, found, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        for c in tree.get(p, []):
            todo.append(c)
            try:
                with open(f"/proc/{c}/comm") as f:
                    if f.read().strip() == "barrier_check":
                        found.append(c)
            except OSError:
                pass
    return found


def killed_run(rng, in_window):
    """One run with one random rank SIGKILLed during start-up, returning when the job has ended:
    at a random moment 0 to 1 s after launch (as soon as a rank exists), or, `in_window`, as
    soon as a new segment name appears (the window is a few milliseconds: random moments seldom
    hit it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TNBC_")}
    cmd = mpiexec_command(RANKS, CHECK, ["50"], {"UCX_NET_DEVICES": "lo", "LD_PRELOAD": LIBS["tnbc"]})
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + rng.uniform(0.0, 1.0)
    existing = names()
    try:
        while proc.poll() is None:
            due = names() - existing if in_window else time.monotonic() >= deadline
            ranks = ranks_of(proc.pid) if due else []
            if ranks:
                try:
                    os.kill(rng.choice(ranks), signal.SIGKILL)
                except ProcessLookupError:
                    continue
                break
            time.sleep(0 if in_window else 0.002)
        proc.wait(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("a killed job did not end")


def main():
    s = Suite("mpi-barrier-kill")
    rng = random.Random(int(os.environ.get("TNBCTEST_SEED", time.time_ns())))
    before = names()

    def killed():
        left = set()  # stale names found after a run, before the next one could remove them
        for i in range(RUNS):
            killed_run(rng, in_window=i % 2 == 1)
            time.sleep(0.05)
            left |= {n for n in names() - before if stale(n)}
        # A killed job's ranks may outlive its launcher by a moment (Open MPI's mpirun returned
        # while one still ended, in a CI run): the next run removes only names whose creator is
        # gone, so it starts once every creator of a name left is gone (or after LIMIT).
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline and any(
                c is not None and c[0] == pid_namespace() and alive(c[1]) for c in map(creator, names() - before)):
            time.sleep(0.05)
        mpirun(CHECK, RANKS, preload="tnbc", args=[10], timeout=LIMIT)
        remaining = {n for n in names() - before if stale(n)}
        print(f"     {RUNS} runs with a rank killed in start-up (half of them in the window) left {len(left)} names on the way;"
              f" after one more run {len(remaining)} remain", flush=True)
        expect(not remaining, f"left behind: {sorted(remaining)}")
    s.check(f"{RUNS} runs with a rank SIGKILLed during start-up: nothing left behind", killed)

    def planted():
        ns = pid_namespace()
        done = subprocess.Popen(["true"])
        done.wait()  # a pid that no longer exists
        plant = {"dead": f"{PREFIX}{ns}-{done.pid}-00000000000000aa",
                 "live": f"{PREFIX}{ns}-{os.getpid()}-00000000000000bb",
                 "other_ns": f"{PREFIX}{ns + 1}-{done.pid}-00000000000000cc",
                 "other_form": f"{PREFIX}00000000000000dd"}
        for n in plant.values():
            open(os.path.join(SHM, n), "w").close()
        try:
            mpirun(CHECK, 2, preload="tnbc", args=[10], timeout=LIMIT)
            now = names()
            expect(plant["dead"] not in now, "the dead creator's segment was not removed")
            for kind in ("live", "other_ns", "other_form"):
                expect(plant[kind] in now, f"the {kind} segment was removed")
        finally:
            for n in plant.values():
                if os.path.exists(os.path.join(SHM, n)):
                    os.unlink(os.path.join(SHM, n))
    s.check("a dead creator's segment is removed by the next run; others are left alone", planted)

    s.finish()


if __name__ == "__main__":
    main()
