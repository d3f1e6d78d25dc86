"""Writing a results page whose tables a benchmark regenerates while a section written by hand
(the reading of the numbers) stays: bench/overlap.py and tools/tnbc-bench; and the header line
every report opens with (docs/measurements/README.md): those two and bench/apps/run.py.
Standard library only."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_commit():
    """This repository's HEAD, short, with '+' where its tracked files have changes; None outside
    git (the library measured is the one built from this tree unless the caller says otherwise)."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def ran_line(date, commit, placement, links, segments, pinned, rounds):
    """`Ran: date · commit c · placement · links · segments · pinned|unpinned · N rounds`: the
    header line tools/check-tree asks of every report.  `links`: e.g. "200 Mbit/s", "unshaped",
    "no links"; `segments`: "whole segments" on the emulated cluster (tnbc-cluster --tso on, its
    default), "no links" on one node."""
    return (f"Ran: {date} · commit {commit or 'unknown'} · {placement} · {links} · {segments} · "
            f"{'pinned' if pinned else 'unpinned'} · {rounds} rounds")


def rate_words(rate):
    """tnbc-cluster's --rate as a report says it: 200mbit -> 200 Mbit/s, none -> unshaped."""
    if rate in (None, ""):
        return "200 Mbit/s"
    if rate == "none":
        return "unshaped"
    return rate.replace("mbit", " Mbit/s").replace("gbit", " Gbit/s")


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
