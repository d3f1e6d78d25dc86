#!/usr/bin/env python3
"""bench/sim_vs_measured.py's reading of a bench/overlap.py page, on a page made up by hand (no
MPI, no simulator): the cluster from the page's text, the columns by their headings whatever
their order, the rows with work that sleeps left out, and a page that does not say its cluster
refused with a message."""

import os
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import sim_vs_measured as V  # noqa: E402

HEAD = ("Measured 2026-12-02 by `bench/overlap.py` on the emulated cluster: 4 nodes x 2 ranks, 100mbit per "
        "node and direction, MPI_Alltoall of 256 KiB blocks, median of 3 rounds.\n\n")


def table(title, headings, rows):
    out = [f"## {title}", "", "| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n\n"


def page(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".md", delete=False)
    f.write(text)
    f.close()
    return f.name


def main():
    s = Suite("sim-vs-measured")
    cols = ["scenario", "TCURC", "plain", "MPICH, scattered", "engine alone", "tnbc, plan", "Tcomm (row)"]
    # The same values under headings in another order: what counts is the heading.
    other = ["scenario", "tnbc, plan", "TCURC", "Tcomm (row)", "plain", "engine alone"]
    text = (HEAD + table("Placement block, blocks read in 1 part", cols,
                         [["a: TCURC >= Tcomm", "638 ms", "1027.9 ms", "955.9 ms", "678.5 ms", "671.6 ms", "390.4 ms"]])
            + table("Placement cyclic, blocks read in 16 parts", other,
                    [["d: 0 < TCURC", "828.5 ms", "253 ms", "390.9 ms", "1143.6 ms", "827.5 ms"]])
            + table("Placement block, blocks read in 1 part, work that sleeps", cols,
                    [["b: x", "0 ms", "1.0 ms", "1.0 ms", "1.0 ms", "1.0 ms", "1.0 ms"]]))
    path = page(text)

    def platform():
        got = V.platform_of(path)
        expect(got == ["--nodes", "4", "--ppn", "2", "--link", "100mbit", "--bytes", 262144], got)
    s.check("the cluster from the page's text", platform)

    def rows():
        got = V.measured_rows(path)
        expect(got == [("block", 1, "a", 671.6, 390.4, 678.5, 1027.9), ("cyclic", 16, "d", 828.5, 390.9, 827.5, 1143.6)],
               f"columns not found by their headings, or the sleeping rows kept: {got}")
    s.check("the columns by their headings, in either order; rows with work that sleeps left out", rows)

    def refused():
        bad = page(text.replace("4 nodes x 2 ranks, ", ""))
        try:
            V.platform_of(bad)
            expect(False, "a page without its cluster accepted")
        except SystemExit as e:
            expect("does not say its cluster" in str(e), str(e))
        finally:
            os.unlink(bad)
    s.check("a page that does not say its cluster: refused, with the reason", refused)
    os.unlink(path)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
