"""Writing a results page whose tables a benchmark regenerates while a section written by hand
(the reading of the numbers) stays: bench/overlap.py and tools/tnbc-bench.  Standard library only."""

import os


def write_keeping_section(path, lines, heading, note):
    """Writes `lines` (the generated page) to `path`.  If the page there already has a section
    starting with the line `heading` (e.g. "## Reading"), that section and everything after it is
    appended again, under the paragraph `note` (that it was written for an earlier run)."""
    lines = list(lines)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
        mark = "\n" + heading
        if mark in old:
            lines += [note, "", old[old.index(mark) + 1:].rstrip("\n"), ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
