#!/usr/bin/env python3
"""Generate one thin PMPI wrapper per MPI function that MPICH's or Open MPI's mpi.h declares.

Usage:
  gen_wrappers.py [--mpi openmpi] --mpi-h PATH --table shim/mpi_functions.tsv --out-cpp F --out-hpp F
  gen_wrappers.py [--mpi openmpi] --mpi-h PATH --table shim/mpi_functions.tsv --list

Every function declared in mpi.h (and the headers it includes from its own
folder, except the C++ bindings) gets a wrapper of the class the table gives it:

  local   never blocks: forwards straight to PMPI_<name>; one that takes data
          pointers first completes the collectives whose receive pages hold them
          (tnbc::shim::release_pointer_arguments; a fast path while none is in flight).
  fence   may block or touch user memory: completes in-flight collectives first
          (tnbc::shim::FenceScope), then forwards.  The default for every
          function the table does not name, so a new MPI function is safe.
  custom  forwards to a hand-written handler tnbc::shim::custom::<name>() in shim/.

Besides, whatever the class: a function that creates a request naming the program's memory
records it, and the waits, tests and MPI_Request_free forget the ones they complete
(shim/requests.hpp: a collective on pages a pending request holds receives in place).
  skip    declared but not wrapped; the table says why (e.g. not exported by
          libmpich).  Functions that mpi.h also #defines as macros are skipped
          automatically: a program can never call them as functions.

Standard library only: meson runs it at build time.
"""

import argparse
import os
import re
import sys

CLASSES = ("local", "fence", "custom", "skip")
NAME_RE = re.compile(r"^P?MPIX?_\w+$")


class Function:
    def __init__(self, ret, name, params, variadic):
        self.ret = ret          # return type text, e.g. "int"
        self.name = name        # MPI_Send
        self.params = params    # list of (declaration text, parameter name)
        self.variadic = variadic

    def signature(self):
        decls = [d for d, _ in self.params]
        if self.variadic:
            decls.append("...")
        return f"{self.ret} {self.name}({', '.join(decls) if decls else 'void'})"

    def call_args(self):
        return ", ".join(n for _, n in self.params)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def read_headers(mpi_h):
    """Return the text of mpi.h followed by the local headers it includes."""
    folder = os.path.dirname(os.path.abspath(mpi_h))
    seen, texts = set(), []

    def visit(path):
        real = os.path.realpath(path)
        if real in seen:
            return
        seen.add(real)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        texts.append(text)
        for inc in re.findall(r'^\s*#\s*include\s*[<"]([^">]+)[">]', text, flags=re.M):
            candidate = os.path.join(folder, inc)
            # mpicxx.h holds the C++ class bindings, not MPI_ functions.
            if os.path.basename(inc) != "mpicxx.h" and os.path.isfile(candidate):
                visit(candidate)

    visit(mpi_h)
    return [strip_comments(t) for t in texts]


def split_params(text):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_param(decl, fname):
    decl = " ".join(decl.split())
    m = re.search(r"(\w+)\s*(\[[^\]]*\]\s*)*$", decl)
    if not m or m.group(1) in ("int", "void", "char", "double", "MPI_Aint"):
        raise SystemExit(f"gen_wrappers: cannot find the parameter name in '{decl}' of {fname}")
    return decl, m.group(1)


# A declaration: MPICH's "int MPI_x(...) MPICH_ATTR...;" and Open MPI's
# "OMPI_DECLSPEC int MPI_x(...) __mpi_interface_deprecated__("...");".
DECL_RE = re.compile(
    r"(?:^|;|\})\s*(?:OMPI_DECLSPEC\s+)?((?:const\s+)?[A-Za-z_]\w*(?:\s*\*)*)\s+(MPIX?_\w+)\s*\(([^;{}]*?)\)\s*"
    r"((?:MPICH_\w+\s*(?:\([^()]*\))?\s*|ROMIO_API_PUBLIC\s*"
    r"|__mpi_interface_deprecated__\s*\(\s*\"(?:[^\"\\]|\\.)*\"\s*\)\s*"
    r"|__mpi_interface_removed__\s*\([^()]*\)\s*)*);",
    re.M,
)


def parse_functions(texts):
    macros = set()
    for t in texts:
        macros.update(re.findall(r"^\s*#\s*define\s+(P?MPIX?_\w+)", t, flags=re.M))
    funcs, seen = {}, set()
    for t in texts:
        body = re.sub(r"^\s*#[^\n]*(?:\\\n[^\n]*)*", " ", t, flags=re.M)
        for m in DECL_RE.finditer(body):
            ret, name, params = " ".join(m.group(1).split()), m.group(2), m.group(3).strip()
            if ret == "typedef" or name in seen:
                continue
            seen.add(name)
            plist = [] if params in ("", "void") else split_params(params)
            variadic = bool(plist) and plist[-1] == "..."
            if variadic:
                plist = plist[:-1]
            parsed = [parse_param(p, name) for p in plist]
            funcs[name] = (Function(ret, name, parsed, variadic), name in macros)
    return funcs


def read_table(path):
    """The table as {name: class}, and the names it marks "openmpi-only": declared as functions
    by Open MPI's mpi.h, not by MPICH's (where they are macros), so an MPICH build does not find
    them."""
    table, openmpi_only = {}, set()
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            fields = line.split(None, 2)
            if len(fields) < 2 or fields[1] not in CLASSES or not NAME_RE.match(fields[0]):
                raise SystemExit(f"{path}:{lineno}: expected '<MPI_name> <{'|'.join(CLASSES)}> [reason]'")
            if fields[0] in table:
                raise SystemExit(f"{path}:{lineno}: {fields[0]} is listed twice")
            if fields[1] == "skip" and len(fields) < 3:
                raise SystemExit(f"{path}:{lineno}: a 'skip' entry needs a reason")
            if len(fields) == 3 and fields[2].split()[0] == "openmpi-only":
                openmpi_only.add(fields[0])
            table[fields[0]] = fields[1]
    return table, openmpi_only


def classify(funcs, table, openmpi_only=frozenset(), mpi="mpich"):
    # The table is written against MPICH's mpi.h, which declares all but a few (marked
    # "openmpi-only") of what Open MPI 4.1's does and much more (MPIX_*, the large-count _c
    # variants): under Open MPI the names its mpi.h does not declare are left out; under MPICH a
    # name mpi.h does not declare is a mistake in the table.
    unknown = sorted(set(table) - set(funcs) - set(openmpi_only))
    if unknown and mpi == "mpich":
        raise SystemExit("gen_wrappers: the table names functions mpi.h does not declare: " + ", ".join(unknown))
    result = []
    for name in sorted(funcs):
        func, is_macro = funcs[name]
        cls = "skip" if is_macro else table.get(name, "fence")
        result.append((func, cls, is_macro))
    return result


# Pointers MPI keeps or hands back but never reads or writes through: the caller's state for its
# callbacks, an attribute's value, the address MPI_Get_address computes.  Releasing them would
# only wait for a collective for nothing (MPI_Get_address(recvbuf) right after an early return).
NOT_DEREFERENCED_PARAMS = {"extra_state", "user_data"}
NOT_DEREFERENCED = {("MPI_Get_address", "location"), ("MPI_Address", "location"),
                    ("MPI_Comm_set_attr", "attribute_val"), ("MPI_Type_set_attr", "attribute_val"),
                    ("MPI_Win_set_attr", "attribute_val"), ("MPI_Attr_put", "attribute_val")}


def pointer_args(func):
    """The data pointers a function takes (arrays and pointers, not pointers to functions nor the
    ones MPI never dereferences), as arguments of fence.hpp's release_pointer_arguments: MPI may
    read or write memory there."""
    return [name for decl, name in func.params
            if ("*" in decl or "[" in decl) and "function" not in decl
            and name not in NOT_DEREFERENCED_PARAMS and (func.name, name) not in NOT_DEREFERENCED]


# The functions that complete or free requests: a recorded request whose handle they replace by
# MPI_REQUEST_NULL is forgotten (shim/requests.hpp).
COMPLETING = {"MPI_Wait", "MPI_Test", "MPI_Request_free", "MPI_Waitall", "MPI_Testall", "MPI_Waitany",
              "MPI_Testany", "MPI_Waitsome", "MPI_Testsome"}
# The functions that start persistent requests: (handles, count).
STARTING = {"MPI_Start": ("request", "1"), "MPI_Startall": ("array_of_requests", "count")}
# Functions that take a request handle to act on, not to create.
REQUEST_USERS = COMPLETING | {"MPI_Start", "MPI_Startall", "MPI_Cancel", "MPI_Request_get_status",
                              "MPI_Pready", "MPI_Pready_range", "MPI_Pready_list", "MPI_Parrived"}


def request_completion(func):
    """For a function of COMPLETING: (handles, count) as C expressions, else None."""
    if func.name not in COMPLETING:
        return None
    names = [n for _, n in func.params]
    handles = next(n for d, n in func.params if "MPI_Request" in d and ("*" in d or "[" in d))
    count = next((n for n in ("count", "incount") if n in names), "1")
    return handles, count


def request_creation(func):
    """For a function that creates `*request` naming the program's memory: the arguments of
    requests::created (buf, count, datatype: the bytes are known) or [] (created_anywhere);
    None for any other function."""
    if func.name in REQUEST_USERS or not func.params:
        return None
    decl, name = func.params[-1]
    if name != "request" or "Request" not in decl or "*" not in decl:  # MPIO_Request too
        return None
    memory = [n for n in pointer_args(func) if n not in ("request", "status", "flag")]
    if not memory:
        return None  # MPI_Ibarrier, MPI_Grequest_start: no memory of the program's
    names = [n for _, n in func.params]
    dtype = next((n for n in ("datatype", "type") if n in names), None)
    if "buf" in names and "count" in names and dtype and "partitions" not in names:
        return ["buf", "count", dtype]
    return []


def emit_cpp(entries):
    out = [
        "// Generated by shim/gen_wrappers.py from the MPI's mpi.h and shim/mpi_functions.tsv.",
        "// Do not edit: change the table or the generator.",
        "#include <mpi.h>",
        '#include "custom.hpp"',
        '#include "shim/fence.hpp"',
        '#include "shim/requests.hpp"',
        "",
        "// Deprecated functions (Open MPI marks MPI_Attr_get & co.) are wrapped like the others.",
        '#pragma GCC diagnostic ignored "-Wdeprecated-declarations"',
        "",
        "// Under the other MPI (runtime.cpp sets tnbc_mpi_mismatch before PMPI_Init) a wrapper must",
        "// not touch its arguments: MPICH's handles are ints, Open MPI's pointers, and a wrapper",
        "// compiled for ints would cut a pointer to 32 bits.  On x86-64 the exported MPI_x is a",
        "// trampoline that jumps to PMPI_x with every register and the stack as the caller left them",
        "// when the flag is set, else to the C++ wrapper tnbc_w_MPI_x.  Elsewhere MPI_x is the",
        "// wrapper itself.  MPI_Init and MPI_Init_thread take no handle and find out.",
        "#if defined(__x86_64__) && defined(__ELF__)",
        'extern "C" __attribute__((visibility("hidden"))) unsigned char tnbc_mpi_mismatch;',
        '#define TNBC_WRAPPER(name) __attribute__((visibility("hidden"), used)) tnbc_w_##name',
        "#define TNBC_TRAMPOLINE(name) \\",
        '  __asm__(".pushsection .text\\n\\t.globl " #name "\\n\\t.type " #name ", @function\\n\\t.p2align 4\\n" \\',
        '          #name ":\\n\\tcmpb $0, tnbc_mpi_mismatch(%rip)\\n\\tjne P" #name "@PLT\\n\\tjmp tnbc_w_" #name \\',
        '          "\\n\\t.size " #name ", .-" #name "\\n\\t.popsection");',
        "#else",
        '#define TNBC_WRAPPER(name) __attribute__((visibility("default"))) name',
        "#define TNBC_TRAMPOLINE(name)",
        "#endif",
        'extern "C" {',
    ]
    for func, cls, _ in entries:
        if cls == "skip":
            continue
        sig = func.signature()
        fwd = f"P{func.name}({func.call_args()})"
        out.append("")
        if func.name in ("MPI_Init", "MPI_Init_thread"):
            out.append(f"__attribute__((visibility(\"default\"))) {sig} {{")
        else:
            decls = [d for d, _ in func.params] + (["..."] if func.variadic else [])
            out.append(f"TNBC_TRAMPOLINE({func.name})")
            out.append(f"{func.ret} TNBC_WRAPPER({func.name})({', '.join(decls) if decls else 'void'}) {{")
        if cls in ("local", "fence"):
            if cls == "local":
                pointers = pointer_args(func)
                if pointers:
                    out.append(f"    tnbc::shim::release_pointer_arguments({{{', '.join(pointers)}}});")
            else:
                out.append("    tnbc::shim::FenceScope scope;")
            completion, creation = request_completion(func), request_creation(func)
            if completion:
                handles, count = completion
                out.append(f"    return tnbc::shim::requests::completing({handles}, {count}, [&] {{ return {fwd}; }});")
            elif creation is not None:
                kind = "tnbc::shim::requests::Kind::" + ("persistent" if "_init" in func.name else "started")
                out.append(f"    const int rc = {fwd};")
                if creation:
                    out.append(f"    tnbc::shim::requests::created(rc, {kind}, request, {', '.join(creation)});")
                else:
                    out.append(f"    tnbc::shim::requests::created_anywhere(rc, {kind}, request);")
                out.append("    return rc;")
            elif func.name in STARTING:
                handles, count = STARTING[func.name]
                out.append(f"    const int rc = {fwd};")
                out.append(f"    tnbc::shim::requests::started(rc, {handles}, {count});")
                out.append("    return rc;")
            else:
                out.append(f"    return {fwd};")
        else:
            out.append(f"    return tnbc::shim::custom::{func.name}({func.call_args()});")
        out.append("}")
    out.append("")
    out.append('}  // extern "C"')
    return "\n".join(out) + "\n"


def emit_hpp(entries):
    out = [
        "// Generated by shim/gen_wrappers.py: the hand-written handlers shim/ must define.",
        "#pragma once",
        "#include <mpi.h>",
        "",
        "namespace tnbc::shim::custom {",
    ]
    for func, cls, _ in entries:
        if cls == "custom":
            decls = [d for d, _ in func.params]
            out.append(f"{func.ret} {func.name}({', '.join(decls)});")
    out.append("}  // namespace tnbc::shim::custom")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpi-h", required=True, help="the MPI's mpi.h")
    ap.add_argument("--mpi", choices=("mpich", "openmpi"), default="mpich",
                    help="whose mpi.h it is (default: mpich)")
    ap.add_argument("--table", required=True, help="the classification table (shim/mpi_functions.tsv)")
    ap.add_argument("--out-cpp", help="write the wrappers here")
    ap.add_argument("--out-hpp", help="write the custom handler declarations here")
    ap.add_argument("--list", action="store_true", help="print '<name> <class>' for every declared function")
    args = ap.parse_args()

    funcs = parse_functions(read_headers(args.mpi_h))
    if len(funcs) < 100:
        raise SystemExit(f"gen_wrappers: found only {len(funcs)} MPI functions in {args.mpi_h}; is it an MPI's mpi.h?")
    table, openmpi_only = read_table(args.table)
    entries = classify(funcs, table, openmpi_only, args.mpi)
    if args.list:
        for func, cls, is_macro in entries:
            print(func.name, cls + (" (macro)" if is_macro else ""))
    if args.out_cpp:
        with open(args.out_cpp, "w", encoding="utf-8") as f:
            f.write(emit_cpp(entries))
    if args.out_hpp:
        with open(args.out_hpp, "w", encoding="utf-8") as f:
            f.write(emit_hpp(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
