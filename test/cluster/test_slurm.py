#!/usr/bin/env python3
"""Slurm on the emulated cluster (`tnbc-cluster slurm up`, docs/slurm.md): the daemons come up
and go away by their pids; srun --mpi=pmi2 starts MPICH ranks on both nodes; the sbatch script
of docs/slurm.md (docs/tnbc-job.sbatch) traces test/mpi/replay_diff, plans it with tnbc-order and
replays it with the plan, launched by MPICH's mpiexec inside the allocation and by srun directly,
and every run prints exactly the bytes of plain MPICH.

The cluster's prefix and subnet come from TNBCTEST_CLUSTER_PREFIX and TNBCTEST_CLUSTER_SUBNET
(default: tnbc-cluster's own, as the other cluster tests use), so that a run beside other users
of the machine's emulated cluster can keep to its own nodes.  Skipped (77) without root or
without Slurm and munge (tools/install-deps installs them)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from tnbc_testlib import BUILD, LIBS, MPI, SOURCE, Failure, Suite, cluster, expect, mpirun

PREFIX = os.environ.get("TNBCTEST_CLUSTER_PREFIX", "tnbc")
SUBNET = os.environ.get("TNBCTEST_CLUSTER_SUBNET", "10.213.0")
OPTS = ["--prefix", PREFIX, "--subnet", SUBNET]
PROG = os.path.join(BUILD, "test", "mpi", "replay_diff")
NETCHECK = os.path.join(BUILD, "test", "mpi", "netcheck")
SCRIPT = os.path.join(SOURCE, "docs", "tnbc-job.sbatch")
DOC = os.path.join(SOURCE, "docs", "slurm.md")
RANKS = 4
JOB_TIMEOUT = 420


def lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def slurm(*args, **kw):
    return cluster("slurm", *args, cluster_opts=OPTS, **kw)


def job_env(extra=None):
    """The environment of sbatch and srun: this one without TNBC_* (the libraries would read
    them), plus what `tnbc-cluster slurm env` prints, tnbc-order on PATH and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TNBC_")}
    for line in slurm("env").stdout.splitlines():
        for word in line.removeprefix("export ").split():
            k, v = word.split("=", 1)
            env[k] = v
    env["PATH"] = os.path.join(BUILD, "tools") + os.pathsep + env.get("PATH", "")
    env.update(extra or {})
    return env


def run(cmd, env, timeout, cwd=None):
    """Runs a Slurm client command in a session of its own; a hang becomes a failure (and the
    job is cancelled by `slurm down` at the end)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise Failure(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out}\nstderr:\n{err}")
    if proc.returncode != 0:
        raise Failure(f"exit {proc.returncode}: {' '.join(cmd)}\nstdout:\n{out}\nstderr:\n{err}")
    return out


def main():
    if os.geteuid() != 0:
        print("Slurm on the emulated cluster needs root (network namespaces); skipped")
        sys.exit(77)
    missing = [p for p in ("slurmctld", "slurmd", "sbatch", "srun", "munged") if not shutil.which(p)]
    if missing:
        print(f"Slurm is not installed ({', '.join(missing)}: tools/install-deps); skipped")
        sys.exit(77)
    if MPI != "mpich":
        # The job script launches with MPICH's mpiexec or srun --mpi=pmi2 (docs/slurm.md).
        print(f"the Slurm jobs run MPICH programs; this build is for {MPI}: skipped")
        sys.exit(77)
    s = Suite("slurm")
    tmp = tempfile.mkdtemp(prefix="tnbc_slurm_")
    cluster("down", cluster_opts=OPTS)
    try:
        ref = {}

        def up():
            slurm("up", timeout=180)
            slurm("up")  # idempotent
            st = slurm("status").stdout
            for i in range(2):
                expect(f"{PREFIX}-n{i} idle" in st, f"node {i} not idle:\n{st}")
        s.check("slurm up twice: munged, slurmctld, a slurmd per node, nodes idle", up)

        def srun_direct():
            out = run(["srun", "--mpi=pmi2", "-N", "2", "-n", str(RANKS), NETCHECK, "2"],
                      job_env({"LD_PRELOAD": job_env()["JOB_PRELOAD"]}), 120)
            names = dict(l.split()[1:3] for l in out.splitlines() if l.startswith("name "))
            want = {"0": f"{PREFIX}-n0", "1": f"{PREFIX}-n0", "2": f"{PREFIX}-n1", "3": f"{PREFIX}-n1"}
            expect(names == want, f"placement: {names}\n{out}")
        s.check("srun --mpi=pmi2 starts MPICH's ranks on both nodes (PMI-2)", srun_direct)

        def reference():
            ref["out"] = lines(mpirun(PROG, RANKS, args=[tmp], timeout=180).stdout)
            expect(len(ref["out"]) > 100, f"too little output: {len(ref['out'])} lines")
        s.check("reference: plain MPICH on one node", reference)

        def job(launch):
            out_dir = os.path.join(tmp, f"job_{launch}")
            log = os.path.join(tmp, f"job_{launch}.log")
            env = job_env({"LIBTNBC": LIBS["tnbc"], "LIBTNBC_TRACE": LIBS["tnbc_trace"],
                           "JOB_LAUNCH": launch, "JOB_OUT": out_dir})
            try:
                run(["sbatch", "--wait", "--output", log, SCRIPT, PROG, tmp], env, JOB_TIMEOUT, cwd=tmp)
            except Failure as e:
                log_text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
                raise Failure(f"{e}\njob log:\n{log_text[-3000:]}")
            traces = sorted(os.listdir(os.path.join(out_dir, "trace")))
            expect(traces == [f"{r}.tnbct" for r in range(RANKS)], f"trace files: {traces}")
            with open(os.path.join(out_dir, "app.plan"), encoding="utf-8") as f:
                plan = f.read()
            expect(plan.startswith("tnbc-plan") and "\nsite " in plan, f"no plan entries:\n{plan[:500]}")
            for name in ("trace.out", "replay.out"):
                with open(os.path.join(out_dir, name), encoding="utf-8") as f:
                    got = lines(f.read())
                diff = sorted(set(got) ^ set(ref.get("out", [])))
                expect(got == ref.get("out"), f"{name} differs from plain MPICH: {diff[:10]}")
            for r in range(RANKS):
                with open(os.path.join(out_dir, f"stats.{r}.json"), encoding="utf-8") as f:
                    d = json.load(f)
                expect(d["alltoall"]["planned"] + d["bcast"]["planned"] > 0,
                       f"rank {r}: the plan was not used: {d['alltoall']} {d['bcast']}")

        s.check("sbatch docs/tnbc-job.sbatch, mpiexec in the allocation: trace, plan, replay, "
                "identical bytes", lambda: job("mpiexec"))
        s.check("sbatch docs/tnbc-job.sbatch, srun --mpi=pmi2: trace, plan, replay, identical bytes",
                lambda: job("srun"))

        def doc_has_script():
            with open(SCRIPT, encoding="utf-8") as f:
                script = f.read()
            with open(DOC, encoding="utf-8") as f:
                doc = f.read()
            expect("```bash\n" + script + "```" in doc, "docs/slurm.md does not show docs/tnbc-job.sbatch as it is")
        s.check("docs/slurm.md shows the script the test runs", doc_has_script)

        def down():
            slurm("down")
            slurm("down")  # safe twice
            st = slurm("status").stdout
            expect("not running" in st, st)
            left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            mine = [l for l in left.splitlines() if f"/{PREFIX}-slurm/" in l]
            expect(not mine, f"daemons left: {mine}")
            expect(not os.path.exists(f"/etc/netns/{PREFIX}-n0/hosts"), "hosts file of node 0 left")
            for args, msg in ((["bogus"], "slurm: unknown command 'bogus'"),
                              (["env"], f"Slurm is not running on cluster '{PREFIX}'")):
                res = slurm(*args, check=False)
                expect(res.returncode == 2 and msg in res.stderr, f"slurm {args}: exit {res.returncode}, {res.stderr!r}")
        s.check("slurm down twice: no daemon, no file left; bad use: exit 2 with a message", down)
    finally:
        cluster("down", cluster_opts=OPTS, check=False)
    s.finish()


if __name__ == "__main__":
    main()
