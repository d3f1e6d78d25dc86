#!/usr/bin/env python3
"""tools/check-tree: the tree itself passes, and each rule fails on a tree that breaks it."""

import os
import subprocess
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

TOOL = os.path.join(SOURCE, "tools", "check-tree")


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
    "shim/replay/decide/policy.hpp": '#pragma once\n#include "shim/replay/engine/engine.hpp"\n',
}


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
        bad["shim/replay/engine/op.hpp"] = '#pragma once\n#include "shim/replay/decide/policy.hpp"\n'
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
        bad = dict(GOOD)
        bad["docs/replay.md"] = "line\n" * 251
        bad["docs/measurements/notes.md"] = "line\n" * 900
        out = run(tree(bad))
        expect(out.returncode == 1 and "docs/replay.md: 251 lines" in out.stdout, out.stdout)
        expect("notes.md" not in out.stdout, f"a measurements page was held to the limit: {out.stdout}")

    def a_broken_link():
        bad = dict(GOOD)
        bad["docs/a.md"] = "see [b](b.md) and [c](measurements/c.md#x)\n"
        bad["docs/b.md"] = "[back](a.md)\n"
        out = run(tree(bad))
        expect(out.returncode == 1 and "the link to measurements/c.md names no file" in out.stdout, out.stdout)
        expect("b.md names" not in out.stdout and "a.md names" not in out.stdout, out.stdout)

    s.check("the source tree keeps its layering and sizes", this_tree)
    s.check("a tree that keeps the layers passes", a_good_tree)
    s.check("the engine including the decision is refused", the_engine_reaching_up)
    s.check("an include with '..' is refused", a_climbing_include)
    s.check("a bare name not in the including folder is refused", a_bare_name_from_elsewhere)
    s.check("a source file of 601 lines is refused", a_long_file)
    s.check("a reference page of 251 lines is refused, a measurements page is not", a_long_reference_page)
    s.check("a relative link to a missing page is refused", a_broken_link)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
