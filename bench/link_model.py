"""What the links allow: the shortest time any Alltoall schedule could give the overlap benchmark.

bench/overlap.c reads the blocks 0..p-1, each in PARTS equal parts, and works TCRC/(p*PARTS)
after each part, starting TCURC after the call returned (Tinit).  Formula (3) of the paper,
min(Tcomm - Tinit, TCURC + TCRC), treats the data as a fluid that arrives at the rate of the
whole exchange.  On few ranks it does not: one block is a large share of the data, and every
reader wants the same first block.  This model gives the bound the links set instead:

- each node sends to other nodes through one link of RATE bytes/s (with two nodes, one node's
  outgoing link is the other's incoming one; with more, incoming links are left out, so the
  result stays a lower bound);
- data within a node, and a rank's own block, are there at once (shared memory is two orders
  of magnitude faster than the link);
- no protocol costs beyond what the rate leaves for the payload: the caller passes the rate at
  which a link carries the exchange's own bytes (bench/overlap.py measures it: the link's rate
  divided by the bytes its counters saw per byte of payload, which adds TCP/IP and Ethernet
  headers and the acknowledgements of the other direction's data);
- data starts to flow when the call begins (time 0), not when it returns.

Every link sends its parts earliest-need-first (Jackson's rule), which minimises the largest
lateness on that link.  A reader that never waits ends at Tinit + TCURC + TCRC; one whose part k
(need time Tinit + TCURC + k*w) arrives late by L ends L later, whatever else it waited for,
because every later part then moves by at most L.  So the total is Tinit + TCURC + TCRC plus the
largest lateness, and no schedule over these links does better.
"""

import re
import subprocess


def parse_rate(text):
    """tc's rate syntax ("200mbit", "1gbit", "25mbps", "500kbit") -> bytes per second."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(bit|bps)\s*", text.lower())
    if not m:
        raise ValueError(f"not a tc rate: {text!r}")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    value = float(m.group(1)) * scale
    return value / 8 if m.group(3) == "bit" else value


def node_of(ranks, nodes, placement):
    """The node of each rank: block (ranks 0..ppn-1 on node 0, ...) or cyclic (rank r on node
    r mod nodes), as `tnbc-cluster run --placement` deals them."""
    if ranks % nodes:
        raise ValueError(f"{ranks} ranks do not fill {nodes} nodes evenly")
    ppn = ranks // nodes
    if placement == "block":
        return [r // ppn for r in range(ranks)]
    if placement == "cyclic":
        return [r % nodes for r in range(ranks)]
    raise ValueError(f"placement block or cyclic, not {placement!r}")


def tbf_counters(dev, netns=None):
    """(bytes sent so far, rate in bit/s) of the tbf qdisc that shapes network device `dev` (in
    network namespace `netns`, if given), as `tc -s qdisc show` prints them; None where they
    cannot be read (no such device, the link unshaped, no root)."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + ["tc", "-s", "qdisc", "show", "dev", dev]
    try:
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rate = re.search(r"\btbf\b.*?\brate (\d+(?:\.\d+)?)([KMG]?)bit", text)
    sent = re.search(r"Sent (\d+) bytes", text)
    if not (rate and sent):
        return None
    return int(sent.group(1)), float(rate.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[rate.group(2)]


def cluster_link_counters(prefix, nodes):
    """{link: (bytes sent, rate in bit/s)} of every shaped link of tnbc-cluster's nodes PREFIX-n0
    .. PREFIX-n{nodes-1}: each node's eth0 (out of the node) and its bridge end, NODE-h (into it),
    from their tbf qdiscs' counters; {} where they cannot be read (links unshaped, no root)."""
    out = {}
    for i in range(nodes):
        ns = f"{prefix}-n{i}"
        for name, counters in ((f"{ns} out", tbf_counters("eth0", ns)), (f"{ns} in", tbf_counters(f"{ns}-h"))):
            if counters is not None:
                out[name] = counters
    return out


def crossing_bytes(nodes, block):
    """The bytes one MPI_Alltoall of `block`-byte blocks sends out of each node (a dict): every
    pair of ranks on different nodes, once per direction; `nodes[r]` is rank r's node."""
    out = {n: 0 for n in set(nodes)}
    for n in nodes:  # each rank sends a block to every rank on another node
        out[n] += block * sum(1 for m in nodes if m != n)
    return out


def ideal_total(rate, nodes, block, parts, tinit, curc, crc):
    """Least total time (seconds) of one benchmark iteration: `nodes[r]` is rank r's node, `rate`
    the link rate (bytes/s), `block` the block size (bytes), `parts` the parts each block is read
    in, `tinit`, `curc`, `crc` in seconds."""
    p = len(nodes)
    if p == 0 or parts < 1 or rate <= 0:
        raise ValueError("need ranks, parts >= 1 and a positive rate")
    w = crc / (p * parts)
    start = tinit + curc
    part_bytes = [block * (q + 1) // parts - block * q // parts for q in range(parts)]
    lateness = 0.0
    for n in sorted(set(nodes)):
        # (need time, reader, block, part, bytes) of every part that crosses n's link.
        units = sorted((start + (b * parts + q) * w, r, b, q, part_bytes[q])
                       for r in range(p) if nodes[r] != n
                       for b in range(p) if nodes[b] == n
                       for q in range(parts))
        sent = 0
        for need, _r, _b, _q, nbytes in units:
            sent += nbytes
            lateness = max(lateness, sent / rate - need)
    return start + crc + lateness
