"""Helpers for the MPI integration tests: run real MPI processes under a time limit.

Every run has a timeout: a broken collective hangs rather than fails, and a hang must become a
failure.  Paths come from the environment meson sets (see test/meson.build):
  TNBCTEST_BUILD_ROOT   the build directory
  TNBCTEST_SOURCE_ROOT  the source directory
  TNBCTEST_MPI          the MPI the build is for (meson's -Dmpi): mpich (the default) or openmpi
"""

import json
import os
import re
import signal
import struct
import subprocess
import sys

BUILD = os.environ.get("TNBCTEST_BUILD_ROOT", "")
SOURCE = os.environ.get("TNBCTEST_SOURCE_ROOT", "")
# Every node barrier algorithm of libtnbc.so (TNBC_BARRIER_ALGO), as barrier/barrier.cpp names them.
BARRIER_ALGOS = ["central_counter", "flat_tree", "gather_release", "combining_tree",
                 "combining_tree_atomic", "mcs", "tournament", "dissemination"]
# The MPI of the build: its libraries' names, how mpirun() launches ranks and which launcher
# the emulated cluster (cluster_run(): `tnbc-cluster run --mpi`) uses.
MPI = os.environ.get("TNBCTEST_MPI", "mpich")
assert MPI in ("mpich", "openmpi"), f"TNBCTEST_MPI={MPI}: expected mpich or openmpi"
_SUFFIX = "" if MPI == "mpich" else "-" + MPI
LIBS = {
    "tnbc": os.path.join(BUILD, "shim", "replay", f"libtnbc{_SUFFIX}.so"),
    "tnbc_trace": os.path.join(BUILD, "trace", f"libtnbc_trace{_SUFFIX}.so"),
}
# Open MPI's launcher on one node: as root it needs --allow-run-as-root, with more ranks than
# cores --oversubscribe; the shared-memory and self transports over ob1 keep UCX (and its
# memory hooks) out of the ranks, as MPICH's runs keep to loopback (docs/design.md, "Open MPI").
OPENMPI_MPIEXEC = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
                   "--mca", "pml", "ob1", "--mca", "btl", "self,vader", "--mca", "osc", "^ucx"]


OTHER_MPI = "openmpi" if MPI == "mpich" else "mpich"


def mpiexec_command(nprocs, program, args=(), env=None, rank_env=None, mpi=MPI):
    """The command that starts `program args` on nprocs local ranks under the build's MPI (or
    `mpi`), with the variables `env` in every rank and, if given, `rank_env[i]` in rank i only."""
    assert rank_env is None or len(rank_env) == nprocs, "one environment per rank"
    sections = [(nprocs, {})] if rank_env is None else [(1, e) for e in rank_env]
    if mpi == "openmpi":
        # Open MPI's -x reaches the ranks of its own section (app context) only: every section
        # gets the common variables and its own.
        cmd = list(OPENMPI_MPIEXEC)
        for i, (n, section_env) in enumerate(sections):
            cmd += [":"] * (i > 0) + ["-n", str(n)]
            for k, v in {**(env or {}), **section_env}.items():
                cmd += ["-x", f"{k}={v}"]
            cmd += [program, *map(str, args)]
        return cmd
    cmd = ["mpiexec"]
    for k, v in (env or {}).items():
        cmd += ["-genv", k, v]
    for i, (n, section_env) in enumerate(sections):
        cmd += [":"] * (i > 0) + ["-n", str(n)]
        for k, v in section_env.items():
            cmd += ["-env", k, v]
        cmd += [program, *map(str, args)]
    return cmd


class Failure(Exception):
    pass


def mpirun(program, nprocs, preload=None, env=None, args=(), timeout=60, cwd=None, check=True,
           rank_env=None, mpi=MPI):
    """Runs `mpiexec -n nprocs program args` locally; returns the CompletedProcess.

    preload: None (plain MPI), "tnbc" or "tnbc_trace".  env: extra variables for every rank.
    rank_env: a list of nprocs dicts, the extra variables of each rank (an MPMD launch,
    `-n 1 -env K V program args : ...`), for settings that differ between ranks.
    Under Open MPI (TNBCTEST_MPI=openmpi) the same through mpirun.openmpi (mpiexec_command());
    mpi: launch under the other MPI instead (OTHER_MPI), for a program built for it.
    """
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TNBC_")}
    # The test environment must not leak TNBC_* settings into the ranks: unknown-variable
    # warnings are part of what the tests check.  Pass them with -genv instead.
    # One node: UCX needs no network device but loopback.  Without this, UCX enumerates every
    # interface at MPI_Init and fails ("init_worker No such device") when one vanishes meanwhile
    # -- as the emulated cluster's veths do when another test or benchmark tears it down.
    extra = {"UCX_NET_DEVICES": "lo", **(env or {})}
    if preload:
        extra["LD_PRELOAD"] = LIBS[preload]
    cmd = mpiexec_command(nprocs, program, args, extra, rank_env, mpi)
    # mpiexec runs in a session of its own, so that a hang can be ended by killing exactly this
    # run: killing mpiexec makes its proxies end the ranks.  (Killing by program name would also
    # hit other people's runs of the same program on a shared machine.)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=full_env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise Failure(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{out}\nstderr:\n{err}")
    res = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and res.returncode != 0:
        raise Failure(f"exit {res.returncode}: {' '.join(cmd)}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    return res


def messages(stderr):
    """The library's messages in `stderr` (lines "tnbc[R]: ..."), less the report lines it prints
    at TNBC_LOG=info by design: each key's path ("decided: ...") and the closing "summary: ..."."""
    return [l for l in stderr.splitlines()
            if l.startswith("tnbc[") and not re.match(r"tnbc\[\d+\]: (decided|summary): ", l)]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# Trace files (docs/trace-format.md): the u64 file_size and checksum fields, and the prefix the
# checksum leaves out.
TRACE_SIZE_FIELD, TRACE_CHECKSUM_FIELD, TRACE_PREFIX = 12, 20, 28


def fnv1a64(data):
    """FNV-1a 64 (util/checksum.hpp), the trace files' checksum."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def reseal_trace(b):
    """A trace file's bytes (bytearray) changed on purpose: its size and checksum made right."""
    if len(b) >= TRACE_PREFIX:
        b[TRACE_SIZE_FIELD:TRACE_SIZE_FIELD + 8] = struct.pack("<Q", len(b))
        b[TRACE_CHECKSUM_FIELD:TRACE_CHECKSUM_FIELD + 8] = struct.pack("<Q", fnv1a64(b[TRACE_PREFIX:]))


class Suite:
    """Collects named checks and prints the closing 'N passed, N failed' line."""

    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, label, fn):
        try:
            fn()
        except (Failure, AssertionError) as e:
            self.failed += 1
            print(f"FAIL {label}: {e}", flush=True)
        else:
            self.passed += 1
            print(f"ok   {label}", flush=True)

    def finish(self, skipped=None):
        """Exits 1 when a check failed (or none ran), else 77 (meson: skipped) when `skipped`
        names checks that could not run, so that a partial run is never reported as a pass."""
        print(f"{self.name}: {self.passed} passed, {self.failed} failed"
              + (f"; skipped: {skipped}" if skipped else ""))
        if self.failed or not self.passed:
            sys.exit(1)
        sys.exit(77 if skipped else 0)


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


CLUSTER = os.path.join(BUILD, "tools", "tnbc-cluster")


def cluster(*args, timeout=120, check=True, cluster_opts=()):
    """Runs `tnbc-cluster [cluster_opts] args...` and returns the CompletedProcess.  A job that
    outlives `timeout` is a failure, and the nodes are torn down so the next test starts clean."""
    cmd = [CLUSTER, *cluster_opts, *map(str, args)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TNBC_")}
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        subprocess.run([CLUSTER, *cluster_opts, "down"], check=False)
        raise Failure(f"timed out after {timeout}s: {' '.join(cmd)}\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if check and res.returncode != 0:
        raise Failure(f"exit {res.returncode}: {' '.join(cmd)}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    return res


def cluster_run(program, args=(), ppn=2, preload=None, env=None, timeout=60, cluster_opts=(),
                placement="block"):
    """Runs an MPI program across the emulated nodes (created and removed around the run unless
    already up); returns the CompletedProcess.  preload: None, "tnbc" or "tnbc_trace", or a
    list of those and paths of other libraries to preload as well."""
    run = ["run", "--ppn", ppn, "--placement", placement, "--timeout", timeout, "--mpi", MPI]
    for lib in ([preload] if isinstance(preload, str) else preload or []):
        run += ["--preload", LIBS.get(lib, lib)]
    for k, v in (env or {}).items():
        run += ["--env", f"{k}={v}"]
    return cluster(*run, "--", program, *args, timeout=timeout + 30, cluster_opts=cluster_opts)
