#!/usr/bin/env python3
"""shim/gen_wrappers.py: the classes it emits, and the table errors it refuses."""

import os
import subprocess
import sys
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

GEN = os.path.join(SOURCE, "shim", "gen_wrappers.py")


def mpi_h():
    inc = subprocess.run(["pkg-config", "--variable=includedir", "mpich"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return os.path.join(inc, "mpi.h")


def gen(table_text, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as t:
        t.write(table_text)
    return subprocess.run([sys.executable, GEN, "--mpi-h", mpi_h(), "--table", t.name, *extra],
                          capture_output=True, text=True, timeout=60)


def main():
    s = Suite("gen-wrappers")

    def emitted_shapes():
        d = tempfile.mkdtemp()
        cpp, hpp = os.path.join(d, "w.cpp"), os.path.join(d, "w.hpp")
        r = gen("MPI_Comm_rank local\nMPI_Comm_create_keyval local\nMPI_Get_address local\nMPI_Wtime local\n"
                "MPI_Bcast custom\n"
                "MPI_Status_f2f08 skip not exported\n", "--out-cpp", cpp, "--out-hpp", hpp)
        expect(r.returncode == 0, r.stderr)
        code = open(cpp).read()

        def body(sig):
            b = code[code.index(sig):]
            return b[:b.index("\n}\n")]
        # Each exported MPI_x is a trampoline to its wrapper (to PMPI_x under the other MPI).
        expect("TNBC_TRAMPOLINE(MPI_Comm_rank)\nint TNBC_WRAPPER(MPI_Comm_rank)(" in code, "no trampoline")
        rank = body("int TNBC_WRAPPER(MPI_Comm_rank)(")
        expect("FenceScope" not in rank and "return PMPI_Comm_rank(comm, rank);" in rank, rank)
        # A local function releases its data pointers (not its function pointers) first; one
        # without pointers forwards at once.
        expect("tnbc::shim::release_pointer_arguments({rank});" in rank, rank)
        # Pointers MPI never dereferences are left out (the callbacks' state, the address
        # MPI_Get_address computes): releasing them would wait for nothing.
        keyval = body("int TNBC_WRAPPER(MPI_Comm_create_keyval)(")
        expect("release_pointer_arguments({comm_keyval});" in keyval, keyval)
        address = body("int TNBC_WRAPPER(MPI_Get_address)(")
        expect("release_pointer_arguments({address});" in address, address)
        wtime = body("double TNBC_WRAPPER(MPI_Wtime)(")
        expect("release_pointer_arguments" not in wtime and "return PMPI_Wtime();" in wtime, wtime)
        send = body("int TNBC_WRAPPER(MPI_Send)(")
        expect("tnbc::shim::FenceScope scope;" in send and "return PMPI_Send(" in send, send)
        expect("return tnbc::shim::custom::MPI_Bcast(buffer, count, datatype, root, comm);" in code, "custom")
        expect("MPI_Status_f2f08" not in code, "a skipped function was emitted")
        expect("MPI_Info_c2f" not in code, "a macro was emitted as a function")
        expect("int MPI_Bcast(void *buffer" in open(hpp).read(), "custom handler not declared")
        expect("double TNBC_WRAPPER(MPI_Wtime)(void)" in code and "TNBC_WRAPPER(MPI_Pcontrol)(const int level, ...)" in code,
               "void and variadic signatures")
    s.check("local, fence, custom and skip wrappers have their shapes", emitted_shapes)

    def refuses_bad_tables():
        for text, msg in (("MPI_Not_a_function local\n", "the table names functions mpi.h does not declare"),
                          ("MPI_Send sometimes\n", "expected '<MPI_name> <local|fence|custom|skip> [reason]'"),
                          ("MPI_Send local\nMPI_Send fence\n", "MPI_Send is listed twice"),
                          ("MPI_Send skip\n", "a 'skip' entry needs a reason")):
            r = gen(text, "--list")
            expect(r.returncode != 0 and msg in r.stderr, f"{text!r}: {r.returncode} {r.stderr!r}")
    s.check("bad tables are refused with a message", refuses_bad_tables)
    s.finish()


if __name__ == "__main__":
    main()
