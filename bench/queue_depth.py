#!/usr/bin/env python3
"""Whether the emulated links' queue depth, or TCP's restart after idle, slows MPICH's Alltoall on a
larger emulated cluster.

tnbc-cluster shapes each direction of a node's link with `tbf ... latency 1s`: a queue that holds
a second of data at the link's rate (12.5 MB at 100 Mbit/s; docs/cluster.md says why).  On 8
nodes x 2 ranks MPICH's default Alltoall (pairwise) takes about twice the links' bound, where
tnbc-sim predicts 1.1 times (docs/measurements/scale-overlap.md).  One suspect: rendezvous
handshakes and TCP's acknowledgements waiting behind other ranks' data in those deep queues.

This brings up a cluster (--nodes, --rate), and in alternating rounds re-shapes every link with
each queue depth in turn (tbf's latency) and sets each --slow-start-after-idle in turn (TCP's
net.ipv4.tcp_slow_start_after_idle in every node: a connection idle for longer than its
retransmission timeout starts again from a small window), runs bench/curc's back-to-back MPI_Alltoall (the data
read at once, --block bytes a pair, --calls calls) under MPICH's default algorithm and under
`scattered`, and counts the packets the shapers dropped.  Prints each run and a Markdown table of
the medians (min-max) per call; the cluster is taken down at the end.

    python3 bench/queue_depth.py [--queues 1s,100ms,20ms] [--slow-start-after-idle on,off]
                                 [--rounds 3] [--nodes 8] [--ppn 2] [--rate 100mbit]
                                 [--block 131072] [--calls 12]

Needs root (network namespaces) and a build (bench/curc, tools/tnbc-cluster).  Python 3 standard
library only.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGORITHMS = (("default", []), ("scattered", ["--env", "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=scattered"]))
RUN_LIMIT_S = 300


class Cluster:
    def __init__(self, a):
        self.a = a
        self.base = [os.path.join(a.build, "tools", "tnbc-cluster"), "--nodes", str(a.nodes), "--prefix", a.prefix,
                     "--subnet", a.subnet]
        self.nodes = [f"{a.prefix}-n{i}" for i in range(a.nodes)]

    def up(self):
        subprocess.run(self.base + ["--rate", self.a.rate, "up"], check=True, capture_output=True, timeout=300)

    def down(self):
        subprocess.run(self.base + ["down"], capture_output=True, timeout=300)

    def shapers(self):
        """(command prefix, device) of each shaper: the node's eth0 (node to network) and its
        veth's host end (network to node), as tnbc-cluster names them."""
        for ns in self.nodes:
            yield ["ip", "netns", "exec", ns], "eth0"
            yield [], f"{ns}-h"

    def idle_restart(self, on_off):
        subprocess.run(self.base + ["--slow-start-after-idle", on_off, "up"], check=True, capture_output=True,
                       timeout=300)

    def queue(self, latency):
        for run, dev in self.shapers():
            subprocess.run(run + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", self.a.rate, "burst",
                                  "32kb", "latency", latency], check=True, capture_output=True)

    def dropped(self):
        total = 0
        for run, dev in self.shapers():
            out = subprocess.run(run + ["tc", "-s", "qdisc", "show", "dev", dev], capture_output=True, text=True).stdout
            total += sum(int(x) for x in re.findall(r"dropped (\d+)", out))
        return total

    def alltoall_ms(self, extra):
        """One run of bench/curc; its time per call in ms."""
        cmd = self.base + ["run", "--ppn", str(self.a.ppn), "--timeout", str(RUN_LIMIT_S), *extra, "--",
                           os.path.join(self.a.build, "bench", "curc"), str(self.a.block), str(self.a.calls), "blocking", "0"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S + 60)
        m = re.search(r"total_ms=([0-9.]+)", r.stdout)
        if r.returncode != 0 or not m:
            sys.exit(f"queue_depth.py: {' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
        return float(m.group(1)) / self.a.calls


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--queues", default="1s,100ms,20ms", help="tbf latencies, tc syntax (default 1s,100ms,20ms)")
    p.add_argument("--slow-start-after-idle", dest="idle", default="on",
                   help="TCP's restart after idle in the nodes, on and off in turn where both are given "
                        "(default on: the kernel's and tnbc-cluster's default)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--ppn", type=int, default=2)
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--block", type=int, default=128 * 1024, help="bytes per pair (default 131072)")
    p.add_argument("--calls", type=int, default=12)
    p.add_argument("--prefix", default="qd")
    p.add_argument("--subnet", default="10.236.0")
    a = p.parse_args()
    queues = a.queues.split(",")
    idles = a.idle.split(",")
    if a.rounds < 1 or a.nodes < 2 or a.ppn < 1 or a.block < 1 or a.calls < 1 or not all(queues):
        p.error("--rounds, --ppn, --block and --calls of 1 or more, --nodes of 2 or more, --queues not empty")
    if not idles or any(i not in ("on", "off") for i in idles) or len(set(idles)) != len(idles):
        p.error("--slow-start-after-idle takes on, off, or both (on,off)")
    settings = [(q, i) for q in queues for i in idles]
    c = Cluster(a)
    c.up()
    res = {}
    try:
        for rnd in range(a.rounds):
            for q, i in settings if rnd % 2 == 0 else settings[::-1]:
                c.queue(q)
                c.idle_restart(i)
                before = c.dropped()
                for name, extra in ALGORITHMS:
                    ms = c.alltoall_ms(extra)
                    res.setdefault((q, i, name), []).append(ms)
                    print(f"round {rnd + 1}, queue {q}, slow start after idle {i}, {name}: {ms:.1f} ms a call",
                          flush=True)
                res.setdefault((q, i, "dropped"), []).append(c.dropped() - before)
    finally:
        c.down()
    print(f"\n{a.nodes} nodes x {a.ppn} ranks, {a.rate}, bench/curc {a.block}-byte blocks, {a.calls} calls a run, "
          f"{a.rounds} rounds; per call, median (min-max):\n")
    print("| queue (tbf latency) | slow start after idle | MPICH's default | `scattered` "
          "| packets dropped a round (both runs) |")
    print("|---|---|---|---|---|")
    for q, i in settings:
        cells = []
        for name, _ in ALGORITHMS:
            v = res[(q, i, name)]
            cells.append(f"{statistics.median(v):.1f} ms ({min(v):.1f}-{max(v):.1f})")
        d = res[(q, i, "dropped")]
        print(f"| {q} | {i} | {cells[0]} | {cells[1]} | {statistics.median(d):.0f} ({min(d)}-{max(d)}) |")


if __name__ == "__main__":
    main()
