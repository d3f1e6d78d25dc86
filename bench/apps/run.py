#!/usr/bin/env python3
"""Time the corpus of MPI programs (programs.py) under several configurations.

For each selected program and placement (local: one node, mpiexec.mpich -n 4; cluster: 2
emulated nodes x 2 ranks through tnbc-cluster; --ranks and --nodes change both, the programs'
arguments made for the rank count: programs.py), the configurations run side by side: round r
runs every configuration once, rounds 2j and 2j + 1 in an order rotated by j, the second
reversed, so that drift of the machine, and what a run leaves to the next, spread over all.
Every run is verified (a failed verification is an error, reported, never timed; a tuning pass's
candidate that fails, MPICH's own algorithm under plain MPICH, is left out of best and reported
apart) and measured
by its wall time, the CPU time of all its processes (user + sys of the waited-for descendants:
RUSAGE_CHILDREN, which covers the ranks on the emulated nodes too) and the program's own time
where it prints one.

Configurations:
  plain      MPICH as it is
  best       MPICH with the fastest MPIR_CVAR_<COLL>_INTRA_ALGORITHM per collective the
             program calls, found by a tuning pass (or read from --tune-cache)
  tnbc       LD_PRELOAD=--lib (libtnbc.so) with its defaults
  tnbc-plan  (--plan) libtnbc.so with TNBC_PLAN from a traced run (--trace-lib, tnbc-order plan)
  NAME       (--extra-config NAME:K=V,...) any set of variables

Python 3 standard library only.
"""

import argparse
import datetime
import fnmatch
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build")  # the repository's build folder
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ in the source tree
import programs as corpus  # noqa: E402
sys.path.insert(0, os.path.dirname(HERE))
import link_model  # noqa: E402  (bench/link_model.py: the links' tbf counters)
import hung_job  # noqa: E402  (bench/hung_job.py: a run's processes, hydra's ranks included)
import results_doc  # noqa: E402  (bench/results_doc.py: the report's header line)

# Candidate algorithms per collective, by the names Debian's MPICH 4.0.2 accepts (an unknown
# name aborts MPI_Init: "Invalid MPIR_CVAR_..._INTRA_ALGORITHM value").  Left out: nb (the
# nonblocking algorithm; aborts 4.0.2 in these programs), k_brucks (not in 4.0.2).  A candidate
# that does not apply to a call (pairwise_sendrecv_replace needs MPI_IN_PLACE) silently falls
# back to MPICH's own choice (MPIR_CVAR_COLLECTIVE_FALLBACK=silent).
CANDIDATES = {
    "alltoall": ("brucks", "pairwise", "pairwise_sendrecv_replace", "scattered"),
    "alltoallv": ("pairwise_sendrecv_replace", "scattered"),
    "bcast": ("binomial", "smp", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"),
}


def round_order(configs, r):
    """The order of round r: rounds 2j and 2j + 1 rotate the configurations by j, the second of
    them reversed, so that each position is taken evenly and a configuration follows a different
    one in alternate rounds.  (Rotation alone puts every configuration after the same one in
    every round: on this machine heFFTe under libtnbc.so, run right after plain MPICH, took 10%
    longer than under a build that behaved the same run after it, medians of 10 rounds; swapped,
    2%.)"""
    k = (r // 2) % len(configs)
    rotated = configs[k:] + configs[:k]
    return rotated[::-1] if r % 2 else rotated


def cvar(coll):
    return f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM"


def log(msg):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def error(msg):
    print(f"\n*** ERROR: {msg}\n", file=sys.stderr, flush=True)


def fmt(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


# ------------------------------------------------------------------------------------------
# running one program


class Runner:
    def __init__(self, a):
        self.a = a
        self.work = a.workdir
        os.makedirs(os.path.join(self.work, "logs"), exist_ok=True)
        self.seq = 0
        # The ranks get only what a configuration sets: no stray TNBC_*, MPIR_CVAR_* or
        # LD_PRELOAD from the caller's environment (mpiexec passes its environment on).
        self.base_env = {k: v for k, v in os.environ.items()
                         if not (k.startswith(("TNBC_", "MPIR_CVAR_", "UCX_")) or k == "LD_PRELOAD")}

    def exe(self, prog):
        return os.path.join(self.a.apps, prog.build, "bin", prog.exe)

    def command(self, prog, placement, env, preload):
        exe = [self.exe(prog), *prog.args]
        if placement == "local":
            cmd = ["mpiexec.mpich", "-n", str(prog.ranks)]
            if self.a.pin:  # hydra binds the ranks to cores round robin
                cmd += ["-bind-to", "core"]
            for k, v in env.items():
                cmd += ["-genv", k, v]
            if preload:
                cmd += ["-genv", "LD_PRELOAD", " ".join(preload)]
            return cmd + exe
        ppn = prog.ranks // self.a.nodes
        cmd = self.cluster_base() + ["run", "--ppn", str(ppn), "--timeout",
                                     str(self.a.timeout + hung_job.CLUSTER_LIMIT_MARGIN_S)]
        if self.a.pin:
            cmd += ["--pin"]
        for lib in preload:
            cmd += ["--preload", lib]
        for k, v in env.items():
            cmd += ["--env", f"{k}={v}"]
        return cmd + ["--"] + exe

    def link_counters(self):
        """The cluster's shaped links and their counters (link_model.cluster_link_counters)."""
        return link_model.cluster_link_counters(self.a.prefix, self.a.nodes)

    def cluster_base(self):
        return [self.a.cluster, "--nodes", str(self.a.nodes), "--prefix", self.a.prefix,
                "--subnet", self.a.subnet]

    def run(self, prog, placement, config, env, preload, tag, stats=False):
        """One run: returns a record (dict).  ok False for a failed verification/timeout."""
        self.seq += 1
        env = dict(prog.env, **env)
        rid = f"{self.seq:04d}-{prog.name}-{placement}-{config}-{tag}"
        stats_prefix = None
        if stats and preload and "TNBC_STATS" not in env:
            stats_prefix = os.path.join(self.work, "stats", rid, "s")
            env["TNBC_STATS"] = stats_prefix
        cmd = self.command(prog, placement, env, preload)
        logpath = os.path.join(self.work, "logs", rid + ".log")
        links0 = self.link_counters() if placement == "cluster" else {}
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        started = datetime.datetime.now().isoformat(timespec="seconds")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.work, env=self.base_env,
                             start_new_session=True)
        timed_out = False
        hung_stacks = ""
        try:
            out, _ = p.communicate(timeout=self.a.timeout)
        except subprocess.TimeoutExpired:
            # Hung: where the ranks wait goes to the log before they are ended.
            timed_out = True
            hung_stacks = hung_job.stacks(p.pid, self.exe(prog))
            hung_job.kill_job(p.pid, signal.SIGTERM)
            try:
                out, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                hung_job.kill_job(p.pid, signal.SIGKILL)
                out, _ = p.communicate()
        except KeyboardInterrupt:
            hung_job.kill_job(p.pid, signal.SIGTERM)
            time.sleep(2)
            hung_job.kill_job(p.pid, signal.SIGKILL)
            p.wait()
            raise
        wall = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        links1 = self.link_counters() if links0 else {}
        # The busiest link's bytes at its rate: the time the run needed the links at least (its
        # link bound), whatever the program and the library do.
        link_bytes = {k: links1[k][0] - links0[k][0] for k in links0 if k in links1}
        link_s = max((8 * b / links0[k][1] for k, b in link_bytes.items()), default=None)
        out = out.decode(errors="replace")
        with open(logpath, "w") as f:
            f.write("$ " + shlex.join(cmd) + "\n" + out)
            if timed_out:
                f.write(f"\n=== still running after {self.a.timeout} s: every thread's stack, then ended\n"
                        + (hung_stacks or "(no process of the program found)\n"))
        rc = p.returncode
        if timed_out:
            ok, reason = False, f"timed out after {self.a.timeout}s (every thread's stack in {logpath})"
        elif placement == "cluster" and "job killed after" in out:
            ok, reason = False, (f"timed out: ended by the cluster after "
                                 f"{self.a.timeout + hung_job.CLUSTER_LIMIT_MARGIN_S}s")
        else:
            ok, reason = corpus.verify(prog, rc, out)
        if not ok:
            last = [ln.strip() for ln in out.splitlines() if ln.strip()]
            if last:
                reason += f"; last output line: {last[-1][:200]}"
        rec = dict(program=prog.name, placement=placement, config=config, tag=tag,
                   started=started, cmd=cmd, env=env, preload=preload, rc=rc, ok=ok,
                   verification=reason, log=logpath,
                   wall_s=round(wall, 4) if ok else None,
                   cpu_s=round(cpu, 3) if ok else None,
                   reported_s=corpus.reported_time(prog, out) if ok else None,
                   failed_wall_s=None if ok else round(wall, 4),
                   link_bytes=link_bytes or None,
                   link_s=round(link_s, 4) if link_s is not None and ok else None)
        if stats_prefix:
            rec["stats"] = read_stats(os.path.dirname(stats_prefix))
        if ok:
            log(f"  {prog.name:22s} {placement:7s} {config:12s} {tag:>10s}: {wall:7.2f} s wall, "
                f"{cpu:7.2f} s CPU" + (f", program {rec['reported_s']:.2f} s"
                                      if rec["reported_s"] is not None else ""))
        else:
            error(f"{prog.name} {placement} {config} {tag}: verification FAILED: {reason} "
                  f"(log: {logpath})")
        return rec


def read_stats(folder):
    """Sum libtnbc.so's TNBC_STATS files: per operation, calls of rank 0 and early returns
    (all ranks)."""
    res = {}
    try:
        files = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
    except OSError:
        return None
    for f in files:
        try:
            with open(os.path.join(folder, f)) as fh:
                d = json.load(fh)
        except (OSError, ValueError):
            continue
        for op in ("alltoall", "alltoallv", "bcast", "barrier"):
            s = d.get(op)
            if not isinstance(s, dict):
                continue
            r = res.setdefault(op, {"calls_rank0": 0, "calls_all": 0, "early_all": 0})
            if d.get("rank") == 0:
                r["calls_rank0"] = s.get("calls", 0)
            r["calls_all"] += s.get("calls", 0)
            r["early_all"] += s.get("early_return", 0)
    res["ranks"] = len(files)
    return res


# ------------------------------------------------------------------------------------------
# tuning (best) and plans (tnbc-plan)


def fingerprint(prog, a):
    return dict(exe=os.path.join(a.apps, prog.build, "bin", prog.exe), args=list(prog.args),
                ranks=prog.ranks, nodes=a.nodes, candidates={c: list(CANDIDATES[c]) for c in prog.tunable()})


def tune_candidate(rec):
    """Whether a run is one of a tuning pass's candidates (MPICH with one of its own algorithms
    set), not its default."""
    return rec["config"] == "tune" and not rec.get("tag", "").startswith("default#")


def failed_runs(runs):
    """The runs that fail the whole run: every run that did not verify or timed out, except a
    tuning candidate's, which is MPICH's own algorithm failing under plain MPICH (heFFTe's
    Alltoall with `brucks`: "Message truncated"): it is left out of `best` and reported apart."""
    return [r for r in runs if not r["ok"] and not tune_candidate(r)]


def failed_tune_candidates(runs):
    """The tuning candidates that failed (failed_runs leaves them out)."""
    return [r for r in runs if not r["ok"] and tune_candidate(r)]


def tune(runner, prog, placement, cache, records):
    """The fastest algorithm setting, one collective at a time; None if plain MPICH fails."""
    a = runner.a
    # The rank count is in the key where it is not the corpus's 4, so that caches of 4-rank
    # tunings stay valid beside those of other counts.
    key = f"{prog.name}|{placement}" + ("|pin" if a.pin else "") + (f"|{prog.ranks}r" if prog.ranks != 4 else "")
    fp = fingerprint(prog, a)
    hit = cache.get(key)
    if hit and not a.retune and hit.get("fingerprint") == fp:
        log(f"  best for {prog.name} {placement}: cached {hit['settings'] or 'MPICH default'}")
        return hit
    if not prog.tunable():
        log(f"  best for {prog.name} {placement}: nothing to tune (best = plain)")
        return dict(settings={}, default_wall_s=None, best_wall_s=None, trials=[],
                    fingerprint=fp, placement=placement, note="nothing to tune")
    log(f"  tuning {prog.name} {placement}: {', '.join(prog.tunable())}")

    def measure(settings, label):
        walls = []
        for i in range(a.tune_reps):
            rec = runner.run(prog, placement, "tune", settings, [], f"{label}#{i}")
            rec["tune_settings"] = dict(settings)
            records.append(rec)
            if not rec["ok"]:
                return None
            walls.append(rec["wall_s"])
        return min(walls)

    base = measure({}, "default")
    if base is None:
        return None
    settings, best_t, trials = {}, base, [dict(var=None, value="default", wall_s=base)]
    for coll in prog.tunable():
        var = cvar(coll)
        chosen = None
        for val in CANDIDATES[coll]:
            t = measure(dict(settings, **{var: val}), f"{coll}={val}")
            trials.append(dict(var=var, value=val, wall_s=t, ok=t is not None))
            if t is not None and t < best_t:
                best_t, chosen = t, val
        if chosen:
            settings[var] = chosen
    entry = dict(settings=settings, default_wall_s=base, best_wall_s=best_t, trials=trials,
                 fingerprint=fp, placement=placement,
                 date=datetime.datetime.now().isoformat(timespec="seconds"))
    cache[key] = entry
    log(f"  best for {prog.name} {placement}: {settings or 'MPICH default'} "
        f"({best_t:.2f} s vs default {base:.2f} s)")
    return entry


def make_plan(runner, prog, placement, records):
    """Trace one run and turn it into a plan; returns (plan path or None, info)."""
    a = runner.a
    tdir = os.path.join(runner.work, "trace", f"{prog.name}-{placement}")
    os.makedirs(os.path.dirname(tdir), exist_ok=True)
    if os.path.exists(tdir):
        for f in os.listdir(tdir):
            os.unlink(os.path.join(tdir, f))
    rec = runner.run(prog, placement, "trace", {"TNBC_TRACE_DIR": tdir}, [a.trace_lib], "trace")
    records.append(rec)
    if not rec["ok"]:
        return None, dict(error="traced run failed", trace_run=rec["log"])
    plan = os.path.join(runner.work, "plans", f"{prog.name}-{placement}.plan")
    os.makedirs(os.path.dirname(plan), exist_ok=True)
    p = subprocess.run([a.order, "plan", tdir, "-o", plan], capture_output=True, text=True)
    info = dict(trace_dir=tdir, plan=plan, order_rc=p.returncode,
                order_output=(p.stdout + p.stderr)[-4000:], trace_wall_s=rec["wall_s"])
    if p.returncode not in (0, 1) or not os.path.exists(plan):
        error(f"{prog.name} {placement}: tnbc-order plan failed (rc {p.returncode}): "
              f"{(p.stdout + p.stderr).strip()[-1000:]}")
        return None, info
    log(f"  plan for {prog.name} {placement}: {plan}")
    return plan, info


# ------------------------------------------------------------------------------------------
# report


def median(xs):
    return statistics.median(xs) if xs else None


def summarize(runs, configs):
    """{(program, placement): {config: summary}} over the timed rounds."""
    out = {}
    timed = [r for r in runs if r.get("round") is not None]
    keys = []
    for r in timed:
        k = (r["program"], r["placement"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        rs = [r for r in timed if (r["program"], r["placement"]) == k]
        plain = {r["round"]: r["wall_s"] for r in rs if r["config"] == "plain" and r["ok"]}
        per = {}
        for c in configs:
            cr = [r for r in rs if r["config"] == c]
            if not cr:
                continue
            ok = [r for r in cr if r["ok"]]
            walls = [r["wall_s"] for r in ok]
            ratios = [r["wall_s"] / plain[r["round"]] for r in ok if r["round"] in plain]
            cpus = [r["cpu_s"] for r in ok]
            rep = [r["reported_s"] for r in ok if r.get("reported_s") is not None]
            links = [r["link_s"] for r in ok if r.get("link_s") is not None]
            busy = [r["link_s"] / r["wall_s"] for r in ok if r.get("link_s") is not None]
            per[c] = dict(
                n=len(cr), n_ok=len(ok),
                wall_med=median(walls), wall_min=min(walls, default=None),
                wall_max=max(walls, default=None),
                ratio_med=median(ratios), ratio_min=min(ratios, default=None),
                ratio_max=max(ratios, default=None),
                cpu_med=median(cpus), reported_med=median(rep),
                link_med=median(links), busy_med=median(busy),
                stats=next((r["stats"] for r in reversed(ok) if r.get("stats")), None))
        out[k] = per
    return out


def side_by_side(runs, program, placement, a, b):
    """`a`'s wall time over `b`'s in the same round, over the rounds where both verified: median,
    range, how many rounds `a` took longer, and how many rounds; None where no round has both."""
    walls = {}
    for r in runs:
        if r.get("round") is not None and r["ok"] and (r["program"], r["placement"]) == (program, placement):
            walls.setdefault(r["round"], {})[r["config"]] = r["wall_s"]
    ratios = [w[a] / w[b] for w in walls.values() if a in w and b in w]
    if not ratios:
        return None
    return dict(med=median(ratios), min=min(ratios), max=max(ratios),
                longer=sum(x > 1 for x in ratios), n=len(ratios))


def side_by_side_lines(data, summ):
    """The report's section of every configuration but plain against every other that follows it
    (the ÷ plain column holds plain): where several configurations read within a few points of
    plain, their ratio to each other in the same rounds says whether one costs more than another."""
    configs = [c for c in data["meta"]["configs"] if c != "plain"]
    pairs = [(a, b) for i, a in enumerate(configs) for b in configs[i + 1:]]
    rows = []
    for (prog, placement), per in summ.items():
        for a, b in pairs:
            s = side_by_side(data["runs"], prog, placement, a, b) if a in per and b in per else None
            if s:
                rows.append(f"| {prog} | {placement} | `{a}` ÷ `{b}` | {fmt(s['med'], 3)} "
                            f"({fmt(s['min'], 3)}–{fmt(s['max'], 3)}) | {s['longer']} of {s['n']} |")
    if not rows:
        return []
    return ["## side by side\n",
            "Each configuration's wall time ÷ another's in the same round: median (min–max) over the "
            "rounds where both verified, and the rounds in which the first took longer.\n",
            "| program | placement | configurations | ratio | longer |", "|---|---|---|---|---|",
            *rows, ""]


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else ""
    except OSError:
        pass
    mpich = ""
    try:
        v = subprocess.run(["mpichversion"], capture_output=True, text=True).stdout
        m = re.search(r"MPICH Version:\s*(\S+)", v)
        d = re.search(r"MPICH Device:\s*(\S+)", v)
        mpich = f"{m.group(1) if m else '?'} ({d.group(1) if d else '?'})"
    except OSError:
        pass
    return dict(nproc=os.cpu_count(), kernel=platform.release(), cpu=cpu, mpich=mpich,
                python=platform.python_version(), host=platform.node(),
                loadavg_start=[round(x, 2) for x in os.getloadavg()])


def sha(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return None


def header_line(meta):
    """The report's one-line header (docs/measurements/README.md)."""
    places = meta.get("placements", [])
    ranks = meta.get("ranks", 4)
    cluster = f"{meta['nodes']} emulated nodes x {ranks // meta['nodes']} ranks"
    placement = " and ".join([f"one node x {ranks} ranks"] * ("local" in places) + [cluster] * ("cluster" in places))
    links = results_doc.rate_words(meta.get("rate")) if "cluster" in places else "no links"
    return results_doc.ran_line(meta["date"][:10], meta.get("lib_commit"), placement or "unknown", links,
                                "whole segments" if "cluster" in places else "no links", meta.get("pin"),
                                meta["rounds"])


def write_report(data, md_path, svg_path):
    meta = data["meta"]
    configs = meta["configs"]
    summ = summarize(data["runs"], configs)
    L = []
    L.append("# tnbc application corpus: timings\n")
    L.append(header_line(meta) + "\n")
    L.append(f"- date: {meta['date']} (finished {meta.get('finished', 'not finished')})")
    L.append(f"- command: `{meta['command']}`")
    m = meta["machine"]
    L.append(f"- machine: {m['nproc']} CPUs ({m['cpu']}), Linux {m['kernel']}, MPICH {m['mpich']}; "
             f"load average (1, 5, 15 min) at the start {m.get('loadavg_start')}, at the end "
             f"{m.get('loadavg_end')}")
    L.append(f"- rounds: {meta['rounds']} (each round runs every configuration once, the order "
             "rotated by one every second round, reversed in odd rounds); configurations: "
             + ", ".join(f"`{c}`" for c in configs))
    ranks = meta.get("ranks", 4)
    L.append(f"- local: `mpiexec.mpich -n {ranks}` on this machine; cluster: {meta['nodes']} emulated "
             f"nodes x {ranks // meta['nodes']} ranks (`tnbc-cluster --prefix {meta['prefix']} "
             f"--subnet {meta['subnet']}`{', --rate ' + meta['rate'] if meta.get('rate') else ''})")
    L.append("- pinning: " + ("pinned (cluster: `tnbc-cluster run --pin`, a core per node; one node: "
                              "`mpiexec -bind-to core`)" if meta.get("pin") else "unpinned"))
    for name, info in meta["libs"].items():
        L.append(f"- {name}: `{info['path']}` (sha256 {info['sha256']})")
    L.append("")
    L.append("Wall: the whole run (mpiexec start to exit), in seconds: median (min–max) over "
             "the rounds whose run verified.  ÷ plain: the ratio to `plain` of the same round, "
             "median (min–max) over rounds.  CPU: user+sys of all processes of the run "
             "(RUSAGE_CHILDREN; includes the ranks on the emulated nodes), median.  Program: "
             "the program's own time of its timed loop (NPB \"Time in seconds\"; heFFTe "
             "\"Time per run\" x 2 x runs), median.")
    L.append("")
    L.append("**OSU and IMB rows are whole-run wall times**: these benchmarks time only the "
             "collective call itself, so their reported latencies cannot show what overlapping "
             "gains; they are not used.")
    L.append("")
    for placement in ("local", "cluster"):
        keys = [k for k in summ if k[1] == placement]
        if not keys:
            continue
        L.append(f"## {placement}\n")
        links = placement == "cluster" and any(s.get("link_med") for k in keys for s in summ[k].values())
        if links:
            L.append("Link s: the bytes that crossed the busiest link (a node's, one direction; "
                     "`tc -s qdisc` on the tbf of each link) at the link's rate: the least time the "
                     "run needs the links, whatever the program and the library do.  Busy: link s "
                     "÷ wall, median over the rounds.\n")
        L.append("| program | configuration | wall s | ÷ plain | CPU s | program s |"
                 + (" link s | busy |" if links else "") + " ok/runs |")
        L.append("|---|---|---|---|---|---|" + ("---|---|" if links else "") + "---|")
        for k in keys:
            for c, s in summ[k].items():
                wall = (f"{fmt(s['wall_med'])} ({fmt(s['wall_min'])}–{fmt(s['wall_max'])})"
                        if s["n_ok"] else "FAILED")
                ratio = ("1" if c == "plain" else
                         f"{fmt(s['ratio_med'], 3)} ({fmt(s['ratio_min'], 3)}–{fmt(s['ratio_max'], 3)})"
                         if s["ratio_med"] is not None else "–")
                busy = f"{s['busy_med']:.0%}" if s.get("busy_med") is not None else "–"
                L.append(f"| {k[0]} | {c} | {wall} | {ratio} | {fmt(s['cpu_med'])} | "
                         f"{fmt(s['reported_med'])} |"
                         + (f" {fmt(s.get('link_med'))} | {busy} |" if links else "")
                         + f" {s['n_ok']}/{s['n']} |")
        L.append("")
    L += side_by_side_lines(data, summ)
    if data.get("tuning"):
        L.append("## best: MPICH's fastest algorithms\n")
        L.append("Found one collective at a time (the others at the setting chosen so far), "
                 "one run per candidate" + (f" (best of {meta['tune_reps']})" if meta.get("tune_reps", 1) > 1 else "")
                 + ", by wall time; `default` is MPICH's own choice.\n")
        L.append("| program | placement | chosen | default s | best s | trials (s) |")
        L.append("|---|---|---|---|---|---|")
        for key, t in data["tuning"].items():
            prog, placement = key.split("|")
            if t is None:
                L.append(f"| {prog} | {placement} | FAILED (plain MPICH did not verify) | | | |")
                continue
            chosen = ", ".join(f"{v.replace('MPIR_CVAR_', '').replace('_INTRA_ALGORITHM', '').lower()}="
                               f"{x}" for v, x in t["settings"].items()) or "default"
            trials = "; ".join(
                f"{(tr['var'] or '').replace('MPIR_CVAR_', '').replace('_INTRA_ALGORITHM', '').lower() + '=' if tr['var'] else ''}"
                f"{tr['value']} {fmt(tr['wall_s']) if tr.get('wall_s') is not None else 'failed'}"
                for tr in t["trials"])
            L.append(f"| {prog} | {placement} | {chosen} | {fmt(t['default_wall_s'])} | "
                     f"{fmt(t['best_wall_s'])} | {trials} |")
        L.append("")
    stat_rows = []
    for k, per in summ.items():
        for c, s in per.items():
            st = s.get("stats")
            if not st:
                continue
            cells = []
            for op in ("alltoall", "alltoallv", "bcast", "barrier"):
                o = st.get(op) or {}
                cells.append(f"{o.get('calls_rank0', 0)} ({o.get('early_all', 0)}/{o.get('calls_all', 0)})")
            stat_rows.append(f"| {k[0]} | {k[1]} | {c} | " + " | ".join(cells) + " |")
    if stat_rows:
        L.append("## libtnbc.so statistics (last verified run)\n")
        L.append("Calls of rank 0 (early returns / calls, all ranks), from TNBC_STATS.\n")
        L.append("| program | placement | configuration | Alltoall | Alltoallv | Bcast | Barrier |")
        L.append("|---|---|---|---|---|---|---|")
        L += stat_rows
        L.append("")
    if data.get("plans"):
        L.append("## plans (tnbc-plan)\n")
        for key, info in data["plans"].items():
            L.append(f"- {key}: " + (f"`{info.get('plan')}`, traced run "
                                     f"{fmt(info.get('trace_wall_s'))} s" if info.get("plan_ok")
                                     else f"FAILED: {info.get('error', 'tnbc-order plan failed')}"))
        L.append("")
    fails = failed_runs(data["runs"])
    if fails:
        L.append("## FAILURES\n")
        for r in fails:
            L.append(f"- **{r['program']} {r['placement']} {r['config']} {r.get('tag', '')}**: "
                     f"{r['verification']} (log `{r['log']}`)")
        L.append("")
    tune_fails = failed_tune_candidates(data["runs"])
    if tune_fails:
        L.append("## MPICH's algorithms that failed in tuning\n")
        L.append("Plain MPICH with the algorithm set failed or did not verify: left out of `best`.\n")
        for r in tune_fails:
            L.append(f"- {r['program']} {r['placement']} {r.get('tag', '')}: {r['verification']} "
                     f"(log `{r['log']}`)")
        L.append("")
    if svg_path:
        L.append(f"![ratios to plain]({os.path.relpath(svg_path, os.path.dirname(os.path.abspath(md_path)))})\n")
    with open(md_path, "w") as f:
        f.write("\n".join(L))
    if svg_path:
        write_svg(summ, configs, svg_path, meta)


PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948",
           "#9c755f", "#ff9da7", "#bab0ac"]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_svg(summ, configs, path, meta):
    """Grouped bars: per program (one panel per placement), the median ratio to plain of each
    configuration with a min–max error bar; a dashed line at 1."""
    bars = [c for c in configs if c != "plain"]
    panels = [p for p in ("local", "cluster") if any(k[1] == p for k in summ)]
    if not bars or not panels:
        return
    bw, gap, left, top, ph, lab = 14, 18, 60, 40, 260, 130
    ngroups = max(len([k for k in summ if k[1] == p]) for p in panels)
    gw = bw * len(bars) + gap
    plot_w = max(ngroups * gw, 200)
    legend_w = 30 + 8 * max(len(c) for c in bars) + 20
    title = (f"Wall time ÷ plain MPICH (same round): median, bars min–max; "
             f"{meta['rounds']} round{'s' if meta['rounds'] != 1 else ''}")
    width = max(left + plot_w + 30 + legend_w, left + int(7.6 * len(title)) + 20)
    height = top + len(panels) * (ph + lab + 30) + 10
    vals = [s[x] for per in summ.values() for c, s in per.items() if c != "plain"
            for x in ("ratio_max", "ratio_med") if s.get(x) is not None]
    ymax = max([1.2] + [v * 1.05 for v in vals])
    ymax = min(ymax, 4.0)
    step = 0.25 if ymax <= 2 else 0.5
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{left}" y="20" font-size="13">{esc(title)}</text>']
    for pi, placement in enumerate(panels):
        y0 = top + pi * (ph + lab + 30) + 14
        keys = [k for k in summ if k[1] == placement]

        def Y(v):
            return y0 + ph - min(v, ymax) / ymax * ph
        o.append(f'<text x="{left}" y="{y0 - 4}" font-weight="bold">{esc(placement)}</text>')
        t = 0.0
        while t <= ymax + 1e-9:
            o.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" '
                     f'stroke="#ddd"/>')
            o.append(f'<text x="{left - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
            t += step
        o.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{Y(1):.1f}" y2="{Y(1):.1f}" '
                 f'stroke="#333" stroke-dasharray="5,3"/>')
        o.append(f'<line x1="{left}" x2="{left}" y1="{y0}" y2="{y0 + ph}" stroke="#333"/>')
        o.append(f'<text transform="rotate(-90 16 {y0 + ph / 2:.0f})" x="16" y="{y0 + ph / 2:.0f}" '
                 f'text-anchor="middle">wall time / plain MPICH</text>')
        for gi, k in enumerate(keys):
            gx = left + gi * gw + gap / 2
            for bi, c in enumerate(bars):
                s = summ[k].get(c)
                x = gx + bi * bw
                color = PALETTE[bi % len(PALETTE)]
                if not s or s.get("ratio_med") is None:
                    if s and s["n_ok"] < s["n"]:
                        o.append(f'<text x="{x + bw / 2:.1f}" y="{Y(0) - 3:.1f}" fill="red" '
                                 f'text-anchor="middle" font-size="9">x</text>')
                    continue
                yv = Y(s["ratio_med"])
                o.append(f'<rect x="{x:.1f}" y="{yv:.1f}" width="{bw - 2}" height="{Y(0) - yv:.1f}" '
                         f'fill="{color}"><title>{esc(k[0])} {esc(c)}: {s["ratio_med"]:.3f} '
                         f'({s["ratio_min"]:.3f}–{s["ratio_max"]:.3f})</title></rect>')
                cx = x + (bw - 2) / 2
                y1, y2 = Y(s["ratio_min"]), Y(s["ratio_max"])
                o.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" stroke="#000"/>')
                for yy in (y1, y2):
                    o.append(f'<line x1="{cx - 3:.1f}" x2="{cx + 3:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" '
                             f'stroke="#000"/>')
            lx = gx + len(bars) * bw / 2
            o.append(f'<text transform="translate({lx:.1f},{y0 + ph + 10}) rotate(40)" '
                     f'text-anchor="start">{esc(k[0])}</text>')
    lx = left + plot_w + 30
    for bi, c in enumerate(bars):
        ly = top + 14 + bi * 18
        o.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{PALETTE[bi % len(PALETTE)]}"/>')
        o.append(f'<text x="{lx + 18}" y="{ly + 10}">{esc(c)}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


# ------------------------------------------------------------------------------------------


def parse_extra(spec):
    name, sep, rest = spec.partition(":")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise argparse.ArgumentTypeError(f"--extra-config wants NAME:K=V[,K=V...], not {spec!r}")
    env, preload = {}, None
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq:
            raise argparse.ArgumentTypeError(f"--extra-config {name}: {kv!r} is not K=V")
        if k == "preload":
            if v not in ("tnbc", "none") and not os.path.isabs(v):
                raise argparse.ArgumentTypeError("preload= wants tnbc, none or an absolute path")
            if os.path.isabs(v) and not os.path.isfile(v):
                raise argparse.ArgumentTypeError(f"--extra-config {name}: preload={v}: no such file")
            preload = v if os.path.isabs(v) else v == "tnbc"
        else:
            env[k] = v
    if preload is None:
        preload = any(k.startswith("TNBC_") for k in env)
    return dict(name=name, env=env, preload=preload)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: run.py --placement both --rounds 5 --plan --json out.json "
               "--out report.md --svg report.svg")
    ap.add_argument("--apps", default="/work/apps",
                    help="folder of the builds (npb/, heffte/, 2decomp/, osu/, imb/; default %(default)s)")
    ap.add_argument("--only", help="programs to run, comma-separated names or globs (npb-*)")
    ap.add_argument("--long", action="store_true", help="include the programs marked long")
    ap.add_argument("--list", action="store_true", help="print the corpus and exit")
    ap.add_argument("--placement", choices=("local", "cluster", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default="plain,best,tnbc",
                    help="built-in configurations to run (default %(default)s; plain is always run)")
    ap.add_argument("--plan", action="store_true", help="add tnbc-plan (a traced run, tnbc-order plan, TNBC_PLAN)")
    ap.add_argument("--extra-config", action="append", type=parse_extra, default=[],
                    metavar="NAME:K=V,...",
                    help="add a configuration setting variables for every rank; libtnbc.so is "
                         "preloaded when a TNBC_ variable is set, or with preload=tnbc "
                         "(preload=none: never; preload=/abs/path/libtnbc.so: that build, to compare "
                         "two); repeatable, e.g. tnbc-off:TNBC_ADAPT=off")
    ap.add_argument("--lib", default=os.path.join(BUILD, "shim", "replay", "libtnbc.so"))
    ap.add_argument("--trace-lib", default=os.path.join(BUILD, "trace", "libtnbc_trace.so"))
    ap.add_argument("--order", default=os.path.join(BUILD, "tools", "tnbc-order"), help="tnbc-order")
    ap.add_argument("--cluster", default=os.path.join(BUILD, "tools", "tnbc-cluster"), help="tnbc-cluster")
    ap.add_argument("--prefix", default="tnbcapps", help="cluster name prefix (default %(default)s)")
    ap.add_argument("--subnet", default="10.217.0", help="cluster subnet (default %(default)s)")
    ap.add_argument("--nodes", type=int, default=2, help="emulated nodes (default 2)")
    ap.add_argument("--ranks", type=int, default=4,
                    help="ranks of every program, on one node and across the nodes (default 4; "
                         "programs that cannot run on the count are left out, or refused by --only)")
    ap.add_argument("--rate", help="link rate when this run brings the cluster up (tnbc-cluster --rate)")
    ap.add_argument("--lib-commit", help="the commit --lib was built from, for the report's header "
                    "(default: this repository's HEAD, with '+' where its tree has changes)")
    ap.add_argument("--pin", action="store_true",
                    help="pin the ranks: on the cluster each node's ranks on cores of their own "
                         "(tnbc-cluster run --pin), on one node each rank to a core, round robin "
                         "(mpiexec -bind-to core)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run (default %(default)s)")
    ap.add_argument("--tune-cache", default=None,
                    help="JSON file of tuning results, read and updated "
                         "(default: best-algorithms.json next to --json, or in --workdir)")
    ap.add_argument("--retune", action="store_true", help="ignore cached tuning results")
    ap.add_argument("--tune-reps", type=int, default=1, help="runs per candidate, best taken (default 1)")
    ap.add_argument("--no-stats", action="store_true", help="do not set TNBC_STATS for libtnbc.so runs")
    ap.add_argument("--workdir", help="folder for logs, traces, plans (default: a new /tmp/tnbc-apps-*)")
    ap.add_argument("--json", help="write every run here (updated after each run)")
    ap.add_argument("--out", help="Markdown report")
    ap.add_argument("--svg", help="SVG chart of the ratios (default: the report's name with .svg)")
    ap.add_argument("--report-only", metavar="JSON", help="only write --out/--svg from an earlier --json")
    a = ap.parse_args()

    if a.report_only:
        with open(a.report_only) as f:
            data = json.load(f)
        if not a.out:
            ap.error("--report-only needs --out")
        svg = a.svg or os.path.splitext(a.out)[0] + ".svg"
        write_report(data, a.out, svg)
        print(f"wrote {a.out} and {svg}")
        return 0

    if a.list:
        for p in corpus.PROGRAMS:
            print(f"{p.name:24s} {p.build + '/bin/' + p.exe:26s} {' '.join(p.args):60s} "
                  f"{','.join(p.tunable()) or '-':24s}{' long' if p.long else ''}"
                  f"{' call-only' if p.times_call_only else ''}")
        return 0

    if a.rounds < 1 or a.tune_reps < 1:
        ap.error("--rounds and --tune-reps must be at least 1")
    if a.ranks < 2 or a.nodes < 1:
        ap.error("--ranks must be at least 2 and --nodes at least 1")
    if a.placement != "local" and a.ranks % a.nodes:
        ap.error(f"--nodes {a.nodes} does not divide --ranks {a.ranks}")
    selected = corpus.PROGRAMS
    named = set()  # the programs --only names, not by a glob
    if a.only:
        pats = [s.strip() for s in a.only.split(",") if s.strip()]
        for pat in pats:
            if not any(fnmatch.fnmatch(p.name, pat) for p in corpus.PROGRAMS):
                ap.error(f"--only: no program matches {pat!r} (see --list)")
        selected = [p for p in corpus.PROGRAMS if any(fnmatch.fnmatch(p.name, pat) for pat in pats)]
        named = {p.name for p in corpus.PROGRAMS if p.name in pats}
        selected = [p for p in selected if not p.long or a.long or p.name in named]
    else:
        selected = [p for p in selected if not p.long or a.long]
    at_ranks = []
    for p in selected:
        try:
            at_ranks.append(p.at(a.ranks))
        except ValueError as e:
            if p.name in named:
                ap.error(f"--ranks {a.ranks}: {e}")
            log(f"left out: {e}")
    selected = at_ranks
    if not selected:
        ap.error("no program selected")
    builtin = [c.strip() for c in a.configs.split(",") if c.strip()]
    for c in builtin:
        if c not in ("plain", "best", "tnbc", "tnbc-plan"):
            ap.error(f"--configs: unknown configuration {c!r}")
    if a.plan and "tnbc-plan" not in builtin:
        builtin.append("tnbc-plan")
    if "plain" not in builtin:
        builtin.insert(0, "plain")
    extras = {e["name"]: e for e in a.extra_config}
    for n in extras:
        if n in builtin:
            ap.error(f"--extra-config {n}: the name is taken")
    configs = builtin + list(extras)

    placements = ["local", "cluster"] if a.placement == "both" else [a.placement]
    need = []
    for p in selected:
        exe = os.path.join(a.apps, p.build, "bin", p.exe)
        if not os.access(exe, os.X_OK):
            need.append(f"{exe} (build it: bench/apps/build-{p.build}.sh --out {os.path.join(a.apps, p.build)} ...)")
    uses_lib = any(c in ("tnbc", "tnbc-plan") for c in configs) or any(e["preload"] is True for e in extras.values())
    if uses_lib and not os.path.isfile(a.lib):
        need.append(f"--lib {a.lib}")
    if "tnbc-plan" in configs:
        for what, path in (("--trace-lib", a.trace_lib), ("--order", a.order)):
            if not os.path.isfile(path):
                need.append(f"{what} {path}")
    if "cluster" in placements and not os.access(a.cluster, os.X_OK):
        need.append(f"--cluster {a.cluster}")
    if not shutil.which("mpiexec.mpich"):
        need.append("mpiexec.mpich (Debian package mpich)")
    if need:
        for n in need:
            print(f"run.py: missing: {n}", file=sys.stderr)
        return 2

    a.workdir = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="tnbc-apps-"))
    os.makedirs(a.workdir, exist_ok=True)
    for attr in ("apps", "lib", "trace_lib", "order", "cluster"):
        setattr(a, attr, os.path.abspath(getattr(a, attr)))
    cache_path = a.tune_cache or os.path.join(
        os.path.dirname(os.path.abspath(a.json)) if a.json else a.workdir, "best-algorithms.json")
    cache = {}
    if os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
    if a.out and not a.svg:
        a.svg = os.path.splitext(a.out)[0] + ".svg"

    runner = Runner(a)
    libs = {"libtnbc.so": a.lib}
    if "tnbc-plan" in configs:
        libs.update({"libtnbc_trace.so": a.trace_lib, "tnbc-order": a.order})
    data = dict(meta=dict(
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        command=shlex.join([sys.executable] + sys.argv), machine=machine_info(),
        rounds=a.rounds, configs=configs, placements=placements, nodes=a.nodes, ranks=a.ranks,
        prefix=a.prefix, subnet=a.subnet, rate=a.rate, pin=a.pin,
        lib_commit=a.lib_commit or results_doc.repo_commit(), timeout=a.timeout, tune_reps=a.tune_reps,
        workdir=a.workdir, tune_cache=cache_path, programs=[p.name for p in selected],
        extra_configs=extras,
        libs={n: dict(path=p, sha256=sha(p)) for n, p in libs.items()}),
        tuning={}, plans={}, runs=[])
    log(f"workdir {a.workdir}; {len(selected)} programs x {len(placements)} placements x "
        f"{len(configs)} configurations x {a.rounds} rounds")

    def save():
        if a.json:
            tmp = a.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, a.json)

    brought_up = False
    interrupted = False
    try:
        if "cluster" in placements:
            st = subprocess.run(runner.cluster_base() + ["status"], capture_output=True, text=True)
            if st.returncode != 0 or "no cluster" in (st.stdout + st.stderr).lower():
                log(f"bringing up cluster {a.prefix} ({a.nodes} nodes, {a.subnet}.0/24)")
                cmd = runner.cluster_base()[:1] + (["--rate", a.rate] if a.rate else []) + \
                    runner.cluster_base()[1:] + ["up"]
                up = subprocess.run(cmd, capture_output=True, text=True)
                if up.returncode != 0:
                    error(f"tnbc-cluster up failed: {up.stdout}{up.stderr}")
                    return 2
                brought_up = True
            elif a.rate:
                log("cluster already up: --rate not applied")
        for prog in selected:
            for placement in placements:
                log(f"{prog.name} ({placement})")
                envs = {"plain": ({}, []), "tnbc": ({}, [a.lib])}
                skip = set()
                if "best" in configs:
                    t = tune(runner, prog, placement, cache, data["runs"])
                    data["tuning"][f"{prog.name}|{placement}"] = t
                    with open(cache_path, "w") as f:
                        json.dump(cache, f, indent=1)
                    if t is None:
                        error(f"{prog.name} {placement}: plain MPICH failed to verify: skipped")
                        save()
                        continue
                    envs["best"] = (dict(t["settings"]), [])
                if "tnbc-plan" in configs:
                    plan, info = make_plan(runner, prog, placement, data["runs"])
                    info["plan_ok"] = plan is not None
                    data["plans"][f"{prog.name}|{placement}"] = info
                    if plan:
                        envs["tnbc-plan"] = ({"TNBC_PLAN": plan}, [a.lib])
                    else:
                        skip.add("tnbc-plan")
                for n, e in extras.items():
                    lib = e["preload"] if isinstance(e["preload"], str) else a.lib
                    envs[n] = (dict(e["env"]), [lib] if e["preload"] else [])
                order = [c for c in configs if c not in skip]
                for r in range(a.rounds):
                    for pos, c in enumerate(round_order(order, r)):
                        env, pre = envs[c]
                        rec = runner.run(prog, placement, c, env, pre, f"round{r + 1}",
                                         stats=not a.no_stats)
                        rec["round"], rec["position"] = r, pos
                        data["runs"].append(rec)
                        save()
    except KeyboardInterrupt:
        interrupted = True
        error("interrupted: writing what was measured")
    finally:
        if brought_up:
            subprocess.run(runner.cluster_base() + ["down"], capture_output=True)
    data["meta"]["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    data["meta"]["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save()
    if a.out:
        write_report(data, a.out, a.svg)
        log(f"report: {a.out}" + (f", chart: {a.svg}" if a.svg else ""))
    for r in failed_tune_candidates(data["runs"]):
        log(f"note: tuning {r['program']} {r['placement']}: MPICH's {r['tag'].split('#')[0]} failed under "
            f"plain MPICH ({r['verification']}): left out of best")
    fails = failed_runs(data["runs"])
    if fails:
        error(f"{len(fails)} run(s) failed verification or timed out:\n" + "\n".join(
            f"  {r['program']} {r['placement']} {r['config']} {r['tag']}: {r['verification']} ({r['log']})"
            for r in fails))
    return 1 if fails or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
