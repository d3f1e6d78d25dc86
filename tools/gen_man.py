#!/usr/bin/env python3
"""Writes tnbc's man pages at build time from the texts users already read elsewhere:

  tnbc-order.1    `tnbc-order --help` and `tnbc-order <command> --help` of every command it lists
  tnbc-stats.1    tnbc-stats's argparse help
  tnbc-cluster.1  `tnbc-cluster --help` (the installed copy)
  tnbc-sim.1      `tnbc-sim --help`
  tnbc.7          README.md's overview and "Using it", docs/config.md with the settings table
                  `tnbc-order config --markdown` prints (shim/config.cpp), and the installed files

No option or setting is written here a second time: a changed --help, README or config table
changes the page at the next build.  The help texts are read by their layout, the one all of
them share with argparse: a "usage:" line, paragraphs, and lists of `  TERM  text` items under
an optional "heading:" line, with long terms alone on their line and text continued deeper.

usage: gen_man.py OUTDIR --version V --order EXE --stats SCRIPT --cluster SCRIPT --sim EXE
                  --readme README.md --config-doc docs/config.md --lib P --trace-lib P
                  --modulefiles DIR --docdir DIR
"""

import argparse
import os
import re
import subprocess
import sys


# ---- roff text -------------------------------------------------------------------------------

def esc(text):
    """Plain text as roff: backslashes, option dashes (so that a copied option is a real '-'),
    characters outside ASCII as groff's \\[uXXXX]."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?<![A-Za-z0-9])-", r"\\-", text)
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)


def line(text):
    """One input line; a leading '.' or "'" would be read as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def inline_md(text):
    """Markdown's inline marks: `code` and **strong** in bold, [text](link) as its text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    out, pos = [], 0
    for m in re.finditer(r"`([^`]*)`|\*\*([^*]*)\*\*", text):
        out.append(esc(text[pos:m.start()]))
        code = m.group(1) if m.group(1) is not None else m.group(2).replace("`", "")
        out.append("\\fB" + esc(code) + "\\fR")
        pos = m.end()
    out.append(esc(text[pos:]))
    return "".join(out)


def literal(lines):
    """Lines kept as they are (examples, a usage synopsis)."""
    return [".PP", ".nf", ".RS 2", *(line(esc(x)) for x in lines), ".RE", ".fi"]


def tagged(tag, body):
    """One item of a list: its tag in bold, its text indented below."""
    return [".TP", line("\\fB" + tag + "\\fR"), *(line(x) for x in body)]


# ---- --help texts ----------------------------------------------------------------------------

class Help:
    """A --help text read by its layout: the synopsis lines, the first sentence (the page's NAME)
    and the rest as blocks: ("para", [lines]) or ("items", heading or None, [(term, [lines])])."""

    def __init__(self, text, prog):
        lines = text.rstrip("\n").split("\n")
        if not lines or not lines[0].startswith("usage: "):
            sys.exit(f"gen_man: {prog}: --help does not start with 'usage: '")
        self.usage = [lines[0][len("usage: "):]]
        i = 1
        while i < len(lines) and lines[i].startswith(" "):  # argparse wraps a long synopsis
            self.usage.append(lines[i].strip())
            i += 1
        self.blocks = []
        for chunk in re.split(r"\n\s*\n", "\n".join(lines[i:]).strip("\n")):
            self._read_block(chunk.split("\n"))
        first = next((b[1] for b in self.blocks if b[0] == "para"), None)
        if not first:
            sys.exit(f"gen_man: {prog}: --help has no description")
        summary = " ".join(first)
        summary = summary.removeprefix(prog + ": ")
        summary = re.split(r"(?<=\.)\s", summary)[0].rstrip(".")
        self.summary = summary[0].lower() + summary[1:] if summary[1:2].islower() else summary

    def _read_block(self, rows):
        heading = None
        if re.fullmatch(r"\S.*:", rows[0]):
            heading, rows = rows[0][:-1], rows[1:]
        if not rows:
            return
        if not rows[0].startswith(" "):
            self.blocks.append(("para", [r.strip() for r in rows]))
            return
        indent = len(rows[0]) - len(rows[0].lstrip())
        items = []
        for r in rows:
            depth = len(r) - len(r.lstrip())
            if depth > indent and items:  # the text of the item above, continued
                items[-1][1].append(r.strip())
                continue
            term, *text = re.split(r"\s{2,}", r.strip(), maxsplit=1)
            items.append((term, text))
        self.blocks.append(("items", heading, items))

    def render(self, blocks=None, untitled=None):
        """The blocks as roff; a heading becomes a subsection, but `untitled`."""
        out = []
        for b in self.blocks if blocks is None else blocks:
            if b[0] == "para":
                out += [".PP", *(line(inline_md(x)) for x in b[1])]
                continue
            _, heading, items = b
            if heading and heading != untitled:
                out.append(f'.SS "{esc(heading[0].upper() + heading[1:])}"')
            if all(not text for _, text in items):  # examples: commands without text
                out += literal(term for term, _ in items)
            else:
                for term, text in items:
                    out += tagged(esc(term), [inline_md(t) for t in text])
        return out

    def option_blocks(self):
        """Lists headed "options" or "arguments", or whose every term is an option (tnbc-sim's
        "platform:", "call:"...)."""
        return [b for b in self.blocks if b[0] == "items" and b[1] and
                (re.search(r"options|arguments", b[1]) or all(t.startswith("-") for t, _ in b[2]))]

    def other_blocks(self):
        return [b for b in self.blocks if b not in self.option_blocks()]


def run_help(cmd, prog):
    env = dict(os.environ, COLUMNS="80")  # argparse wraps to the terminal; the page must not vary
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, env=env, timeout=60)
    if r.returncode != 0:
        sys.exit(f"gen_man: {' '.join(cmd)} --help exited {r.returncode}: {r.stderr}")
    return Help(r.stdout, prog)


# ---- pages -----------------------------------------------------------------------------------

class Page:
    def __init__(self, name, section, version, summary):
        self.name, self.section = name, section
        self.lines = [f'.\\" Generated by tools/gen_man.py; edit the sources it names, not this file.',
                      f'.TH {name.upper()} {section} "" "tnbc {version}" "tnbc"',
                      ".SH NAME", f"{esc(name)} \\- {inline_md(summary)}"]

    def section_(self, title, body):
        if body:
            self.lines += [f'.SH "{title}"', *body]

    def write(self, outdir):
        with open(os.path.join(outdir, f"{self.name}.{self.section}"), "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines) + "\n")


def see_also(own, args):
    pages = [p for p in ("tnbc(7)", "tnbc-order(1)", "tnbc-stats(1)", "tnbc-cluster(1)", "tnbc-sim(1)") if p != own]
    return [".BR " + ",\n.BR ".join(p.replace("(", " (") for p in pages),
            ".PP", f"The project's documentation: {esc(args.docdir)}."]


ENVIRONMENT_TOOL = ("The \\fBTNBC_*\\fR settings of the libraries are listed in "
                    "\\fBtnbc\\fR(7) and by \\fBtnbc\\-order config\\fR.")


def tool_page(prog, help_, args, extra=()):
    page = Page(prog, 1, args.version, help_.summary)
    page.section_("SYNOPSIS", literal(help_.usage))
    page.section_("DESCRIPTION", help_.render(help_.other_blocks()))
    page.lines += list(extra)
    options = help_.option_blocks()
    # A lone "options:" needs no subsection of its own under OPTIONS.
    page.section_("OPTIONS", help_.render(options, untitled="options" if len(options) == 1 else None))
    page.section_("ENVIRONMENT", [ENVIRONMENT_TOOL])
    page.section_("SEE ALSO", see_also(f"{prog}(1)", args))
    return page


def order_page(args):
    top = run_help([args.order], "tnbc-order")
    commands = [b[2] for b in top.blocks if b[0] == "items" and b[1] == "commands"]
    if not commands:
        sys.exit("gen_man: tnbc-order --help lists no commands")
    subs = [term.split()[0] for term, _ in commands[0]]
    helps = {c: run_help([args.order, c], "tnbc-order") for c in subs}
    body = []
    for c in subs:
        body += [f'.SS "{esc(c)}"', *helps[c].render()]
    page = tool_page("tnbc-order", top, args, extra=['.SH "COMMANDS"', *body])
    synopsis = literal(top.usage + [u for c in subs for u in helps[c].usage])
    page.lines[page.lines.index('.SH "SYNOPSIS"') + 1:page.lines.index('.SH "DESCRIPTION"')] = synopsis
    return page


# ---- tnbc(7) from Markdown -------------------------------------------------------------------

def md_sections(text):
    """{heading: body lines} of the '## ' sections; the part before the first one under ''."""
    out, name = {"": []}, ""
    for row in text.split("\n"):
        if row.startswith("## "):
            name = row[3:].strip()
            out[name] = []
        elif not row.startswith("# "):
            out[name].append(row)
    return out


def md_to_roff(rows):
    """The Markdown the project's docs use: paragraphs, '- ' lists, fenced code, tables (a row
    becomes an item: the first cell its tag, the middle cells 'header: value', the last its
    text) and HTML comments (dropped)."""
    out, para, i = [], [], 0

    def flush():
        if para:
            out.extend([".PP", *(line(inline_md(x)) for x in para)])
            para.clear()

    while i < len(rows):
        row = rows[i]
        if row.startswith("```"):
            flush()
            j = rows.index("```", i + 1)
            out += literal(rows[i + 1:j])
            i = j + 1
            continue
        if row.startswith("|"):
            flush()
            table = []
            while i < len(rows) and rows[i].startswith("|"):
                table.append([c.strip() for c in rows[i].strip().strip("|").split(" | ")])
                i += 1
            header, body = table[0], table[2:]
            out.append(".PP")  # back to the page's indent after a list
            for cells in body:
                middle = "; ".join(f"{h}: {c}" for h, c in zip(header[1:-1], cells[1:-1]))
                text = ([inline_md(middle) + "."] if middle else []) + [inline_md(cells[-1])]
                out += tagged(inline_md(cells[0]).replace("\\fB", "").replace("\\fR", ""), text)
            continue
        if row.startswith("<!--"):
            i += 1
            continue
        if row.startswith("- "):
            flush()
            out += [".IP \\(bu 2", line(inline_md(row[2:]))]
            i += 1
            while i < len(rows) and rows[i].startswith("  ") and rows[i].strip():
                out.append(line(inline_md(rows[i].strip())))
                i += 1
            continue
        if not row.strip():
            flush()
        else:
            para.append(row.strip())
        i += 1
    flush()
    return out


def overview_page(args):
    readme = open(args.readme, encoding="utf-8").read()
    title = readme.split("\n", 1)[0]
    readme_parts = md_sections(readme)
    config = open(args.config_doc, encoding="utf-8").read()
    table = subprocess.run([args.order, "config", "--markdown"], capture_output=True, text=True,
                           check=True, timeout=60).stdout
    # The table the program prints, not the doc's copy (a test keeps them equal anyway).
    begin = config.index("-->\n", config.index("<!-- BEGIN SETTINGS")) + 4
    config = config[:begin] + table + config[config.index("<!-- END SETTINGS -->"):]
    config_parts = md_sections(config)

    page = Page("tnbc", 7, args.version, title.split(" — ", 1)[1])
    page.section_("DESCRIPTION", md_to_roff(readme_parts[""]))
    # Installed first (docs/install.md, "Preloading"), then from a build tree (README.md).
    installed = md_sections(open(args.install_doc, encoding="utf-8").read())["Preloading"]
    page.section_("USAGE", md_to_roff(["Installed (docs/install.md):", ""] + installed +
                                      ["", "From a build tree (README.md, \"Using it\"):", ""] +
                                      readme_parts["Using it"]))
    page.section_("FILES", [
        *tagged(esc(args.lib), ["replay mode: returns early from the collectives (LD_PRELOAD)"]),
        *tagged(esc(args.trace_lib), ["trace mode: records first touches into trace files (LD_PRELOAD)"]),
        *tagged(esc(args.modulefiles), ["environment module: \\fBmodule use\\fR this folder, then "
                                        "\\fBmodule load tnbc\\fR"]),
        *tagged(esc(args.docdir), ["the project's documentation (Markdown)"])])
    page.section_("ENVIRONMENT", md_to_roff(config_parts[""]))
    for name, body in config_parts.items():
        if name:
            page.section_(re.sub(r"\s*\(.*\)$", "", name).upper(), md_to_roff(body))
    page.section_("SEE ALSO", see_also("tnbc(7)", args))
    return page


def main():
    ap = argparse.ArgumentParser(description="Writes tnbc's man pages (see the comment at the top).")
    ap.add_argument("outdir")
    for opt in ("version", "order", "stats", "cluster", "sim", "readme", "config-doc", "install-doc", "lib",
                "trace-lib", "modulefiles", "docdir"):
        ap.add_argument("--" + opt, required=True)
    args = ap.parse_args()
    pages = [order_page(args),
             tool_page("tnbc-stats", run_help([sys.executable, args.stats], "tnbc-stats"), args),
             tool_page("tnbc-cluster", run_help(["bash", args.cluster], "tnbc-cluster"), args),
             tool_page("tnbc-sim", run_help([args.sim], "tnbc-sim"), args),
             overview_page(args)]
    for p in pages:
        p.write(args.outdir)


if __name__ == "__main__":
    main()
