#!/usr/bin/env python3
"""tnbc-stats on statistics files written by hand: one row per call site of a key, means over the
ranks, per-call costs and bytes, the order learned for a site, the table, --json and --sim, files
without call sites (older versions), and clear errors for missing or foreign files."""

import json
import os
import subprocess
import tempfile

from tnbc_testlib import SOURCE, Suite, expect

TOOL = os.path.join(SOURCE, "tools", "tnbc-stats")


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def costs(early_calls, blocking_calls, init_us, blocking_us, intra=0, inter=0, **more):
    return {"early_calls": early_calls, "blocking_calls": blocking_calls, "init_us": init_us,
            "wait_us": 2000.0, "progress_cpu_us": 4000.0, "blocking_us": blocking_us,
            "setup_us": init_us / 2, "send_copy_us": init_us / 4, "inside_wait_us": init_us / 4, "publish_us": 30.0,
            "intra_node_bytes": intra, "inter_node_bytes": inter, **more}


def key(sites, path="early", decisions=3, comm=0, op="alltoall", with_sites=True):
    """A key whose calls came from `sites` ({site: costs}); its own fields are their sums."""
    total = {}
    for c in sites.values():
        for f, v in c.items():
            total[f] = total.get(f, 0) + v
    k = {"comm": comm, "comm_size": 2, "op": op, "total_class": 21, "one_node": False, "path": path,
         "decisions": decisions, "switches": 1, "early_interval_us": 10000.0, "blocking_interval_us": 12000.0, **total}
    if with_sites:
        k["sites"] = [dict(c, site=name) for name, c in sites.items()]
    return k


def write(prefix, rank, keys, explore=None, sums=None, started=None, starts=None):
    doc = {"rank": rank, "library": "tnbc", "version": "x", "faults": 3, "fault_wait_us": 1000.0,
           "fence_wait_us": 500.0, "progress": {"cpu_us": 2000.0, "rounds": 10, "user_us": 6000.0, "system_us": 2000.0},
           "adapt": {"enabled": True, "keys": keys}}
    if started is not None:
        doc["progress"]["started"] = started
        if not started:
            doc["progress"].update(cpu_us=0.0, rounds=0, user_us=0.0, system_us=0.0)
    if starts is not None:
        doc["progress"]["starts"] = starts
    if explore is not None:
        doc["adapt"]["explore"] = explore
    if sums is not None:
        doc["adapt"]["sums"] = sums
    with open(f"{prefix}.{rank}.json", "w", encoding="utf-8") as f:
        json.dump(doc, f)


def main():
    s = Suite("tnbc-stats")
    tmp = tempfile.mkdtemp(prefix="tnbc_stats_")
    prefix = os.path.join(tmp, "run")
    # Rank 0: 4 early calls, 2000 us inside in all; rank 1: 2 early calls, 4000 us.  Means over
    # the ranks: 3 early calls, 3000 us inside -> 1 ms per early call.  A second call site of the
    # same key (only on rank 0) makes a row of its own.  Bytes: 10 calls per rank, 1 MiB from
    # this node and 3 MiB from others each.
    a = "prog+0x10;libc.so.6+0x2724a"
    b = "prog+0x20;libc.so.6+0x2724a"
    mib = 1 << 20
    # Site a's order was learned (the same on every rank; written into rank 0's file only, as a
    # file of a rank that never called from a may lack it).
    learned = {"points": 2, "designated": 8, "observed": 8, "protect_us": 100.0, "learn_us": 10.0, "gather_us": 50.0,
               "sites": [{"site": a, "learned": True, "at_call": 6, "changes": 1, "agreement": 0.75,
                          "observed": 8, "order": [1, 0]},
                         {"site": b, "learned": False, "at_call": 0, "changes": 0, "agreement": 1.0,
                          "observed": 0, "order": []}]}
    # Site a's early calls took the learned order (rank 0: 4, 2 of them with per-node turns;
    # rank 1: 2), the Bcast's a plan's; the Bcast's blocking calls ran on the engine.
    k0 = key({a: costs(4, 6, 2000.0, 6000.0, 10 * mib, 30 * mib, order_learned_calls=4, turn_calls=2),
              b: costs(0, 5, 0.0, 500.0)})
    k0["learning"] = learned
    k0["algorithm"] = {"chosen": "scattered", "rounds": 1, "switches": 1, "mean_us": {"auto": 9.0, "scattered": 5.0}}
    bcast = {"": costs(1, 9, 100.0, 900.0, order_plan_calls=1, engine_blocking_calls=9)}
    write(prefix, 0, [k0, key(bcast, path="blocking", op="bcast")])
    # Rank 1's file names the key's class as files before 2026-11-29 did ("size_class"): its
    # calls of site a must still count with rank 0's (the means below).
    old_a = key({a: costs(2, 8, 4000.0, 8000.0, 10 * mib, 30 * mib, order_learned_calls=2)})
    old_a["size_class"] = old_a.pop("total_class")
    write(prefix, 1, [old_a, key(bcast, path="blocking", op="bcast")])

    def as_json():
        r = run("--json", prefix)
        expect(r.returncode == 0, r.stderr)
        d = json.loads(r.stdout)
        expect(d["ranks"] == 2 and len(d["rows"]) == 3, d)
        a2a = next(k for k in d["rows"] if k["op"] == "alltoall" and k["site"] == a)
        expect(a2a["ranks"] == 2 and a2a["early_calls"] == 3 and a2a["blocking_calls"] == 7, a2a)
        expect(abs(a2a["inside_ms"] - 1.0) < 1e-9, f"inside per early call: {a2a['inside_ms']}")
        expect(abs(a2a["setup_ms"] - 0.5) < 1e-9 and abs(a2a["send_copy_ms"] - 0.25) < 1e-9, a2a)
        expect(abs(a2a["blocking_ms"] - 1.0) < 1e-9, f"per blocking call: {a2a['blocking_ms']}")
        expect(a2a["early_interval_ms"] == 10.0 and a2a["blocking_interval_ms"] == 12.0, a2a)
        expect(a2a["intra_node_kib"] == 1024 and a2a["inter_node_kib"] == 3072, a2a)
        other = next(k for k in d["rows"] if k["site"] == b)
        expect(other["ranks"] == 1 and other["early_calls"] == 0 and other["blocking_calls"] == 5, other)
        expect(abs(other["blocking_ms"] - 0.1) < 1e-9, other)
        expect(a2a["learned_order"] == [1, 0] and a2a["learned_at_call"] == 6 and a2a["learned_changes"] == 1
               and a2a["learned_agreement"] == 0.75, a2a)
        expect(other["learned_order"] is None, f"site b learned nothing: {other}")
        expect(a2a["order_learned_calls"] == 3 and a2a["order_plan_calls"] == 0 and a2a["turn_calls"] == 1, a2a)
        bc = next(k for k in d["rows"] if k["op"] == "bcast")
        expect(bc["path"] == "blocking" and bc["algorithm"] == "engine" and bc["order_plan_calls"] == 1, bc)
    s.check("--json: a row per call site, means over ranks, costs and bytes per call", as_json)

    def section(out, title):
        """The rows of the default output's table under `title`, split into columns."""
        lines = out.splitlines()
        at = next(i for i, l in enumerate(lines) if l.startswith(title))
        body = []
        for l in lines[at + 2:]:
            if not l.strip():
                break
            body.append(l.split())
        return body

    def as_table():
        r = run(prefix)
        expect(r.returncode == 0, r.stderr)
        expect("2 ranks, tnbc" in r.stdout and "progress thread 2.0 ms CPU on collectives (8.0 ms in all, 25% in the kernel)" in r.stdout, r.stdout)
        long = [l for l in r.stdout.splitlines() if len(l) > 100]
        expect(not long, f"lines over 100 columns: {long}")
        calls = section(r.stdout, "calls per rank")
        expect(len(calls) == 3 and [c[0] for c in calls] == ["1", "2", "3"], r.stdout)
        a_row = next(c for c in calls if "prog+0x10" in c)
        # Columns counted from the end: "bytes" is several words ("< 4 MiB").
        expect(a_row[-3:] == ["early", "3", "7"], f"site a: path and calls per rank: {a_row}")
        times = {c[0]: c[1:] for c in section(r.stdout, "ms: ")}
        expect(times[a_row[0]][:3] == ["10.00", "12.00", "0.50"], f"site a: intervals and setup: {times}")
        # The last table: what ran the key's blocking calls (MPI's algorithm, auto where the file
        # has none; engine), and where the early calls' order came from.
        rest = {c[0]: c[1:] for c in section(r.stdout, "blocking calls")}
        expect(rest[a_row[0]][1:] == ["1024", "3072", "1,0", "@6", "x1", "a0.75", "scattered", "learned", "3",
                                      "turns", "1"], f"site a: {rest}")
        b_row = next(c for c in calls if "prog+0x20" in c)
        expect(rest[b_row[0]][-3:] == ["-", "scattered", "-"], f"site b: {rest}")
        bcast = next(c for c in calls if "bcast" in c)
        expect(bcast[-4] == "-" and rest[bcast[0]][-3:] == ["engine", "plan", "1"], f"the Bcast: {bcast} {rest}")
        expect("columns:" in run("--help").stdout, "--help has no legend")
    s.check("table: three tables within 100 columns, a row per call site, innermost frame named", as_table)

    def as_wide_table():
        r = run("--wide", prefix)
        expect(r.returncode == 0, r.stderr)
        rows = [l for l in r.stdout.splitlines() if l.startswith("0 ")]
        expect(len(rows) == 3, r.stdout)
        expect(any("prog+0x10 " in l and "early" in l and
                   l.split()[-11:] == ["1024", "3072", "1,0", "@6", "x1", "a0.75", "scattered", "learned", "3", "turns",
                                       "1"] for l in rows), r.stdout)
        expect(any("prog+0x20 " in l and l.split()[-3:] == ["-", "scattered", "-"] for l in rows), r.stdout)
        expect(any("bcast" in l and l.split()[-3:] == ["engine", "plan", "1"] for l in rows), r.stdout)
    s.check("--wide: one row per call site with every column", as_wide_table)

    def sim():
        # Site a: setup 0.5 ms and send copy 0.25 ms per early call; 4 MiB received per call from
        # the other rank, so the send side is 8 MiB (2 ranks): 8 MiB / 0.25 ms.  Site b made no
        # early call and the Bcast is no Alltoall: no line.  Progress CPU: 4 ms per rank over
        # 3 early calls on average.
        r = run("--sim", prefix)
        expect(r.returncode == 0, r.stderr)
        lines = r.stdout.splitlines()
        expect(len(lines) == 1 and "prog+0x10" in lines[0] and
               lines[0].endswith(": --setup-us 500.0 --copy-bw 33554432000bps --progress-cpu-us 1333.3"), r.stdout)
        none = os.path.join(tmp, "none")
        write(none, 0, [key({"": costs(0, 6, 0.0, 6000.0)}, path="blocking")])
        r = run("--sim", none)
        expect(r.returncode == 0 and "nothing for tnbc-sim" in r.stdout, r)
    s.check("--sim: tnbc-sim's --setup-us and --copy-bw per Alltoall site with early calls", sim)

    def source_lines():
        # A site whose statistics name its function and module: the table shows the function,
        # and the sites list the source line addr2line finds for the call (return address - 1).
        # The site's offset counts from the module's load base (dladdr's dli_fbase): 0 in a
        # position-independent program, its first segment's page (0x400000) in one linked
        # -no-pie, where addr2line wants the address itself.
        src = os.path.join(tmp, "where.c")
        with open(src, "w", encoding="utf-8") as f:
            f.write("int twice(int x) { return 2 * x; }\nint main(void) {\n  return twice(1) - 2;\n}\n")
        for kind, flags in (("pie", ["-fPIE", "-pie"]), ("nopie", ["-fno-pie", "-no-pie"])):
            exe = os.path.join(tmp, "where")
            subprocess.run(["cc", "-g", "-O0", *flags, "-o", exe, src], check=True, timeout=60)
            syms = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
            main_at = next(int(l.split()[0], 16) for l in syms.splitlines() if l.endswith(" T main"))
            segments = subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True).stdout
            base = next(int(l.split()[2], 16) for l in segments.splitlines() if l.split()[:1] == ["LOAD"]) & ~0xfff
            expect((base == 0) == (kind == "pie"), f"{kind}: first segment at {base:#x}")
            # A return address a few bytes into main's body is on line 3, the call of twice().
            dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True, text=True).stdout
            call = next(int(l.split(":")[0], 16) for l in dis.splitlines()
                        if "call" in l and "<twice>" in l and int(l.split(":")[0], 16) > main_at)
            ret = call + 5 - base  # the call instruction (e8 rel32) is 5 bytes
            site = f"where+{ret:#x};libc.so.6+0x2724a"
            named = os.path.join(tmp, "named-" + kind)
            k = key({site: costs(2, 2, 1000.0, 2000.0)})
            k["sites"][0].update(function="main", module=exe, plan_order=[3, 1, 2, 0])
            write(named, 0, [k])
            r = run(named)
            expect(r.returncode == 0, r.stderr)
            rows = section(r.stdout, "calls per rank")
            expect(len(rows) == 1 and rows[0][-4] == "main" and "where+" not in " ".join(rows[0]), r.stdout)
            listed = [l for l in r.stdout.splitlines() if l.startswith("  main ")]
            expect(len(listed) == 1 and f"{src}:3" in listed[0] and f"(where+{ret:#x})" in listed[0],
                   f"{kind}: {r.stdout}")
            # The plan entry's order, in the list and in --json, with the source line.
            expect(listed[0].endswith("plan order 3,1,2,0"), f"{kind}: {listed}")
            j = json.loads(run("--json", named).stdout)["rows"][0]
            expect(j["plan_order"] == [3, 1, 2, 0] and j["source"] == f"{src}:3", j)
    s.check("sites named by function; the sites list their source lines (addr2line), with and without -pie", source_lines)

    def old_files():
        old = os.path.join(tmp, "old")
        write(old, 0, [key({"": costs(4, 6, 2000.0, 6000.0)}, with_sites=False)])
        r = run("--json", old)
        expect(r.returncode == 0, r.stderr)
        rows = json.loads(r.stdout)["rows"]
        expect(len(rows) == 1 and rows[0]["early_calls"] == 4 and rows[0]["site"] == "", rows)
    s.check("statistics without call sites: the key is one row", old_files)

    def what_ran_blocking():
        # What ran the blocking calls: the engine as the choice (its first calls ran on MPI), MPI's
        # algorithm with some trial calls on the engine, MPI's alone.
        prefix = os.path.join(tmp, "blocking_by")
        ks = []
        for comm, chosen, engine_calls in ((0, "engine", 4), (1, "scattered", 1), (2, "auto", 0)):
            k = key({"": costs(0, 10, 0.0, 1000.0, engine_blocking_calls=engine_calls)}, path="blocking", comm=comm)
            k["algorithm"] = {"chosen": chosen, "rounds": 1, "switches": 0, "mean_us": {}}
            ks.append(k)
        write(prefix, 0, ks)
        r = run("--json", prefix)
        expect(r.returncode == 0, r.stderr)
        got = [row["algorithm"] for row in sorted(json.loads(r.stdout)["rows"], key=lambda row: row["comm"])]
        expect(got == ["engine", "scattered+engine", "auto"], got)
    s.check("what ran the blocking calls: engine, MPI's algorithm with trial calls on the engine, MPI's", what_ran_blocking)

    def errors():
        r = run(os.path.join(tmp, "missing"))
        expect(r.returncode == 1 and "no statistics files" in r.stderr, r)
        with open(os.path.join(tmp, "foreign.0.json"), "w") as f:
            f.write("[1, 2")
        r = run(os.path.join(tmp, "foreign"))
        expect(r.returncode == 1 and "not a statistics file" in r.stderr, r)
        r = run("--help")
        expect(r.returncode == 0 and "usage: tnbc-stats" in r.stdout, r)
    s.check("missing and foreign files: one clear message, exit 1; --help", errors)

    def exploring():
        # The exploration budget (adapt.explore): the most any rank spent, against the least any
        # rank was allowed, and the probes deferred; absent in older files (above: no line).
        ex = os.path.join(tmp, "explore")
        parts = {"early_probe_us": 1500.0, "engine_sample_us": 0.0, "trial_us": 500.0}
        write(ex, 0, [key(bcast, path="blocking", op="bcast")],
              explore={"bound": 0.01, "allowed_us": 30000.0, "spent_us": 2000.0, **parts, "probes_deferred": 2})
        write(ex, 1, [key(bcast, path="blocking", op="bcast")],
              explore={"bound": 0.01, "allowed_us": 29000.0, "spent_us": 1000.0, **dict(parts, early_probe_us=500.0),
                       "probes_deferred": 2})
        r = run(ex)
        expect(r.returncode == 0, r.stderr)
        expect("exploring: at most 2.0 ms a rank of the 1% (29.0 ms) allowed (early probes 1.5, engine samples 0.0, "
               "algorithm trials 0.5 ms), 2 early probe(s) deferred" in r.stdout, r.stdout)
        expect("exploring" not in run(prefix).stdout, "an exploring line for files without it")
        d = json.loads(run("--json", ex).stdout)
        expect([e["spent_us"] for e in d["explore"]] == [2000.0, 1000.0], d["explore"])
    s.check("exploring: the most a rank spent against the bound, the probes deferred", exploring)

    def sums():
        # The decision's sums (adapt.sums): posted and complete before the next call, over the
        # ranks; no line where none was posted or the files predate them.
        sm = os.path.join(tmp, "sums")
        write(sm, 0, [key(bcast, path="blocking", op="bcast")], sums={"posted": 6, "ready": 5})
        write(sm, 1, [key(bcast, path="blocking", op="bcast")], sums={"posted": 6, "ready": 4})
        r = run(sm)
        expect(r.returncode == 0, r.stderr)
        expect("decision sums: 12 posted over 2 rank(s), 9 complete before the next call (75%; the others "
               "finished there)" in r.stdout, r.stdout)
        expect("decision sums" not in run(prefix).stdout, "a sums line for files without them")
        write(sm, 0, [key(bcast, path="blocking", op="bcast")], sums={"posted": 6, "woke": 1, "ready": 5})
        write(sm, 1, [key(bcast, path="blocking", op="bcast")], sums={"posted": 6, "woke": 2, "ready": 4})
        r = run(sm)
        expect("decision sums: 12 posted over 2 rank(s), 3 woke the progress thread, 9 complete before the next "
               "call (75%; the others finished there)" in r.stdout, r.stdout)
        write(sm, 0, [key(bcast, path="blocking", op="bcast")], sums={"posted": 0, "ready": 0})
        write(sm, 1, [key(bcast, path="blocking", op="bcast")], sums={"posted": 0, "ready": 0})
        expect("decision sums" not in run(sm).stdout, "a sums line where none was posted")
    s.check("decision sums: posted, woke the progress thread, complete before the next call, over the ranks", sums)

    def thread_started():
        # progress.started (files since 2026-12-03): the thread starts only for the engine's work;
        # files without the field had it from the start.
        th = os.path.join(tmp, "thread")
        for started, said in (((False, False), "no progress thread ran"),
                              ((True, False), "progress thread on 1 of 2 ranks, 2.0 ms CPU each on collectives"),
                              ((True, True), "progress thread 2.0 ms CPU on collectives")):
            for rank in (0, 1):
                write(th, rank, [key(bcast, path="blocking", op="bcast")], started=started[rank])
            r = run(th)
            expect(r.returncode == 0 and said in r.stdout.replace("\n  ", " "), f"{started}: {r.stdout}")
            expect("times a rank" not in r.stdout, f"{started}: restarts said where files have none: {r.stdout}")
        # progress.starts (files after 977265d): a thread that ended idle and started again.
        for rank, starts in ((0, 1), (1, 3)):
            write(th, rank, [key(bcast, path="blocking", op="bcast")], started=True, starts=starts)
        r = run(th)
        expect("started up to 3 times a rank" in r.stdout.replace("\n  ", " "), r.stdout)
    s.check("the progress thread: none, on some ranks, on all (progress.started), its restarts", thread_started)

    def samples():
        # --samples: a line per rank and key that sampled the engine, each call's cost, the
        # verdict and the check (per call: the blocks' sums over 2 ranks x 4 calls) and how often
        # a budget refused it (files before the count: none said); a key that did not sample is
        # left out, and a run without samples says so.
        sp = os.path.join(tmp, "samples")
        check = {"calls": 8, "judged": True, "kept": False, "mpi_ms": 3200.0, "engine_ms": 3120.0, "spread_ms": 400.0}
        sampled = {"asked": True, "weight": 0.5, "mpi_calls": 2, "engine_calls": 2, "mpi_us": 16050.0,
                   "engine_us": 12300.0, "mpi_calls_us": [29100.0, 3000.0], "engine_calls_us": [13900.0, 10700.0],
                   "engine_first": True, "check": check}
        quiet = dict(sampled, mpi_calls=0, engine_calls=0, engine_first=False)
        # In a job across nodes: refused by the budgets 3 times, never sampled (comm 4), and
        # sampled after one refusal (comm 5).
        refused = dict(quiet, refusals=3)
        late = dict(sampled, engine_first=False, refusals=1)
        unchecked = dict(sampled, check=dict(check, calls=0, judged=False, refusals=3))
        # MPI's calls stayed after the samples; a trial round chose the engine later, and its
        # check kept it.
        rounded = dict(sampled, engine_first=False, check=dict(check, started=1, engine_ms=2000.0))
        for rank in (0, 1):
            # rank 1's check ran after 2 refusals, the second of the key's checks, and the key was
            # then judged with its ranks' other keys (a job on one node); rank 0's file has none of
            # these.
            s1 = dict(sampled, check=dict(check, refusals=2, started=2),
                      joint={"verdicts": 2, "switches": 1, "last": "engine"}) if rank else sampled
            k1 = dict(key(bcast, path="blocking", comm=1), algorithm={"engine_sample": s1}, one_node=True)
            k0 = dict(key(bcast, path="blocking", comm=0), algorithm={"engine_sample": quiet})
            k2 = dict(key(bcast, path="blocking", comm=2), algorithm={"engine_sample": unchecked})
            k3 = dict(key(bcast, path="blocking", comm=3), algorithm={"engine_sample": dict(rounded, check=dict(
                rounded["check"], kept=True))})
            k4 = dict(key(bcast, path="blocking", comm=4), algorithm={"engine_sample": refused})
            k5 = dict(key(bcast, path="blocking", comm=5), algorithm={"engine_sample": late})
            write(sp, rank, [k0, k1, k2, k3, k4, k5])
        r = run("--samples", sp)
        expect(r.returncode == 0, r.stderr)
        for rank in (0, 1):
            after = " after 2 budget refusals (the latest of 2)" if rank else ""
            joint = "; judged with its ranks' other keys 2 times: the engine, 1 switched it" if rank else ""
            expect(f"rank {rank} comm 1 (2 ranks, one node) alltoall: weight 0.50; MPI 29.1, 3.0; engine 13.9, 10.7 ms: "
                   f"engine first; checked{after}: MPI again (intervals 390.0 against MPI's 400.0 ms, spread 50.0)"
                   f"{joint}\n" in r.stdout + "\n", r.stdout)
            expect(f"rank {rank} comm 2 (2 ranks) alltoall: weight 0.50; MPI 29.1, 3.0; engine 13.9, 10.7 ms: "
                   "engine first, not checked (after 3 budget refusals)" in r.stdout, r.stdout)
            expect(f"rank {rank} comm 3 (2 ranks) alltoall: weight 0.50; MPI 29.1, 3.0; engine 13.9, 10.7 ms: "
                   "MPI's algorithm stays; a trial round chose the engine later, checked: kept (intervals 250.0 "
                   "against MPI's 400.0 ms, spread 50.0)" in r.stdout, r.stdout)
            expect(f"rank {rank} comm 4 (2 ranks) alltoall: weight 0.50; no samples: refused by the exploration "
                   "budget 3 times" in r.stdout, r.stdout)
            expect(f"rank {rank} comm 5 (2 ranks) alltoall: weight 0.50; MPI 29.1, 3.0; engine 13.9, 10.7 ms "
                   "(sampled after 1 budget refusal): MPI's algorithm stays" in r.stdout, r.stdout)
        expect("comm 0" not in r.stdout, f"a key without samples listed: {r.stdout}")
        expect("no key sampled" in run("--samples", prefix).stdout, "a run without samples")
    s.check("--samples: each sample call's cost per rank and key, the verdict and its check", samples)
    s.finish()


if __name__ == "__main__":
    main()
