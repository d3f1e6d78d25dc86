#!/usr/bin/env python3
"""Every MPI function MPICH declares is wrapped: checked against the generator's own reading of
mpi.h and, independently, against the symbols libmpich.so really exports (in an Open MPI build:
Open MPI's mpi.h and libmpi.so).  Every C library function
that moves bytes for the caller or changes its memory is in shim/libc_functions.tsv: checked
against the symbols the system's libc exports, so a new C library cannot add a hole silently."""

import os
import re
import subprocess
import sys

from tnbc_testlib import BUILD, LIBS, MPI, SOURCE, Suite, expect

# A public libc function whose name has one of these words (between underscores or digits) moves
# bytes between the caller's memory and the kernel, or changes the caller's memory.  Each must be
# a row of shim/libc_functions.tsv: interposed, or reviewed with the reason it needs nothing.
WORDS = ("read|write|pread|pwrite|readv|writev|preadv|pwritev|recv|send|recvfrom|sendto|recvmsg|sendmsg|"
         "recvmmsg|sendmmsg|fread|fwrite|fputs|puts|splice|vmsplice|tee|process|getrandom|getentropy|"
         "getdents|getdents64|readlink|readlinkat|copy|sendfile|sendfile64|aio|lio|msgrcv|msgsnd|mq|"
         "mmap|mmap64|munmap|mremap|mprotect|pkey|madvise|mlock|mlock2|munlock|mlockall|munlockall|"
         "msync|remap|shmat|shmdt|brk|sbrk|free|realloc|reallocarray|syscall|fork|vfork|io|uring|res|"
         "sigaction|signal|sigset")
SUSPECT = re.compile(rf"(^|[_0-9])({WORDS})([_0-9]|v?2?$|$)")
def libc_path():
    out = subprocess.run(["gcc", "-print-file-name=libc.so.6"], capture_output=True, text=True, check=True)
    return os.path.realpath(out.stdout.strip())


def libc_public_functions():
    """The functions a program built today can link: default-version symbols, not GLIBC_PRIVATE."""
    out = subprocess.run(["nm", "-D", "--defined-only", libc_path()], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in ("T", "W", "i") or "@@" not in parts[2]:
            continue
        name, version = parts[2].split("@@", 1)
        if version != "GLIBC_PRIVATE":
            names.add(name)
    return names


def libc_table():
    out = subprocess.run([sys.executable, os.path.join(SOURCE, "shim", "gen_interposers.py"), "--table",
                          os.path.join(SOURCE, "shim", "libc_functions.tsv"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines())


def defined_symbols(lib, prefixes=("MPI_", "MPIX_")):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.split()[-1].startswith(prefixes) and line.split()[-2] in ("T", "W", "i")}


# pkg-config package, library and the least number of functions each MPI declares and exports.
PKG, LIB, AT_LEAST = {"mpich": ("mpich", "libmpich.so", 600), "openmpi": ("ompi-c", "libmpi.so", 400)}[MPI]
# Open MPI's libmpi.so also exports what its mpi.h does not declare as a C function: the
# predefined callbacks and Fortran helpers in capitals (MPI_COMM_DUP_FN, MPI_WTIME_F90), the
# MPIX_* extensions of mpi-ext.h (persistent collectives, CUDA query), and the MPI-1 functions
# removed in MPI-3 (MPI_Address ...), which mpi.h turns into compile errors (macros, skipped).
# The PMPI_ functions the libraries define under MPICH, for `use mpi_f08` programs (shim/entry_points.cpp).
F08_PMPI = {"PMPI_Init", "PMPI_Init_thread", "PMPI_Finalize", "PMPI_Query_thread"}
OPENMPI_NOT_IN_MPI_H = re.compile(r"^(MPI_[A-Z0-9_]+|MPIX_\w+)$")


def libmpich_path():
    out = subprocess.run(["pkg-config", "--variable=libdir", PKG], capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), LIB)


def generator_listing(mpi_h):
    out = subprocess.run([sys.executable, os.path.join(SOURCE, "shim", "gen_wrappers.py"), "--mpi", MPI, "--mpi-h", mpi_h,
                          "--table", os.path.join(SOURCE, "shim", "mpi_functions.tsv"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(None, 1) for line in out.splitlines())


def main():
    s = Suite("coverage")
    inc = subprocess.run(["pkg-config", "--variable=includedir", PKG], capture_output=True, text=True,
                         check=True).stdout.strip()
    listing = generator_listing(os.path.join(inc, "mpi.h"))
    mpich = defined_symbols(libmpich_path())
    if MPI == "openmpi":
        mpich = {n for n in mpich if not OPENMPI_NOT_IN_MPI_H.match(n)
                 and not listing.get(n, "").startswith("skip (macro)")}
    table = libc_table()
    interposed = {n for n, kind in table.items() if kind != "none"}
    libc = libc_public_functions()

    def plausible():
        expect(len(listing) > AT_LEAST, f"the generator found only {len(listing)} functions in mpi.h")
        expect(len(mpich) > AT_LEAST, f"{LIB} exports only {len(mpich)} MPI functions")
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
            other = sorted(n for n in names if not n.startswith(("MPI_", "MPIX_")) and n not in interposed
                           and n not in F08_PMPI)
            expect(not other, f"non-MPI symbols exported: {other[:10]}")
            if MPI == "mpich":  # MPICH's mpi_f08 bindings call these four themselves (shim/entry_points.cpp)
                expect(F08_PMPI <= names, f"missing: {sorted(F08_PMPI - names)}")
            missing = sorted(interposed - names)
            expect(not missing, f"interposed functions not exported: {missing}")
        s.check(f"{lib_name}: exports nothing but MPI functions and the table's C library functions",
                only_mpi_exported)

    def libc_is_read():
        expect(len(libc) > 1500, f"only {len(libc)} public functions found in {libc_path()}")
        expect(len(table) > 100, f"only {len(table)} rows in shim/libc_functions.tsv")
    s.check("the system's libc and the interposer table are read", libc_is_read)

    def every_suspect_reviewed():
        suspects = sorted(n for n in libc if SUSPECT.search(n))
        expect(len(suspects) > 80, f"the pattern found only {len(suspects)} functions: is it still right?")
        missing = [n for n in suspects if n not in table]
        expect(not missing, "libc functions that may take a buffer or change memory, not in "
                            f"shim/libc_functions.tsv (interpose them or review them as 'none'): {missing}")
    s.check("every libc function that may move bytes or change memory is in the table", every_suspect_reviewed)

    def interposed_exist():
        gone = sorted(interposed - libc)
        expect(not gone, f"interposed, but not a public function of this libc (dlsym would fail): {gone}")
    s.check("every interposed function is a public libc function", interposed_exist)

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
