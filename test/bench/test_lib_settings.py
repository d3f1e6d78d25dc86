#!/usr/bin/env python3
"""bench/lib_settings.py, the --set option of bench/overlap.py and bench/never_slower.py: what
it accepts, the environment and the page's sentence it makes, and a bad setting (or
never_slower.py's missing --other-lib) ending the benchmarks with a message before anything runs
(no MPI, no root)."""

import argparse
import os
import subprocess
import sys

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import lib_settings as L  # noqa: E402


def main():
    s = Suite("lib-settings")

    def parse():
        ap = argparse.ArgumentParser(exit_on_error=False)
        L.add_option(ap, "TNBC_CHUNK_WINDOW=8")
        a = ap.parse_args(["--set", "TNBC_CHUNK_WINDOW=8", "--set", "TNBC_PLAN=/a=b"])
        expect(a.set == ["TNBC_CHUNK_WINDOW=8", "TNBC_PLAN=/a=b"], a.set)
        expect(L.env(a.set) == {"TNBC_CHUNK_WINDOW": "8", "TNBC_PLAN": "/a=b"}, L.env(a.set))
        expect(ap.parse_args([]).set == [], "no --set: an empty list")
        for bad in ("CHUNK_WINDOW=8", "TNBC_CHUNK_WINDOW", "tnbc_chunk_window=8", "MPIR_CVAR_X=1"):
            try:
                ap.parse_args(["--set", bad])
            except argparse.ArgumentError as e:
                expect("TNBC_NAME=VALUE" in str(e), str(e))
            else:
                raise AssertionError(f"--set {bad} accepted")
    s.check("TNBC_NAME=VALUE accepted (the value may hold '='), anything else refused", parse)

    def sentence():
        expect(L.sentence([]) == "", repr(L.sentence([])))
        got = L.sentence(["TNBC_CHUNK_WINDOW=8", "TNBC_ADAPT=off"])
        expect(got == "Every run with libtnbc.so sets `TNBC_CHUNK_WINDOW=8`, `TNBC_ADAPT=off`.  ", repr(got))
    s.check("the page names every setting, and says nothing without one", sentence)

    def benchmarks():
        for script in ("overlap.py", "never_slower.py"):
            res = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", script), "--set", "WINDOW=8"],
                                 capture_output=True, text=True, timeout=60)
            expect(res.returncode == 2 and "--set: TNBC_NAME=VALUE, not 'WINDOW=8'" in res.stderr,
                   f"{script}: exit {res.returncode}, {res.stderr!r}")
    s.check("a bad --set ends bench/overlap.py and bench/never_slower.py with a message", benchmarks)

    def other_lib():
        res = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "never_slower.py"), "--blocking-only",
                              "--other-lib", "/nonexistent/libtnbc.so"], capture_output=True, text=True, timeout=60)
        expect(res.returncode == 2 and "--other-lib: no such file: /nonexistent/libtnbc.so" in res.stderr,
               f"exit {res.returncode}, {res.stderr!r}")
    s.check("a missing --other-lib ends bench/never_slower.py with a message before anything runs", other_lib)
    s.finish()


if __name__ == "__main__":
    main()
