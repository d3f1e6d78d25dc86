#!/usr/bin/env python3
"""bench/link_model.py, the link bound of the overlap benchmark, against cases worked out by
hand: a rate parser that knows tc's units, the two placements, and the least total time when
the first block read comes over a shared link, when nothing crosses a link, and when only the
volume counts; and against tnbc-sim, whose link bound must be the same number."""

import json
import os
import subprocess
import sys

from tnbc_testlib import BUILD, SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import link_model as L  # noqa: E402

MIB = 1 << 20


def close(a, b, what):
    expect(abs(a - b) < 1e-9, f"{what}: {a!r}, expected {b!r}")


def main():
    s = Suite("link-model")

    def rates():
        close(L.parse_rate("200mbit"), 25e6, "200mbit")
        close(L.parse_rate("1gbit"), 125e6, "1gbit")
        close(L.parse_rate("500kbit"), 62.5e3, "500kbit")
        close(L.parse_rate("3mbps"), 3e6, "3mbps (bytes)")
        for bad in ("fast", "200", "mbit", "-1mbit"):
            try:
                L.parse_rate(bad)
            except ValueError:
                continue
            raise AssertionError(f"parse_rate({bad!r}) was accepted")
    s.check("tc rates", rates)

    def crossing():
        # 2 nodes x 2 ranks: each rank sends a block to each of the 2 ranks on the other node.
        for placement in ("block", "cyclic"):
            got = L.crossing_bytes(L.node_of(4, 2, placement), MIB)
            expect(got == {0: 4 * MIB, 1: 4 * MIB}, f"{placement}: {got}")
        # 3 nodes x 2 ranks: 4 peers elsewhere per rank, 2 ranks per node.
        got = L.crossing_bytes(L.node_of(6, 3, "block"), 10)
        expect(got == {0: 80, 1: 80, 2: 80}, f"3 x 2: {got}")
        expect(L.crossing_bytes([0, 0, 0], 10) == {0: 0}, "one node: nothing crosses")
    s.check("bytes that cross each node's link", crossing)

    def counters_unreadable():
        # No such device (or namespace): None, not an exception, so a run on unshaped links goes on.
        expect(L.tbf_counters("tnbc-no-such-dev") is None, "a missing device gave counters")
        expect(L.tbf_counters("eth0", "tnbc-no-such-ns") is None, "a missing namespace gave counters")
    s.check("tbf counters that cannot be read: None", counters_unreadable)

    def placements():
        expect(L.node_of(4, 2, "block") == [0, 0, 1, 1], str(L.node_of(4, 2, "block")))
        expect(L.node_of(4, 2, "cyclic") == [0, 1, 0, 1], str(L.node_of(4, 2, "cyclic")))
        expect(L.node_of(6, 3, "block") == [0, 0, 1, 1, 2, 2], str(L.node_of(6, 3, "block")))
        for args in ((5, 2, "block"), (4, 2, "round")):
            try:
                L.node_of(*args)
            except ValueError:
                continue
            raise AssertionError(f"node_of{args} was accepted")
    s.check("placements", placements)

    rate = 25e6

    def first_block_shared():
        # Cyclic, 16 parts: ranks 1 and 3 read rank 0's block first, both over node 0's link,
        # part by part; the 16th part of each is there when 2 MiB have crossed.  It was needed
        # 15 work shares after the start: the lateness adds to the total.
        tinit, crc = 0.010, 0.242
        w = crc / 64
        late = 2 * MIB / rate - (tinit + 15 * w)
        close(L.ideal_total(rate, [0, 1, 0, 1], MIB, 16, tinit, 0, crc), tinit + crc + late, "cyclic b")
        # Whole blocks: the first block is needed at once, and it is 2 MiB on one link.
        close(L.ideal_total(rate, [0, 1, 0, 1], MIB, 1, tinit, 0, crc), 2 * MIB / rate + crc, "cyclic b, 1 part")
    s.check("the first block read crosses a shared link", first_block_shared)

    def volume_only():
        # Nothing to overlap (no work): the total is the time node 0's link needs for what it
        # carries, 2 ranks x 2 remote readers x 1 MiB, or the work's end when that is later.
        close(L.ideal_total(rate, [0, 0, 1, 1], MIB, 1, 0.005, 0, 0), 4 * MIB / rate, "none")
        close(L.ideal_total(rate, [0, 0, 1, 1], MIB, 16, 0.005, 0.310, 0), 0.315, "a")
    s.check("only the volume counts when nothing is read early", volume_only)

    def one_node():
        # No rank on another node: no link, no lateness, whatever the work.
        close(L.ideal_total(rate, [0, 0, 0, 0], MIB, 16, 0.004, 0.1, 0.2), 0.304, "one node")
    s.check("one node: no link to wait for", one_node)

    def same_as_simulator():
        # tnbc-sim computes the same bound in C++ (tools/sim/reader.*, link_bound_ms): one model,
        # checked here on every scenario of bench/overlap.py, both placements, whole blocks and
        # parts, 2 to 4 nodes.
        sim = os.path.join(BUILD, "tools", "tnbc-sim")
        sys.path.insert(0, os.path.join(SOURCE, "bench"))
        from overlap import SCENARIOS  # noqa: E402
        cases = [(2, 2, "200mbit", "block", 1, MIB), (2, 2, "200mbit", "cyclic", 16, MIB),
                 (4, 2, "1gbit", "cyclic", 4, 1 << 18), (3, 2, "1gbit", "block", 1, 1 << 16)]
        for nodes, ppn, rate_text, placement, parts, block in cases:
            for name, *_ in SCENARIOS:
                r = subprocess.run([sim, "--json", "--nodes", str(nodes), "--ppn", str(ppn), "--link", rate_text,
                                    "--placement", placement, "--parts", str(parts), "--bytes", str(block),
                                    "--scenario", name, "--work-ms", "100", "--plan", "none"],
                                   capture_output=True, text=True, timeout=60)
                expect(r.returncode == 0, f"tnbc-sim: {r.stderr}")
                d = json.loads(r.stdout)
                bound = 1e3 * L.ideal_total(L.parse_rate(rate_text), L.node_of(nodes * ppn, nodes, placement), block,
                                            parts, 0.0, d["curc_ms"] / 1e3, d["crc_ms"] / 1e3)
                expect(abs(bound - d["link_bound_ms"]) <= 1e-3 * bound,
                       f"{nodes} x {ppn} {placement} {parts} part(s) {name}: link_model {bound:.3f} ms, "
                       f"tnbc-sim {d['link_bound_ms']} ms")
    s.check("tnbc-sim's link bound equals link_model's (24 cases)", same_as_simulator)
    s.finish()


if __name__ == "__main__":
    main()
