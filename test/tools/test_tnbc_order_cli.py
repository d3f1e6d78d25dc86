#!/usr/bin/env python3
"""tnbc-order's command line: help, version, exit codes, and docs/config.md equal to the table."""

import os
import subprocess
import tempfile

from tnbc_testlib import BUILD, SOURCE, Suite, expect

TOOL = os.path.join(BUILD, "tools", "tnbc-order")


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def main():
    s = Suite("tnbc-order-cli")

    def help_text():
        for args in (["--help"], ["-h"], ["config", "--help"], ["show", "--help"], ["plan", "-h"],
                     ["export", "--help"], ["plot", "--help"], ["check", "--help"]):
            r = run(*args)
            expect(r.returncode == 0 and r.stdout.startswith("usage: tnbc-order"), f"{args}: {r}")
        r = run("--help")
        for cmd in ("show", "plan", "export", "plot", "check", "config", "exit codes: 0 ok, 1 findings"):
            expect(cmd in r.stdout, f"{cmd!r} missing from --help")
    s.check("--help on the tool and its commands", help_text)

    def version():
        r = run("--version")
        expect(r.returncode == 0 and r.stdout.startswith("tnbc-order "), str(r))
    s.check("--version", version)

    def usage_errors():
        for args, msg in (([], "no command given"), (["frob"], "unknown command 'frob'"),
                          (["config", "--bogus"], "config: unknown option '--bogus'"),
                          (["show"], "show: no trace directory given"),
                          (["show", "d", "--bogus"], "show: unknown option '--bogus'"),
                          (["show", "d", "e"], "show: unexpected argument 'e'"),
                          (["plan", "d"], "plan: no output file given (-o FILE)"),
                          (["plan", "d", "-o"], "plan: -o needs a file name"),
                          (["export", "d", "-o", "x"], "export: no format given (--chrome)"),
                          (["plot", "d", "-o", "x", "--callsite"], "plot: --callsite needs an id"),
                          (["show", "/nonexistent/tnbc"], "/nonexistent/tnbc: no such directory"),
                          (["check"], "check: give one plan file"),
                          (["check", "a", "b"], "check: give one plan file")):
            r = run(*args)
            expect(r.returncode == 2 and msg in r.stderr, f"{args}: exit {r.returncode} {r.stderr!r}")
    s.check("usage errors exit 2 with a message", usage_errors)

    def check_plans():
        d = tempfile.mkdtemp(prefix="tnbc_cli_check_")
        good = os.path.join(d, "good.plan")
        with open(good, "w") as f:
            f.write("tnbc-plan 2\n\nsite app+0x10 alltoall comm=4 class=16\n  order 3 2 1 0\n  per-node off\n"
                    "  return early\nend\n\nend-of-plan 1\n")
        r = run("check", good)
        expect(r.returncode == 0 and "1 entries, accepted" in r.stdout
               and "app+0x10 alltoall comm=4 class=16 order=3,2,1,0 return=early" in r.stdout, str(r))
        bad = os.path.join(d, "bad.plan")
        with open(bad, "w") as f:
            f.write("tnbc-plan 2\n\nsite app+0x10 alltoall comm=4 class=16\n  order 3 2 2 0\nend\n\nend-of-plan 1\n")
        r = run("check", bad)
        expect(r.returncode == 2 and "bad.plan: line" in r.stderr, str(r))
        r = run("check", os.path.join(d, "missing.plan"))
        expect(r.returncode == 2 and "missing.plan" in r.stderr, str(r))
    s.check("check: a plan libtnbc.so accepts is printed, one it refuses exits 2 naming the line", check_plans)

    def special_files():
        # Each would block or mislead a reader that opens, reads or stats naively: a FIFO named
        # like a trace file (blocks the open), a folder named like one, a symlink loop as the
        # folder (not "no such directory").  run() gives up after 30 s.
        with tempfile.TemporaryDirectory() as tmp:
            fifo, folder = os.path.join(tmp, "fifo"), os.path.join(tmp, "folder")
            os.makedirs(fifo)
            os.mkfifo(os.path.join(fifo, "0.tnbct"))
            os.makedirs(os.path.join(folder, "0.tnbct"))
            loop = os.path.join(tmp, "loop")
            os.symlink(loop, loop)
            for d, msg in ((fifo, f"{fifo}/0.tnbct: not a regular file (a FIFO)"),
                           (folder, f"{folder}/0.tnbct: is a directory"),
                           (loop, f"{loop}: Too many levels of symbolic links")):
                r = run("show", d)
                expect(r.returncode == 2 and r.stderr == f"tnbc-order: {msg}\n",
                       f"{d}: exit {r.returncode} {r.stderr!r}")
    s.check("special files in place of a trace folder or file: exit 2, the real reason", special_files)

    def config_lists_settings():
        r = run("config")
        expect(r.returncode == 0, str(r))
        for name in ("TNBC_DISABLE", "TNBC_LOG", "TNBC_STATS"):
            expect(name in r.stdout, f"{name} missing from `tnbc-order config`")
    s.check("config lists the settings", config_lists_settings)

    def docs_match():
        table = run("config", "--markdown").stdout
        with open(os.path.join(SOURCE, "docs", "config.md"), encoding="utf-8") as f:
            doc = f.read()
        begin = doc.index("-->\n", doc.index("<!-- BEGIN SETTINGS")) + 4
        end = doc.index("<!-- END SETTINGS -->")
        expect(doc[begin:end] == table,
               "docs/config.md is out of date: paste `tnbc-order config --markdown` between the markers")
    s.check("docs/config.md matches the settings table", docs_match)
    s.finish()


if __name__ == "__main__":
    main()
