#!/usr/bin/env python3
"""Every MPI function MPICH declares is wrapped: checked against the generator's own reading of
mpi.h and, independently, against the symbols libmpich.so really exports."""

import os
import subprocess
import sys

from tnbc_testlib import BUILD, LIBS, SOURCE, Suite, expect

# The system calls and memory functions the libraries interpose besides MPI (shim/io_interpose.hpp
# documents why; shim/exports.map exports them).
INTERPOSED = {"read", "write", "pread", "pwrite", "pread64", "pwrite64", "readv", "writev",
              "send", "recv", "sendto", "recvfrom", "sendmsg", "recvmsg", "fread", "fwrite",
              "free", "realloc", "munmap"}


def defined_symbols(lib, prefixes=("MPI_", "MPIX_")):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.split()[-1].startswith(prefixes) and line.split()[-2] in ("T", "W", "i")}


def libmpich_path():
    out = subprocess.run(["pkg-config", "--variable=libdir", "mpich"], capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "libmpich.so")


def generator_listing(mpi_h):
    out = subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "gen_wrappers.py"), "--mpi-h", mpi_h,
                          "--table", os.path.join(SOURCE, "shim", "mpi_functions.tsv"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(None, 1) for line in out.splitlines())


def main():
    s = Suite("coverage")
    inc = subprocess.run(["pkg-config", "--variable=includedir", "mpich"], capture_output=True, text=True,
                         check=True).stdout.strip()
    listing = generator_listing(os.path.join(inc, "mpi.h"))
    mpich = defined_symbols(libmpich_path())

    def plausible():
        expect(len(listing) > 600, f"the generator found only {len(listing)} functions in mpi.h")
        expect(len(mpich) > 600, f"libmpich exports only {len(mpich)} MPI functions")
    s.check("mpi.h and libmpich are read", plausible)

    for lib_name, lib in LIBS.items():
        ours = defined_symbols(lib)

        def every_export_wrapped(ours=ours):
            missing = sorted(mpich - ours)
            expect(not missing, f"exported by libmpich but not wrapped: {missing[:20]}")
        s.check(f"{lib_name}: every MPI function libmpich exports is wrapped", every_export_wrapped)

        def every_declaration_wrapped(ours=ours):
            missing = sorted(n for n, c in listing.items() if not c.startswith("skip") and n not in ours)
            expect(not missing, f"declared in mpi.h, classified, but not exported: {missing[:20]}")
            extra = sorted(ours - set(listing))
            expect(not extra, f"exported but not declared in mpi.h: {extra[:20]}")
        s.check(f"{lib_name}: every classified declaration is exported, nothing else", every_declaration_wrapped)

        def only_mpi_exported(lib=lib):
            out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
            names = {l.split()[-1] for l in out.splitlines()}
            other = sorted(n for n in names if not n.startswith(("MPI_", "MPIX_")) and n not in INTERPOSED)
            expect(not other, f"non-MPI symbols exported: {other[:10]}")
            missing = sorted(INTERPOSED - names)
            expect(not missing, f"interposed functions not exported: {missing}")
        s.check(f"{lib_name}: exports nothing but MPI functions and the documented interposed calls",
                only_mpi_exported)

    def skips_are_justified():
        skipped = sorted(n for n, c in listing.items() if c.startswith("skip"))
        unjustified = [n for n in skipped if n in mpich]
        expect(not unjustified, f"skipped although libmpich exports them: {unjustified}")
    s.check("no function libmpich exports is skipped", skips_are_justified)

    def classes_present():
        classes = {c.split()[0] for c in listing.values()}
        expect({"local", "fence", "custom", "skip"} <= classes, f"classes seen: {classes}")
        for name in ("MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Alltoall", "MPI_Alltoallv",
                     "MPI_Bcast", "MPI_Barrier"):
            expect(listing.get(name) == "custom", f"{name} is {listing.get(name)}, not custom")
        expect(listing.get("MPI_Send") == "fence", "MPI_Send must be fenced")
        expect(listing.get("MPI_Abort") == "local", "MPI_Abort must never wait for in-flight work")
    s.check("the table classifies the key functions as designed", classes_present)
    s.finish()


if __name__ == "__main__":
    main()
