#!/usr/bin/env python3
"""tnbc-sim --trace against the emulated cluster: the prediction from a trace of the program.

For each placement and scenario of bench/overlap.py, traces bench/overlap on the emulated cluster
(2 nodes x 2 ranks, libtnbc_trace.so; the scenario's work sized by the Tcomm measured for the
placement), then measures in rounds (each round runs every configuration once): plain MPICH,
libtnbc.so's engine alone (TNBC_ADAPT=off: every call returns early, tnbc-sim's "tnbc, no plan")
and libtnbc.so with a plan (blocks 0..p-1, per-node turns, `return early`: tnbc-sim's "tnbc,
plan").  Then it asks `tnbc-sim --trace DIR --json` -- the work, the read order, the nodes and the
placement all from the trace, nothing from the scenario -- and prints a Markdown table of measured
medians beside the predictions, each miss, and whether the configurations rank the same.

docs/measurements/scale.md, "Traces", holds its output.  Needs root (network namespaces) and a build
(`tools/build`); takes about 10 minutes with the defaults.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

import overlap
import sim_is

ROOT = overlap.ROOT
CONFIGS = sim_is.CONFIGS
SIM_FIELD = sim_is.SIM_FIELD


def trace(args, placement, curc_us, crc_us, trace_dir):
    """One traced run of the scenario (the timed loop alone: one call site)."""
    subprocess.run([overlap.CLUSTER, "run", "--mpi", overlap.MPI, "--ppn", str(overlap.PPN), "--placement", placement,
                    "--timeout", "300", "--preload", overlap.TRACE_LIB, "--env", f"TNBC_TRACE_DIR={trace_dir}",
                    "--env", "OVERLAP_SKIP_TCOMM=1", "--", overlap.PROG, str(args.block), str(args.iters), "blocking",
                    f"{curc_us:.0f}", f"{crc_us:.0f}"],
                   check=True, capture_output=True, timeout=400)


def predict(sim, rate, trace_dir):
    r = subprocess.run([sim, "--json", "--trace", trace_dir, "--link", rate], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        sys.exit(f"sim_trace.py: tnbc-sim --trace {trace_dir}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    args, chosen, placements, sim = sim_is.parse_args(__doc__, "sim_trace.py", block_help="block bytes (default 1 MiB)",
                                                      iters_help="iterations per run (median taken; the trace's calls)")
    work = tempfile.mkdtemp(prefix="tnbc_sim_trace_")
    subprocess.run([overlap.CLUSTER, "--nodes", str(overlap.NODES), "--rate", args.rate, "up"], check=True)
    rows = []
    try:
        plan = overlap.make_plan(args, work)
        for placement in placements:
            tcomm = statistics.median(
                overlap.run("blocking", False, 0, 0, args, placement=placement, timed=False)["tcomm_us"]
                for _ in range(args.repeat)) / 1e3
            for name, _desc, fc, fr in overlap.SCENARIOS:
                if name not in chosen:
                    continue
                trace_dir = os.path.join(work, f"{placement}-{name}")
                trace(args, placement, fc * tcomm * 1e3, fr * tcomm * 1e3, trace_dir)
                runs = {label: [] for label, *_ in CONFIGS}
                for _ in range(args.repeat):
                    for label, preload, env in CONFIGS:
                        r = overlap.run("blocking", preload, fc * tcomm * 1e3, fr * tcomm * 1e3, args,
                                        plan=plan if label == "plan" else None, placement=placement, env=env)
                        runs[label].append(r["total_us"] / 1e3)
                measured = {label: statistics.median(v) for label, v in runs.items()}
                d = predict(sim, args.rate, trace_dir)
                if d["placement"] != placement or d["ranks"] != overlap.NODES * overlap.PPN:
                    sys.exit(f"sim_trace.py: tnbc-sim read {d['ranks']} ranks in {d['placement']} placement "
                             f"from the trace of a {placement} run")
                rows.append((placement, name, tcomm, d["curc_ms"], d["crc_ms"], measured,
                             {k: d[f] for k, f in SIM_FIELD.items()}))
                print(f"{placement:<6} {name:>4} " + "  ".join(
                    f"{k} {measured[k]:.1f}/{rows[-1][6][k]:.1f} ms" for k in measured), file=sys.stderr, flush=True)
    finally:
        subprocess.run([overlap.CLUSTER, "down"], check=False)

    sim_is.report([(placement, name, tcomm, [f"{curc:.1f} + {crc:.1f} ms"], m, p)
                   for placement, name, tcomm, curc, crc, m, p in rows],
                  ["traced work: before the first read + after"])

if __name__ == "__main__":
    main()
