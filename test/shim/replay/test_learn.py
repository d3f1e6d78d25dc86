#!/usr/bin/env python3
"""Replay mode learns read orders while the program runs (shim/replay/learn/learn.hpp).

test/mpi/learn_order reads its blocks in known orders at two call sites of one key, one of
which changes its order halfway.  Under libtnbc.so (TNBC_ADAPT=measure, so that one node
learns too) the bytes must equal plain MPICH's; the statistics must show both sites learned,
site_fixed in reverse order; the plan written with TNBC_PLAN_OUT must give site_fixed the order
`tnbc-order plan` derives from a trace of the same program, and read back through TNBC_PLAN it
must change nothing in the bytes.  test/mpi/learn_bcast reads its Bcast buffer back to front:
every rank must learn the units' reverse order, and the learned plan must equal the one
`tnbc-order plan` derives from a trace (segments, tree, order), with identical bytes.  On 2
emulated nodes (root), with the default settings, the learned order must become the key's
per-node turn order, its early calls must compare turns on and off (and ranks must wait for
their turn), with identical bytes; TNBC_LEARN_PER_NODE=0 must take no turns.  On one node the
defaults must observe nothing.  The differential programs (replay_diff: stack buffers, write(),
free(), threads; adapt_switch: ranks calling from different sites) must print what plain MPICH
prints while learning is on; TNBC_LEARN=0 must learn nothing."""

import json
import os
import re
import subprocess
import tempfile

from tnbc_testlib import BUILD, SOURCE, Suite, cluster_run, expect, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "learn_order")
DIFF = os.path.join(BUILD, "test", "mpi", "replay_diff")
SWITCH = os.path.join(BUILD, "test", "mpi", "adapt_switch")
BCAST = os.path.join(BUILD, "test", "mpi", "learn_bcast")
BCAST_ITERS = 30
TOOL = os.path.join(BUILD, "tools", "tnbc-order")
PLAN_DUMP = os.path.join(BUILD, "test", "tools", "plan_dump")
P = 4
ITERS = 60
# TNBC_EXPLORE=off: the early probes at their calls, whatever they cost (learning happens where a
# key enters the early path; with the exploration budget, a key whose reads leave no room to
# overlap is first probed after about 400 of its calls).
LEARN = {"TNBC_ADAPT": "measure", "TNBC_MIN_BYTES": "4K", "TNBC_LEARN": "1", "TNBC_EXPLORE": "off"}


def lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def plan_entries(path):
    d = subprocess.run([PLAN_DUMP, path], capture_output=True, text=True, timeout=30)
    expect(d.returncode == 0, f"plan_dump {path}: {d.stderr}")
    return [json.loads(l) for l in d.stdout.splitlines()]


def traced_plan(prog, trace):
    """The entries `tnbc-order plan` derives from a traced run of `prog` (12 iterations)."""
    mpirun(prog, P, preload="tnbc_trace", args=[12], timeout=120, env={"TNBC_TRACE_DIR": trace})
    out = trace + ".plan"
    r = subprocess.run([TOOL, "plan", trace, "-o", out], capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, f"tnbc-order plan: {r.stderr}")
    return plan_entries(out)


def learned_sites(prefix, rank):
    """{innermost-site key: learning entry} of the alltoall keys of one rank's statistics."""
    d = read_json(f"{prefix}.{rank}.json")
    out = {}
    for k in d["adapt"]["keys"]:
        if k["op"] != "alltoall":
            continue
        for s in k["learning"]["sites"]:
            out[s["site"]] = (k["learning"], s)
    return out


def main():
    s = Suite("learn")
    tmp = tempfile.mkdtemp(prefix="tnbc_learn_")
    ref = {}
    reverse = list(range(P - 1, -1, -1))

    def plain():
        ref["out"] = lines(mpirun(PROG, P, args=[ITERS], timeout=120).stdout)
        expect(len(ref["out"]) == 2 * P * ITERS, f"{len(ref['out'])} lines")
    s.check("plain MPICH: learn_order", plain)

    def learned():
        prefix = os.path.join(tmp, "learn")
        plan = os.path.join(tmp, "learned.plan")
        out = lines(mpirun(PROG, P, preload="tnbc", args=[ITERS], timeout=120,
                           env={**LEARN, "TNBC_STATS": prefix, "TNBC_PLAN_OUT": plan}).stdout)
        expect(out == ref.get("out"), f"differs from plain MPICH: {sorted(set(out) ^ set(ref.get('out', [])))[:6]}")
        orders = []
        for r in range(P):
            sites = learned_sites(prefix, r)
            expect(len(sites) == 2, f"rank {r}: learned sites {list(sites)}")
            for key, (k, site) in sites.items():
                expect(k["points"] >= 1 and k["observed"] >= 4, f"rank {r}: {k}")
                expect(site["learned"] and site["observed"] >= 2, f"rank {r}: {site}")
                orders.append(tuple(site["order"]))
        # Every rank learned the same orders (one consensus), and one site reads in reverse.
        expect(len(set(orders)) <= 2 and tuple(reverse) in orders, f"learned orders {orders}")
        st = subprocess.run([os.path.join(SOURCE, "tools", "tnbc-stats"), prefix], capture_output=True, text=True, timeout=60)
        expect(st.returncode == 0 and st.stdout.count(" @") >= 2 and ",".join(map(str, reverse)) + " @" in st.stdout,
               f"tnbc-stats does not show the learned orders: {st.stdout}{st.stderr}")
        entries = plan_entries(plan)
        expect(len(entries) == 2, f"learned plan: {entries}")
        ref["learned_plan"] = plan
        ref["learned"] = {e["site"]: e["order"] for e in entries}
        fixed = [site for site, order in ref["learned"].items() if order == reverse]
        expect(len(fixed) >= 1, f"no site learned the reverse order: {ref['learned']}")
    s.check("libtnbc.so learns both sites: identical bytes, the same orders on every rank, "
            "TNBC_PLAN_OUT written", learned)

    def hold_released():
        # The key stays blocking (TNBC_EXPLORE=0: no probe), so no learn point follows its observed
        # calls; once the program's reads have opened their pages, the MPI calls after them must
        # not drain any more (a stuck hold made every fenced call drain until MPI_Finalize).
        ring, iters = 400, 12
        env = {"LEARN_ORDER_SENDRECV": str(ring)}
        want = lines(mpirun(PROG, P, args=[iters], timeout=120, env=env).stdout)
        prefix = os.path.join(tmp, "hold")
        out = lines(mpirun(PROG, P, preload="tnbc", args=[iters], timeout=120,
                           env={**LEARN, **env, "TNBC_EXPLORE": "0", "TNBC_STATS": prefix}).stdout)
        expect(out == want and len(out) == P * (2 * iters + 1), f"differs from plain MPICH: {sorted(set(out) ^ set(want))[:6]}")
        for r in range(P):
            d = read_json(f"{prefix}.{r}.json")
            keys = [k for k in d["adapt"]["keys"] if k["op"] == "alltoall"]
            expect(len(keys) == 1 and keys[0]["early_calls"] == 0 and keys[0]["learning"]["observed"] >= 2,
                   f"rank {r}: want one blocking key with observed calls: {keys}")
            expect(d["fence_drains"] < ring // 4, f"rank {r}: {d['fence_drains']} fences drained for {ring} MPI_Sendrecv")
    s.check("a key that stays blocking: after its observed calls are read, the MPI calls that follow "
            "do not drain (fence_drains), identical bytes", hold_released)

    def same_as_trace():
        traced = {e["site"]: e["order"] for e in traced_plan(PROG, os.path.join(tmp, "trace"))}
        learned = ref.get("learned", {})
        expect(set(traced) == set(learned), f"sites: traced {sorted(traced)}, learned {sorted(learned)}")
        # 12 traced iterations all lie before the phase change: both sites in the orders of
        # the first half; site_fixed is the one whose order never changes.
        same = [site for site in traced if traced[site] == learned[site]]
        expect(len(same) >= 1 and any(traced[site] == reverse for site in same),
               f"traced {traced}, learned {learned}")
    s.check("the learned plan gives site_fixed the order tnbc-order plan derives from a trace", same_as_trace)

    def plan_back():
        out = lines(mpirun(PROG, P, preload="tnbc", args=[ITERS], timeout=120,
                           env={**LEARN, "TNBC_PLAN": ref.get("learned_plan", "")}).stdout)
        expect(out == ref.get("out"), "differs from plain MPICH with the learned plan")
        r = subprocess.run([TOOL, "check", ref.get("learned_plan", "")], capture_output=True, text=True, timeout=60)
        expect(r.returncode == 0 and "accepted by libtnbc.so" in r.stdout, f"tnbc-order check: {r.stdout} {r.stderr}")
        for site, order in ref.get("learned", {}).items():
            expect(f"{site} alltoall comm={P}" in r.stdout and "order=" + ",".join(map(str, order)) in r.stdout,
                   f"tnbc-order check does not print {site}: {r.stdout}")
    s.check("the learned plan read back with TNBC_PLAN: identical bytes; tnbc-order check prints it", plan_back)

    def bcast_learned():
        # learn_bcast: every rank but the root reads its Bcast buffer from the last of 16 parts
        # to the first; the units learning observes are those parts.
        ref["bcast_out"] = lines(mpirun(BCAST, P, args=[BCAST_ITERS], timeout=120).stdout)
        expect(len(ref["bcast_out"]) == P * BCAST_ITERS, f"{len(ref['bcast_out'])} lines")
        prefix = os.path.join(tmp, "bcast")
        plan = os.path.join(tmp, "bcast.plan")
        out = lines(mpirun(BCAST, P, preload="tnbc", args=[BCAST_ITERS], timeout=120,
                           env={**LEARN, "TNBC_STATS": prefix, "TNBC_PLAN_OUT": plan}).stdout)
        expect(out == ref["bcast_out"], f"differs from plain MPICH: {sorted(set(out) ^ set(ref['bcast_out']))[:6]}")
        units = list(range(15, -1, -1))
        for r in range(P):
            keys = [k for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"] if k["op"] == "bcast"]
            expect(len(keys) == 1 and keys[0]["early_calls"] > 0, f"rank {r}: bcast keys {keys}")
            learning = keys[0]["learning"]
            expect(learning["points"] >= 1 and (learning["observed"] >= 2) == (r != 0),
                   f"rank {r} (the root observes nothing): {learning}")
            sites = learning["sites"]
            expect(len(sites) == 1 and sites[0]["learned"] and sites[0]["order"] == units,
                   f"rank {r}: learned {sites}")
            expect(learning["applied"] > 0, f"rank {r}: no early call took the learned order: {learning}")
            # The statistics say where each early call's order came from (tnbc-stats: early order).
            expect(keys[0]["order_learned_calls"] == learning["applied"] and keys[0]["order_plan_calls"] == 0,
                   f"rank {r}: order sources {keys[0]}")
        entries = [e for e in plan_entries(plan) if e["op"] == "bcast"]
        expect(len(entries) == 1, f"learned plan: {entries}")
        e = entries[0]
        expect(e["segments"] >= 2 and e["order"] == list(range(e["segments"] - 1, -1, -1)) and e["size_class"] >= 0,
               f"the learned Bcast entry does not read the segments in reverse: {e}")
        ref["bcast_plan"], ref["bcast_entry"] = plan, e
    s.check("learn_bcast: the units' reverse order learned on every rank, identical bytes, "
            "TNBC_PLAN_OUT writes the segments in reverse", bcast_learned)

    def bcast_as_traced():
        traced = [e for e in traced_plan(BCAST, os.path.join(tmp, "bcast_trace")) if e["op"] == "bcast"]
        learned = ref.get("bcast_entry", {})
        expect(len(traced) == 1, f"traced plan: {traced}")
        fields = ("site", "comm", "segments", "chains", "size_class", "order")
        expect(all(traced[0][f] == learned.get(f) for f in fields),
               f"traced {[traced[0][f] for f in fields]}, learned {[learned.get(f) for f in fields]}")
        back = os.path.join(tmp, "bcast_back")
        b = lines(mpirun(BCAST, P, preload="tnbc", args=[BCAST_ITERS], timeout=120,
                         env={**LEARN, "TNBC_PLAN": ref.get("bcast_plan", ""), "TNBC_STATS": back}).stdout)
        expect(b == ref.get("bcast_out"), "differs from plain MPICH with the learned Bcast plan")
        expect(read_json(f"{back}.0.json")["bcast"]["planned"] == BCAST_ITERS,
               f"the learned Bcast plan was not used: {read_json(f'{back}.0.json')['bcast']}")
    s.check("the learned Bcast plan equals tnbc-order plan's from a trace (site, segments, tree, "
            "class, order) and read back gives identical bytes", bcast_as_traced)

    def bcast_split():
        # The root calls from a site of its own, which nobody observes: it must still send its
        # segments in the order the others learned (the key's majority order).
        prefix = os.path.join(tmp, "split")
        out = lines(mpirun(BCAST, P, preload="tnbc", args=[BCAST_ITERS, 1 << 20, "split"], timeout=120,
                           env={**LEARN, "TNBC_STATS": prefix}).stdout)
        expect(out == ref.get("bcast_out"), "differs from plain MPICH with the root at its own site")
        keys = [k for k in read_json(f"{prefix}.0.json")["adapt"]["keys"] if k["op"] == "bcast"]
        expect(len(keys) == 1, f"root: bcast keys {keys}")
        learning = keys[0]["learning"]
        own = [x for x in learning["sites"] if x["site"]]
        expect(len(own) == 1 and not own[0]["learned"], f"root: its own site learned something: {learning}")
        expect(learning["applied"] > 0, f"root: never sent in the learned order: {learning}")
    s.check("learn_bcast with the root calling from its own site: the root takes the order the others "
            "learned, identical bytes", bcast_split)

    def phase_change():
        # Long enough that the new order of site_phase wins over its window of old records.
        iters = 400
        a = lines(mpirun(PROG, P, args=[iters, 40], timeout=180).stdout)
        prefix = os.path.join(tmp, "phase")
        # The new order is observed in the blocking probes after the change.  TNBC_ADAPT_WIDE=0:
        # early saves far more than 10% here, and wide decisions would put the probes at calls
        # 73, 331 and 1357 of the key (two calls per iteration), too few in 400 iterations.
        # TNBC_EXPLORE=off: every probe at its call (the budget would space the early probes, and
        # with them the learn points, by what they cost).
        b = lines(mpirun(PROG, P, preload="tnbc", args=[iters, 40], timeout=180,
                         env={**LEARN, "TNBC_STATS": prefix, "TNBC_ADAPT_WIDE": "0", "TNBC_EXPLORE": "off"}).stdout)
        expect(a == b, f"differs from plain MPICH: {sorted(set(a) ^ set(b))[:6]}")
        for r in range(P):
            for key, (k, site) in learned_sites(prefix, r).items():
                expect(site["order"] == reverse, f"rank {r}: {key} ends with order {site['order']}: {site}")
    s.check("a read order that changes mid-run: identical bytes, the new order learned", phase_change)

    def differential():
        d_ref = lines(mpirun(DIFF, P, args=[tmp], timeout=120).stdout)
        d = lines(mpirun(DIFF, P, preload="tnbc", args=[tmp], timeout=180,
                         env={**LEARN, "TNBC_ADAPT_WARMUP": "2"}).stdout)
        expect(d == d_ref, f"replay_diff differs: {sorted(set(d) ^ set(d_ref))[:6]}")
        prefix = os.path.join(tmp, "switch")
        a = lines(mpirun(SWITCH, P, args=[60], timeout=120).stdout)
        b = lines(mpirun(SWITCH, P, preload="tnbc", args=[60], timeout=180,
                         env={**LEARN, "TNBC_ADAPT_WARMUP": "2", "TNBC_STATS": prefix}).stdout)
        expect(a == b, f"adapt_switch differs: {sorted(set(a) ^ set(b))[:6]}")
        observed = sum(k["learning"]["observed"] for k in read_json(f"{prefix}.0.json")["adapt"]["keys"])
        expect(observed > 0, "adapt_switch: nothing observed, so nothing was tested")
    s.check("replay_diff and adapt_switch while learning: identical bytes", differential)

    def off():
        prefix = os.path.join(tmp, "off")
        plan = os.path.join(tmp, "off.plan")
        r = mpirun(PROG, P, preload="tnbc", args=[20], timeout=120,
                   env={**LEARN, "TNBC_LEARN": "0", "TNBC_STATS": prefix, "TNBC_PLAN_OUT": plan})
        expect(lines(r.stdout) == lines(mpirun(PROG, P, args=[20], timeout=120).stdout), "differs")
        for rank in range(P):
            for key, (k, site) in learned_sites(prefix, rank).items():
                expect(False, f"rank {rank} learned with TNBC_LEARN=0: {site}")
            keys = read_json(f"{prefix}.{rank}.json")["adapt"]["keys"]
            expect(all(k["learning"]["observed"] == 0 for k in keys), "observed with TNBC_LEARN=0")
        expect(not os.path.exists(plan), "TNBC_PLAN_OUT written with learning off")
        expect("TNBC_PLAN_OUT" in r.stderr, f"no message about TNBC_PLAN_OUT: {r.stderr}")
    s.check("TNBC_LEARN=0: nothing observed, no plan written, and it says so", off)

    def default_one_node():
        # Learning is on by default, but a communicator within one node runs every call
        # blocking (TNBC_ADAPT=on): nothing is observed there and no site is learned.
        prefix = os.path.join(tmp, "default1")
        r = mpirun(PROG, P, preload="tnbc", args=[20], timeout=120,
                   env={"TNBC_MIN_BYTES": "4K", "TNBC_STATS": prefix})
        expect(lines(r.stdout) == lines(mpirun(PROG, P, args=[20], timeout=120).stdout), "differs")
        for rank in range(P):
            keys = read_json(f"{prefix}.{rank}.json")["adapt"]["keys"]
            expect(keys and all(k["one_node"] and k["blocking_calls"] > 0 for k in keys), f"rank {rank}: {keys}")
            expect(all(k["learning"]["designated"] == 0 and k["learning"]["observed"] == 0
                       and not k["learning"]["sites"] for k in keys), f"rank {rank} observed on one node: {keys}")
    s.check("the defaults on one node: every call blocking, nothing observed, no site learned", default_one_node)

    def turns_on_cluster(per_node, op="alltoall", first_us=0):
        # Cyclic placement: nodes {0, 2} and {1, 3}; the world key spans both, so its learned
        # order becomes a turn order and its early calls compare turns on and off.  With
        # op="alltoallv" the program's calls are Alltoallvs whose ranks receive different
        # amounts: the key's turn order is still one for all.  TNBC_LEARN keeps its default (on);
        # TNBC_EXPLORE=off, so that the early probes (and their learn points) come at their calls.
        # first_us > 0: every rank reads its first block that long after the call (CURC), and
        # TNBC_CHUNK_WINDOW=3 is what its turns must send with.
        prefix = os.path.join(tmp, f"turns{per_node}{op}{first_us}")
        mode = {"LEARN_ORDER_ALLTOALLV": "1"} if op == "alltoallv" else {}
        if first_us:
            mode = {**mode, "LEARN_ORDER_FIRST_US": str(first_us), "TNBC_CHUNK_WINDOW": "3"}
        want = ref.get("out") if op == "alltoall" else lines(mpirun(PROG, P, args=[ITERS], env=mode, timeout=120).stdout)
        out = lines(cluster_run(PROG, args=[ITERS], preload="tnbc", placement="cyclic", timeout=240,
                                env={"TNBC_LEARN_PER_NODE": per_node, "TNBC_STATS": prefix, "TNBC_EXPLORE": "off",
                                     **mode}).stdout)
        expect(want and out == want, f"differs from plain MPICH: {sorted(set(out) ^ set(want or []))[:6]}")
        states, gated, windows = [], [], []
        for r in range(P):
            d = read_json(f"{prefix}.{r}.json")
            world = [k for k in d["adapt"]["keys"] if k["op"] == op and k["comm_size"] == P]
            expect(len(world) == 1 and not world[0]["one_node"], f"rank {r}: keys {d['adapt']['keys']}")
            t = world[0]["turns"]
            states.append((t["state"], t["decisions"], t["switches"]))
            gated.append(d["node_priority"]["gated_sends"])
            windows.append((world[0]["learning"]["turn_window"], d["node_priority"]["send_window_max"]))
            if per_node == "1":
                expect(t["state"] in ("on", "off") and t["decisions"] >= 1, f"rank {r}: turns not decided: {t}")
                expect(t["on_calls"] >= 2 and t["off_calls"] >= 2, f"rank {r}: turns not compared: {t}")
            else:
                expect(t["state"] == "none" and t["on_calls"] == 0, f"rank {r}: turns with TNBC_LEARN_PER_NODE=0: {t}")
        # One decision for all: the same state everywhere.
        expect(len(set(states)) == 1, f"ranks decided turns differently: {states}")
        # Every rank reads its first block right after the call (verdict CRC): the learned turns
        # send with the window tnbc-order plan writes there, 8, on every rank (learned and used).
        # Read long after the call (CURC), they learn none and send with the configured one.
        if per_node == "1":
            expect(any(g > 0 for g in gated), f"no rank ever waited for its turn: {gated}")
            want_windows = [(0, 3)] * P if first_us else [(8, 8)] * P
            expect(windows == want_windows, f"(learned, used) send windows {windows}, expected {want_windows}")
        else:
            expect(gated == [0] * P, f"sends gated with TNBC_LEARN_PER_NODE=0: {gated}")
            expect(windows == [(0, 0)] * P, f"send windows {windows} without turns")

    def room_on_cluster(pause_us, room, explore="off"):
        # The warm-up's room point (shim/replay/adapt/policy.hpp): reads 10 ms apart leave room to overlap an
        # exchange of about 10 ms, reads at once do not.  Every rank must come to the same
        # verdict (the ranks vote), with identical bytes either way.  With an exploration budget
        # (TNBC_EXPLORE not off) room begins the early probe only where every rank's budget
        # affords it: 4 calls into a run, none does (adapt/explore.hpp: a whole interval per call
        # predicted before any early call was measured), and the warm-up goes on everywhere.
        prefix = os.path.join(tmp, f"room{pause_us}-{explore}")
        short = room and explore == "off"
        # TNBC_ALGORITHMS=0: the exchange the pauses are sized against is MPICH's default
        # algorithm's.  "At once" is no pause at all: reads 0.3 ms apart were judged to leave room
        # in two clean-clone CI runs (2026-11-26; MPICH with scattered, and Open MPI), where a
        # loaded machine stretched each sleep towards a quarter of the shortened exchange.
        env = {"LEARN_ORDER_PAUSE_US": str(pause_us), "TNBC_ALGORITHMS": "0", "TNBC_EXPLORE": explore}
        want = ref.get("out")
        res = cluster_run(PROG, args=[ITERS], preload="tnbc", placement="cyclic", timeout=240,
                          env={"TNBC_STATS": prefix, "TNBC_LOG": "debug", **env})
        out = lines(res.stdout)
        expect(want and out == want, f"differs from plain MPICH: {sorted(set(out) ^ set(want or []))[:6]}")
        verdicts = []
        for r in range(P):
            world = [k for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]
                     if k["op"] == "alltoall" and k["comm_size"] == P]
            expect(len(world) == 1 and world[0]["decisions"] >= (1 if explore == "off" else 0), f"rank {r}: keys {world}")
            verdicts.append(world[0]["short_warmup"])
        expect(verdicts == [short] * P, f"short warm-up per rank {verdicts}, expected {short} everywhere")
        # Each rank says what the vote was, once, at the key's room point (the end of its fourth call):
        # every rank observed.
        votes = re.findall(r"tnbc\[(\d)\]: alltoall of \d+ bytes on communicator 0: (\d) of the (\d) ranks that "
                           r"observed its warm-up found room to overlap: the warm-up (ends here|goes on)", res.stderr)
        expect(sorted(v[0] for v in votes) == [str(r) for r in range(P)], f"room votes logged: {votes}")
        expect(all(v[2] == str(P) and (int(v[1]) > P // 2) == room and (v[3] == "ends here") == short for v in votes),
               f"room votes: {votes}")
        deferred = re.findall(r"early not tried yet: on (\d) of its ranks .* \(asked again at the warm-up's end\)",
                              res.stderr)
        expect(len(deferred) == (1 if room and not short else 0), f"room points deferred by the budget: {deferred}")

    if os.geteuid() == 0:
        s.check("2 emulated nodes, reads that leave room to overlap: every rank ends the warm-up after 4 "
                "calls, identical bytes", lambda: room_on_cluster(10000, True))
        s.check("2 emulated nodes, reads that leave room, the exploration budget of 1%: the room point's probe "
                "deferred on every rank, the whole warm-up, identical bytes",
                lambda: room_on_cluster(10000, True, explore="1"))
        s.check("2 emulated nodes, reads at once: the whole warm-up of 6 calls, identical bytes",
                lambda: room_on_cluster(0, False))
        s.check("2 emulated nodes, learning on: the learned order becomes the turn order, "
                "turns on and off compared and decided alike on every rank, identical bytes",
                lambda: turns_on_cluster("1"))
        s.check("2 emulated nodes, data read 30 ms after the call: learned turns send with the "
                "configured window (3), not the read-at-once one, identical bytes",
                lambda: turns_on_cluster("1", first_us=30000))
        s.check("2 emulated nodes, TNBC_LEARN_PER_NODE=0: no turns, identical bytes",
                lambda: turns_on_cluster("0"))
        s.check("2 emulated nodes, Alltoallvs of different sizes per rank: the key's learned turns "
                "compared and decided alike, identical bytes", lambda: turns_on_cluster("1", "alltoallv"))
    return s.finish(skipped=None if os.geteuid() == 0 else "the 2-node checks (they need root)")


if __name__ == "__main__":
    raise SystemExit(main())
