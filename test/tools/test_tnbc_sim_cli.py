#!/usr/bin/env python3
"""tnbc-sim's command line: help, exit codes, the JSON object and the plan's prediction.

On 2 nodes x 2 ranks in block placement at 200 Mbit/s with scenario b (data read in order
0..p-1 while the work spreads over the blocks), the prediction must hold all the fields the
documentation names; per-node turns are on by default with every model; the plan's order alone (`--per-node off`) must predict what no plan predicts (within 2%: one
order everywhere reorders no sender's sends), `--plan none` must leave tnbc_plan_ms null, and
every model must give the plan's prediction (SimGrid's own flows the same as the fluid model, with
turns and without).
`--sweep` must give each rank count the prediction a run with that many nodes gives, and
`--svg` must plot one line per configuration on a log2 axis of ranks.  `--fat-tree` must slow
the exchange a little on a full tree (four links between leaves) and much on a 4 to 1 taper."""

import json
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET

from tnbc_testlib import BUILD, Suite, expect

TOOL = os.path.join(BUILD, "tools", "tnbc-sim")
FIELDS = ("plain_ms", "tnbc_ms", "tnbc_plan_ms", "link_bound_ms", "plain_algorithm", "plan", "model",
          "tnbc_plan_exchange_ms")


def run(*args):
    return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=120)


def predict(*args):
    r = run("--json", *args)
    expect(r.returncode == 0, f"tnbc-sim {' '.join(map(str, args))}: {r.stderr}")
    return json.loads(r.stdout)


def main():
    s = Suite("tnbc-sim-cli")

    def help_text():
        for flag in ("--help", "-h"):
            r = run(flag)
            expect(r.returncode == 0 and r.stdout.startswith("usage: tnbc-sim"), f"{flag}: {r}")
        expect("--plan natural|none" in run("--help").stdout, "--plan missing from --help")
    s.check("--help", help_text)

    def usage_errors():
        for args, msg in ((["--plan", "reverse"], "--plan reverse: not a value it takes"),
                          (["--nodes", "0"], "--nodes and --ppn: at least 1"),
                          (["--bytes", "x"], "--bytes: not a number: 'x'"),
                          (["--frob"], "--frob: unknown option"),
                          (["--frob", "1"], "--frob: unknown option"),
                          (["--nodes"], "--nodes: needs a value"),
                          (["--per-node", "maybe"], "--per-node maybe: not a value it takes"),
                          (["--setup-us", "-1"], "--setup-us: 0 to 1e9"),
                          (["--copy-bw", "fast"], "--copy-bw: not a number"),
                          (["--op", "bcast", "--progress-cpu-us", "5"], "not --op bcast"),
                          (["--trace-work", "per-byte"], "--trace-work: needs --trace"),
                          (["--trace-work-scale", "2"], "--trace-work-scale: needs --trace"),
                          (["--trace-work", "per-rank", "--trace", "x"], "--trace-work per-rank: not a value it takes"),
                          (["--trace-work-scale", "0", "--trace", "x"], "--trace-work-scale: above 0"),
                          (["--counts", "is"], "--counts: with --trace only")):
            r = run(*args)
            lines = r.stderr.strip().splitlines()
            expect(r.returncode == 2 and len(lines) == 1 and msg in lines[0] and "--help" in lines[0]
                   and lines[0].count(args[0]) == 1, f"{args}: {r}")
    s.check("bad usage: exit 2, one line naming the option once and --help", usage_errors)

    def plan_prediction():
        base = ["--nodes", 2, "--ppn", 2, "--link", "200mbit", "--scenario", "b", "--bytes", 1 << 20]
        turns = predict(*base)
        expect(turns["plan_per_node"] is True, f"the fluid model's plan takes no per-node turns by default: {turns}")
        d = predict(*base, "--per-node", "off")
        for f in FIELDS:
            expect(f in d, f"{f} missing: {d}")
        expect(d["plan"] == "natural" and isinstance(d["tnbc_plan_ms"], float) and d["plan_per_node"] is False,
               f"no plan prediction: {d}")
        expect(d["link_bound_ms"] <= min(d["plain_ms"], d["tnbc_ms"], d["tnbc_plan_ms"]) + 1e-6,
               f"a prediction below the link bound: {d}")
        # One order on every rank moves no sender's sends relative to each other (each sender
        # stands at the same place in every receiver's order), so without per-node turns the
        # plan predicts what no plan does, as measured (docs/measurements/learn-overlap.md: the plan with
        # per-node off, 1.00x plain MPICH).
        expect(abs(d["tnbc_plan_ms"] - d["tnbc_ms"]) <= 0.02 * d["tnbc_ms"], f"the plan's order alone moved the prediction: {d}")
        # The engine's setup comes before its send copy: the call returns that much later.
        setup = predict(*base, "--per-node", "off", "--setup-us", 1000, "--copy-bw", "8gbps")
        expect(setup["setup_us"] == 1000 and setup["copy_bytes_per_s"] == 8e9, f"--setup-us, --copy-bw: {setup}")
        expect(abs(setup["tnbc_init_ms"] - d["tnbc_init_ms"] - 1.0) < 1e-3, f"--setup-us 1000: {setup} {d}")
        # 400 ms of progress-thread CPU per call, twice the exchange, spread over the sends:
        # the last send goes after it, so the exchange takes longer than that.
        cpu = predict(*base, "--per-node", "off", "--progress-cpu-us", 400000)
        expect(cpu["progress_cpu_us"] == 400000 and cpu["tnbc_exchange_ms"] > 400 > d["tnbc_exchange_ms"],
               f"--progress-cpu-us: {cpu} {d}")
        none = predict(*base, "--plan", "none")
        expect(none["tnbc_plan_ms"] is None and none["plan"] == "none", f"--plan none: {none}")
        expect(abs(none["tnbc_ms"] - d["tnbc_ms"]) < 1e-6, f"--plan none changed the no-plan prediction: {none} {d}")
        for model in ("simgrid", "pairs"):
            m = predict(*base, "--model", model)
            expect(isinstance(m["tnbc_plan_ms"], float) and m["model"] == model, f"--model {model}: {m}")
            expect(m["plan_per_node"] is True, f"--model {model}: per-node turns {m}")
        # SimGrid's own flows and the fluid model share the rule: the same plan prediction, with
        # per-node turns and without.
        for fluid, extra in ((turns, []), (d, ["--per-node", "off"])):
            sg = predict(*base, "--model", "simgrid", *extra)
            expect(abs(sg["tnbc_plan_ms"] - fluid["tnbc_plan_ms"]) < 1e-3 * fluid["tnbc_plan_ms"], f"simgrid {sg} fluid {fluid}")
    s.check("--json: every field; the plan's order alone predicts what no plan does; --plan none; every model",
            plan_prediction)

    def window_at_scale():
        # 16 nodes x 4 ranks: each rank sends bodies to 60 peers on other nodes.  With a send
        # window of 2 chunks the members' turns left the links idle (plan 194.8 ms against no
        # plan's 136.5 ms); one chunk per remote peer (shim/replay/engine/schedule_pieces.hpp,
        # send_window) keeps the plan from losing to no plan.
        d = predict("--nodes", 16, "--ppn", 4, "--bytes", 1 << 18, "--link", "10gbit", "--latency", "5us",
                    "--scenario", "b")
        expect(d["plan_per_node"] is True and d["tnbc_plan_ms"] <= 1.01 * d["tnbc_ms"],
               f"per-node turns at 16 x 4 lose to no plan: {d}")
    s.check("per-node turns at 16 nodes x 4 ranks: the window of one chunk per remote peer does not lose",
            window_at_scale)

    def alltoallv():
        # bench/is's key spread on 2 x 2 ranks: the middle ranks get 11/12 of the keys.
        base = ["--scenario", "b", "--placement", "cyclic", "--bytes", 1 << 18]
        v = predict(*base, "--op", "alltoallv")
        expect(v["op"] == "alltoallv" and v["plain_algorithm"] == "scattered", f"--op alltoallv: {v}")
        expect(v["bytes_min"] < v["bytes"] < v["bytes_max"], f"IS-like blocks not spread: {v}")
        # The plan's per-node turns, as the engine takes them for an Alltoallv with an agreed plan.
        expect(v["plan_per_node"] is True, f"--op alltoallv predicted no per-node turns: {v}")
        expect(predict(*base, "--op", "alltoallv", "--per-node", "off")["plan_per_node"] is False, "--per-node off ignored")
        expect(v["link_bound_ms"] <= min(v["plain_ms"], v["tnbc_ms"], v["tnbc_plan_ms"]) + 1e-6,
               f"a prediction below the link bound: {v}")
        a = predict(*base, "--op", "alltoall")
        expect(a["op"] == "alltoall" and a["bytes_min"] == a["bytes_max"] == a["bytes"], f"--op alltoall: {a}")
        # The busiest rank reads 11/6 of the mean block's data (TCRC in proportion): the
        # Alltoallv takes longer after the call than the Alltoall of the mean block.
        expect(v["plain_ms"] > a["plain_ms"], f"alltoallv {v['plain_ms']} ms, alltoall {a['plain_ms']} ms")
        r = run(*base, "--op", "alltoallv")
        expect(r.returncode == 0 and "MPI_Alltoallv of bench/is's key spread" in r.stdout, f"table: {r}")
        r = run(*base, "--op", "bcast")
        expect(r.returncode == 2 and "--op bcast" in r.stderr, f"--op bcast: {r}")
    s.check("--op alltoallv: bench/is's counts, MPICH's scattered algorithm, the bound of both link directions",
            alltoallv)

    def bcast():
        # Seed 003's platform: 48 processes, one per node, 32 Gbit/s; one 1 MiB message over k
        # chains is fastest near k* = sqrt(a(P-1)/b) = 6.9, in the formula and in the engine.
        d = predict("--op", "bcast", "--nodes", 48, "--ppn", 1, "--link", "32gbit", "--latency", "1us",
                    "--chain-sweep", "2,7,24")
        for f in ("plain_ms", "tnbc_ms", "tnbc_plan_ms", "link_bound_ms", "plain_algorithm", "segments", "chains"):
            expect(f in d, f"{f} missing: {d}")
        expect(d["op"] == "bcast" and d["plain_algorithm"] == "scatter + ring allgather", f"--op bcast: {d}")
        expect([x["chains"] for x in d["chain_sweep"]] == [2, 7, 24], f"--chain-sweep: {d['chain_sweep']}")
        expect(d["best_chains_sim"] == 7 and d["best_chains_seed"] == 7 and 6 < d["k_star"] < 8,
               f"the chain count of least time: {d}")
        expect(d["link_bound_ms"] <= min(d["plain_ms"], d["tnbc_ms"]), f"a prediction below the link bound: {d}")
        # --chains and --segments set the engine's shape.
        one = predict("--op", "bcast", "--nodes", 48, "--ppn", 1, "--link", "32gbit", "--latency", "1us",
                      "--segments", 1, "--chains", 7)
        expect(one["segments"] == 1 and one["chains"] == 7 and abs(one["tnbc_ms"] - d["chain_sweep"][1]["tnbc_one_segment_ms"]) < 1e-6,
               f"--segments 1 --chains 7 {one} against the sweep's k = 7 {d['chain_sweep'][1]}")
        r = run("--op", "bcast", "--chain-sweep", "1,2")
        expect(r.returncode == 0 and "seed 003" in r.stdout and "(least)" in r.stdout, f"table: {r}")
        for args, msg in ((["--op", "bcast", "--sweep", "4"], "no --sweep"),
                          (["--op", "bcast", "--scenario", "b"], "read at once"),
                          (["--op", "bcast", "--model", "fluid"], "--model simgrid only"),
                          (["--op", "bcast", "--root", "4"], "--root"),
                          (["--op", "bcast", "--segments", "0"], "--segments: 1 to 253"),
                          (["--op", "bcast", "--per-node", "on"], "Alltoall(v) options"),
                          (["--chains", "2"], "with --op bcast only")):
            r = run(*args)
            expect(r.returncode == 2 and msg in r.stderr, f"{args}: {r.returncode} {r.stderr[:200]}")
    s.check("--op bcast: MPICH's algorithm, the engine's shape, and seed 003's k-chain optimum", bcast)

    def sweep():
        base = ["--ppn", 2, "--link", "200mbit", "--scenario", "b", "--bytes", 1 << 18]
        d = predict(*base, "--sweep", "4,8")
        points = d.get("sweep", [])
        expect([(p["ranks"], p["nodes"]) for p in points] == [(4, 2), (8, 4)], f"--sweep 4,8: {d}")
        # Each point is the prediction of its own platform, as one run with --nodes gives it.
        for p in points:
            one = predict(*base, "--nodes", p["nodes"])
            for f in ("plain_ms", "tnbc_ms", "tnbc_plan_ms", "link_bound_ms", "model"):
                expect(p[f] == one[f], f"{f}: {p[f]} in the sweep, {one[f]} alone ({p['nodes']} nodes)")
        svg = os.path.join(tempfile.mkdtemp(prefix="tnbc_sim_"), "gain.svg")
        r = run(*base, "--sweep", "4,8,16", "--svg", svg)
        expect(r.returncode == 0 and "| 16 | 8 |" in r.stdout, f"--sweep table: {r}")
        root = ET.parse(svg).getroot()
        lines = {l.get("data-name"): l.get("points").split() for l in root.iter("{http://www.w3.org/2000/svg}polyline")}
        expect(set(lines) == {"tnbc, no plan", "tnbc, plan", "link bound"} and all(len(v) == 3 for v in lines.values()),
               f"the SVG's lines: {lines}")
        # Ranks on a log2 axis: 4, 8, 16 equally spaced.
        xs = [float(pt.split(",")[0]) for pt in lines["link bound"]]
        expect(abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2, f"x positions {xs}")
        r = run(*base, "--sweep", "4,8", "--plan", "none", "--svg", svg)
        names = {l.get("data-name") for l in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}polyline")}
        expect(r.returncode == 0 and names == {"tnbc, no plan", "link bound"}, f"--plan none: {names} {r.stderr}")
        for args, msg in ((["--svg", svg], "--svg: needs --sweep"),
                          (["--sweep", "5"], "not a multiple of --ppn"),
                          (["--sweep", "4,x"], "not a number"),
                          (["--sweep", "4", "--nodes", "2"], "leave out --nodes")):
            r = run(*base, *args)
            expect(r.returncode == 2 and msg in r.stderr, f"{args}: {r.returncode} {r.stderr[:200]}")
        r = run(*base, "--sweep", "4", "--svg", "/nonexistent-dir/gain.svg")
        expect(r.returncode == 1 and "--svg /nonexistent-dir/gain.svg" in r.stderr, f"unwritable --svg: {r}")
    s.check("--sweep: one prediction per rank count (each as alone), its table, JSON and SVG; bad sweeps", sweep)

    def fat_tree():
        base = ["--nodes", 8, "--ppn", 2, "--link", "1gbit", "--bytes", 1 << 20, "--plan", "none"]
        full, tapered, flat = (predict(*base, "--fat-tree", "4:4"), predict(*base, "--fat-tree", "4:1"),
                               predict(*base))
        expect(full["fat_tree"] == {"leaf_nodes": 4, "spines": 4} and flat["fat_tree"] is None, f"{full} {flat}")
        # Four links between leaves instead of two: a full tree is a little slower than one
        # switch (latencies), a 4 to 1 taper much slower (the leaves' links carry what 4 nodes send).
        expect(flat["plain_ms"] <= full["plain_ms"] < 1.1 * flat["plain_ms"], f"full tree {full} flat {flat}")
        expect(tapered["plain_ms"] > 1.5 * full["plain_ms"] and tapered["tnbc_ms"] > 1.5 * full["tnbc_ms"],
               f"a 4:1 taper did not slow the exchange: {tapered} {full}")
        expect(abs(tapered["link_bound_ms"] - full["link_bound_ms"]) < 1e-6, "the link bound counts node links only")
        expect("fat tree: leaves of 4 nodes, 1 spine(s), 4 to 1 taper" in run(*base, "--fat-tree", "4:1").stdout,
               "the table does not name the fat tree")
        for args, msg in ((["--fat-tree", "3:1"], "8 nodes do not fill leaves of 3"),
                          (["--fat-tree", "4"], "not LEAF:SPINES"),
                          (["--fat-tree", "0:1"], "at least 1"),
                          (["--fat-tree", "4:x"], "not a number")):
            r = run(*base, *args)
            expect(r.returncode == 2 and msg in r.stderr, f"{args}: {r.returncode} {r.stderr[:200]}")
        r = run("--op", "bcast", "--fat-tree", "2:1", "--nodes", 4)
        expect(r.returncode == 2 and "not --op bcast" in r.stderr, f"bcast on a fat tree: {r.stderr[:200]}")
        r = run("--ppn", 2, "--fat-tree", "4:2", "--sweep", "8,12")
        expect(r.returncode == 2 and "12 ranks do not fill leaves" in r.stderr, f"sweep on a fat tree: {r.stderr[:200]}")
    s.check("--fat-tree: SimGrid's two-level fat tree, the taper, bad trees", fat_tree)
    return s.finish()


if __name__ == "__main__":
    raise SystemExit(main())
