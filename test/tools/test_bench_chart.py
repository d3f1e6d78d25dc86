#!/usr/bin/env python3
"""tools/tnbc-bench's charts: every legend entry inside the picture (the legend wraps onto more
rows where the configurations' names do not fit one), and a min-max line per bar."""

import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_docs_svg import outside  # noqa: E402


def load_bench():
    loader = importlib.machinery.SourceFileLoader("tnbc_bench", os.path.join(SOURCE, "tools", "tnbc-bench"))
    spec = importlib.util.spec_from_loader("tnbc_bench", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    s = Suite("bench-chart")
    tb = load_bench()

    def legend_inside():
        configs = list(tb.LABELS)
        groups = [(f"ft {c}", {k: {"ratio": 0.9, "ratio_min": 0.8, "ratio_max": 1.3} for k in configs}) for c in "SWA"]
        path = os.path.join(tempfile.mkdtemp(), "chart.svg")
        tb.svg_chart("test", groups, configs, path)
        svg = open(path).read()
        width = float(re.search(r'<svg [^>]*width="([\d.]+)"', svg).group(1))
        height = float(re.search(r'<svg [^>]*height="([\d.]+)"', svg).group(1))
        for label in (tb.LABELS[c] for c in configs):
            m = re.search(r'<text x="([\d.]+)" y="([\d.]+)">' + re.escape(label) + "<", svg)
            expect(m is not None, f"legend entry {label!r} missing")
            x, y = float(m.group(1)), float(m.group(2))
            expect(x + 6.5 * len(label) <= width and y <= height, f"{label!r} at ({x}, {y}) outside {width}x{height}")
        whiskers = re.findall(r'<line x1="(\d+\.\d)" y1="([\d.]+)" x2="\1" y2="([\d.]+)" stroke="black"/>', svg)
        expect(len(whiskers) == len(groups) * len(configs), f"{len(whiskers)} min-max lines for {len(groups) * len(configs)} bars")
        expect(all(float(lo) > float(hi) for _, lo, hi in whiskers), "a line's lowest ratio drawn above its highest")
    s.check("every legend entry inside the picture; one min-max line per bar", legend_inside)

    def sized_to_data():
        # Two groups of two bars (docs/measurements/per-node's charts) fill the axis, and the
        # axis says what it shows.
        configs = ["plan", "node"]
        groups = [(f"ft {c}", {k: {"ratio": 0.9, "ratio_min": 0.8, "ratio_max": 1.0} for k in configs}) for c in "SW"]
        path = os.path.join(tempfile.mkdtemp(), "chart.svg")
        tb.svg_chart("test", groups, configs, path)
        svg = open(path).read()
        axis = re.search(r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="\2" stroke="black"/>', svg)
        left, right = float(axis.group(1)), float(axis.group(3))
        bars = [(float(x), float(w)) for x, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="[\d.]+" fill="[^"]+"><title>', svg)]
        expect(len(bars) == 4, f"{len(bars)} bars")
        used = (max(x + w for x, w in bars) - left) / (right - left)
        expect(used >= 0.75, f"the bars take {used:.0%} of the axis")
        expect(re.search(r'<text transform="rotate\(-90[^"]*"[^>]*>time / plain MPICH</text>', svg), "no axis title")
        expect(not outside(path), f"text outside the picture: {outside(path)}")
    s.check("a few groups fill the axis; the axis has a title; all text inside", sized_to_data)
    s.finish()


if __name__ == "__main__":
    main()
