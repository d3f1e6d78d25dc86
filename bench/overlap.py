#!/usr/bin/env python3
"""Replay mode's overlap benchmark: the paper's five CURC/CRC scenarios (Table 1) and the case
with nothing to overlap, on the emulated cluster (2 nodes x 2 ranks; --nodes, --ppn), 1 MiB
Alltoall blocks.

For every scenario eight configurations run side by side in one session: plain MPICH
(MPI_Alltoall), libtnbc.so without a plan (its defaults: the per-call decision), libtnbc.so's
engine alone (TNBC_ADAPT=off: every call returns early), libtnbc.so with a plan (the benchmark
reads blocks 0..p-1; the plan, keyed by the call sites of a traced run, says so, turns per-node
priority on and says `return early`; where the data is read right after the call, `window 8`, as
tnbc-order plan --per-node writes there), and the hand-written MPI-3 version (MPI_Ialltoall,
MPI_Wait before the first read), without and with MPICH's asynchronous progress thread
(MPIR_CVAR_ASYNC_PROGRESS=1; not under Open MPI) and with MPI_Test every millisecond of the work
before the reads (progress by hand, no thread), and plain MPICH once more with its scattered
algorithm (MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=scattered, every exchange posted at once: the
setting that gains most on the real programs, docs/apps.md; not under Open MPI); the plan is
also set against the best of the five that need no library.  Work after the collective is given in
absolute microseconds derived from a plain run's Tcomm, so every configuration does the same
work; the timed runs skip the program's own Tcomm loop (OVERLAP_SKIP_TCOMM), so the library sees
one call site, the timed one.  Overlap measured = total(plain) - total(config); the bound is formula (3) of the paper,
min(Tcomm - Tinit, TCURC + TCRC) (with RCRC = D/TCRC, Tcomm*Rcomm/RCRC = TCRC), with the Tcomm of
plain MPICH measured in the same row.  Each scenario runs with the blocks read whole and read in
16 parts (--parts), and with two rank placements (--placement): block (ranks 0,1 on node 0) and
cyclic (ranks dealt round robin, as in the paper's per-node priority figure).  The link bound
(bench/link_model.py) is the overlap the links allow at best.  Scenarios b and c run once more
with work that sleeps instead of spinning (--free-cores), so that the progress threads have the
cores to themselves.  Under each placement's table a second one gives what each configuration
spends beside the work, per call and rank: the CPU of threads other than the program's own
(libtnbc.so's progress thread, MPICH's async progress thread) and the time inside the call.
With --warmup K every timed run makes K calls before its --iters counted ones (the steady state:
without every configuration's first calls, which pay for connections and fresh pages).

Writes docs/measurements/replay-overlap.md; a section of it headed "## Reading" (written by hand) is kept.
Needs root (network namespaces); takes about 40 minutes with --repeat 5.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

import hung_job
import lib_settings
import link_model
import results_doc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI = "mpich"  # --mpi: the build, libraries and launcher used (use_mpi)
BUILD = os.path.join(ROOT, "build")
CLUSTER = os.path.join(BUILD, "tools", "tnbc-cluster")
PROG = os.path.join(BUILD, "bench", "overlap")
LIB = os.path.join(BUILD, "shim", "replay", "libtnbc.so")
TRACE_LIB = os.path.join(BUILD, "trace", "libtnbc_trace.so")
DUMP = os.path.join(BUILD, "test", "trace", "trace_dump")


def use_mpi(mpi):
    """Open MPI: the build in build-openmpi/ (meson -Dmpi=openmpi), its libraries and
    `tnbc-cluster run --mpi openmpi`."""
    global MPI, BUILD, CLUSTER, PROG, LIB, TRACE_LIB, DUMP
    MPI = mpi
    suffix = "" if mpi == "mpich" else "-" + mpi
    BUILD = os.path.join(ROOT, "build" + suffix)
    CLUSTER = os.path.join(BUILD, "tools", "tnbc-cluster")
    PROG = os.path.join(BUILD, "bench", "overlap")
    LIB = os.path.join(BUILD, "shim", "replay", f"libtnbc{suffix}.so")
    TRACE_LIB = os.path.join(BUILD, "trace", f"libtnbc_trace{suffix}.so")
    DUMP = os.path.join(BUILD, "test", "trace", "trace_dump")
NODES, PPN = 2, 2  # the emulated cluster: nodes, and ranks per node (--nodes, --ppn)


def cluster(*args):
    """tnbc-cluster with the cluster's node count."""
    return [CLUSTER, "--nodes", str(NODES), *args]

# (name, what the paper's Table 1 row is, TCURC/Tcomm, TCRC/Tcomm), fractions from the paper's
# numbers (Tcomm 268 ms: TCURC 445 / 177 ms, CRC 350 / 175 ms).
SCENARIOS = [
    ("a", "TCURC >= Tcomm", 1.66, 0.0),
    ("b", "TCURC = 0, RCRC < Rcomm", 0.0, 1.3),
    ("c", "TCURC = 0, RCRC > Rcomm", 0.0, 0.65),
    ("d", "0 < TCURC < Tcomm, RCRC < Rcomm", 0.66, 1.3),
    ("e", "0 < TCURC < Tcomm, RCRC > Rcomm", 0.66, 0.65),
    ("none", "data read at once, nothing to overlap", 0.0, 0.0),
]


# The first touch, as a share of Tcomm, from which `tnbc-order show` calls a site CURC
# (priority::ConsensusOptions::curc_fraction); before it, CRC: the data is read right after the call.
CURC_FRACTION = 0.5
# The send window tnbc-order plan writes for a CRC site with per-node priority
# (priority::PlannerOptions::read_at_once_window).
READ_AT_ONCE_WINDOW = 8
RUN_LIMIT_S = 150  # a run takes 2-15 s; tnbc-cluster's own --timeout (300 s) stays behind it


def make_plan(args, work, op="alltoall", env=None, windows=(None,)):
    """Traces the benchmark once and writes a plan: blocks read 0..p-1, per-node priority on.
    (The call-site keys come from the trace, as `tnbc-order plan` would take them.)  `op`: the
    collective the program makes (alltoallv with OVERLAP_COUNTS=is in `env`).  One plan per
    entry of `windows`, which its entries give as `window N` (None: no window line, the
    configured TNBC_CHUNK_WINDOW); returns the path, or a dict of paths by window if several."""
    trace_dir = os.path.join(work, "trace")
    extra = [x for k, v in (env or {}).items() for x in ("--env", f"{k}={v}")]
    subprocess.run(cluster("run", "--mpi", MPI, "--ppn", str(PPN), "--timeout", "300", "--preload", TRACE_LIB) + [
                    "--env", f"TNBC_TRACE_DIR={trace_dir}", *extra, "--", PROG, str(args.block), "2",
                    "blocking", "0", "0"], check=True, capture_output=True, timeout=400)
    dump = json.loads(subprocess.run([DUMP, os.path.join(trace_dir, "0.tnbct")], check=True,
                                     capture_output=True, text=True).stdout)
    def key(site):
        # As CallSiteTable::key: a plan key holds no blanks, '#' or bytes outside printable ASCII.
        raw = ";".join(f"{os.path.basename(f['module'])}+0x{f['offset']:x}" for f in site["frames"]) or "?"
        return "".join(chr(b) if 0x20 < b <= 0x7e and b != 0x23 else "_" for b in raw.encode())
    sites = sorted({(key(dump["callsites"][c["callsite"]]), c["comm_size"]) for c in dump["calls"]})
    # `return early`: each run makes only --iters calls, fewer than the per-call decision's warm-up,
    # so without it the plan's calls would all run blocking.  tnbc-order plan writes it where the
    # trace shows the data read long after the call (scenarios a, d, e); the scenario with nothing
    # to overlap keeps it here too, so that its row shows what returning early costs there.
    paths = {}
    for window in windows:
        text = ["tnbc-plan 2", "# bench/overlap.py: blocks are read 0..p-1"]
        for site, p in sites:
            text += [f"site {site} {op} comm={p} class=*", "  order " + " ".join(map(str, range(p))), "  per-node on"]
            text += [f"  window {window}"] if window else []
            text += ["  return early", "end"]
        text.append(f"end-of-plan {len(sites)}")
        paths[window] = os.path.join(work, f"overlap{'-window' + str(window) if window else ''}.plan")
        with open(paths[window], "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
    return paths if len(windows) > 1 else paths[windows[0]]


def ms_cell(totals, label):
    """A configuration's total (µs, by label) as a table cell; '–' where not measured (the
    MPICH-only ones under Open MPI)."""
    return f"{totals[label]/1e3:.1f} ms" if label in totals else "–"


def async_ratio(res, total):
    return f"{total / res['mpi3a']['total']:.2f}" if "mpi3a" in res else "–"


# What a user gets without the library: plain MPI, its scattered algorithm, MPI-3 with and
# without MPICH's progress thread (those measured).
BASELINES = ("plain", "scat", "mpi3", "mpi3t", "mpi3a")
SHORT = {"plain": "plain", "scat": "scattered", "mpi3": "MPI-3", "mpi3t": "MPI-3 + MPI_Test",
         "mpi3a": "MPI-3 async"}


def best_cell(totals, total):
    """`total` against the least of the configurations without the library (totals by label)
    measured, named: a table cell."""
    least, label = min((totals[k], k) for k in BASELINES if k in totals)
    return f"{total / least:.2f} ({SHORT[label]})"


def run(mode, preload, curc_us, crc_us, args, plan=None, parts=1, placement="block", block=None, iters=None,
        sleep=False, env=None, timed=True):
    cmd = cluster("run", "--mpi", MPI, "--ppn", str(PPN), "--placement", placement, "--timeout", "300")
    if getattr(args, "pin", False):
        cmd += ["--pin"]
    if timed:
        # Only the Tcomm runs use the Tcomm loop (another call site, data read at once); the
        # timed runs skip it, so the program is the timed loop alone, one call site, as the
        # library's per-call decision and learning should see it.
        cmd += ["--env", "OVERLAP_SKIP_TCOMM=1"]
    if sleep:
        cmd += ["--env", "OVERLAP_SLEEP=1"]
    if timed and getattr(args, "warmup", 0):
        cmd += ["--env", f"OVERLAP_WARMUP={args.warmup}"]
    for k, v in (env or {}).items():
        cmd += ["--env", f"{k}={v}"]
    if preload:
        cmd += ["--preload", LIB]
        for kv in getattr(args, "set", None) or ():
            cmd += ["--env", kv]
    if plan:
        cmd += ["--env", f"TNBC_PLAN={plan}"]
    cmd += ["--", PROG, str(block or args.block), str(iters or args.iters), mode, f"{curc_us:.0f}", f"{crc_us:.0f}", str(parts)]
    # A run takes seconds: one still going after RUN_LIMIT_S is hung, and leaves its stacks.
    try:
        out = hung_job.run(cmd, RUN_LIMIT_S, PROG).stdout
    except hung_job.HungJob as e:
        raise SystemExit(f"overlap.py: a run hung: {e}")
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"overlap.py: exit status {e.returncode} from {' '.join(cmd)}:\n{e.stderr[-3000:]}")
    m = re.search(r"result .*", out)
    if not m:
        raise SystemExit(f"no result line from {' '.join(cmd)}:\n{out}")
    return {k: float(v) if re.fullmatch(r"[0-9.]+", v) else v
            for k, v in (kv.split("=") for kv in m.group(0).split()[1:])}


def sent_bytes():
    """Bytes each node's shaped link (its eth0's tbf qdisc) has sent so far, by node; {} where
    they cannot be read."""
    counters = {n: link_model.tbf_counters("eth0", f"tnbc-n{n}") for n in range(NODES)}
    return {n: c[0] for n, c in counters.items() if c is not None}


def wire_per_payload(args):
    """Bytes the links carry per byte of the exchange's payload (TCP/IP and Ethernet headers,
    the acknowledgements of the other direction's data, MPI's own messages), measured on a plain
    run of --iters exchanges read at once: the busiest link's counter against the bytes the
    exchanges send across it.  None where the counters cannot be read."""
    before = sent_bytes()
    run("blocking", False, 0, 0, args)
    after = sent_bytes()
    payload = link_model.crossing_bytes(link_model.node_of(NODES * PPN, NODES, "block"), args.block)
    calls = args.iters + args.warmup
    ratios = [(after[n] - before[n]) / (calls * payload[n]) for n in before if n in after and payload[n]]
    return max(ratios) if ratios else None


def learn_table(args, rows):
    """The learning table of one placement and granularity: what TNBC_LEARN=1 reaches without a
    plan, next to the plan, and what it costs against learning off."""
    lines = [
        "Learning the read order: no plan with `TNBC_LEARN=1` (the default) against no plan "
        "with `TNBC_LEARN=0` (learning off), and the share of the plan's gain over plain MPICH that "
        "learning reaches without a plan.  Times here are the mean per iteration of "
        f"{args.iters} (every call counts: the warm-up calls and probes of the per-call "
        "decision" + (f", after {args.warmup} calls not counted" if args.warmup else "") + "), median of the runs.",
        "",
        "| scenario | plain | plan | no plan, TNBC_LEARN=1 | no plan, TNBC_LEARN=0 | learning on / off | plan's gain reached without a plan |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, desc, curc, crc, res in rows:
        p, nl, t, q = (res[k]["mean"] for k in ("plain", "nolearn", "tnbc", "plan"))
        reached = f"{(p - t) / (p - q):.0%}" if p - q > 0 else "n/a (the plan gains nothing)"
        lines.append(f"| {name} | {p/1e3:.1f} ms | {q/1e3:.1f} ms | {t/1e3:.1f} ms | {nl/1e3:.1f} ms "
                     f"| {t/nl:.2f} | {reached} |")
    lines += ["", "Each run's mean per iteration (ms), and what each learning run's world key ended "
              "with (rank 0's statistics: its path, its per-node turns, how many calls compared "
              "turns on and off, and how many ran blocking):", ""]
    for name, desc, curc, crc, res in rows:
        means = "; ".join(f"{shown} " + ", ".join(f"{m/1e3:.1f}" for m in res[k]["means"])
                          for k, shown in (("plain", "plain"), ("nolearn", "learning off"),
                                           ("tnbc", "learning on"), ("plan", "plan")) if k in res)
        lines.append(f"- {name}: {means}.  Learning: " + "; ".join(res["tnbc"]["turns"]) + ".")
    return lines


def cpu_table(rows):
    """What each configuration spends beside the program's work, per call and rank (medians of
    the runs): the CPU of threads other than the program's own and the time inside the call."""
    lib = [(k, n) for k, n in (("tnbc", "no plan"), ("engine", "engine alone"), ("plan", "plan"))
           if all(k in r for *_, r in rows)]
    helpers = lib + ([("mpi3a", "MPI-3, async progress")] if all("mpi3a" in r for *_, r in rows) else [])
    out = [
        "Beside the work, per call and rank (median of the runs): the CPU time of threads other "
        "than the program's own (libtnbc.so's progress thread"
        + ("; MPICH's asynchronous progress thread" if len(helpers) > len(lib) else "")
        + "), and the time inside the call (Tinit), where libtnbc.so sets the call up and "
        "copies the send buffer in the calling thread (plain MPI and MPI-3 without a progress "
        "thread have no thread of their own beside the program's, and their time in the call is "
        "the exchange or its start).",
        "",
        "| scenario | " + " | ".join(f"progress thread CPU, {n}" for _, n in helpers) + " | "
        + " | ".join(f"in the call, {n}" for _, n in lib) + " |",
        "|---|" + "---|" * (len(helpers) + len(lib)),
    ]
    for name, _, _, _, r in rows:
        out.append(f"| {name} | " + " | ".join(f"{r[k]['helper']/1e3:.1f} ms" for k, _ in helpers) + " | "
                   + " | ".join(f"{r[k]['tinit']/1e3:.1f} ms" for k, _ in lib) + " |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--block", type=int, default=1 << 20, help="Alltoall block bytes (default 1 MiB)")
    ap.add_argument("--iters", type=int, default=5, help="iterations per run (median taken)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="calls each timed run makes before its --iters, not counted (default 0): "
                         "with 4 or more the medians are the steady state, without every "
                         "configuration's first calls (connections, fresh pages, the library's "
                         "warm-up)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each runs every configuration once, in turn (median taken)")
    ap.add_argument("--rate", default="200mbit", help="link rate per node")
    ap.add_argument("--nodes", type=int, default=2, choices=(2, 4, 8),
                    help="emulated nodes (default 2; 4 and 8 at a rate where the links bound the "
                         "exchanges: docs/cluster.md)")
    ap.add_argument("--ppn", type=int, default=2, choices=(1, 2), help="ranks per node (default 2)")
    ap.add_argument("--slow-start-after-idle", choices=("on", "off"), default="on",
                    help="TCP's slow start after idle in the emulated nodes (tnbc-cluster's option; "
                         "default on, the kernel's default): off separates what the library does "
                         "from the restarts of connections that rested between their turns")
    ap.add_argument("--tso", choices=("on", "off"), default="on",
                    help="the links take the nodes' TCP segments whole (on, tnbc-cluster's default) or "
                         "cut them into 1500-byte packets on the nodes' CPUs (off, the emulation "
                         "before 2026-11-28)")
    ap.add_argument("--pin", action="store_true",
                    help="each emulated node's ranks on its own share of the cores (tnbc-cluster run --pin: "
                         "one core per node on a 2-core machine), so one node's busy ranks do not take "
                         "the other's CPU")
    ap.add_argument("--parts", default="1,16",
                    help="CRC granularities to measure, comma-separated: each block is read in "
                         "this many parts, each followed by its share of the work (default 1,16)")
    ap.add_argument("--placement", default="block,cyclic",
                    help="rank placements to measure, comma-separated: block (ranks 0,1 on node 0, "
                         "2,3 on node 1) and/or cyclic (rank r on node r mod 2) (default block,cyclic)")
    ap.add_argument("--none-blocks", default="65536,262144,1048576",
                    help="block sizes (bytes, comma-separated) of the extra table for data read at "
                         "once, where nothing can overlap (default 64 KiB, 256 KiB, 1 MiB; empty: skip)")
    ap.add_argument("--free-cores", default="b,c",
                    help="scenarios (comma-separated) measured once more with work that sleeps "
                         "instead of spinning, in every placement with the largest --parts: the "
                         "cores are then free for the progress threads (default b,c; empty: skip)")
    ap.add_argument("--scenarios", default=",".join(sc[0] for sc in SCENARIOS),
                    help="scenarios to measure, comma-separated (default: all)")
    ap.add_argument("--learn", action="store_true",
                    help="add libtnbc.so without a plan and with learning off (nolearn, TNBC_LEARN=0) "
                         "beside its default (tnbc, learning on), to show what learning the read order "
                         "(docs/replay.md, \"Learning the order\") gains or costs; runs must be longer than "
                         "the warm-up (--iters 20 or more)")
    ap.add_argument("--learn-only", action="store_true",
                    help="measure only what the learning goal compares (plain MPICH, libtnbc.so with no "
                         "plan, learning on (its default) and off, and with the plan) and write only the learning table, "
                         "with the turns each learning run decided (docs/measurements/learn-overlap.md); no --none-blocks "
                         "or --free-cores tables")
    ap.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich",
                    help="the MPI to measure: mpich (build/, the default) or openmpi (build-openmpi/, "
                         "meson -Dmpi=openmpi, launched with mpirun.openmpi)")
    lib_settings.add_option(ap, "TNBC_CHUNK_WINDOW=8")
    ap.add_argument("--no-plan-window", action="store_true",
                    help=f"the plan of a scenario read right after the call gives no `window {READ_AT_ONCE_WINDOW}` "
                         "(TNBC_CHUNK_WINDOW for every scenario), to compare with what tnbc-order plan writes")
    ap.add_argument("--out", help="the page written (default docs/measurements/replay-overlap.md, "
                                  "docs/measurements/replay-overlap-openmpi.md with --mpi openmpi)")
    args = ap.parse_args()
    global NODES, PPN
    NODES, PPN = args.nodes, args.ppn
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be 1 or more and --warmup 0 or more")
    calls = args.iters + args.warmup  # the calls each timed run makes, its warm-up included
    if args.learn_only:
        args.learn, args.none_blocks, args.free_cores = True, "", ""
    use_mpi(args.mpi)
    if not args.out:
        name = "replay-overlap" + ("" if args.mpi == "mpich" else f"-{args.mpi}") \
            + ("" if (NODES, PPN) == (2, 2) else f"-{NODES}x{PPN}") + ".md"
        args.out = os.path.join(ROOT, "docs", "measurements", name)
    for path in (CLUSTER, PROG, LIB):
        if not os.path.exists(path):
            sys.exit(f"overlap.py: missing {path} (build {BUILD} first)")
    placements = args.placement.split(",")
    chosen = args.scenarios.split(",")
    if any(x not in [sc[0] for sc in SCENARIOS] for x in chosen):
        ap.error(f"--scenarios: scenario names ({', '.join(sc[0] for sc in SCENARIOS)}), not {args.scenarios!r}")
    if any(p not in ("block", "cyclic") for p in placements):
        ap.error(f"--placement: block and/or cyclic, not {args.placement!r}")
    parts_list = [int(x) for x in args.parts.split(",")]
    free_cores = [x for x in args.free_cores.split(",") if x]
    if any(x not in [sc[0] for sc in SCENARIOS] for x in free_cores):
        ap.error(f"--free-cores: scenario names ({', '.join(sc[0] for sc in SCENARIOS)}), not {args.free_cores!r}")
    try:
        rate = None if args.rate == "none" else link_model.parse_rate(args.rate)
    except ValueError as e:
        ap.error(f"--rate: {e}")
    try:
        none_blocks = [int(x) for x in args.none_blocks.split(",") if x]
    except ValueError:
        ap.error(f"--none-blocks: comma-separated byte counts, not {args.none_blocks!r}")
    if os.geteuid() != 0:
        sys.exit("overlap.py: needs root (network namespaces)")

    subprocess.run(cluster("--rate", args.rate) + [
                    "--slow-start-after-idle", args.slow_start_after_idle, "--tso", args.tso, "up"],
                   check=True)
    try:
        # The plan of a scenario whose data is read right after the call (TCURC below
        # CURC_FRACTION of Tcomm: b, c, none; tnbc-order's verdict CRC) gives its entry the send
        # window tnbc-order plan writes there; the others' the configured one.
        plans = make_plan(args, tempfile.mkdtemp(prefix="tnbc_overlap_"), windows=(None, READ_AT_ONCE_WINDOW))
        plan = plans[None]
        if args.no_plan_window:
            plans[READ_AT_ONCE_WINDOW] = plan
        # The link bound counts the payload at the rate the links leave for it.
        wire = wire_per_payload(args) if rate is not None else None
        payload_rate = rate / wire if wire else rate
        base = [run("blocking", False, 0, 0, args, timed=False)["tcomm_us"] for _ in range(args.repeat)]
        tcomm = statistics.median(base)
        tables = []
        CONFIGS = (("plain", "blocking", False, None, None), ("tnbc", "blocking", True, None, None),
                   ("engine", "blocking", True, None, {"TNBC_ADAPT": "off"}),
                   ("plan", "blocking", True, plan, None), ("mpi3", "mpi3", False, None, None),
                   # The MPI-3 version driving MPI's progress by hand: MPI_Test every millisecond
                   # of its work (no thread), as a program written for overlap would.
                   ("mpi3t", "mpi3test", False, None, None))
        if MPI == "mpich":
            # The MPI-3 version once more with MPICH's own progress thread, which moves the data
            # while the program computes (Open MPI's ob1 has none).
            CONFIGS += (("mpi3a", "mpi3", False, None, {"MPIR_CVAR_ASYNC_PROGRESS": "1"}),)
            # Plain MPICH with the algorithm a user would set by hand (MPICH only: the CVAR).
            CONFIGS = CONFIGS[:1] + (("scat", "blocking", False, None,
                                      {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "scattered"}),) + CONFIGS[1:]
        learning = args.learn  # --learn-only sets it too
        if learning:
            # Learning is on by default (tnbc): the comparison adds the default without it.
            CONFIGS = CONFIGS[:2] + (("nolearn", "blocking", True, None, {"TNBC_LEARN": "0"}),) + CONFIGS[2:]
        if args.learn_only:
            CONFIGS = tuple(c for c in CONFIGS if c[0] in ("plain", "tnbc", "nolearn", "plan"))
        stats_dir = tempfile.mkdtemp(prefix="tnbc_overlap_stats_")
        stats_runs = [0]

        def run_config(label, mode, pre, pl, env, *a, **kw):
            """One run of a configuration; with --learn the default's runs (which learn) also
            report the per-node turns and the path their world key ended with (rank 0's
            statistics)."""
            if not (learning and label == "tnbc"):
                return run(mode, pre, *a, plan=pl, env=env, **kw)
            stats_runs[0] += 1
            prefix = os.path.join(stats_dir, f"learn{stats_runs[0]}")
            r = run(mode, pre, *a, plan=pl, env={**(env or {}), "TNBC_STATS": prefix}, **kw)
            try:
                with open(f"{prefix}.0.json", encoding="utf-8") as f:
                    keys = [k for k in json.load(f)["adapt"]["keys"] if k["op"] == "alltoall"]
                t = keys[0]["turns"]
                r["turns"] = (f"{keys[0]['path']}, turns {t['state']} (compared in {t['on_calls']} calls with "
                              f"turns and {t['off_calls']} without; {keys[0]['blocking_calls']} calls blocking)")
            except (OSError, ValueError, KeyError, IndexError) as e:
                r["turns"] = f"no statistics ({e})"
            return r
        scenarios_all = [sc for sc in SCENARIOS if sc[0] in chosen]
        cases = [(pl, pa, False, scenarios_all) for pl in placements for pa in parts_list]
        cases += [(pl, max(parts_list), True, [sc for sc in SCENARIOS if sc[0] in free_cores])
                  for pl in placements if free_cores]
        for placement, parts, sleep, scenarios in cases:
            rows = []
            for name, desc, fc, fr in scenarios:
                curc, crc = fc * tcomm, fr * tcomm
                res = {}
                # Rounds: each runs every configuration once, so that a drift of the machine
                # over the minutes of a row weighs on all of them alike.
                all_runs = {label: [] for label, *_ in CONFIGS}
                for _ in range(args.repeat):
                    for label, mode, pre, pl, env in CONFIGS:
                        pl = plans[READ_AT_ONCE_WINDOW] if pl == plan and fc < CURC_FRACTION else pl
                        all_runs[label].append(run_config(label, mode, pre, pl, env, curc, crc, args, parts=parts,
                                                          placement=placement, sleep=sleep))
                for label, *_ in CONFIGS:
                    runs = all_runs[label]
                    res[label] = {
                        "total": statistics.median(r["total_us"] for r in runs),
                        "spread": max(r["total_us"] for r in runs) - min(r["total_us"] for r in runs),
                        "tinit": statistics.median(r["tinit_us"] for r in runs),
                        "mean": statistics.median(r["mean_us"] for r in runs),
                        "means": [r["mean_us"] for r in runs],
                        "helper": statistics.median(r["helper_us"] for r in runs),
                        "turns": [r["turns"] for r in runs if "turns" in r],
                    }
                    print(f"{placement:<6} parts {parts:>2}{' sleep' if sleep else ''} {name:>4} {label:<6} total {res[label]['total']/1e3:8.1f} ms "
                          f"tinit {res[label]['tinit']/1e3:6.1f} ms", flush=True)
                rows.append((name, desc, curc, crc, res))
            tables.append((placement, parts, sleep, rows))
        sweep = []
        for block in none_blocks:
            iters = min(40, args.iters * max(1, args.block // block))  # small blocks: more iterations
            all_runs = {label: [] for label, *_ in CONFIGS}
            for _ in range(args.repeat):
                for label, mode, pre, pl, env in CONFIGS:
                    pl = plans[READ_AT_ONCE_WINDOW] if pl == plan else pl  # read at once: CRC
                    all_runs[label].append(run(mode, pre, 0, 0, args, pl, 1, "block", block, iters, env=env))
            res = {}
            for label, *_ in CONFIGS:
                res[label] = statistics.median(r["total_us"] for r in all_runs[label])
                print(f"none block {block:>8} {label:<6} total {res[label]/1e3:8.1f} ms", flush=True)
            sweep.append((block, iters, res))
    finally:
        subprocess.run(cluster("down"), check=False)

    # The header line every report opens with (docs/measurements/README.md), in either page.
    ran = results_doc.ran_line(datetime.date.today(), results_doc.repo_commit(), f"{NODES} emulated nodes x {PPN} ranks",
                               results_doc.rate_words(args.rate),
                               "cut segments" if args.tso == "off" else "whole segments", args.pin, args.repeat)
    lines = [
        "# Replay mode: overlap on the paper's five scenarios",
        "",
        ran,
        "",
        f"Measured {datetime.date.today()} by `bench/overlap.py` on the emulated cluster: {NODES} nodes x "
        f"{PPN} ranks, {args.rate} per node and direction, MPI_Alltoall of {args.block // 1024} KiB blocks, "
        f"median of {args.repeat} rounds, each running every configuration once, one after the other, "
        f"{args.iters} iterations a run"
        + (f" after {args.warmup} not counted (the steady state)" if args.warmup else "")
        + " (the slowest rank counts).  "
        + ("TCP's slow start after idle is off in the nodes (`tnbc-cluster --slow-start-after-idle off`: "
           "a connection that rested longer than its retransmission timeout keeps its window).  "
           if args.slow_start_after_idle == "off" else "")
        + ("The links cut the nodes' TCP segments into 1500-byte packets on their CPUs (`tnbc-cluster --tso off`).  "
           if args.tso == "off" else "")
        + ("Each node's ranks run on its own share of the cores (`tnbc-cluster run --pin`: "
           f"{max(1, (os.cpu_count() or 1) // NODES)} of {os.cpu_count()} each).  " if args.pin else "")
        + lib_settings.sentence(args.set)
        + f"One machine with {os.cpu_count()} cores runs all {NODES * PPN} ranks, their progress threads and "
        + ("the network emulation, and other jobs ran on it at the same time: compare the columns "
           "of one row, not absolute times." if (os.cpu_count() or 1) < 2 * NODES * PPN else
           "the network emulation: a core for each rank and one for its progress thread."),
        "",
        f"Tcomm (plain MPICH, exchange only) = {tcomm/1e3:.1f} ms.  Work after the call: TCURC "
        "spins without touching the buffer, then TCRC is spread over the blocks, read in order "
        "0..p-1.  Each block is read in PARTS equal parts, each part's pages read just before "
        "its share of the work: PARTS = 1 reads a whole block before working on it, PARTS = 16 "
        "works through it front to back (as a loop over the received data would).  Each share "
        "of work ends a fixed time after the previous one (or after its data arrived, if the "
        "read waited), so that scheduler delays on this oversubscribed machine do not pile up "
        "once per share.",
        "",
        ("*tnbc, no plan* is libtnbc.so with its defaults: each run makes "
         f"{calls} calls, no more than the per-call decision's shortest warm-up (3 blocking calls, "
         "docs/replay.md, \"Deciding per call\"), so it runs them all as plain MPICH.  "
         if calls <= 3 else
         "*tnbc, no plan* is libtnbc.so with its defaults: each run makes "
         f"{calls} calls, the first 6 blocking (the per-call decision's warm-up, docs/replay.md, "
         "\"Deciding per call\"; 3 where the reads observed in them leave room to overlap), "
         "then, where the exploration budget affords it (TNBC_EXPLORE: 1% of the run so far; a "
         "run this short rarely does), an early probe of 3-5 calls (the first not measured), then "
         "the cheaper path.  ") +
        "*MPI-3* is MPI_Ialltoall and MPI_Wait before the first read; *MPI-3 + MPI_Test* the "
        "same with MPI_Test every millisecond of the work before the first read (MPI's progress "
        "driven by hand, no thread); *MPI-3, async progress* "
        "the same as *MPI-3* with MPICH's progress thread (MPIR_CVAR_ASYNC_PROGRESS=1), which moves the "
        "data while the program computes, at the price of a core it keeps busy.  "
        + ("*MPICH, scattered* is plain MPICH with MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=scattered "
           "(every exchange posted at once, the setting that gains most on the real programs); "
           "*best without the library* is the least of plain MPICH, MPICH scattered and the "
           "three MPI-3 versions in the row.  " if MPI == "mpich" else "") +
        "*engine "
        "alone* is libtnbc.so with TNBC_ADAPT=off: every call returns early, in the default "
        "order (what *tnbc, no plan* measured before the per-call decision).  "
        "The plan (keyed by the call sites of a traced run of the same benchmark) lists blocks 0..p-1, has "
        "per-node priority on and says `return early` (as `tnbc-order plan` writes where the "
        "trace shows the data read long after the call; kept for the scenario with nothing to "
        "overlap too, to show what returning early costs there); where the data is read right "
        f"after the call (TCURC below {CURC_FRACTION:g} Tcomm: b, c and the data read at once, "
        f"tnbc-order's verdict CRC) it also says `window {READ_AT_ONCE_WINDOW}`, as `tnbc-order plan --per-node` "
        "writes there: 8 inter-node chunks in flight per rank instead of TNBC_CHUNK_WINDOW's 2"
        + (" (not in this run: --no-plan-window)" if args.no_plan_window else "") + ".  "
        + (f"Placement block puts ranks 0 to {PPN - 1} on node 0, {PPN} to {2 * PPN - 1} on node 1 and so on: "
           if PPN > 1 else "Placement block puts rank r on node r: ")
        + "every rank then reads node 0's blocks first, and node 0's link carries them all.  "
        f"Placement cyclic deals ranks out round robin (rank r on node r mod {NODES}), the placement of the "
        "paper's per-node priority figure: the blocks read first come from every node.  "
        "Overlap = total(plain) - total(tnbc with plan).  Bound = formula (3): min(Tcomm - Tinit, "
        "TCURC + TCRC), with the Tinit measured for libtnbc.so with the plan (time inside "
        "MPI_Alltoall) and the Tcomm of the same row (plain MPICH's total there minus the work, "
        "which is fixed in time): plain MPICH's exchange time varies by 10-20% from row to row "
        "here, and a bound taken from another measurement would move with it.  The Tcomm above "
        "only sizes the work.  Link bound = the overlap the links allow at best (never more "
        "than bound (3)): plain MPICH's total minus the least total of any schedule over links "
        f"of {args.rate}, from bench/link_model.py"
        + (f", at the rate they leave for the payload: the links' counters saw {wire:.3f} bytes "
           f"per byte of payload in a plain run of {calls} exchanges (TCP/IP and Ethernet "
           f"headers, the acknowledgements of the other direction's data), so "
           f"{payload_rate * 8 / 1e6:.0f} Mbit/s of payload.  "
           if wire else " (unshaped links: none).  " if rate is None
           else ", at their whole rate (their counters could not be read).  ") +
        "Formula (3) treats the data as a fluid "
        f"that arrives at the rate of the whole exchange; on {NODES * PPN} ranks one block is 1/{NODES * PPN} of "
        "the data, and every reader wants the same block first, so where a node's ranks read "
        "another node's blocks first they must wait for them whatever the schedule.  Ratios "
        "below 1 are faster than the reference.",
        "",
    ]
    if args.learn_only:
        lines = [
            "# Replay mode: learning the read order and the per-node turns in one run",
            "",
            ran,
            "",
            f"Measured {datetime.date.today()} by `bench/overlap.py --learn-only` on the emulated cluster: "
            f"{NODES} nodes x {PPN} ranks, {args.rate} per node and direction, MPI_Alltoall of "
            f"{args.block // 1024} KiB blocks, {args.repeat} rounds of {args.iters} iterations per configuration"
            + (f" after {args.warmup} not counted" if args.warmup else "") + f" (each round runs every configuration once, in turn) "
            "(the slowest rank counts).  Scenarios and work as in docs/measurements/replay-overlap.md (Tcomm, plain "
            f"MPICH, exchange only = {tcomm/1e3:.1f} ms sizes the work).  *plan* is libtnbc.so with the plan "
            "of a traced run (blocks 0..p-1, per-node priority on, `return early` from the first call); "
            "*no plan* is libtnbc.so without a plan (the per-call decision: 6 blocking warm-up calls, 3 where "
            "the reads observed in them leave room to overlap, then "
            "probes), with learning off (*TNBC_LEARN=0*) and on (*TNBC_LEARN=1*, the default): the read order is observed in the "
            "blocking calls, agreed at learn points, and becomes the per-message order and the per-node "
            "turn order, whose use the per-call decision measures (docs/replay.md, \"Learning the order\").",
            "",
        ]
    for placement, parts, sleep, rows in tables:
        title = f"## Placement {placement}, blocks read in {parts} part{'s' if parts > 1 else ''}"
        if sleep:
            title += ", work that sleeps (free cores)"
        lines += [title, ""]
        if sleep:
            lines += [
                "The same scenarios with work that sleeps (nanosleep) instead of spinning: the "
                "progress threads and the network emulation then have the cores to themselves, "
                "as on a node with a spare core per rank.  Plain MPICH and MPI-3 do the same "
                "work the same way.",
                "",
            ]
        if args.learn_only:
            lines += learn_table(args, rows) + [""]
            continue
        lines += [
            "| scenario | TCURC | TCRC | plain | MPICH, scattered | tnbc, no plan | engine alone | tnbc, plan | MPI-3 | MPI-3 + MPI_Test | MPI-3, async progress | no plan / plain | engine / plain | plan / plain | plan / MPI-3 | plan / MPI-3 async | plan / best without the library | Tcomm (row) | Tinit / Tcomm | overlap (plan) | bound (3) | overlap / bound | link bound | overlap / link bound |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        nodes = link_model.node_of(NODES * PPN, NODES, placement)
        for name, desc, curc, crc, res in rows:
            p, t, e, q, m = (res[k]["total"] for k in ("plain", "tnbc", "engine", "plan", "mpi3"))
            totals = {k: v["total"] for k, v in res.items()}
            tinit = res["plan"]["tinit"]
            # Tcomm of this row: plain MPICH's total minus the work (the work is fixed in time).
            row_tcomm = p - curc - crc
            bound = max(0.0, min(row_tcomm - tinit, curc + crc))
            overlap = p - q
            share = f"{overlap / bound:.0%}" if bound > 0 else "n/a"
            if rate is None:
                link, link_share = "n/a", "n/a"
            else:
                # The most any schedule could overlap over these links, and never more than (3).
                least = 1e6 * link_model.ideal_total(payload_rate, nodes, args.block, parts, tinit / 1e6,
                                                     curc / 1e6, crc / 1e6)
                reach = max(0.0, min(bound, p - least))
                link = f"{reach/1e3:.1f} ms"
                link_share = f"{overlap / reach:.0%}" if reach > 0 else "n/a"
            lines.append(
                f"| {name}: {desc} | {curc/1e3:.0f} ms | {crc/1e3:.0f} ms | {p/1e3:.1f} ms | {ms_cell(totals, 'scat')} "
                f"| {t/1e3:.1f} ms | {e/1e3:.1f} ms | {q/1e3:.1f} ms | {m/1e3:.1f} ms | {ms_cell(totals, 'mpi3t')} "
                f"| {ms_cell(totals, 'mpi3a')} | {t/p:.2f} | {e/p:.2f} | {q/p:.2f} | {q/m:.2f} | {async_ratio(res, q)} "
                f"| {best_cell(totals, q)} "
                f"| {row_tcomm/1e3:.1f} ms "
                f"| {tinit/row_tcomm:.0%} "
                f"| {overlap/1e3:.1f} ms | {bound/1e3:.1f} ms | {share} | {link} | {link_share} |")
        if args.learn:
            lines += [""] + learn_table(args, rows)
        lines += [
            "",
            "Spread (max - min of the runs, ms): " + "; ".join(
                f"{name}: plain {r['plain']['spread']/1e3:.1f}, "
                + (f"scattered {r['scat']['spread']/1e3:.1f}, " if "scat" in r else "")
                + f"no plan {r['tnbc']['spread']/1e3:.1f}, "
                f"engine {r['engine']['spread']/1e3:.1f}, plan {r['plan']['spread']/1e3:.1f}, "
                f"mpi3 {r['mpi3']['spread']/1e3:.1f}"
                + (f", mpi3 + MPI_Test {r['mpi3t']['spread']/1e3:.1f}" if "mpi3t" in r else "")
                + (f", mpi3 async {r['mpi3a']['spread']/1e3:.1f}" if "mpi3a" in r else "")
                for name, _, _, _, r in rows) + ".",
            "",
        ]
        lines += cpu_table(rows)
    if sweep:
        lines += [
            "## Nothing to overlap, by block size",
            "",
            "Data read at once (no work), placement block, median of the runs.  The goal for "
            "blocks of 64 KiB and more is at most 1.05 x plain MPICH.",
            "",
            "| block | iterations | plain | MPICH, scattered | tnbc, no plan | engine alone | tnbc, plan | MPI-3 | MPI-3, async progress | no plan / plain | engine / plain | plan / plain | MPI-3 / plain | plan / best without the library |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for block, iters, r in sweep:
            lines.append(
                f"| {block // 1024} KiB | {iters} | {r['plain']/1e3:.1f} ms | {ms_cell(r, 'scat')} | {r['tnbc']/1e3:.1f} ms "
                f"| {r['engine']/1e3:.1f} ms | {r['plan']/1e3:.1f} ms | {r['mpi3']/1e3:.1f} ms | {ms_cell(r, 'mpi3a')} "
                f"| {r['tnbc']/r['plain']:.2f} | {r['engine']/r['plain']:.2f} "
                f"| {r['plan']/r['plain']:.2f} | {r['mpi3']/r['plain']:.2f} "
                f"| {best_cell(r, r['plan'])} |")
        lines.append("")
    lines += [
        # The command as it ran (--repeat, --scenarios...), so the page says how it was made.
        f"Rerun: `{shlex.join(['sudo', 'python3', 'bench/overlap.py', *sys.argv[1:]])}` (after "
        + ("`tools/build`)." if MPI == "mpich" else
           "`meson setup build-openmpi -Dmpi=openmpi && meson compile -C build-openmpi`)."),
        "",
    ]
    if MPI == "openmpi":
        # The same page for Open MPI 4.1: its launcher, transports and no progress thread of its own.
        lines = [l.replace("plain MPICH", "plain Open MPI").replace("Plain MPICH", "Plain Open MPI")
                 for l in lines]
        lines[0] += " (Open MPI)"
        lines[1:1] = ["", "Under Open MPI 4.1 (`tnbc-cluster run --mpi openmpi`: ob1 over tcp between "
                      "nodes, vader within one; docs/cluster.md), with `libtnbc-openmpi.so`.  Its MPI-3 "
                      "version has no progress thread of its own: `MPI_Ialltoall` moves data only "
                      "inside MPI calls, here the final `MPI_Wait`."]
    # The reading written by hand under an earlier run stays.
    results_doc.write_keeping_section(args.out, lines, "## Reading", "_The reading below was written for an earlier "
                                      "run; check it against the tables above._")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
