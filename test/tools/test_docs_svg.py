#!/usr/bin/env python3
"""Every SVG picture in docs/ shows all its text: each <text> element, at its position (the
translations of its groups added) and its estimated width (per character, roughly DejaVu Sans's
advance widths, placed by its text-anchor), lies inside the picture's view box.  A legend entry
drawn past the right edge, as the never-slower charts once were, fails here."""

import glob
import os
import re
import xml.etree.ElementTree as ET

from tnbc_testlib import SOURCE, Suite, expect

SVG = "{http://www.w3.org/2000/svg}"
SLACK = 2.0  # pixels


def em_width(text):
    """The text's width in ems, by classes of characters (DejaVu Sans, the default sans-serif
    here: i and l 0.28, space and t 0.32-0.39, most lower case 0.6, m and w 0.8-1.0)."""
    width = 0.0
    for ch in text:
        if ch in "ijl.,:;'|!":
            width += 0.28
        elif ch in " ftr()[]/-":
            width += 0.38
        elif ch in "mwMW":
            width += 0.9
        elif ch.isupper():
            width += 0.7
        else:
            width += 0.62  # digits, the rest of lower case, other symbols
    return width


def number(text, default=0.0):
    m = re.match(r"\s*(-?[\d.]+)", text or "")
    return float(m.group(1)) if m else default


def translation(transform):
    x = y = 0.0
    for m in re.finditer(r"translate\(\s*(-?[\d.]+)(?:[\s,]+(-?[\d.]+))?\s*\)", transform or ""):
        x += float(m.group(1))
        y += float(m.group(2) or 0)
    return x, y


def texts(el, ox=0.0, oy=0.0, size=12.0, anchor="start"):
    """(text, left, right, top, bottom) of every text element under `el`; rotated text (an axis
    title) by its anchor point only."""
    dx, dy = translation(el.get("transform"))
    ox, oy = ox + dx, oy + dy
    if el.get("font-size"):
        size = number(el.get("font-size"), size)
    m = re.search(r"font-size:\s*([\d.]+)", el.get("style") or "")
    if m:
        size = float(m.group(1))
    anchor = el.get("text-anchor", anchor)
    if el.tag == SVG + "text":
        text = "".join(el.itertext())
        x, y = ox + number(el.get("x")), oy + number(el.get("y"))
        if "rotate" in (el.get("transform") or ""):
            return [(text, x, x, y, y)]
        width = em_width(text) * size
        left = x - {"end": width, "middle": width / 2}.get(anchor, 0.0)
        return [(text, left, left + width, y - 0.8 * size, y + 0.2 * size)]
    out = []
    for child in el:
        out += texts(child, ox, oy, size, anchor)
    return out


def outside(path):
    """The text elements of the SVG file `path` that pass its edges: [(text, left, right)]."""
    root = ET.parse(path).getroot()
    if root.get("viewBox"):
        x0, y0, w, h = (float(v) for v in root.get("viewBox").replace(",", " ").split())
    else:
        x0, y0, w, h = 0.0, 0.0, number(root.get("width")), number(root.get("height"))
    expect(w > 0 and h > 0, f"no size: {root.attrib}")
    return [(t, round(l), round(r)) for t, l, r, top, bottom in texts(root)
            if l < x0 - SLACK or r > x0 + w + SLACK or top < y0 - SLACK or bottom > y0 + h + SLACK]


def inside(path):
    out = outside(path)
    expect(not out, f"text outside the picture: {out[:5]}")


def main():
    s = Suite("docs-svg")
    files = sorted(glob.glob(os.path.join(SOURCE, "docs", "**", "*.svg"), recursive=True))

    def found():
        expect(len(files) >= 5, f"only {len(files)} SVG files under docs/")
    s.check("the pictures in docs/ are found", found)

    for path in files:
        s.check(f"{os.path.relpath(path, SOURCE)}: all its text inside the picture", lambda path=path: inside(path))
    s.finish()


if __name__ == "__main__":
    main()
