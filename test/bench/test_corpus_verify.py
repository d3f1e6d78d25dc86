#!/usr/bin/env python3
"""bench/apps/programs.py's verification of a run's output, as bench/apps/run.py and
bench/stress.py --verify apply it: each kind (regex, heffte, max_error) on outputs made up after
the programs' own lines, a good run accepted and a bad or truncated one refused with its reason;
the programs on other rank counts (Program.at) (no MPI)."""

import os
import sys

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench", "apps"))
import programs as corpus  # noqa: E402


def main():
    s = Suite("corpus-verify")
    P = corpus.BY_NAME

    def npb():
        ok = " IS Benchmark Completed.\n Verification    =               SUCCESSFUL\n"
        expect(corpus.verify(P["npb-is-A"], 0, ok)[0], "NPB's SUCCESSFUL refused")
        good, why = corpus.verify(P["npb-is-A"], 0, ok.replace("SUCCESSFUL", "UNSUCCESSFUL"))
        expect(not good and "does not match" in why, why)
        good, why = corpus.verify(P["npb-is-A"], 1, ok)
        expect(not good and why == "exit code 1", why)
    s.check("NPB: the verification line and the exit code", npb)

    def heffte():
        line = "Max error:            1.2e-15\nTolerance:            1e-11\n"
        expect(corpus.verify(P["heffte-a2a"], 0, line)[0], "heFFTe within its tolerance refused")
        good, why = corpus.verify(P["heffte-a2a"], 0, line.replace("1.2e-15", "3e-09"))
        expect(not good and "3e-09 > tolerance" in why, why)
        expect(not corpus.verify(P["heffte-a2a"], 0, "Tolerance: 1e-11\n")[0], "no error line accepted")
    s.check("heFFTe: its error against its own tolerance", heffte)

    def fftmpi():
        for name in ("fftmpi-pencil", "fftmpi-uneven", "fftmpi-pencil-long", "fftmpi-uneven-long"):
            p = P[name]
            expect(p.verify == "max_error" and "-v" in p.args and "all" in p.args, f"{name}: {p}")
            out = "3d FFTs with FFTW3 library, precision = double\nMax error = 4.44089e-16\nTime for 3d FFTs = 4.2 secs\n"
            good, why = corpus.verify(p, 0, out)
            expect(good and "4.44e-16" in why, why)
            expect(corpus.reported_time(p, out) == 4.2, corpus.reported_time(p, out))
            good, why = corpus.verify(p, 0, out.replace("4.44089e-16", "0.0371"))
            expect(not good and "0.0371 > tolerance" in why, why)
            good, why = corpus.verify(p, 0, out.replace("Max error", "Max eror"))
            expect(not good and "no error line" in why, why)
            expect(not corpus.verify(p, 0, out.replace("4.44089e-16", "nan"))[0], "a NaN error accepted")
    s.check("fftMPI: 'Max error' at most the tolerance; missing, larger or NaN refused; its own time", fftmpi)

    def other_rank_counts():
        expect([corpus.pencil_grid(r) for r in (2, 4, 8, 12, 16, 7)] == [(1, 2), (2, 2), (2, 4), (3, 4), (4, 4), (1, 7)],
               "2DECOMP&FFT's grid is not the most nearly square")
        d = P["2decomp-c2c"]
        expect(d.at(4) is d and d.args[:2] == ("2", "2"), f"the 4-rank program changed: {d.args}")
        d8 = d.at(8)
        expect(d8.ranks == 8 and d8.args == ("2", "4") + d.args[2:], f"8 ranks: {d8.args}")
        expect(d8.calls.startswith("counted on 4 ranks") and d8.verify_regex == d.verify_regex, d8.calls)
        ft = P["npb-ft-A"].at(16)
        expect(ft.ranks == 16 and ft.args == P["npb-ft-A"].args, f"NPB's arguments changed: {ft.args}")
        for bad in (6, 12):
            try:
                P["npb-is-A"].at(bad)
                expect(False, f"NPB IS accepted on {bad} ranks")
            except ValueError as e:
                expect("power-of-two" in str(e), str(e))
        imb = P["imb-alltoall"].at(8).args
        expect(imb[imb.index("-npmin") + 1] == "8", f"IMB would measure other counts too: {imb}")
        try:
            P["minivite"].at(8)
            expect(False, "miniVite accepted on 8 ranks, where its 4-rank modularity cannot verify it")
        except ValueError as e:
            expect("only on 4 ranks" in str(e), str(e))
    s.check("other rank counts: arguments made for the count, or a refusal with its reason", other_rank_counts)

    def failures():
        import run  # bench/apps/run.py (on the path above)
        runs = [dict(config="tune", tag="default#0", ok=False), dict(config="tune", tag="alltoall=brucks#0", ok=False),
                dict(config="tune", tag="alltoall=pairwise#0", ok=True), dict(config="tnbc", tag="round1", ok=False),
                dict(config="plain", tag="round2", ok=True)]
        got = [(r["config"], r["tag"]) for r in run.failed_runs(runs)]
        expect(got == [("tune", "default#0"), ("tnbc", "round1")],
               f"a failed run not counted, or MPICH's own failing algorithm in tuning counted: {got}")
    s.check("run.py: every failed run fails the whole run but a tuning candidate's (MPICH's own algorithm)",
            failures)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
