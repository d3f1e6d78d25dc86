#!/usr/bin/env python3
"""`meson install` of the build tree into a temporary folder: the man pages are there and groff
renders them without a warning, tnbc(7) lists every setting `tnbc-order config --markdown` knows,
tnbc-order(1) every command tnbc-order runs and each page every option its tool's --help names,
and the environment module points PATH, MANPATH and the libraries at files the install wrote."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from tnbc_testlib import BUILD, MPI, SOURCE, Suite, expect

ORDER = os.path.join(BUILD, "tools", "tnbc-order")


def meson_info(name):
    with open(os.path.join(BUILD, "meson-info", f"intro-{name}.json"), encoding="utf-8") as f:
        return json.load(f)


def settings():
    """The names of the settings table, as the program prints it (shim/config.cpp)."""
    out = subprocess.run([ORDER, "config", "--markdown"], capture_output=True, text=True, check=True).stdout
    names = re.findall(r"^\| `(TNBC_\w+)` \|", out, re.M)
    expect(len(names) > 10, f"settings table not read: {out[:200]}")
    return names


def order_commands():
    """The commands tnbc-order's main() dispatches, read from its source: one added there but
    left out of --help (which the page is made from) is caught."""
    with open(os.path.join(SOURCE, "tools", "tnbc_order.cpp"), encoding="utf-8") as f:
        commands = re.findall(r'if \(cmd == "(\w+)"\) return', f.read())
    expect(len(commands) >= 5, f"commands not read from tnbc_order.cpp: {commands}")
    return commands


def section(page, title):
    """The roff lines of one .SH section."""
    m = re.search(rf'^\.SH "?{title}"?\n(.*?)(?=^\.SH |\Z)', page, re.M | re.S)
    expect(m, f"no section {title}")
    return m.group(1)


def missing_settings(page, names):
    """The settings that are not an item (a .TP tag) of the page's ENVIRONMENT section."""
    env = section(page, "ENVIRONMENT")
    return [n for n in names if not re.search(rf"^\.TP\n\\fB{n}\\fR$", env, re.M)]


def roff(text):
    """How a literal text (an option) is spelled in the pages' roff (tools/gen_man.py's esc)."""
    return re.sub(r"(?<![A-Za-z0-9])-", r"\\-", text)


def main():
    s = Suite("install")
    opts = {o["name"]: o["value"] for o in meson_info("buildoptions")}
    version = meson_info("projectinfo")["version"]
    prefix = opts["prefix"]
    dest = tempfile.mkdtemp(prefix="tnbc_install_")

    def inst(*parts):
        """A path under the install prefix, as it is inside the temporary folder."""
        return os.path.join(dest + os.path.join(prefix, *parts))

    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild", "--quiet"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print(f"FAIL meson install exited {r.returncode}: {r.stdout}{r.stderr}")
        sys.exit(1)
    pages = {name: inst(opts["mandir"], f"man{name[-1]}", name)
             for name in ("tnbc-order.1", "tnbc-stats.1", "tnbc-cluster.1", "tnbc-sim.1", "tnbc.7")}
    text = {}

    def installed():
        for name, path in pages.items():
            expect(os.path.isfile(path), f"{name} not installed at {path}")
            with open(path, encoding="utf-8") as f:
                text[name] = f.read()
    s.check("man pages installed under mandir (man1, man7)", installed)

    def render():
        for name, path in pages.items():
            g = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True)
            expect(g.returncode == 0 and not g.stderr, f"{name}: groff: {g.stderr}")
            m = subprocess.run(["man", "-l", path], capture_output=True, text=True,
                               env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
            expect(m.returncode == 0 and not m.stderr and "SEE ALSO" in m.stdout, f"{name}: man -l: {m}")
            for sh in ("NAME", "DESCRIPTION", "ENVIRONMENT", "SEE ALSO") + ("SYNOPSIS", "OPTIONS") * (name[-1] == "1"):
                section(text[name], sh)
    s.check("groff and man -l render each page without a warning; the usual sections", render)

    def every_setting():
        names = settings()
        lost = missing_settings(text["tnbc.7"], names)
        expect(not lost, f"tnbc(7) does not list {lost}")
        # The check itself: a page that lost one setting is caught.
        cut = text["tnbc.7"].replace(f"\\fB{names[3]}\\fR", "")
        expect(missing_settings(cut, names) == [names[3]], "a page without a setting passed")
    s.check("tnbc(7) lists every setting of `tnbc-order config --markdown`", every_setting)

    def installed_usage():
        # tnbc(7)'s USAGE starts with the installed commands (the module, $LIBTNBC), before the
        # build tree's (tools/tnbc-env).
        usage = section(text["tnbc.7"], "USAGE")
        at = {w: usage.find(w) for w in ("module load tnbc", "LD_PRELOAD=$LIBTNBC_TRACE", "tools/tnbc-env")}
        expect(all(i >= 0 for i in at.values()) and at["module load tnbc"] < at["tools/tnbc-env"], f"USAGE: {at}")
    s.check("tnbc(7)'s USAGE gives the installed commands first", installed_usage)

    def every_command():
        commands = order_commands()
        page = text["tnbc-order.1"]
        body, synopsis = section(page, "COMMANDS"), section(page, "SYNOPSIS")
        for c in commands:
            expect(f'.SS "{c}"' in body, f"tnbc-order(1) has no COMMANDS entry for {c}")
            expect(roff(f"tnbc-order {c}") in synopsis, f"tnbc-order(1)'s synopsis lacks {c}")
    s.check("tnbc-order(1) describes every command tnbc-order runs", every_command)

    def every_option():
        helps = {"tnbc-stats.1": [[sys.executable, os.path.join(SOURCE, "tools", "tnbc-stats")]],
                 "tnbc-cluster.1": [["bash", os.path.join(BUILD, "tools", "tnbc-cluster")]],
                 "tnbc-sim.1": [[os.path.join(BUILD, "tools", "tnbc-sim")]],
                 "tnbc-order.1": [[ORDER]] + [[ORDER, c] for c in order_commands()]}
        for name, cmds in helps.items():
            for cmd in cmds:
                out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, check=True).stdout
                for opt in set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", out)):
                    expect(roff(opt) in text[name], f"{name} lacks {opt} of `{' '.join(cmd[-1:])} --help`")
    s.check("each tool's page names every option of its --help", every_option)

    # An Open MPI build installs its module as tnbc-openmpi/<version>, beside MPICH's tnbc/<version>,
    # and names its libraries libtnbc-openmpi.so and libtnbc_trace-openmpi.so.
    suffix = "" if MPI == "mpich" else "-" + MPI
    modulefiles = inst(opts["datadir"], "tnbc", "modulefiles")
    module = os.path.join(modulefiles, "tnbc" + suffix, version)

    def modulefile():
        expect(os.path.isfile(module), f"no module file at {module}")
        with open(module, encoding="utf-8") as f:
            mod = f.read()
        expect(mod.startswith("#%Module"), "the module file lacks its #%Module line")
        paths = dict(re.findall(r"^prepend-path (\w+) +(\S+)$", mod, re.M))
        expect(paths.get("PATH") == os.path.join(prefix, opts["bindir"]), f"PATH: {paths}")
        expect(paths.get("MANPATH") == os.path.join(prefix, opts["mandir"]), f"MANPATH: {paths}")
        for tool in ("tnbc-order", "tnbc-sim"):
            expect(os.access(dest + os.path.join(paths["PATH"], tool), os.X_OK), f"PATH has no {tool}")
        expect(os.path.isfile(dest + os.path.join(paths["MANPATH"], "man7", "tnbc.7")), "MANPATH has no tnbc.7")
        libs = dict(re.findall(r"^setenv (\w+) +(\S+)$", mod, re.M))
        expect(os.path.basename(libs.get("LIBTNBC", "")) == f"libtnbc{suffix}.so", f"LIBTNBC: {libs}")
        expect(os.path.basename(libs.get("LIBTNBC_TRACE", "")) == f"libtnbc_trace{suffix}.so", f"LIBTNBC_TRACE: {libs}")
        for var, path in libs.items():
            # Every TNBC_* variable a rank sees is read as a setting (and reported if unknown).
            expect(not var.startswith("TNBC_"), f"{var}: the libraries would report it as an unknown setting")
            expect(path.startswith(prefix) and os.path.isfile(dest + path), f"{var}={path} was not installed")
    s.check("the module file sets PATH, MANPATH and the libraries to installed files", modulefile)

    inits = [i for i in ("/usr/share/modules/init/bash", "/usr/share/lmod/lmod/init/bash") if os.path.exists(i)]

    def module_round_trip():
        # Under the machine's module system: `module load tnbc` (tnbc-openmpi for an Open MPI
        # build) names this build's libraries and keeps man's own search path behind ours;
        # `module unload` gives back the environment exactly, MANPATH unset or set.
        name = "tnbc" + suffix
        for manpath in ("unset MANPATH", "export MANPATH=/usr/share/man"):
            # A PATH without the prefix's bin (/usr/local/bin by default): a module system may
            # move or drop a path element that was there before, which is its business, not ours.
            script = (f"export PATH=/usr/sbin:/usr/bin:/sbin:/bin; {manpath}; source {inits[0]} >/dev/null 2>&1; module use {modulefiles}; env -0 > before; "
                      f"module load {name} || exit 3; echo \"loaded=$LIBTNBC|$MANPATH\"; "
                      f"module unload {name}; env -0 > after")
            tmp = tempfile.mkdtemp(prefix="tnbc_module_")
            r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp, timeout=60)
            expect(r.returncode == 0, f"{manpath}: {r.stderr}")
            lib, path = r.stdout.strip().split("loaded=", 1)[1].split("|", 1)
            expect(os.path.basename(lib) == f"libtnbc{suffix}.so", f"{manpath}: module load {name} set LIBTNBC={lib}")
            parts = path.split(":")
            expect(parts[0] == os.path.join(prefix, opts["mandir"]) and "" in parts,
                   f"{manpath}: MANPATH={path!r}: ours first, and an empty element (man's own path)")

            def env(f):
                with open(os.path.join(tmp, f), encoding="utf-8", errors="replace") as fh:
                    pairs = [e.split("=", 1) for e in fh.read().split("\0") if "=" in e]
                # The module systems' own bookkeeping is theirs to keep.
                own = ("LOADEDMODULES", "_LMFILES_", "__MODULES_", "_ModuleTable", "__LMOD", "LMOD_", "_", "SHLVL", "PWD")
                return {k: v for k, v in pairs if not k.startswith(own)}
            before, after = env("before"), env("after")
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            expect(not changed, f"{manpath}: module unload left {[(k, before.get(k), after.get(k)) for k in changed]}")
    if inits:
        s.check("module load/unload under the machine's module system: this build's libraries, environment restored",
                module_round_trip)

    shutil.rmtree(dest, ignore_errors=True)
    s.finish()


if __name__ == "__main__":
    main()
