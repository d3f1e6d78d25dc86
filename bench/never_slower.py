#!/usr/bin/env python3
"""never_slower: does a user who leaves libtnbc.so preloaded ever lose?

Runs bench/curc (MPI_Alltoall, then a fixed amount of computation calibrated alone, then every
received byte read) in every configuration side by side, round after round:

  plain   plain MPICH
  scat    plain MPICH with MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=scattered, the algorithm that gains
          most on the real programs measured (docs/apps.md): plain MPICH tuned by one setting
  tnbc    libtnbc.so with its defaults (per-call decision, TNBC_ADAPT=on)
  plan    libtnbc.so with TNBC_PLAN: the plan `tnbc-order plan` writes from a traced run of the
          same case (libtnbc_trace.so, a few iterations), as a user would make it
  engine  libtnbc.so returning early wherever it can (TNBC_ADAPT=off: the library before the
          per-call decision)
  mpi3    the hand-written MPI-3 version (MPI_Ialltoall, the work, MPI_Wait), no progress thread
  mpi3t   the same with MPI_Test every millisecond of the work (progress by hand, no thread)
  mpi3a   the same with MPICH's asynchronous progress thread (MPIR_CVAR_ASYNC_PROGRESS=1)
  floor   the same work and reads with no exchange at all (curc mode none): no way of
          communicating can take less, so a goal below it cannot be met

Cases: on one node (4 ranks on this machine's cores) and on the emulated cluster (2 nodes x 2
ranks, tnbc-cluster; --ppn 1: one rank a node, so each has a core of its own, the case where
MPICH's progress thread does not fight the ranks; --pin: each node's ranks on their own cores;
--nodes 4 or 8: 8 or 16 ranks, at a --rate low enough that the links bound the exchanges,
docs/cluster.md),
each with the data read at once (back-to-back exchanges, osu_alltoall's pattern) and with work
after the call.  Reports medians over the rounds as ratios against plain
MPICH of the same round, what the library cost per call (time inside the call, time waited
afterwards, progress-thread CPU, from TNBC_STATS), and the CPU time of every configuration (all
threads of all ranks: the work is fixed, so what is above plain MPICH's is what a library or a
progress thread added, and what is below is polling a blocking call did not do), with the
machine's softirq time over each run (the kernel's packet processing, which on the emulated
cluster runs on the same cores).  Checksums must equal plain MPICH's.

  bench/never_slower.py [--build build] [--rounds 3] [--only local|cluster] [--case NAME] [--nodes N]
                        [--ppn 1|2] [--pin] [--rate 200mbit]
                        [--out docs/measurements/never-slower.md]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import hung_job
import lib_settings
import link_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ["plain", "scat", "tnbc", "plan", "engine", "mpi3", "mpi3t", "mpi3a", "floor"]
LABELS = {"plain": "plain MPICH", "scat": "plain MPICH, scattered", "tnbc": "libtnbc.so (default)",
          "plan": "libtnbc.so + plan", "engine": "libtnbc.so, TNBC_ADAPT=off", "mpi3": "MPI-3",
          "mpi3t": "MPI-3 + MPI_Test", "mpi3a": "MPI-3 + async progress", "floor": "no exchange (floor)"}
LIBRARY = ("tnbc", "plan", "engine")  # the configurations that preload libtnbc.so
# Iterations of the traced run a case's plan comes from (its calls, read as the timed runs read).
TRACE_ITERS = 8
LOCAL_RANKS = 4
REFERENCE_RATE = link_model.parse_rate("200mbit")  # the rate the cases' limits were set for, bytes/s

# (name, where, block bytes, iterations, work in ms per iteration)
# Each key of the per-call decision learns in its first calls (6 blocking, or 3 where the reads
# leave room to overlap; 3-5 early; then probes between growing runs): the cluster cases make
# 72-100 calls so that the decision has a run to show, as a real program makes thousands.  On one node every call runs blocking.
CASES = [
    ("1 MiB, read at once", "local", 1 << 20, 40, 0),
    ("1 MiB, 20 ms work", "local", 1 << 20, 30, 20),
    ("1 MiB, read at once", "cluster", 1 << 20, 100, 0),
    ("1 MiB, 100 ms work", "cluster", 1 << 20, 72, 100),
    ("256 KiB, 25 ms work", "cluster", 1 << 18, 100, 25),
]


class RunError(Exception):
    pass


def run(cmd, timeout, env=None, program=None):
    """Runs `cmd` and returns its standard output.  Past `timeout` seconds the job is hung: the
    stacks of its processes running `program` (default: cmd[0]) and its output so far go to a
    file (bench/hung_job.py) that the error names, and its processes are ended."""
    try:
        return hung_job.run(cmd, timeout, program or cmd[0], env=env).stdout
    except hung_job.HungJob as e:
        raise RunError(str(e)) from None
    except subprocess.CalledProcessError as e:
        raise RunError(f"exit {e.returncode}: {' '.join(cmd)}: {e.stderr.strip()[-300:]}") from None


def softirq_s():
    """The machine's softirq time so far, all cores, in seconds (/proc/stat): on the emulated
    cluster mostly the kernel's packet processing (TCP, the veth pairs, the bridge, the links'
    tbf shaping); None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        return int(fields[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def parse(out):
    rows = [l for l in out.splitlines() if l.startswith("result ")]
    if len(rows) != 1:
        raise RunError(f"no result line: {out[-200:]!r}")
    return dict(f.split("=", 1) for f in rows[0].split()[1:])


def lib_costs(prefix, ranks):
    """Per call, mean over ranks: time inside early calls, waited afterwards, progress CPU (us)."""
    inside = waited = cpu = calls = early = 0
    for r in range(ranks):
        try:
            with open(f"{prefix}.{r}.json", encoding="utf-8") as f:
                d = json.load(f)
        except (OSError, ValueError):
            return None
        a = d["alltoall"]
        calls += a["calls"]
        early += a["early_return"]
        inside += d["init_us"]
        waited += d["fault_wait_us"] + d["fence_wait_us"]
        cpu += d["progress"]["cpu_us"]
    n = max(calls, 1)
    return {"early": early / max(ranks, 1), "calls": calls / max(ranks, 1), "inside_us": inside / n,
            "waited_us": waited / n, "cpu_us": cpu / n}


class Bench:
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.prog = os.path.join(self.build, "bench", "curc")
        self.lib = os.path.join(self.build, "shim", "replay", "libtnbc.so")
        self.trace_lib = os.path.join(self.build, "trace", "libtnbc_trace.so")
        self.order = os.path.join(self.build, "tools", "tnbc-order")
        self.cluster = os.path.join(self.build, "tools", "tnbc-cluster")
        self.work = tempfile.mkdtemp(prefix="tnbc_never_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TNBC_", "MPIR_CVAR"))}
        self.loops_per_ms = None  # measure() calibrates it

    def calibrate(self):
        out = run([self.prog, "calibrate", "200"], 60, self.env)
        return float(out.split("=")[1])

    def ranks(self, where):
        return LOCAL_RANKS if where == "local" else self.a.nodes * self.a.ppn

    def where_label(self, where):
        a = self.a
        return "1 node x 4" if where == "local" else f"{a.nodes} nodes x {a.ppn}, {a.rate}" + (", pinned" if a.pin else "")

    def run_limit(self, where, seconds):
        """`seconds`, the limit of a run on 2 nodes x 2 ranks at 200 Mbit/s, scaled to the cluster:
        the bytes one node's link carries per call grow as ppn^2 (nodes - 1), 4 on 2 x 2 (8 x 2:
        7 times as many; 8 x 2 at 100 Mbit/s moves a 1 MiB Alltoall in about 5 s, docs/cluster.md),
        and the time as the rate falls (unshaped links: taken as 200 Mbit/s)."""
        if where == "local":
            return seconds
        try:
            rate = link_model.parse_rate(self.a.rate)
        except ValueError:
            rate = REFERENCE_RATE
        return int(seconds * max(1.0, self.a.ppn ** 2 * (self.a.nodes - 1) / 4 * REFERENCE_RATE / rate))

    def cluster_cmd(self, *args):
        """tnbc-cluster with this run's node count."""
        return [self.cluster, "--nodes", str(self.a.nodes), *args]

    def launch(self, where, args, env, preload, timeout, ranks=LOCAL_RANKS, lib=None):
        """Runs curc ARGS on one node (mpiexec, `ranks` ranks) or on the emulated cluster (--ppn), with
        `env` for every rank and libtnbc.so (or `lib`) preloaded if asked; returns its standard
        output."""
        lib = lib or self.lib
        if preload and lib == self.lib:
            env = {**lib_settings.env(self.a.set), **env}
        if where == "local":
            cmd = ["mpiexec", "-n", str(ranks), "-genv", "UCX_NET_DEVICES", "lo"]
            if preload:
                cmd += ["-genv", "LD_PRELOAD", lib]
            for k, v in env.items():
                cmd += ["-genv", k, v]
            cmd += args
        else:
            cmd = self.cluster_cmd("run", "--ppn", str(self.a.ppn), "--timeout",
                                   str(timeout + hung_job.CLUSTER_LIMIT_MARGIN_S)) + (["--pin"] if self.a.pin else [])
            if preload:
                cmd += ["--preload", lib]
            for k, v in env.items():
                cmd += ["--env", f"{k}={v}"]
            cmd += ["--", *args]
        return run(cmd, timeout, self.env, program=args[0])

    def make_plan(self, where, block, loops, tag):
        """The plan of one case, as a user makes it: a traced run of TRACE_ITERS iterations
        (libtnbc_trace.so), then `tnbc-order plan`.  Returns its path."""
        trace_dir = os.path.join(self.work, f"trace_{tag}")
        self.launch(where, [self.prog, str(block), str(TRACE_ITERS), "blocking", str(loops)],
                    {"TNBC_TRACE_DIR": trace_dir}, True, self.run_limit(where, 300), lib=self.trace_lib)
        path = os.path.join(self.work, f"{tag}.plan")
        run([self.order, "plan", trace_dir, "-o", path], 60, self.env)
        return path

    def one(self, where, config, block, iters, loops, tag, plan=None):
        mode = {"mpi3t": "mpi3test", "mpi3": "mpi3", "mpi3a": "mpi3", "floor": "none"}.get(config, "blocking")
        prefix = os.path.join(self.work, tag)
        env = {}
        if config in LIBRARY:
            env["TNBC_STATS"] = prefix
        if config == "plan":
            env["TNBC_PLAN"] = plan
        if config == "engine":
            env["TNBC_ADAPT"] = "off"
        if config == "scat":
            env["MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM"] = "scattered"
        if config == "mpi3t":
            env["CURC_TEST_LOOPS"] = str(max(1, int(self.loops_per_ms)))
        if config == "mpi3a":
            env["MPIR_CVAR_ASYNC_PROGRESS"] = "1"
        args = [self.prog, str(block), str(iters), mode, str(loops)]
        soft0 = softirq_s()
        r = parse(self.launch(where, args, env, config in LIBRARY, self.run_limit(where, 300)))
        soft1 = softirq_s()
        r["softirq_s"] = soft1 - soft0 if soft0 is not None and soft1 is not None else float("nan")
        r["total_ms"] = float(r["total_ms"])
        r["cpu_ms"] = float(r.get("cpu_per_iter_ms", "nan")) * iters
        r["helper_ms"] = float(r.get("helper_cpu_per_iter_ms", "nan")) * iters
        if config in LIBRARY:
            r["costs"] = lib_costs(prefix, self.ranks(where))
        return r

    def measure(self):
        a = self.a
        loops_per_ms = self.loops_per_ms = self.calibrate()
        print(f"calibrated: {loops_per_ms:.0f} loops per ms of work", flush=True)
        cases = [c for c in CASES if a.only in (None, c[1]) and a.case in (None, c[0])]
        results = {}
        cluster_up = False
        try:
            for name, where, block, iters, work_ms in cases:
                if where == "cluster" and not cluster_up:
                    run(self.cluster_cmd("--rate", a.rate, "up"), 120, self.env)
                    cluster_up = True
                loops = int(work_ms * loops_per_ms)
                runs = results[(name, where)] = {c: [] for c in CONFIGS}
                try:
                    plan = self.make_plan(where, block, loops, f"{where}_{block}_{work_ms}")
                except RunError as e:
                    plan = None
                    print(f"never_slower: {where} {name}: no plan: {e}", file=sys.stderr)
                for rnd in range(a.rounds):
                    for config in CONFIGS:
                        tag = f"{where}_{block}_{work_ms}_{config}_{rnd}"
                        try:
                            if config == "plan" and plan is None:
                                raise RunError("no plan (the traced run or tnbc-order plan failed)")
                            r = self.one(where, config, block, iters, loops, tag, plan)
                        except RunError as e:
                            r = str(e)
                            print(f"never_slower: {where} {name} {config}: {e}", file=sys.stderr)
                        runs[config].append(r)
                        if isinstance(r, dict):
                            print(f"  {where:7} {name:22} {config:6} round {rnd}: {r['total_ms']:.1f} ms "
                                  f"checksum {r['checksum']}", flush=True)
        finally:
            if cluster_up:
                subprocess.run(self.cluster_cmd("down"), capture_output=True, env=self.env)
        return results, loops_per_ms

    def idle_cost(self, loops_per_ms):
        """The progress thread's CPU while a call is in flight with nothing to move: rank 0
        returns early and computes 60 ms while the other ranks sleep SKEW_MS before they call
        (CURC_SKEW_MS); the extra CPU against the same run without the skew, over the waiting
        time, is its share of a core."""
        a = self.a
        rows = []
        iters, skew, work_ms = 10, 50, 60
        wheres = [w for w in ("local", "cluster") if a.only in (None, w)]
        if "cluster" in wheres:
            run(self.cluster_cmd("--rate", a.rate, "up"), 120, self.env)
        try:
            for where in wheres:
                # Rounds interleave the two runs; each round gives one share, the median is reported.
                cpu = {0: [], skew: []}
                for rnd in range(a.rounds):
                    for s_ms in (0, skew):
                        tag = f"idle_{where}_{s_ms}_{rnd}"
                        prefix = os.path.join(self.work, tag)
                        env = {"TNBC_ADAPT": "off", "TNBC_STATS": prefix, "CURC_SKEW_MS": str(s_ms)}
                        args = [self.prog, str(1 << 16), str(iters), "blocking", str(int(work_ms * loops_per_ms))]
                        self.launch(where, args, env, True, self.run_limit(where, 120))
                        with open(f"{prefix}.0.json", encoding="utf-8") as f:
                            cpu[s_ms].append(json.load(f)["progress"]["cpu_us"])
                waited_us = (iters + 1) * skew * 1e3
                shares = [max(late - on_time, 0) / waited_us for on_time, late in zip(cpu[0], cpu[skew])]
                where_s = self.where_label(where)
                rows.append(f"| {where_s} | {statistics.median(cpu[0]) / (iters + 1) / 1e3:.2f} ms "
                            f"| {statistics.median(cpu[skew]) / (iters + 1) / 1e3:.2f} ms "
                            f"| {100 * statistics.median(shares):.1f}% ({100 * min(shares):.1f}-{100 * max(shares):.1f}%) |")
        finally:
            if "cluster" in wheres:
                subprocess.run(self.cluster_cmd("down"), capture_output=True, env=self.env)
        return ("\nWaiting: rank 0's progress-thread CPU per call (64 KiB blocks, `TNBC_ADAPT=off`, "
                f"{work_ms} ms of work after each call), with the other ranks on time and with them {skew} ms late "
                "(`CURC_SKEW_MS`); the difference over the waiting time is the thread's share of a core "
                f"while a call is in flight with nothing to move; medians of {a.rounds} rounds (the share's "
                "range in brackets).\n\n"
                "| cluster | CPU per call, on time | CPU per call, 50 ms late | share of a core while waiting |\n"
                "|---|---|---|---|\n" + "\n".join(rows) + "\n")

    def blocking_cost(self):
        """What the library's blocking path itself costs: 2 ranks on this machine (one per core,
        so no rank waits for a core), 5000 back-to-back 64 KiB Alltoalls whose data is read at
        once; plain MPICH, plain MPICH at MPI_THREAD_MULTIPLE (the level the library asks for),
        libtnbc.so with every choice off and with its defaults (one node: every call is the plain
        call behind the decision's bookkeeping), and --other-lib's defaults where given; rounds
        interleaved."""
        iters, block = 5000, 1 << 16
        configs = {"plain": ({}, None), "mt": ({"MPIR_CVAR_DEFAULT_THREAD_LEVEL": "MPI_THREAD_MULTIPLE"}, None),
                   "nochoice": (lib_settings.CHOICES_OFF, self.lib), "tnbc": ({}, self.lib)}
        if self.a.other_lib:
            configs["other"] = ({}, self.a.other_lib)
        per = {c: [] for c in configs}
        for rnd in range(max(self.a.rounds, 5)):
            order = list(configs) if rnd % 2 == 0 else list(reversed(configs))
            for config in order:
                env, lib = configs[config]
                r = parse(self.launch("local", [self.prog, str(block), str(iters), "blocking", "0"], env,
                                      lib is not None, 120, ranks=2, lib=lib))
                per[config].append(float(r["total_ms"]) * 1e3 / iters)
        names = {"plain": "plain", "mt": "plain, `MPI_THREAD_MULTIPLE`", "nochoice": "libtnbc.so, every choice off",
                 "tnbc": "libtnbc.so (default)", "other": f"`{self.a.other_lib}` (default)"}
        rows = []
        for c, v in per.items():
            ratios = [t / p for p, t in zip(per["plain"], v)]
            rows.append(f"| {names[c]} | {statistics.median(v):.1f} us | {statistics.median(ratios):.3f} "
                        f"({min(ratios):.3f}-{max(ratios):.3f}) |")
        return ("\nThe blocking path's own cost: 2 ranks on one node (one per core), 5000 back-to-back "
                "64 KiB Alltoalls read at once, each configuration in every round (the order reversed every "
                f"second round), {len(per['plain'])} rounds; per call, and the ratio to plain MPICH of the same "
                "round.\n\n"
                "| configuration | per call | ratio, median (min-max) |\n"
                "|---|---|---|\n" + "\n".join(rows) + "\n")

    def report(self, results, loops_per_ms):
        a = self.a
        lines = []
        rows = []
        cpu_rows = []
        for (name, where), runs in results.items():
            ratios = {c: [] for c in CONFIGS}
            bad = set()
            for rnd, base in enumerate(runs["plain"]):
                if not isinstance(base, dict):
                    continue
                for c in CONFIGS:
                    r = runs[c][rnd] if rnd < len(runs[c]) else None
                    if isinstance(r, dict):
                        ratios[c].append(r["total_ms"] / base["total_ms"])
                        if r["checksum"] != base["checksum"] and c != "floor":  # floor receives nothing
                            bad.add(c)
            plain_ms = [r["total_ms"] for r in runs["plain"] if isinstance(r, dict)]

            def cell(c):
                if c in bad:
                    return "DIFFERENT"
                v = ratios[c]
                if not v:
                    return "failed"
                return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

            def cost(c):
                cs = [r["costs"] for r in runs[c] if isinstance(r, dict) and r.get("costs")]
                if not cs:
                    return "-"
                m = lambda k: statistics.median(x[k] for x in cs)
                return (f"{m('early'):.0f}/{m('calls'):.0f} early; in {m('inside_us') / 1e3:.1f} + "
                        f"wait {m('waited_us') / 1e3:.1f} + cpu {m('cpu_us') / 1e3:.1f} ms")
            where_s = self.where_label(where)

            def cpu(c):
                v = [r["cpu_ms"] / r["total_ms"] for r in runs[c] if isinstance(r, dict)]
                w = [r["cpu_ms"] for r in runs[c] if isinstance(r, dict)]
                h = [r["helper_ms"] for r in runs[c] if isinstance(r, dict)]
                k = [r["softirq_s"] for r in runs[c] if isinstance(r, dict)]
                return (f"{statistics.median(w) / 1e3:.2f} s ({statistics.median(v):.2f} cores), "
                        f"{statistics.median(h) / 1e3:.2f} s helpers; {statistics.median(k):.2f} s softirq"
                        if v else "-")
            cpu_rows.append(f"| {where_s} | {name} | " + " | ".join(cpu(c) for c in CONFIGS) + " |")
            rows.append(f"| {where_s} | {name} | {statistics.median(plain_ms):.0f} ms | "
                        + " | ".join(cell(c) for c in CONFIGS[1:]) + " | "
                        + " | ".join(cost(c) for c in LIBRARY) + " |"
                        if plain_ms else f"| {where_s} | {name} | failed |" + " |" * (len(CONFIGS) - 1 + len(LIBRARY)))
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        lines.append(f"Measured {now} on {platform.node() or 'this machine'} ({os.cpu_count()} cores), "
                     f"{a.rounds} rounds, configurations interleaved in each round; work calibrated at "
                     f"{loops_per_ms:.0f} loops/ms.  {lib_settings.sentence(a.set)}Ratios: median (min-max) of run time against plain "
                     f"MPICH of the same round; below 1 is faster.  Library costs per call (median over "
                     f"rounds, mean over ranks and calls): early returns / calls; time inside the call "
                     f"before returning; time waited afterwards in faults and fences; progress-thread "
                     f"CPU.\n")
        lines.append("| cluster | case | plain | " + " | ".join(LABELS[c] for c in CONFIGS[1:])
                     + " | costs, default | costs, plan | costs, ADAPT=off |")
        lines.append("|---|---|---|" + "---|" * (len(CONFIGS) - 1 + len(LIBRARY)))
        lines += rows
        lines.append("\nCPU time of the whole timed loop (every thread of every rank: the program's, MPI's "
                     "and a progress thread's), median over the rounds, and in brackets the cores it kept "
                     "busy on average (CPU time over run time); then the part on threads other than the "
                     "program's own (\"helpers\": libtnbc.so's progress thread, MPICH's asynchronous "
                     "progress thread); then the machine's softirq time over the whole run (every core, "
                     "from /proc/stat, start-up included): the kernel's packet processing, which "
                     "the emulated nodes' TCP, veth pairs, bridge and shaped links do on the same cores "
                     "as the ranks, and which the process CPU times do not all count.  The work after each call is the same in "
                     "every configuration; plain MPICH and MPI-3 without a progress thread poll inside the "
                     "blocking call or `MPI_Wait` (MPI-3 + MPI_Test also once a millisecond of the work), "
                     "MPICH's progress thread polls throughout.\n")
        lines.append("| cluster | case | " + " | ".join(LABELS[c] for c in CONFIGS) + " |")
        lines.append("|---|---|" + "---|" * len(CONFIGS))
        lines += cpu_rows
        return "\n".join(lines) + "\n"


def write(path, table):
    begin, end = "<!-- BEGIN RESULTS -->", "<!-- END RESULTS -->"
    try:
        doc = open(path, encoding="utf-8").read()
    except OSError:
        doc = f"# Never slower\n\n{begin}\n{end}\n"
    i, j = doc.index(begin) + len(begin), doc.index(end)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc[:i] + "\n" + table + doc[j:])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rate", default="200mbit", help="link rate of the emulated nodes (default 200mbit)")
    p.add_argument("--only", choices=["local", "cluster"], help="run only the cases on one node or on the cluster")
    p.add_argument("--nodes", type=int, default=2, choices=[2, 4, 8],
                   help="emulated nodes of the cluster cases (default 2; 4 and 8: docs/cluster.md)")
    p.add_argument("--ppn", type=int, default=2, choices=[1, 2],
                   help="ranks per emulated node (default 2; 1: a core per rank on this 2-core machine)")
    p.add_argument("--pin", action="store_true",
                   help="pin each emulated node's ranks to their own share of the cores (tnbc-cluster run --pin)")
    p.add_argument("--out", help="Markdown file whose RESULTS section is rewritten ('-': print only; default "
                                 "docs/measurements/never-slower.md, never-slower-NxP.md with --nodes N other than 2)")
    p.add_argument("--blocking-only", action="store_true",
                   help="measure only the blocking path's own cost per call (printed, not written)")
    p.add_argument("--other-lib", metavar="PATH",
                   help="another build of libtnbc.so, its defaults measured beside in the blocking path's cost")
    p.add_argument("--waiting-only", action="store_true",
                   help="measure only the progress thread's CPU while a call waits (printed, not written)")
    p.add_argument("--case", choices=sorted({c[0] for c in CASES}),
                   help="run only this case (with --only, where it names two); the blocking path's and the "
                        "waiting thread's costs are then not measured")
    lib_settings.add_option(p, "TNBC_PROGRESS_MAX_SLEEP_US=4000")
    a = p.parse_args()
    if a.out is None:
        a.out = os.path.join(ROOT, "docs", "measurements",
                             "never-slower.md" if a.nodes == 2 else f"never-slower-{a.nodes}x{a.ppn}.md")
    # A missing library would only make the loader warn, and its column measure plain MPICH.
    if a.other_lib and not os.path.isfile(a.other_lib):
        p.error(f"--other-lib: no such file: {a.other_lib}")
    if a.only != "local" and os.geteuid() != 0:
        sys.exit("never_slower: the cluster cases need root (network namespaces); use --only local")
    b = Bench(a)
    if a.blocking_only:
        print(b.blocking_cost())
        return
    if a.waiting_only:
        lpm = b.calibrate()
        print(b.idle_cost(lpm))
        return
    results, lpm = b.measure()
    table = b.report(results, lpm) + ("" if a.case else b.blocking_cost() + b.idle_cost(lpm))
    print(table)
    if a.out != "-":
        write(a.out, table)
        print(f"written to {a.out}")


if __name__ == "__main__":
    main()
