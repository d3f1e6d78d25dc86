#!/usr/bin/env python3
"""What node 0's link carries during each step of an Alltoall on the emulated cluster.

Brings up a tnbc-cluster (--nodes, --rate), captures the TCP headers on node 0's link (tcpdump in
its namespace), runs bench/curc's back-to-back MPI_Alltoall (plain MPICH; --env adds settings,
e.g. MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=pairwise or UCX_RNDV_THRESH=8k) and prints:

  transfers   each run of data node 0 sent to or received from one peer (packets of 1000 bytes or
              more, split where a peer's packets pause 30 ms): start and end (ms from the first),
              KiB, and the rate over the run (headers included)
  per peer    for every peer node, the share of its transfers' time in which both directions ran
              at once (1.00: a pairwise step's send and receive together, as on a full-duplex
              link; 0.00: one after the other)
  link        the share of 20 ms bins in which node 0's link carried no data out, no data in,
              and data from two or more peers at once

    python3 bench/pair_steps.py [--nodes 8] [--ppn 1] [--rate 25mbit] [--block 262144]
                                [--calls 4] [--env NAME=VALUE ...]

Needs root (network namespaces), tcpdump (apt-get install -y tcpdump) and a build (bench/curc,
tools/tnbc-cluster).  The cluster is taken down at the end.  Python 3 standard library only.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LIMIT_S = 300
GAP_S = 0.030  # a pause that ends a transfer
BIN_S = 0.020
LINE = re.compile(r"(\S+) IP (\d+\.\d+\.\d+\.\d+)\.\d+ > (\d+\.\d+\.\d+\.\d+)\.\d+: .* length (\d+)")


def packets(text, me):
    """(time, direction, peer, bytes) of each data packet in tcpdump -tt -nn output."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or int(m.group(4)) < 1000:
            continue
        src, dst = m.group(2), m.group(3)
        out.append((float(m.group(1)), "out" if src == me else "in", dst if src == me else src, int(m.group(4))))
    return out


def transfers(pkts):
    """Runs of data per (direction, peer): [start, end, bytes], split at pauses of GAP_S."""
    runs = collections.defaultdict(list)
    for t, d, peer, n in pkts:
        r = runs[(d, peer)]
        if r and t - r[-1][1] < GAP_S:
            r[-1][1] = t
            r[-1][2] += n
        else:
            r.append([t, t, n])
    return runs


def overlap(a, b):
    """Seconds in which an interval of `a` and one of `b` run at once."""
    return sum(max(0.0, min(x[1], y[1]) - max(x[0], y[0])) for x in a for y in b)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--ppn", type=int, default=1)
    p.add_argument("--rate", default="25mbit")
    p.add_argument("--block", type=int, default=256 * 1024)
    p.add_argument("--calls", type=int, default=4)
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the run (repeatable)")
    p.add_argument("--prefix", default="ps")
    p.add_argument("--subnet", default="10.237.0")
    a = p.parse_args()
    if a.nodes < 2 or a.ppn < 1 or a.block < 1 or a.calls < 1:
        p.error("--nodes of 2 or more; --ppn, --block and --calls of 1 or more")
    if any("=" not in e for e in a.env):
        p.error("--env takes NAME=VALUE")
    if shutil.which("tcpdump") is None:
        sys.exit("pair_steps.py: tcpdump not found: apt-get install -y tcpdump")
    base = [os.path.join(a.build, "tools", "tnbc-cluster"), "--nodes", str(a.nodes), "--prefix", a.prefix,
            "--subnet", a.subnet]
    me = f"{a.subnet}.10"  # node 0's address (tnbc-cluster: .10 + node)
    subprocess.run(base + ["--rate", a.rate, "up"], check=True, capture_output=True, timeout=300)
    tmp = tempfile.mkdtemp(prefix="pair_steps.")
    pcap = os.path.join(tmp, "n0.pcap")
    try:
        cap = subprocess.Popen(["ip", "netns", "exec", f"{a.prefix}-n0", "tcpdump", "-i", "eth0", "-s", "96", "-n",
                                "-w", pcap, "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        envs = [x for e in a.env for x in ("--env", e)]
        cmd = base + ["run", "--ppn", str(a.ppn), "--timeout", str(RUN_LIMIT_S), *envs, "--",
                      os.path.join(a.build, "bench", "curc"), str(a.block), str(a.calls), "blocking", "0"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S + 60)
        time.sleep(0.5)
        cap.terminate()
        cap.wait(timeout=30)
        m = re.search(r"total_ms=([0-9.]+)", r.stdout)
        if r.returncode != 0 or not m:
            sys.exit(f"pair_steps.py: {' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
        text = subprocess.run(["tcpdump", "-r", pcap, "-tt", "-nn"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(base + ["down"], capture_output=True, timeout=300)
        shutil.rmtree(tmp, ignore_errors=True)

    pkts = packets(text, me)
    if not pkts:
        sys.exit("pair_steps.py: the capture holds no data packet of node 0")
    t0 = pkts[0][0]
    runs = transfers(pkts)
    print(f"{a.nodes} nodes x {a.ppn} ranks, {a.rate}, bench/curc {a.block}-byte blocks, {a.calls} calls, "
          f"{' '.join(a.env) or 'no settings'}: {float(m.group(1)) / a.calls:.1f} ms a call\n")
    print("| from ms | to ms | node 0 | peer | KiB | Mbit/s |")
    print("|---|---|---|---|---|---|")
    rows = sorted((s, e, d, peer, n) for (d, peer), rs in runs.items() for s, e, n in rs)
    for s, e, d, peer, n in rows:
        rate = n * 8 / max(e - s, 1e-3) / 1e6
        print(f"| {(s - t0) * 1e3:.0f} | {(e - t0) * 1e3:.0f} | {'sends to' if d == 'out' else 'receives from'} "
              f"| {peer} | {n // 1024} | {rate:.1f} |")
    print("\n| peer | both directions at once |")
    print("|---|---|")
    for peer in sorted({peer for _, peer in runs}, key=lambda x: [int(y) for y in x.split(".")]):
        out, inn = runs.get(("out", peer), []), runs.get(("in", peer), [])
        span = min(sum(e - s for s, e, _ in out), sum(e - s for s, e, _ in inn))
        print(f"| {peer} | {overlap(out, inn) / span:.2f} |" if span > 0 else f"| {peer} | - |")
    bins = collections.defaultdict(lambda: {"out": set(), "in": set()})
    for t, d, peer, _ in pkts:
        bins[int((t - t0) / BIN_S)][d].add(peer)
    k = max(bins) + 1
    idle_out = sum(1 for i in range(k) if not bins[i]["out"]) / k
    idle_in = sum(1 for i in range(k) if not bins[i]["in"]) / k
    two = sum(1 for i in range(k) if len(bins[i]["out"]) > 1 or len(bins[i]["in"]) > 1) / k
    print(f"\nlink of node 0, {k} bins of {BIN_S * 1e3:.0f} ms: no data out {idle_out:.0%}, no data in {idle_in:.0%}, "
          f"two or more peers in one direction {two:.0%}")


if __name__ == "__main__":
    main()
