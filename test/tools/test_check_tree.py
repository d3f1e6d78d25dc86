#!/usr/bin/env python3
"""tools/check-tree: the tree itself passes, and each rule fails on a tree that breaks it."""

import json
import os
import subprocess
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

TOOL = os.path.join(SOURCE, "tools", "check-tree")
SCOREBOARD = os.path.join(SOURCE, "bench", "apps", "scoreboard.py")


def run(root):
    return subprocess.run([sys.executable, TOOL, root], capture_output=True, text=True, timeout=60)


def tree(files):
    """A scratch tree with these files (path -> text)."""
    root = tempfile.mkdtemp(prefix="tnbc-check-tree-")
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(text)
    return root


GOOD = {
    "shim/log.hpp": "#pragma once\n",
    "shim/replay/engine/engine.hpp": '#pragma once\n#include "shim/log.hpp"\n',
    "shim/replay/engine/op.hpp": '#pragma once\n#include "engine.hpp"\n',
    "shim/replay/adapt/policy.hpp": '#pragma once\n#include "shim/replay/engine/engine.hpp"\n',
}

HEADER = ("Ran: 2026-11-28 · commit 629d11a · 2 emulated nodes x 2 ranks · 200 Mbit/s · whole segments"
          " · unpinned · 3 rounds")
OLD_HEADER = ("Ran: 2026-11-26..2026-11-27 · commits 38e5dc8, 95d4329 · one node x 4 ranks · no links"
              " · no links · unpinned · rounds vary")
INDEX = """# Reports

| report | ran | superseded by |
|---|---|---|
| [old](old.md) | 2026-11-26 | [new](apps/new.md) |
| [new](apps/new.md) | 2026-11-28 |  |
| [untitled](untitled.md) | 2026-11-28 | |
"""
# Reports with their header lines (a titled one, one below a folder, one without a title), a
# history page without one, the index marking old.md superseded, and pages linking current reports.
REPORTS = dict(GOOD, **{
    "docs/measurements/old.md": f"# Old\n\n{OLD_HEADER}\n\nsee [the rerun](apps/new.md)\n",
    "docs/measurements/apps/new.md": f"# New\n\n{HEADER}\n\nreruns [old](../old.md)\n",
    "docs/measurements/untitled.md": f"{HEADER}\n\ntext\n",
    "docs/measurements/apps-history.md": "# History\n\nearlier sections, [old](old.md)\n",
    "docs/measurements/README.md": INDEX,
    "docs/guide.md": "see [new](measurements/apps/new.md) and [history](measurements/apps-history.md)\n",
    "README.md": "[guide](docs/guide.md), [new](docs/measurements/apps/new.md#x)\n",
})


def main():
    s = Suite("check-tree")

    def this_tree():
        out = run(SOURCE)
        expect(out.returncode == 0, f"the source tree fails its own check:\n{out.stdout}{out.stderr}")
        expect("layering kept" in out.stdout, out.stdout)

    def a_good_tree():
        out = run(tree(GOOD))
        expect(out.returncode == 0, out.stdout + out.stderr)

    def the_engine_reaching_up():
        bad = dict(GOOD)
        bad["shim/replay/engine/op.hpp"] = '#pragma once\n#include "shim/replay/adapt/policy.hpp"\n'
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        expect("shim/replay/engine/op.hpp:2" in out.stdout and "may include only" in out.stdout, out.stdout)

    def a_climbing_include():
        bad = dict(GOOD)
        bad["shim/replay/engine/op.hpp"] = '#pragma once\n#include "../../log.hpp"\n'
        out = run(tree(bad))
        expect(out.returncode == 1 and "climbs with '..'" in out.stdout, out.stdout)

    def a_bare_name_from_elsewhere():
        bad = dict(GOOD)
        bad["shim/replay/engine/op.hpp"] = '#pragma once\n#include "log.hpp"\n'
        out = run(tree(bad))
        expect(out.returncode == 1 and "not in shim/replay/engine/" in out.stdout, out.stdout)

    def a_long_file():
        bad = dict(GOOD)
        bad["shim/long.cpp"] = "int x;\n" * 601
        out = run(tree(bad))
        expect(out.returncode == 1 and "shim/long.cpp: 601 lines" in out.stdout, out.stdout)

    def a_long_reference_page():
        bad = dict(REPORTS)
        bad["docs/replay.md"] = "line\n" * 251
        bad["docs/measurements/untitled.md"] = f"{HEADER}\n" + "line\n" * 900
        out = run(tree(bad))
        expect(out.returncode == 1 and "docs/replay.md: 251 lines" in out.stdout, out.stdout)
        expect("untitled.md" not in out.stdout, f"a measurements page was held to the limit: {out.stdout}")

    def wordy_pages():
        words = "word " * 4001 + "\n"
        out = run(tree({**GOOD, "docs/guide.md": words, "docs/config.md": words,
                        "docs/measurements/apps-history.md": words}))
        expect(out.returncode == 1 and "docs/guide.md: 4001 words, more than 4000" in out.stdout, out.stdout)
        expect("config.md" not in out.stdout and "apps-history" not in out.stdout, out.stdout)
        status = "# Status\n\n" + "a " * 50 + "x\n| " + "b " * 60 + "|\n" + ("word " * 10 + "\n") * 70
        out = run(tree({**GOOD, "docs/status.md": status}))
        expect(out.returncode == 1, out.stdout)
        expect("docs/status.md:3: 101 characters, more than 100" in out.stdout, out.stdout)
        expect("docs/status.md:4:" not in out.stdout, f"a table row of 123 characters refused: {out.stdout}")
        expect(" words, more than 800" in out.stdout, out.stdout)
        short = "# Status\n\n" + "a " * 40 + "\n| " + "b " * 90 + "|\n"
        out = run(tree({**GOOD, "docs/status.md": short}))
        expect(out.returncode == 0, out.stdout)

    def a_broken_link():
        bad = dict(GOOD)
        bad["docs/a.md"] = "see [b](b.md) and [c](measurements/c.md#x)\n"
        bad["docs/b.md"] = "[back](a.md)\n"
        out = run(tree(bad))
        expect(out.returncode == 1 and "the link to measurements/c.md names no file" in out.stdout, out.stdout)
        expect("b.md names" not in out.stdout and "a.md names" not in out.stdout, out.stdout)

    def good_reports():
        out = run(tree(REPORTS))
        expect(out.returncode == 0, out.stdout + out.stderr)
        expect("reports headed and indexed" in out.stdout, out.stdout)

    def a_report_without_its_header():
        bad = dict(REPORTS)
        bad["docs/measurements/apps/new.md"] = "# New\n\ntext\n"
        bad["docs/measurements/untitled.md"] = "text\n"
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        expect("docs/measurements/apps/new.md:3: no header line" in out.stdout, out.stdout)
        expect("docs/measurements/untitled.md:1: no header line" in out.stdout, out.stdout)
        expect("old.md" not in out.stdout and "history" not in out.stdout, out.stdout)

    def a_header_out_of_form():
        for line in [HEADER.replace(" · 3 rounds", ""),                 # 6 fields
                     HEADER.replace("commit 629d11a", "629d11a"),      # no "commit"
                     HEADER.replace("2026-11-28", "yesterday"),        # no date
                     HEADER.replace(" · unpinned", " ·  · unpinned"),  # an empty field
                     HEADER.replace(" · ", " - ")]:
            bad = dict(REPORTS)
            bad["docs/measurements/apps/new.md"] = f"# New\n\n{line}\n"
            out = run(tree(bad))
            expect(out.returncode == 1, f"{line}: {out.stdout}")
            expect("docs/measurements/apps/new.md:3: the header line does not read" in out.stdout,
                   f"{line}: {out.stdout}")
        bad = dict(REPORTS)
        bad["docs/measurements/apps/new.md"] = f"# New\n{HEADER}\n"
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        expect("docs/measurements/apps/new.md:2: no blank line" in out.stdout, out.stdout)

    def an_index_that_misses_a_report():
        bad = dict(REPORTS)
        bad["docs/measurements/README.md"] = INDEX.replace("| [untitled](untitled.md) | 2026-11-28 | |\n", "")
        bad["docs/measurements/apps/newer.md"] = f"# Newer\n\n{HEADER}\n"
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        expect("docs/measurements/README.md: does not list the report docs/measurements/untitled.md"
               in out.stdout, out.stdout)
        expect("does not list the report docs/measurements/apps/newer.md" in out.stdout, out.stdout)
        expect("apps-history.md" not in out.stdout, f"a history page was asked for: {out.stdout}")

    def an_index_that_lists_what_is_not_there():
        bad = dict(REPORTS)
        bad["docs/measurements/README.md"] = INDEX + ("| [gone](apps/gone.md) | 2026-11-20 | |\n"
                                                      "| [history](apps-history.md) | 2026-11-20 | |\n")
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        expect("lists docs/measurements/apps/gone.md, which does not exist" in out.stdout, out.stdout)
        expect("lists docs/measurements/apps-history.md, which is not a report" in out.stdout, out.stdout)

    def no_index():
        bad = dict(REPORTS)
        del bad["docs/measurements/README.md"]
        out = run(tree(bad))
        expect(out.returncode == 1 and "docs/measurements/README.md: missing" in out.stdout, out.stdout)

    def a_link_to_a_superseded_report():
        bad = dict(REPORTS)
        bad["docs/guide.md"] = "see [old](measurements/old.md) and [again](measurements/old.md#x)\n"
        bad["README.md"] = "[old](docs/measurements/old.md), [new](docs/measurements/apps/new.md)\n"
        out = run(tree(bad))
        expect(out.returncode == 1, out.stdout)
        lines = out.stdout.splitlines()
        expect(lines.count("docs/guide.md: links to docs/measurements/old.md, which "
                           "docs/measurements/README.md marks superseded by docs/measurements/apps/new.md")
               == 1, out.stdout)
        expect(any(l.startswith("README.md: links to docs/measurements/old.md") for l in lines), out.stdout)
        expect("new.md, which" not in out.stdout, f"a current report was refused: {out.stdout}")
        expect(len(lines) == 3, f"reports and history pages may link it: {out.stdout}")

    def scoreboards():
        # Two rounds of one program on one node: tnbc 1.05x plain in both rounds, best 1.00x.
        marks = "<!-- scoreboard: generated by bench/apps/scoreboard.py from docs/measurements/apps/scoreboard.json -->"
        page = f"# Page\n\n{marks}\n<!-- scoreboard: end -->\n\nafter\n"
        walls = {"plain": [10.0, 12.0], "best": [10.0, 12.0], "tnbc": [10.5, 12.6], "nochoice": [10.1, 12.0]}
        runs = [dict(program="prog", placement="local", config=c, round=r, ok=True, wall_s=w[r], cpu_s=2 * w[r])
                for c, w in walls.items() for r in range(2)]
        meta = dict(date="2026-11-29T04:00:00", rounds=2, configs=list(walls), placements=["local"], nodes=2,
                    rate=None, pin=False, lib_commit="abc1234", command="./run.py ...")
        root = tree(dict(REPORTS, **{"README.md": page, "docs/apps.md": page,
                                     "run.json": json.dumps(dict(meta=meta, runs=runs, tuning={}))}))
        built = subprocess.run([sys.executable, SCOREBOARD, "--root", root, "build", os.path.join(root, "run.json"),
                                "--report", "docs/measurements/apps/new.md"], capture_output=True, text=True)
        expect(built.returncode == 0, built.stdout + built.stderr)
        with open(os.path.join(root, "README.md")) as f:
            text = f.read()
        expect("| prog | one node | 11.00 | 1.000 (1.00-1.00) | **1.050** (1.05-1.05) | 1.050 (1.05-1.05) | "
               "1.005 (1.00-1.01) | missed: > 1.02 plain, > 1.03 best |" in text, text)
        expect("· 2 rounds ([report](docs/measurements/apps/new.md))" in text and text.endswith("\n\nafter\n"), text)
        out = run(root)
        expect(out.returncode == 0, out.stdout)
        with open(os.path.join(root, "docs/apps.md"), "w") as f:
            f.write(page.replace(marks, marks + "\n| prog | edited |"))
        out = run(root)
        expect(out.returncode == 1 and "docs/apps.md: the scoreboard differs" in out.stdout, out.stdout)
        with open(os.path.join(root, "docs/apps.md"), "w") as f:
            f.write("# Page\n")
        out = run(root)
        expect(out.returncode == 1 and "docs/apps.md: no scoreboard" in out.stdout, out.stdout)
        os.unlink(os.path.join(root, "docs/measurements/apps/scoreboard.json"))
        out = run(root)
        expect(out.returncode == 1 and "scoreboard.json: missing" in out.stdout, out.stdout)

    s.check("the source tree keeps its layering and sizes", this_tree)
    s.check("a tree that keeps the layers passes", a_good_tree)
    s.check("the engine including the decision is refused", the_engine_reaching_up)
    s.check("an include with '..' is refused", a_climbing_include)
    s.check("a bare name not in the including folder is refused", a_bare_name_from_elsewhere)
    s.check("a source file of 601 lines is refused", a_long_file)
    s.check("a reference page of 251 lines is refused, a measurements page is not", a_long_reference_page)
    s.check("a relative link to a missing page is refused", a_broken_link)
    s.check("a reference page over 4000 words, status.md over 800 or with long lines, are refused; "
            "config.md and measurements are not held to it", wordy_pages)
    s.check("reports with header lines, indexed, linked where current, pass", good_reports)
    s.check("a report without its header line is refused", a_report_without_its_header)
    s.check("a header line out of form is refused", a_header_out_of_form)
    s.check("an index that misses a report is refused", an_index_that_misses_a_report)
    s.check("an index listing a missing file or a history page is refused",
            an_index_that_lists_what_is_not_there)
    s.check("reports without an index are refused", no_index)
    s.check("README.md or docs/ linking a superseded report is refused", a_link_to_a_superseded_report)
    s.check("the scoreboard built from a run passes; edited by hand, missing, or without its data, refused",
            scoreboards)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
