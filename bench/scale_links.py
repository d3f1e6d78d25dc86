#!/usr/bin/env python3
"""Where the links, not the 2 cores, bound an exchange on larger emulated clusters.

Runs bench/curc's back-to-back MPI_Alltoall (the data read at once, plain MPICH, its default
algorithm) on tnbc-cluster with NODES nodes of PPN ranks, at several link rates, in alternating
rounds, and reports per placement and rate:

  per call      the slowest rank's time per call, median (min-max) over the rounds
  bound         the least time the links allow a call: the bytes one Alltoall sends out of each
                node (every block to a rank on another node) at the link's rate, payload only
  busy          the busiest link's share of the call: the bytes its shaper passed (tc counters,
                headers and acknowledgements included) at its rate, over the run's timed part
                (start-up and the warm-up call count too, so slightly high)
  cores         the CPU of every rank (user + system, polling included) over the run time
  x rate        per call x rate, against the same at the lowest rate measured: 1.00 where the call
                takes as long per byte as at the lowest rate, so the links bound it as much; above
                it, what the cores, the transport or the schedule add at that rate

A placement and rate are taken as link-bound when `x rate` stays within 10% of the lowest rate's
(its time follows the rate, as only the links' share does) and the lowest rate's busiest link is
busy a third of the time or more -- the criterion for which figures of
larger clusters mean anything on this machine (issue: beyond four ranks).  Every run is checked
against the same placement's checksum at the other rates.

    bench/scale_links.py [--nodes 2,4,8] [--ppn 1,2] [--rates 200mbit,100mbit,50mbit,25mbit]
                         [--block 262144] [--link-seconds 1.5] [--rounds 3]

Needs root (network namespaces).  Python 3 standard library only.
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

import hung_job
import link_model
from never_slower import RunError, parse, run
from results_doc import rate_words

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LIMIT_S = 600


class Cluster:
    def __init__(self, a, nodes):
        self.a, self.nodes = a, nodes
        self.base = [os.path.join(a.build, "tools", "tnbc-cluster"), "--nodes", str(nodes),
                     "--prefix", a.prefix, "--subnet", a.subnet]

    def shape(self, rate):
        """Brings the nodes up, or re-shapes the links of the running ones, at `rate`."""
        subprocess.run(self.base + ["--rate", rate, "up"], check=True, capture_output=True, timeout=300)

    def down(self):
        subprocess.run(self.base + ["down"], capture_output=True, timeout=300)

    def links(self):
        return link_model.cluster_link_counters(self.a.prefix, self.nodes)

    def run(self, ppn, calls):
        prog = os.path.join(self.a.build, "bench", "curc")
        cmd = self.base + ["run", "--ppn", str(ppn), "--timeout", str(RUN_LIMIT_S + hung_job.CLUSTER_LIMIT_MARGIN_S),
                           "--", prog, str(self.a.block), str(calls), "blocking", "0"]
        l0 = self.links()
        r = parse(run(cmd, RUN_LIMIT_S, program=prog))
        l1 = self.links()
        total_s = float(r["total_ms"]) / 1e3
        busiest = max((8 * (l1[k][0] - l0[k][0]) / l0[k][1] for k in l0 if k in l1), default=float("nan"))
        return {"per_call_s": total_s / calls, "busy": busiest / total_s if total_s > 0 else float("nan"),
                "cores": float(r["cpu_per_iter_ms"]) * calls / 1e3 / total_s, "checksum": r["checksum"]}


def bound_per_call(nodes, ppn, block, rate_bytes):
    owner = link_model.node_of(nodes * ppn, nodes, "block")
    return max(link_model.crossing_bytes(owner, block).values()) / rate_bytes


def table_rows(nodes, ppn, rates, res):
    """The table's rows of one placement: `rates` [(tc rate, bytes/s)], `res` {tc rate: [run]},
    each run {per_call_s, bound_s, busy, cores, checksum}.  `x rate` is per call x rate against
    the same at the lowest rate measured; within 10% of it the links bound the call."""
    lowest = min(rates, key=lambda r: r[1])
    sums = {x["checksum"] for v in res.values() for x in v}
    low = [x["per_call_s"] for x in res.get(lowest[0], [])]
    # The criterion holds only if the lowest rate itself is link-bound: its busiest link busy at
    # least a third of the call (MPICH's default schedule keeps it 37-68% busy where the time
    # follows the rate: docs/measurements/scale-links.md).
    low_busy = statistics.median(x["busy"] for x in res[lowest[0]]) if low else 0.0
    rows = []
    for rate, rb in rates:
        v = res.get(rate, [])
        if not v:
            rows.append(f"| {nodes} x {ppn} | {nodes * ppn} | {rate_words(rate)} | failed | | | | | |")
            continue
        t = [x["per_call_s"] for x in v]
        scale = statistics.median(t) * rb / (statistics.median(low) * lowest[1]) if low else float("nan")
        verdict = ("DIFFERENT checksums" if len(sums) != 1
                   else "unknown: the lowest rate's links not busy" if low_busy < 1 / 3
                   else "links" if scale <= 1.10 else "cores or schedule" if scale > 1.10 else "unknown")
        rows.append(f"| {nodes} x {ppn} | {nodes * ppn} | {rate_words(rate)} | "
                    f"{1e3 * statistics.median(t):.1f} ({1e3 * min(t):.1f}-{1e3 * max(t):.1f}) | "
                    f"{1e3 * v[0]['bound_s']:.1f} | {100 * statistics.median(x['busy'] for x in v):.0f}% | "
                    f"{statistics.median(x['cores'] for x in v):.2f} | {scale:.2f} | {verdict} |")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--nodes", default="2,4,8", help="emulated node counts (default 2,4,8)")
    p.add_argument("--ppn", default="1,2", help="ranks per node (default 1,2)")
    p.add_argument("--rates", default="200mbit,100mbit,50mbit,25mbit", help="link rates, tc syntax")
    p.add_argument("--block", type=int, default=256 * 1024, help="bytes per block (default 262144)")
    p.add_argument("--link-seconds", type=float, default=1.5,
                   help="calls per run: enough for this many seconds of the links' bound at the fastest rate (default 1.5)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prefix", default="scl")
    p.add_argument("--subnet", default="10.241.0")
    a = p.parse_args()
    try:
        nodes_list = [int(x) for x in a.nodes.split(",")]
        ppn_list = [int(x) for x in a.ppn.split(",")]
        rates = [(r, link_model.parse_rate(r)) for r in a.rates.split(",")]
    except ValueError as e:
        p.error(str(e))
    if any(n < 2 for n in nodes_list) or any(m < 1 for m in ppn_list) or a.block < 1 or a.rounds < 1:
        p.error("--nodes of 2 or more, --ppn of 1 or more, --block and --rounds of 1 or more")
    missing = [x for x in ("bench/curc", "tools/tnbc-cluster") if not os.path.isfile(os.path.join(a.build, x))]
    if missing:
        p.error(f"--build {a.build}: no {' or '.join(missing)} (meson compile -C build first)")
    if os.geteuid() != 0:
        sys.exit("scale_links: needs root (network namespaces)")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: block {a.block} bytes, "
          f"{a.rounds} rounds, rates {a.rates}", flush=True)
    rows = []
    failed = 0
    for nodes in nodes_list:
        c = Cluster(a, nodes)
        try:
            for ppn in ppn_list:
                res = {r: [] for r, _ in rates}
                # The same calls at every rate (so that the checksums compare): the fastest rate's
                # bound fills --link-seconds, the slower ones take longer.
                fastest = max(rates, key=lambda r: r[1])
                calls = max(3, math.ceil(a.link_seconds / bound_per_call(nodes, ppn, a.block, fastest[1])))
                for rnd in range(a.rounds):
                    order = rates if rnd % 2 == 0 else list(reversed(rates))
                    for rate, rb in order:
                        bound = bound_per_call(nodes, ppn, a.block, rb)
                        c.shape(rate)
                        try:
                            x = c.run(ppn, calls)
                        except RunError as e:
                            failed += 1
                            print(f"scale_links: {nodes}x{ppn} {rate}: {e}", file=sys.stderr, flush=True)
                            continue
                        x["bound_s"] = bound
                        res[rate].append(x)
                        print(f"  {nodes} nodes x {ppn}, {rate:8} round {rnd}: {1e3 * x['per_call_s']:.1f} ms a call "
                              f"(bound {1e3 * bound:.1f}), busiest link {100 * x['busy']:.0f}%, "
                              f"{x['cores']:.2f} cores", flush=True)
                rows += table_rows(nodes, ppn, rates, res)
        finally:
            c.down()
    print(f"\nbench/curc {a.block}-byte blocks, back-to-back MPI_Alltoall read at once, plain MPICH; "
          f"{a.rounds} rounds, the rates alternating; per call: median (min-max) in ms.\n")
    print("| nodes x ranks | ranks | link rate | per call ms | bound ms | busiest link | cores | x rate | bound by |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
