#!/usr/bin/env python3
"""bench/scale_links.py's verdict, on runs made up by hand (no MPI, no cluster): a call whose
time follows the link rate is link-bound, one that does not slow down as the rate falls is not,
checksums that differ between rates are reported, and the links' bound per call is the bytes one
Alltoall sends out of a node at the rate."""

import os
import sys

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import scale_links as S  # noqa: E402

RATES = [("200mbit", 25e6), ("100mbit", 12.5e6), ("50mbit", 6.25e6)]


def run(per_call_s, busy=0.9, checksum="c0"):
    return {"per_call_s": per_call_s, "bound_s": 0.1, "busy": busy, "cores": 1.9, "checksum": checksum}


def verdicts(rows):
    return [r.rstrip(" |").rsplit("| ", 1)[1] for r in rows]


def main():
    s = Suite("scale-links")

    def bound():
        # 8 nodes x 2 ranks: each node sends 2 ranks x 14 remote ranks x the block.
        got = S.bound_per_call(8, 2, 262144, 25e6)
        expect(abs(got - 2 * 14 * 262144 / 25e6) < 1e-12, f"8 x 2: {got}")
        got = S.bound_per_call(2, 1, 1 << 20, 12.5e6)
        expect(abs(got - (1 << 20) / 12.5e6) < 1e-12, f"2 x 1: {got}")
    s.check("the links' bound per call: the bytes out of a node at the rate", bound)

    def follows_rate():
        res = {"200mbit": [run(0.10)] * 3, "100mbit": [run(0.20)] * 3, "50mbit": [run(0.40)] * 3}
        v = verdicts(S.table_rows(4, 2, RATES, res))
        expect(v == ["links"] * 3, f"time that follows the rate: {v}")
    s.check("a call that takes twice as long at half the rate is link-bound", follows_rate)

    def flat_at_fast_rate():
        # At 200 Mbit/s the call takes as long as at 100: something other than the links.
        res = {"200mbit": [run(0.20)] * 3, "100mbit": [run(0.21)] * 3, "50mbit": [run(0.40)] * 3}
        v = verdicts(S.table_rows(4, 2, RATES, res))
        expect(v == ["cores or schedule", "links", "links"], f"flat at the fast rate: {v}")
    s.check("a call that does not speed up with the rate is not link-bound at that rate", flat_at_fast_rate)

    def idle_links():
        res = {r: [run(0.1, busy=0.2)] for r, _ in RATES}
        v = verdicts(S.table_rows(4, 2, RATES, res))
        expect(all(x.startswith("unknown") for x in v), f"links idle at the lowest rate: {v}")
    s.check("no verdict when even the lowest rate leaves the links idle", idle_links)

    def checksums():
        res = {"200mbit": [run(0.1)], "100mbit": [run(0.2, checksum="c1")], "50mbit": [run(0.4)]}
        v = verdicts(S.table_rows(4, 2, RATES, res))
        expect(v == ["DIFFERENT checksums"] * 3, f"checksums: {v}")
    s.check("runs whose data differ between rates are reported", checksums)

    def failed_rate():
        res = {"200mbit": [], "100mbit": [run(0.2)], "50mbit": [run(0.4)]}
        rows = S.table_rows(4, 2, RATES, res)
        expect("failed" in rows[0] and verdicts(rows[1:]) == ["links", "links"], f"a rate without runs: {rows}")
    s.check("a rate whose every run failed says so", failed_rate)

    s.finish()


if __name__ == "__main__":
    main()
