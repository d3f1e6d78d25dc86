"""Runs a benchmark's job with a time limit; a job that overruns it leaves evidence, not only a
timeout: every thread's kernel view (its name, wchan and kernel stack from /proc, which does not
disturb it), then its stack (gdb, where installed: attaching may change what a stuck thread
does), and the job's output so far, written to a file, before the job's processes are ended.

A broken collective hangs; a benchmark that meets one should say where, so that the hang can be
found again without reproducing it.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time


# Seconds a job's own limit (tnbc-cluster run --timeout) is set behind the limit of the driver
# that watches it, so that the driver, not the cluster, finds it hung and keeps its stacks.
CLUSTER_LIMIT_MARGIN_S = 60


class HungJob(RuntimeError):
    """A job that ran past its limit; `report` is the file with its stacks and output."""

    def __init__(self, cmd, limit_s, report):
        super().__init__(f"still running after {limit_s} s, ended: {' '.join(cmd)}\n"
                         f"stacks and output: {report}")
        self.report = report


def job_processes(sid):
    """{pid: argv} of the processes of a job started with start_new_session (its first
    process `sid`): those of session `sid` (`timeout` moves to a process group of its own but
    stays in the session) and every descendant of them (hydra starts each proxy, and the ranks
    under it, in sessions of their own).  Nothing else."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                # The command may hold blanks and parentheses: the fields follow the last ')'.
                fields = f.read().rsplit(")", 1)[1].split()
            procs[int(name)] = (int(fields[1]), int(fields[3]))  # ppid, session id
        except (OSError, ValueError, IndexError):
            pass
    targets = {pid for pid, (_, s) in procs.items() if s == sid}
    grew = True
    while grew:
        new = {pid for pid, (pp, _) in procs.items() if pp in targets and pid not in targets}
        targets |= new
        grew = bool(new)
    out = {}
    for pid in targets:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[pid] = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            pass  # gone meanwhile
    return out


def kill_job(sid, sig):
    """Sends `sig` to the processes of the job of session `sid` (job_processes)."""
    for pid in job_processes(sid):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def read_proc(path):
    """The text of a /proc file, or why it could not be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError as e:
        return f"({e.strerror})"


def kernel_view(pid):
    """Every thread of `pid` as the kernel sees it, without attaching: name, state, wchan and
    kernel stack (the stack needs root), as text."""
    text = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as e:
        return f"(no threads: {e.strerror})\n"
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        state = next((l for l in read_proc(f"{base}/status").splitlines() if l.startswith("State:")), "State: ?")
        text.append(f"--- thread {tid} {read_proc(f'{base}/comm')}: {state[6:].strip()}, "
                    f"wchan {read_proc(f'{base}/wchan') or '0'}\n{read_proc(f'{base}/stack')}\n")
    return "".join(text)


def stacks(sid, program):
    """Every thread of the processes of the job of session `sid` (job_processes) that run
    `program` (a path), as text: first the kernel's view of all of them (kernel_view), then
    their stacks by gdb; where gdb is missing or does not answer, says so."""
    procs = [(pid, argv) for pid, argv in sorted(job_processes(sid).items()) if argv and argv[0] == program]
    text = [f"\n=== kernel view, pid {pid}: {' '.join(argv)}\n{kernel_view(pid)}" for pid, argv in procs]
    gdb = shutil.which("gdb")
    for pid, argv in procs:
        text.append(f"\n=== pid {pid}: {' '.join(argv)}\n")
        if gdb is None:
            text.append("(no gdb: no stacks)\n")
            continue
        try:
            r = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                               capture_output=True, text=True, timeout=60, check=False)
            text.append(r.stdout)
        except subprocess.TimeoutExpired:
            text.append("(gdb took more than 60 s: no stacks)\n")
    return "".join(text)


def run(cmd, limit_s, program, report_dir=None, **kw):
    """subprocess.run(cmd, capture_output=True, text=True, check=True), in a session of its
    own; past `limit_s` seconds, writes the stacks of the job's processes (job_processes)
    running `program` (a path) and the output so far to a file in `report_dir` (a new temporary
    folder when None), ends the job's processes and raises HungJob."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        report_dir = report_dir or tempfile.mkdtemp(prefix="hung_job_")
        os.makedirs(report_dir, exist_ok=True)
        report = os.path.join(report_dir, f"hung-{int(time.time())}.txt")
        with open(report, "w", encoding="utf-8") as f:
            f.write(f"command: {' '.join(cmd)}\nlimit: {limit_s} s\n")
            f.write(stacks(p.pid, program))
            kill_job(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            f.write(f"\n=== stdout\n{out}\n=== stderr\n{err}\n")
        raise HungJob(cmd, limit_s, report) from None
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd, out, err)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)
