#!/usr/bin/env python3
"""bench/apps/scoreboard.py's --keep (merged): a rerun of one placement replaces that placement's
run and rows where they stood and keeps the others in their order; a new placement goes at the
end; data written before runs named their placements, and a rerun of only some of a run's
placements, are refused with a message; a placement's words name its ranks where they are not
4; run.py's side by side ratios of two configurations in the same rounds (no MPI)."""

import os
import sys

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench", "apps"))
import scoreboard  # noqa: E402


def board(runs):
    """A board of runs given as (report, [placements]), each placement with rows for programs a and b."""
    return dict(runs=[dict(report=rep, placements=pl) for rep, pl in runs],
                rows=[dict(program=prog, placement=p, report=rep) for rep, pl in runs for p in pl for prog in "ab"])


def main():
    s = Suite("scoreboard")
    old = board([("one", ["one node"]), ("two", ["2 nodes"]), ("fast", ["2 nodes, unshaped"])])

    def rerun_one():
        got = scoreboard.merged(old, board([("two-new", ["2 nodes"])]))
        expect([r["report"] for r in got["runs"]] == ["one", "two-new", "fast"], got["runs"])
        expect([(r["placement"], r["report"]) for r in got["rows"]] ==
               [("one node", "one")] * 2 + [("2 nodes", "two-new")] * 2 + [("2 nodes, unshaped", "fast")] * 2,
               got["rows"])
    s.check("a rerun of one placement: replaced where it stood, the others kept", rerun_one)

    def new_placement():
        got = scoreboard.merged(old, board([("pinned", ["one node, pinned"])]))
        expect([r["report"] for r in got["runs"]] == ["one", "two", "fast", "pinned"], got["runs"])
        expect(len(got["rows"]) == 8 and got["rows"][-1]["placement"] == "one node, pinned", got["rows"])
    s.check("a placement the data lacks: added at the end", new_placement)

    def two_placements_one_run():
        got = scoreboard.merged(old, board([("both", ["one node", "2 nodes"])]))
        expect([r["report"] for r in got["runs"]] == ["both", "fast"], got["runs"])
        expect([r["report"] for r in got["rows"]] == ["both"] * 4 + ["fast"] * 2, got["rows"])
    s.check("a run of two placements replaces both", two_placements_one_run)

    def refused(old_board, new_board, words, what):
        try:
            scoreboard.merged(old_board, new_board)
        except SystemExit as e:
            expect(words in str(e), str(e))
        else:
            expect(False, what)

    s.check("a rerun of one of a run's two placements: refused, with the reason",
            lambda: refused(board([("both", ["one node", "2 nodes"])]), board([("one-new", ["one node"])]),
                            "holds 2 nodes too", "a run of two placements was replaced by a rerun of one"))
    s.check("current data without placements: refused, with the reason",
            lambda: refused(dict(runs=[dict(report="old.md")], rows=[]), board([("x", ["one node"])]),
                            "names no placements", "a run without placements was merged"))

    def rank_counts():
        words = scoreboard.placement_words
        expect(words("cluster", dict(nodes=2, rate="200mbit")) == "2 nodes, 200 Mbit/s", "the 4-rank words changed")
        expect(words("cluster", dict(nodes=4, ranks=8, rate="100mbit", pin=True)) == "4 nodes x 2 ranks, 100 Mbit/s, pinned",
               words("cluster", dict(nodes=4, ranks=8, rate="100mbit", pin=True)))
        expect(words("cluster", dict(nodes=4, ranks=4, rate="100mbit")) != words("cluster", dict(nodes=4, ranks=8, rate="100mbit")),
               "4 x 1 and 4 x 2 ranks read the same")
        expect(words("local", dict(ranks=8)) == "one node x 8 ranks", words("local", dict(ranks=8)))
        expect(words("cluster", dict(nodes=8, ranks=8, rate="100mbit")) == "8 nodes x 1 rank, 100 Mbit/s",
               words("cluster", dict(nodes=8, ranks=8, rate="100mbit")))
    s.check("a placement's words name the ranks where they are not 4", rank_counts)

    def side_by_side():
        # Rounds 1-3: a took 1.10, 0.95 and 1.02 of b; round 4 b failed; round 5 only a ran.
        runs = [dict(program="p", placement="cluster", config=c, round=r, ok=ok, wall_s=w)
                for r, (wa, wb, ok_b) in enumerate([(11.0, 10.0, True), (9.5, 10.0, True), (10.2, 10.0, True),
                                                    (10.0, 10.0, False)], start=1)
                for c, w, ok in (("a", wa, True), ("b", wb, ok_b))]
        runs.append(dict(program="p", placement="cluster", config="a", round=5, ok=True, wall_s=99.0))
        got = scoreboard.run.side_by_side(runs, "p", "cluster", "a", "b")
        expect(got["n"] == 3 and got["longer"] == 2, got)
        expect(abs(got["med"] - 1.02) < 1e-9 and abs(got["min"] - 0.95) < 1e-9 and abs(got["max"] - 1.1) < 1e-9, got)
        expect(scoreboard.run.side_by_side(runs, "p", "cluster", "a", "c") is None, "a ratio to a configuration never run")
        data = dict(meta=dict(configs=["plain", "a", "b"]), runs=runs)
        lines = scoreboard.run.side_by_side_lines(data, {("p", "cluster"): {"a": {}, "b": {}}})
        expect(any("`a` ÷ `b` | 1.020 (0.950–1.100) | 2 of 3 |" in l for l in lines), lines)
    s.check("side by side: one configuration over another in the rounds where both verified", side_by_side)

    s.finish()


if __name__ == "__main__":
    main()
