"""Runs a benchmark's job with a time limit; a job that overruns it leaves evidence, not only a
timeout: every thread's stack of the program's processes (gdb, where installed) and the job's
output so far, written to a file, before the job's processes are ended.

A broken collective hangs; a benchmark that meets one should say where, so that the hang can be
found again without reproducing it.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time


class HungJob(RuntimeError):
    """A job that ran past its limit; `report` is the file with its stacks and output."""

    def __init__(self, cmd, limit_s, report):
        super().__init__(f"still running after {limit_s} s, ended: {' '.join(cmd)}\n"
                         f"stacks and output: {report}")
        self.report = report


def _session_of(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            # The command may hold blanks and parentheses: the fields follow the last ')'.
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _processes(session):
    """(pid, argv) of the processes of `session`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or _session_of(int(name)) != session:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        out.append((int(name), argv))
    return out


def run(cmd, limit_s, program, report_dir=None, **kw):
    """subprocess.run(cmd, capture_output=True, text=True, check=True), in a session of its
    own; past `limit_s` seconds, writes the stacks of the processes of that session running
    `program` (a path) and the output so far to a file in `report_dir` (a new temporary folder
    when None), ends the session's processes and raises HungJob."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        report_dir = report_dir or tempfile.mkdtemp(prefix="hung_job_")
        os.makedirs(report_dir, exist_ok=True)
        report = os.path.join(report_dir, f"hung-{int(time.time())}.txt")
        procs = _processes(p.pid)
        with open(report, "w", encoding="utf-8") as f:
            f.write(f"command: {' '.join(cmd)}\nlimit: {limit_s} s\n")
            gdb = shutil.which("gdb")
            for pid, argv in procs:
                if not argv or argv[0] != program:
                    continue
                f.write(f"\n=== pid {pid}: {' '.join(argv)}\n")
                if gdb is None:
                    f.write("(no gdb: no stacks)\n")
                    continue
                try:
                    r = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                                       capture_output=True, text=True, timeout=60, check=False)
                    f.write(r.stdout)
                except subprocess.TimeoutExpired:
                    f.write("(gdb took more than 60 s: no stacks)\n")
            for pid, _ in procs:  # the job's own processes, by their ids
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out, err = p.communicate()
            f.write(f"\n=== stdout\n{out}\n=== stderr\n{err}\n")
        raise HungJob(cmd, limit_s, report) from None
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd, out, err)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)
