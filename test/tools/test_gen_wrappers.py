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

    def request_bookkeeping():
        # Requests naming memory are recorded at creation (with their bytes where buf, count and
        # datatype give them; persistent ones inactive), started, and forgotten by whatever
        # completes or frees them (shim/requests.hpp).
        d = tempfile.mkdtemp()
        cpp = os.path.join(d, "w.cpp")
        r = gen("MPI_Request_free local\n", "--out-cpp", cpp)
        expect(r.returncode == 0, r.stderr)
        code = open(cpp).read()

        def body(sig):
            b = code[code.index(sig):]
            return b[:b.index("\n}\n")]
        for sig, want in (
                ("MPI_Irecv)(", "requests::created(rc, tnbc::shim::requests::Kind::started, request, buf, count, datatype);"),
                ("MPI_Send_init)(", "requests::created(rc, tnbc::shim::requests::Kind::persistent, request, buf, count, datatype);"),
                ("MPI_Ialltoall)(", "requests::created_anywhere(rc, tnbc::shim::requests::Kind::started, request);"),
                ("MPI_Psend_init)(", "requests::created_anywhere(rc, tnbc::shim::requests::Kind::persistent, request);"),
                ("MPI_Startall)(", "requests::started(rc, array_of_requests, count);"),
                ("MPI_Waitsome)(", "requests::completing(array_of_requests, incount, [&] { return PMPI_Waitsome("),
                ("MPI_Wait)(", "requests::completing(request, 1, [&] { return PMPI_Wait(request, status); });"),
                ("MPI_Request_free)(", "requests::completing(request, 1, [&] { return PMPI_Request_free(request); });")):
            b = body("int TNBC_WRAPPER(" + sig)
            expect(want in b, f"{sig}: {b}")
        for sig in ("MPI_Ibarrier)(", "MPI_Cancel)(", "MPI_Request_get_status)(", "MPI_Grequest_start)("):
            b = body("int TNBC_WRAPPER(" + sig)
            expect("requests::" not in b, f"{sig} touches the requests: {b}")
        expect("FenceScope" not in body("int TNBC_WRAPPER(MPI_Request_free)("), "MPI_Request_free became a fence")
    s.check("requests naming memory are recorded, started and forgotten", request_bookkeeping)

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
