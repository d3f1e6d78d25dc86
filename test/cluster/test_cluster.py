#!/usr/bin/env python3
"""The emulated cluster (tools/tnbc-cluster): nodes come up and go away cleanly, ranks land on
distinct hosts, inter-node traffic crosses the shaped links, programs give the same bytes as on
one node, with and without the tnbc libraries, and multi-node runs finish reliably.  In an Open
MPI build the same checks run with `tnbc-cluster run --mpi openmpi`."""

import json
import os
import re
import subprocess
import sys
import tempfile

from tnbc_testlib import BUILD, MPI, Suite, cluster, cluster_run, expect, mpirun

MIXED = os.path.join(BUILD, "test", "mpi", "mixed")
NETCHECK = os.path.join(BUILD, "test", "mpi", "netcheck")
TRACE_ORDER = os.path.join(BUILD, "test", "mpi", "trace_order")
TRACE_DUMP = os.path.join(BUILD, "test", "trace", "trace_dump")
CONSECUTIVE_RUNS = int(os.environ.get("TNBCTEST_CLUSTER_RUNS", "20"))


def netns_names():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(l.split()[0] for l in out.splitlines() if l.startswith("tnbc-n"))


def tnbc_links():
    """The links of the default cluster (prefix tnbc): its bridge and its nodes' host ends.  A
    cluster under another --prefix (tnbcapps-n0-h, ...) is another user's, not this test's."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [l.split(": ")[1].split("@")[0] for l in out.splitlines() if ": " in l]
    return [n for n in names if n == "tnbcbr0" or n.startswith("tnbc-n")]


def main():
    if os.geteuid() != 0:
        print("cluster tests need root (network namespaces); skipped")
        sys.exit(77)
    s = Suite("cluster")
    cluster("down")

    def lifecycle():
        cluster("up")
        cluster("up")  # idempotent
        expect(netns_names() == ["tnbc-n0", "tnbc-n1"], f"namespaces: {netns_names()}")
        st = cluster("status").stdout
        expect("tnbc-n0" in st and "tnbc-n1" in st and "rate 200Mbit" in st, st)
        cluster("down")
        cluster("down")  # safe twice
        expect(not netns_names(), f"namespaces left: {netns_names()}")
        expect(not tnbc_links(), f"links left: {tnbc_links()}")
    s.check("up twice, down twice: idempotent, nothing left behind", lifecycle)

    def subnet_in_use():
        # A second cluster on the first one's subnet would give the host two routes to it, and its
        # jobs would wait for ranks that never start: refused, naming the link, nothing made.
        other = ("--prefix", "tnbcdup")
        try:
            cluster("up")
            res = cluster("up", check=False, cluster_opts=other)
            expect(res.returncode != 0 and "subnet 10.213.0.0/24 is already in use" in res.stderr and
                   "tnbcbr0" in res.stderr, f"a second cluster on a used subnet: exit {res.returncode}, {res.stderr}")
            out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
            expect("tnbcdup" not in out, "the refused cluster left links behind")
        finally:
            cluster("down", check=False, cluster_opts=other)
            cluster("down")
    s.check("up on a subnet another cluster's bridge has: refused, nothing left behind", subnet_in_use)

    def placement_and_shaping():
        out = cluster_run(NETCHECK, args=[2]).stdout.splitlines()
        names = dict(l.split()[1:3] for l in out if l.startswith("name "))
        expect(names == {"0": "tnbc-n0", "1": "tnbc-n0", "2": "tnbc-n1", "3": "tnbc-n1"}, f"placement: {names}")
        rate = [float(l.split()[1]) for l in out if l.startswith("rate_mbit")]
        # Shaping is an upper bound whatever the machine's load: faster than the link means the
        # traffic went around it.
        expect(rate and rate[0] <= 200 * 1.15, f"inter-node rate {rate} Mbit/s exceeds the 200 Mbit/s link")
        expect(not netns_names(), "run did not tear down the nodes it created")
    s.check("2 nodes x 2 ranks: ranks on distinct hosts, traffic limited by the shaped link",
            placement_and_shaping)

    def cyclic_placement():
        out = cluster_run(NETCHECK, args=[2], placement="cyclic").stdout.splitlines()
        names = dict(l.split()[1:3] for l in out if l.startswith("name "))
        expect(names == {"0": "tnbc-n0", "1": "tnbc-n1", "2": "tnbc-n0", "3": "tnbc-n1"}, f"placement: {names}")
    s.check("--placement cyclic: rank r on node r mod 2", cyclic_placement)

    def launcher():
        # hydra gives its ranks PMI_RANK, Open MPI's mpirun OMPI_COMM_WORLD_RANK.
        show = ["/bin/sh", "-c", "echo pmi=${PMI_RANK:+y} ompi=${OMPI_COMM_WORLD_RANK:+y}"]
        out = cluster_run(show[0], args=show[1:]).stdout.splitlines()
        want = "pmi=y ompi=" if MPI == "mpich" else "pmi= ompi=y"
        expect(out == [want] * 4, f"--mpi {MPI}: {out}")
    s.check(f"run --mpi {MPI}: the ranks are started by {MPI}'s launcher", launcher)

    def ucx_protocols():
        # UCX's older protocols stall rendezvous transfers on these links (docs/cluster.md).
        show = ["/bin/sh", "-c", "echo proto=$UCX_PROTO_ENABLE"]
        out = cluster_run(show[0], args=show[1:]).stdout.split()
        expect(out == ["proto=y"] * 4, f"default: {out}")
        out = cluster_run(show[0], args=show[1:], env={"UCX_PROTO_ENABLE": "n"}).stdout.split()
        expect(out == ["proto=n"] * 4, f"--env UCX_PROTO_ENABLE=n: {out}")
    if MPI == "mpich":
        s.check("UCX's newer protocols on by default, --env overrides", ucx_protocols)

    def rate_option():
        out = cluster_run(NETCHECK, args=[2, 4 << 20], cluster_opts=["--rate", "50mbit"]).stdout
        rate = [float(l.split()[1]) for l in out.splitlines() if l.startswith("rate_mbit")]
        expect(rate and rate[0] <= 50 * 1.15, f"rate {rate} Mbit/s exceeds --rate 50mbit")
    s.check("--rate shapes the links to the given rate", rate_option)

    def congestion_control():
        # What a connection from node 0 to node 1 runs, told by the socket itself.
        def connection_cc():
            server = subprocess.Popen(
                ["ip", "netns", "exec", "tnbc-n1", sys.executable, "-c",
                 "import socket\ns = socket.create_server(('10.213.0.11', 5719))\nprint('up', flush=True)\n"
                 "s.settimeout(20)\nc, _ = s.accept()\nc.recv(1)"],
                stdout=subprocess.PIPE, text=True)
            try:
                expect(server.stdout.readline().strip() == "up", "the listener in tnbc-n1 did not start")
                client = subprocess.run(
                    ["ip", "netns", "exec", "tnbc-n0", sys.executable, "-c",
                     "import socket\nc = socket.create_connection(('10.213.0.11', 5719), timeout=20)\n"
                     "print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\\0').decode())\n"
                     "c.send(b'x')"],
                    capture_output=True, text=True, timeout=30)
                return client.stdout.strip()
            finally:
                server.wait(timeout=30)
        host = subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                              capture_output=True, text=True).stdout.strip()
        try:
            cluster("up")
            expect(connection_cc() == "cubic", f"default: {connection_cc()} (the host runs {host})")
            expect("tcp cubic" in cluster("status").stdout, cluster("status").stdout)
            cluster("up", cluster_opts=["--congestion", "reno"])  # a running cluster: new connections
            expect(connection_cc() == "reno", f"--congestion reno: {connection_cc()}")
            cluster("up", cluster_opts=["--congestion", "host"])
            expect(connection_cc() == host, f"--congestion host: {connection_cc()}, the host runs {host}")
        finally:
            cluster("down")
    s.check("TCP congestion control: cubic whatever the host runs, --congestion as asked", congestion_control)

    def slow_start_after_idle():
        def node_values():
            return [subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_slow_start_after_idle"],
                                   capture_output=True, text=True).stdout.strip() for ns in ("tnbc-n0", "tnbc-n1")]
        try:
            cluster("up")
            expect(node_values() == ["1", "1"], f"default: {node_values()}")
            cluster("up", cluster_opts=["--slow-start-after-idle", "off"])  # a running cluster: at once
            expect(node_values() == ["0", "0"], f"--slow-start-after-idle off: {node_values()}")
            st = cluster("status").stdout
            expect(st.count("slow start after idle off") == 2, st)
            cluster("down")
            cluster("up", cluster_opts=["--slow-start-after-idle", "off"])  # new nodes
            expect(node_values() == ["0", "0"], f"new nodes with off: {node_values()}")
            cluster("up", cluster_opts=["--slow-start-after-idle", "on"])
            expect(node_values() == ["1", "1"], f"--slow-start-after-idle on: {node_values()}")
        finally:
            cluster("down")
    s.check("TCP slow start after idle: on by default, --slow-start-after-idle off in every node", slow_start_after_idle)

    def segments():
        def gso(ns, dev):  # the device's gso_max_size, in a node's namespace (ns) or the host's
            cmd = ["ip"] + (["-n", ns] if ns else []) + ["-d", "link", "show", dev]
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
            m = re.search(r" gso_max_size (\d+)", out)
            return int(m.group(1)) if m else None

        def links():
            return [gso(ns, "eth0") for ns in ("tnbc-n0", "tnbc-n1")] + [gso(None, f"tnbc-n{i}-h") for i in (0, 1)]
        try:
            cluster("up")
            expect(links() == [32000] * 4, f"default: {links()}")
            expect(cluster("status").stdout.count("segments up to 32000 B") == 2, cluster("status").stdout)
            cluster("up", cluster_opts=["--tso", "off"])  # a running cluster
            expect(links() == [65536] * 4, f"--tso off: {links()}")
            cluster("down")
            cluster("up", cluster_opts=["--tso", "off"])  # new nodes
            expect(links() == [65536] * 4, f"new nodes with off: {links()}")
            cluster("up", cluster_opts=["--tso", "on"])
            expect(links() == [32000] * 4, f"--tso on: {links()}")
        finally:
            cluster("down")
    s.check("segments: the links take 32000-byte TCP segments by default, the kernel's 64 KiB with --tso off",
            segments)

    def pinned():
        # run --pin: each node's ranks on its own share of the CPUs (CPUs 0..C-1 split by node),
        # without it on all of them.
        def allowed(*opts):
            out = cluster("run", "--ppn", 2, "--timeout", 60, "--mpi", MPI, *opts, "--", "/bin/sh", "-c",
                          "echo $(hostname) $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)").stdout
            return sorted(set(out.split("\n")) - {""})
        def cpu_list(lo, hi):  # as Cpus_allowed_list writes CPUs lo..hi
            return str(lo) if lo == hi else f"{lo}-{hi}"
        cpus = os.cpu_count()
        k = cpus // 2  # CPUs per node; with fewer CPUs than nodes, node i gets CPU i mod C
        want = [f"tnbc-n{i} " + (cpu_list(i * k, i * k + k - 1) if k else cpu_list(i % cpus, i % cpus)) for i in (0, 1)]
        expect(allowed("--pin") == want, f"--pin: {allowed('--pin')}, expected {want}")
        every = cpu_list(0, cpus - 1)
        expect(allowed() == [f"tnbc-n0 {every}", f"tnbc-n1 {every}"], f"without --pin: {allowed()}")
    s.check("run --pin: each node's ranks on its own CPUs, without it on all", pinned)

    ref = {}

    def local_reference():
        ref["out"] = sorted(mpirun(MIXED, 4, args=["/tmp/tnbc_cluster_ref.io"]).stdout.splitlines())
    s.check("reference run on one node", local_reference)
    for lib in (None, "tnbc", "tnbc_trace"):
        def same(lib=lib):
            out = sorted(cluster_run(MIXED, args=["/tmp/tnbc_cluster.io"], preload=lib).stdout.splitlines())
            expect(out == ref.get("out"), f"output differs from the one-node run:\n{out}\nvs\n{ref.get('out')}")
        s.check(f"2 x 2 ranks under {lib or 'plain ' + MPI}: same output as on one node", same)

    def trace_node_ids():
        # The trace file's node index (shim/node.cpp, index()): nodes numbered by their first
        # world rank, so cyclic placement puts rank r on node r mod 2.
        tmp = tempfile.mkdtemp(prefix="tnbc_cluster_trace_")
        os.chmod(tmp, 0o755)
        folder = os.path.join(tmp, "trace")
        cluster_run(TRACE_ORDER, args=[os.path.join(tmp, "out")], preload="tnbc_trace", placement="cyclic",
                    env={"TNBC_TRACE_DIR": folder}, timeout=90)
        ids = {}
        for name in sorted(os.listdir(folder)):
            res = subprocess.run([TRACE_DUMP, os.path.join(folder, name)], capture_output=True, text=True,
                                 timeout=60)
            d = json.loads(res.stdout)
            ids[d["rank"]] = d["node_id"]
        expect(ids == {0: 0, 1: 1, 2: 0, 3: 1}, f"node ids by rank: {ids}")
    s.check("a trace on 2 nodes, cyclic placement: each rank's file names its node", trace_node_ids)

    def consecutive():
        cluster("up")
        try:
            for i in range(CONSECUTIVE_RUNS):
                cluster_run(NETCHECK, args=[2, 1 << 20], timeout=30)
        finally:
            cluster("down")
    s.check(f"{CONSECUTIVE_RUNS} consecutive multi-node runs finish (under MPICH: its finalize workaround)", consecutive)

    def usage_errors():
        for args, msg in ((["run"], "run: no program given"),
                          (["--nodes", "0", "up"], "--nodes must be 1..50"),
                          (["--rate", "fast", "up"], "--rate must look like"),
                          (["--congestion", "a b", "up"], "--congestion must name an algorithm"),
                          (["--congestion", "nosuch", "up"], "cannot set TCP congestion control 'nosuch'"),
                          (["--slow-start-after-idle", "maybe", "up"], "--slow-start-after-idle must be on or off"),
                          (["--tso", "maybe", "up"], "--tso must be on or off"),
                          (["frobnicate"], "unknown command 'frobnicate'"),
                          (["run", "--placement", "random", "--", MIXED], "--placement must be block or cyclic"),
                          (["run", "--preload", "/nonexistent.so", "--", MIXED], "--preload: no such file"),
                          (["run", "--mpi", "lam", "--", MIXED], "--mpi must be mpich or openmpi")):
            res = cluster(*args, check=False)
            expect(res.returncode == 2 and msg in res.stderr, f"{args}: exit {res.returncode}, {res.stderr!r}")
        expect(not netns_names(), "a failed command left nodes behind")
    s.check("bad usage: exit 2 with a clear message, nothing created", usage_errors)
    s.finish()


if __name__ == "__main__":
    main()
