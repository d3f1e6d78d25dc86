#!/usr/bin/env python3
"""Replay mode's differential suite: test/mpi/replay_diff (alltoall from 1 byte to 8 MiB, aligned
and not, collectives in flight together, split and dup'ed communicators, alltoallv with gaps,
derived datatypes, MPI_IN_PLACE, received data handed to MPI, write(), free() and realloc(),
several reader threads, bcast from several roots, on the stack and in mmap'd memory) must print
exactly what plain MPICH prints, on one node and on the emulated cluster, and the engine must
really have returned early (statistics), or the comparison proves nothing."""

import json
import math
import os
import re
import subprocess
import tempfile

from tnbc_testlib import BUILD, LIBS, MPI, Suite, cluster_run, expect, messages, mpirun, read_json

PROG = os.path.join(BUILD, "test", "mpi", "replay_diff")
ORDERS = os.path.join(BUILD, "test", "mpi", "trace_order")
DUMP = os.path.join(BUILD, "test", "trace", "trace_dump")
OVERLAP = os.path.join(BUILD, "bench", "overlap")
CURC = os.path.join(BUILD, "bench", "curc")
MIXED_F = os.path.join(BUILD, "test", "mpi", "mixed_f")
SWITCH = os.path.join(BUILD, "test", "mpi", "adapt_switch")
LARGE = os.path.join(BUILD, "test", "mpi", "large_block")
LATE = os.path.join(BUILD, "test", "mpi", "late_rank")
SUMS_IDLE = os.path.join(BUILD, "test", "mpi", "sums_idle")
FAIL_SHM = os.path.join(BUILD, "test", "mpi", "fail_shm_open.so")
FAIL_THREADS = os.path.join(BUILD, "test", "mpi", "fail_threads.so")
SLOW_TEST = os.path.join(BUILD, "test", "mpi", "slow_test.so")


def gated_sends(prefix, ranks):
    """Each rank's sends that waited for their node's turn (statistics under `prefix`)."""
    return [read_json(f"{prefix}.{r}.json")["node_priority"]["gated_sends"] for r in range(ranks)]


# The engine's own tests force early returns (TNBC_ADAPT=off): with the default, a communicator
# on one node runs blocking, and elsewhere the per-call decision may choose blocking too.
ENGINE = {"TNBC_ADAPT": "off"}


def engine(env=None):
    return {**ENGINE, **(env or {})}


def lines(text):
    return sorted(l for l in text.splitlines() if l and l[0].isdigit())


def sums_idle_like_plain(args, env, timeout=60):
    """Runs `sums_idle ARGS` on 4 ranks under plain MPICH and with `env` (LD_PRELOAD among it),
    checks that the second printed every call's line exactly as the first, and returns its
    CompletedProcess."""
    base = lines(mpirun(SUMS_IDLE, 4, args=args, timeout=timeout).stdout)
    res = mpirun(SUMS_IDLE, 4, args=args, timeout=timeout, env=env)
    out = lines(res.stdout)
    expect(len(base) == 4 * args[0] and out == base, f"differs from plain MPICH: {sorted(set(out) ^ set(base))[:6]}")
    return res


def check_stats(prefix, ranks):
    for r in range(ranks):
        d = read_json(f"{prefix}.{r}.json")
        expect(d["alltoall"]["early_return"] >= 10, f"rank {r}: alltoall hardly returned early: {d['alltoall']}")
        expect(d["bcast"]["early_return"] >= 5, f"rank {r}: bcast hardly returned early: {d['bcast']}")
        expect(d["init_us"] > 0, f"rank {r}: no Tinit measured: {d}")
        expect(d["progress"]["started"], f"rank {r}: calls returned early, yet no progress thread started")


def main():
    s = Suite("mpi-replay")
    tmp = tempfile.mkdtemp(prefix="tnbc_replay_")
    ref = {}

    def plain():
        ref["out"] = lines(mpirun(PROG, 4, args=[tmp], timeout=120).stdout)
        expect(len(ref["out"]) > 100, f"too little output: {len(ref['out'])} lines")
    s.check("plain MPICH, 4 ranks", plain)

    def replay_local():
        prefix = os.path.join(tmp, "local")
        out = lines(mpirun(PROG, 4, preload="tnbc", env=engine({"TNBC_STATS": prefix}), args=[tmp], timeout=120).stdout)
        diff = sorted(set(out) ^ set(ref.get("out", [])))
        expect(out == ref.get("out"), f"differs from plain MPICH: {diff[:10]}")
        check_stats(prefix, 4)
    s.check("libtnbc.so, 4 ranks: identical bytes, early returns happened", replay_local)

    def chunkings():
        # Odd chunks (not page multiples, one in flight), all chunks at once, whole bodies, and the
        # chunks of a job across nodes (on one node the default is 1 MiB).
        for env in ({"TNBC_CHUNK_BYTES": "5000", "TNBC_CHUNK_WINDOW": "1"}, {"TNBC_CHUNK_BYTES": "64K"},
                    {"TNBC_CHUNK_BYTES": "12K", "TNBC_CHUNK_WINDOW": "0"},
                    {"TNBC_CHUNK_BYTES": "0", "TNBC_BCAST_SEGMENTS": "7", "TNBC_BCAST_CHAINS": "2"}):
            out = lines(mpirun(PROG, 4, preload="tnbc", env=engine(env), args=[tmp], timeout=120).stdout)
            diff = sorted(set(out) ^ set(ref.get("out", [])))
            expect(out == ref.get("out"), f"{env}: differs from plain MPICH: {diff[:10]}")
    s.check("libtnbc.so, 4 ranks, other body chunkings and Bcast shapes: identical bytes", chunkings)

    def replay_odd_ranks():
        a = lines(mpirun(PROG, 3, args=[tmp, "alltoall_sizes", "bcasts"], timeout=120).stdout)
        b = lines(mpirun(PROG, 3, preload="tnbc", env=engine(), args=[tmp, "alltoall_sizes", "bcasts"],
                         timeout=120).stdout)
        expect(a == b, f"differs from plain MPICH: {sorted(set(a) ^ set(b))[:10]}")
    s.check("libtnbc.so, 3 ranks: identical bytes", replay_odd_ranks)

    def tiny_threshold():
        env = engine({"TNBC_MIN_BYTES": "1"})
        a = lines(mpirun(PROG, 2, args=[tmp, "alltoall_sizes", "comms_and_v", "bcasts"], timeout=120).stdout)
        b = lines(mpirun(PROG, 2, preload="tnbc", env=env, args=[tmp, "alltoall_sizes", "comms_and_v", "bcasts"],
                         timeout=120).stdout)
        expect(a == b, f"differs from plain MPICH: {sorted(set(a) ^ set(b))[:10]}")
    s.check("TNBC_MIN_BYTES=1 (every size through the engine): identical bytes", tiny_threshold)

    def default_one_node():
        # The default on one node: every collective the engine could take runs blocking, by
        # MPI ("one_node") or by the engine's exchange ("engine", TNBC_BLOCKING), without a single
        # early return, with MPICH's bytes; with TNBC_BLOCKING=mpi without an engine message.
        for blocking in ("auto", "mpi"):
            prefix = os.path.join(tmp, f"onenode-{blocking}")
            out = lines(mpirun(PROG, 4, preload="tnbc", env={"TNBC_STATS": prefix, "TNBC_BLOCKING": blocking},
                               args=[tmp], timeout=120).stdout)
            expect(out == ref.get("out"), f"{blocking}: differs from plain MPICH: "
                                          f"{sorted(set(out) ^ set(ref.get('out', [])))[:10]}")
            for r in range(4):
                d = read_json(f"{prefix}.{r}.json")
                for op in ("alltoall", "alltoallv", "bcast"):
                    expect(d[op]["early_return"] == 0, f"rank {r}: {op} returned early on one node: {d[op]}")
                reasons = d["alltoall"]["fallback_reasons"]
                engine_calls = sum(d[op]["fallback_reasons"].get("engine", 0) for op in ("alltoall", "alltoallv", "bcast"))
                expect(reasons.get("one_node", 0) + reasons.get("engine", 0) >= 10,
                       f"rank {r}: alltoalls not run blocking for one node: {d['alltoall']}")
                expect(engine_calls > 0 or d["progress"]["rounds"] == 0,
                       f"rank {r}: the progress thread worked without an engine call: {d['progress']}")
                if blocking == "mpi":
                    expect(engine_calls == 0 and d["progress"]["rounds"] == 0,
                           f"rank {r}: TNBC_BLOCKING=mpi ran the engine: {d['progress']} {d['alltoall']}")
    s.check("libtnbc.so default, 4 ranks on one node: blocking (by MPI or the engine), identical bytes; "
            "TNBC_BLOCKING=mpi: the engine idle", default_one_node)

    switch_ref = {}

    def switch_plain():
        switch_ref["out"] = lines(mpirun(SWITCH, 4, args=[60], timeout=120).stdout)
        expect(len(switch_ref["out"]) == 4 * 60 * 5, f"{len(switch_ref['out'])} lines")

    def check_switches(prefix, ranks):
        for r in range(ranks):
            keys = read_json(f"{prefix}.{r}.json")["adapt"]["keys"]
            expect(len(keys) >= 4, f"rank {r}: expected a key per communicator and operation: {keys}")
            for k in keys:
                # 60 calls per key, warm-up 2: a blocking probe, an early probe, a decision, a
                # run, a probe of the other path, another decision: both paths taken, more than
                # once.
                expect(k["early_calls"] >= 4 and k["blocking_calls"] >= 4 and k["decisions"] >= 2,
                       f"rank {r}: {k['op']} on communicator {k['comm']} did not switch: {k}")
        check_algorithms(prefix, ranks)

    def check_algorithms(prefix, ranks, rounds=True):
        # MPI's algorithms (adapt/algorithm.hpp): every Alltoall and Bcast key tried its
        # candidates (each a switch of algorithm between consecutive calls), and every rank of a
        # communicator chose the same one at the same calls: ranks that wrote different values for
        # one call would have run different algorithms against each other.  rounds=False: the
        # defaults, where a key of 60 blocking calls never pays for a round (trial.hpp's budget:
        # the first after 300-400 calls).
        chosen = {}
        for r in range(ranks):
            for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]:
                a = k["algorithm"]
                if not rounds:
                    expect(a["rounds"] == 0 and a["switches"] == 0,
                           f"rank {r}: {k['op']} on communicator {k['comm']} ran a round in 60 calls: {a}")
                elif MPI != "mpich":  # no such control variables: MPI's own choice, tried against the
                    # engine's exchange only
                    tried = {"auto", "engine"} if k["comm_size"] > 1 else {"auto"}
                    expect(a["chosen"] in tried and set(a["mean_us"]) <= tried and (a["rounds"] == 0 or len(tried) == 2),
                           f"rank {r}: {MPI} tried algorithms other than its own and the engine's: {a}")
                elif k["op"] in ("alltoall", "bcast"):
                    expect(a["rounds"] >= 1 and len(a["mean_us"]) >= (3 if k["op"] == "alltoall" else 2) and
                           all(v > 0 for v in a["mean_us"].values()),
                           f"rank {r}: {k['op']} on communicator {k['comm']} tried no algorithms: {a}")
                # adapt_switch's communicators: the world and its dup (4 ranks), and the halves
                # of the split by rank % 2 (2 ranks each).
                members = "all" if k["comm_size"] == ranks else f"rank%2={r % 2}"
                chosen.setdefault((k["comm"], members, k["op"], k["total_class"]), set()).add(
                    (a["chosen"], a["rounds"], a["switches"]))
        for key, seen in chosen.items():
            expect(len(seen) == 1, f"{key}: ranks chose differently: {seen}")

    def check_sites(prefix, ranks, cluster):
        # Every key's costs are broken down by call site (TNBC_STATS captures them): the sites
        # add up to the key, each is named in the program, and the bytes received are split by
        # node: the world Alltoall receives one block from the rank's own node and two from the
        # other on 2 nodes (all three from its own on one node).
        for r in range(ranks):
            for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]:
                sites = k.get("sites", [])
                expect(sites and all(x["site"].startswith("adapt_switch+0x") for x in sites),
                       f"rank {r}: call sites not named: {k}")
                # The innermost frame's function and object, from which tnbc-stats finds the line.
                expect(all(x["module"].endswith("/adapt_switch") and
                           (x["function"] == "main" or x["function"].startswith("a2a_")) for x in sites),
                       f"rank {r}: call sites without function or module: {sites}")
                for f in ("early_calls", "blocking_calls", "intra_node_bytes", "inter_node_bytes"):
                    expect(sum(x[f] for x in sites) == k[f], f"rank {r}: sites do not add up to {f}: {k}")
                if k["op"] == "alltoall" and k["comm_size"] == 4:
                    intra, inter = k["intra_node_bytes"], k["inter_node_bytes"]
                    want = inter == 2 * intra if cluster else inter == 0
                    expect(intra > 0 and want, f"rank {r}: bytes by node {intra}/{inter} (cluster={cluster})")

    def switch_local():
        prefix = os.path.join(tmp, "switch")
        # TNBC_ADAPT_WIDE=0: runs of 32, 64 between the probes, so that the paths switch
        # within 60 calls (wide decisions would make the first run 64 calls).
        out = lines(mpirun(SWITCH, 4, preload="tnbc", args=[60], timeout=180,
                           env={"TNBC_ADAPT": "measure", "TNBC_ADAPT_WARMUP": "2", "TNBC_ADAPT_WIDE": "0",
                                "TNBC_ALGORITHMS_AFTER": "1", "TNBC_EXPLORE": "off", "TNBC_STATS": prefix}).stdout)
        diff = sorted(set(out) ^ set(switch_ref.get("out", [])))
        expect(out == switch_ref.get("out"), f"differs from plain MPICH: {diff[:10]}")
        check_switches(prefix, 4)
        check_sites(prefix, 4, cluster=False)
    def check_engine_sample(prefix, ranks, never_afforded=False, job_spans=False):
        """The engine's first choice (blocking.cpp, kEngineAskAt): after a key's 12th blocking call the
        ranks agree on their mean CPU weight (a key whose early probe won returns early from then on
        and never comes to it); from 0.2 its blocking calls 12-15 are samples, MPI's
        and the engine's alternately, and the engine becomes the first choice where the sum of the
        ranks' costs of its samples is the lower (on a key across nodes, by more than their spread,
        the root of the summed squares of the difference between each candidate's two calls on each
        rank; each sample's cost, mpi_calls_us and engine_calls_us, adds up to the means).  Every
        rank of a communicator must see the same: a rank that ran the engine's exchange against
        MPI's blocking call would hang.  A key the engine won is checked by the program's
        intervals: across nodes, and on any key of a job that spans nodes (`job_spans`), at once,
        asked of no budget; in a job on one node where every rank's budget affords it, and a check
        some rank's budget refused is asked for again after twice the blocking calls (at the
        verdict, blocking call 16, then 32, 64, ...; each answer taken at the key's next call);
        `never_afforded`: no budget affords any check (TNBC_EXPLORE=0; a key the engine won predicts
        its check at what MPI's samples cost beyond the engine's, more than nothing), so every key
        of a one-node job the engine won was refused at each of those calls its run reached, and
        every key of a job across nodes it won was checked all the same.  In a job on one node the
        ranks then judge each sampled key with their other keys (blocking.cpp, the joint verdict),
        after its blocking call 32 and 64 (of 60: once): every rank the same verdict, and where it
        switched the key, its calls run what it said.  Returns (keys that sampled the engine, of
        them on one node)."""
        groups, choices = {}, {}
        for r in range(ranks):
            for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]:
                if "engine" not in k["algorithm"]["mean_us"]:
                    continue
                members = "all" if k["comm_size"] == ranks else f"rank%2={r % 2}"
                groups.setdefault((k["comm"], members, k["op"], k["total_class"]), []).append(
                    (r, dict(k["algorithm"]["engine_sample"], blocking_calls=k["blocking_calls"],
                             one_node=k["one_node"])))
                choices.setdefault((k["comm"], members, k["op"], k["total_class"]), []).append(
                    k["algorithm"]["chosen"])
        sampled = sampled_one_node = 0
        for key, seen in groups.items():
            agreed = {(e["asked"], e["weight"], e["engine_first"], e["refusals"]) for _, e in seen}
            expect(len(agreed) == 1, f"{key}: the ranks disagree on the engine's first choice: {seen}")
            asked, weight, first, sample_refusals = agreed.pop()
            # The samples ask the budgets only in a job across nodes (blocking.cpp, affords_engine_try).
            expect(job_spans or sample_refusals == 0, f"{key}: samples refused in a job on one node: {seen}")
            calls = min(e["blocking_calls"] for _, e in seen)
            if calls < 12:
                # The key returned early from its probe on (after its 6 warm-up calls) and never
                # came to its 12th blocking call: nothing asked, nothing sampled.
                expect(not asked and not first and all(e["mpi_calls"] == e["engine_calls"] == 0 for _, e in seen),
                       f"{key}: {calls} blocking calls, but the engine's samples were asked for: {seen}")
                continue
            expect(asked, f"{key}: the CPU weight was never agreed in {calls} blocking calls: {seen}")
            if weight < 0.2:
                expect(not first and all(e["mpi_calls"] == e["engine_calls"] == 0 for _, e in seen),
                       f"{key}: weight {weight} below 0.2 but the engine was sampled or chosen: {seen}")
                continue
            sampled += 1
            sampled_one_node += seen[0][1]["one_node"]
            expect(all(e["mpi_calls"] == e["engine_calls"] == 2 and e["mpi_us"] > 0 and e["engine_us"] > 0
                       for _, e in seen), f"{key}: not 2 sample calls of each: {seen}")
            expect(all(len(e[f"{c}_calls_us"]) == 2 and abs(sum(e[f"{c}_calls_us"]) / 2 - e[f"{c}_us"]) < 0.01
                       for _, e in seen for c in ("mpi", "engine")),
                   f"{key}: the sample calls' costs do not add up to their means: {seen}")
            engine_us = sum(e["engine_us"] for _, e in seen)
            mpi_us = sum(e["mpi_us"] for _, e in seen)
            one_node_job = seen[0][1]["one_node"] and not job_spans
            spread = 0.0 if seen[0][1]["one_node"] and job_spans else math.sqrt(
                sum((e[f"{c}_calls_us"][0] - e[f"{c}_calls_us"][1]) ** 2 for _, e in seen for c in ("mpi", "engine"))) / 2
            # (the sums are of means of 2 calls: the spread of the sums of both, halved; a margin of
            # 0.01 us for the statistics' rounding).  In a job on one node the engine unless its
            # samples cost more beyond the spread; elsewhere only where they cost less beyond it.
            margin = mpi_us + spread - engine_us if one_node_job else mpi_us - spread - engine_us
            if abs(margin) > 0.01:
                expect(first == (margin > 0),
                       f"{key}: engine first {first}, but its samples cost {engine_us:.0f} us against "
                       f"MPI's {mpi_us:.0f}, spread {spread:.0f} (a job on one node: {one_node_job}): {seen}")
            # The check after the samples chose the engine (blocking calls 16-23, agreed at 25;
            # where every rank's exploration budget affords it): the same verdict on every rank,
            # from the same sums, and the choice it says.
            checks = {(e["check"]["judged"], e["check"]["kept"], e["check"]["mpi_ms"], e["check"]["engine_ms"],
                       e["check"]["spread_ms"], e["check"]["calls"], e["check"]["refusals"]) for _, e in seen}
            expect(len(checks) == 1, f"{key}: the ranks disagree on the engine's check: {seen}")
            judged, kept, mpi_ms, engine_ms, spread_ms, check_calls, refused = checks.pop()
            joints = {(e["joint"]["verdicts"], e["joint"]["switches"], e["joint"]["last"]) for _, e in seen}
            expect(len(joints) == 1, f"{key}: the ranks disagree on the joint verdict: {seen}")
            verdicts, switched, last = joints.pop()
            # Posted after blocking call 32 (33 where the check's budget was asked at 32), agreed
            # at the key's next call.
            expect(verdicts == (1 if one_node_job and calls >= 40 else 0) and last in ("own", "engine", "mpi"),
                   f"{key}: {verdicts} joint verdicts in {calls} blocking calls (a job on one node: "
                   f"{one_node_job}): {seen}")
            if switched:
                # The joint verdict overrode the key's own; what follows judges the key's own.
                chosen = set(choices[key])
                expect(last != "own" and len(chosen) == 1 and (chosen == {"engine"}) == (last == "engine"),
                       f"{key}: the joint verdict '{last}' switched the key, but its calls run {chosen}")
                continue
            expect(not judged or check_calls == 8, f"{key}: the check judged after {check_calls} calls: {seen}")
            expect(first or not judged, f"{key}: the check judged {judged} without the engine first: {seen}")
            expect(first or refused == 0, f"{key}: a check refused {refused} times without the engine first: {seen}")
            budgeted = seen[0][1]["one_node"] and not job_spans  # the check asks the budgets
            expect(budgeted or refused == 0, f"{key}: the check was refused {refused} times, but it asks no budget "
                                             f"(one node {seen[0][1]['one_node']}, job spans nodes {job_spans}): {seen}")
            if first and not judged:
                # No trial round within 60 calls: a check not judged was refused (and asked again
                # at call 32; on one node only), or its calls were left off.
                expect(refused >= 1 or check_calls > 0, f"{key}: engine first, neither checked nor refused: {seen}")
                expect(set(choices[key]) == {"engine"}, f"{key}: engine first, not checked, but the key's "
                                                         f"blocking calls run {set(choices[key])}")
            if first and never_afforded and budgeted:
                calls = min(e["blocking_calls"] for _, e in seen)
                want, at = 1, 32
                while calls >= at + 1:
                    want, at = want + 1, 2 * at
                expect(refused == want and not judged and check_calls == 0,
                       f"{key}: the check refused {refused} times in {calls} blocking calls (judged {judged}, "
                       f"{check_calls} calls), want {want} and never run: {seen}")
            if judged:
                # In a job on one node the check drops the engine only on a loss beyond the spread.
                keeps = engine_ms <= mpi_ms + spread_ms if one_node_job else engine_ms < mpi_ms - spread_ms
                expect(kept == keeps and mpi_ms > 0 and engine_ms > 0,
                       f"{key}: the check kept {kept} on intervals {engine_ms} ms against {mpi_ms} ms "
                       f"(spread {spread_ms}): {seen}")
                chosen = set(choices[key])  # no trial round within 60 calls
                expect(len(chosen) == 1 and (chosen == {"engine"}) == kept,
                       f"{key}: the check kept {kept}, but the key's blocking calls run {chosen}")
        return sampled, sampled_one_node

    def engine_first_local():
        # The defaults on one node, 4 ranks on the machine's 2 cores: every call blocking; a key
        # whose MPI calls leave CPU that others want samples the engine's exchange and may take it
        # as its first choice.  Same bytes as plain MPICH, every choice agreed.
        prefix = os.path.join(tmp, "engfirst")
        out = lines(mpirun(SWITCH, 4, preload="tnbc", args=[60], timeout=180, env={"TNBC_STATS": prefix}).stdout)
        diff = sorted(set(out) ^ set(switch_ref.get("out", [])))
        expect(out == switch_ref.get("out"), f"differs from plain MPICH: {diff[:10]}")
        # adapt_switch computes between its calls: on a full node its keys weigh 0.4-0.5.
        expect(check_engine_sample(prefix, 4)[0] >= 1, "no key sampled the engine on a full node")
        check_algorithms(prefix, 4, rounds=False)
        # TNBC_EXPLORE=0 affords no check: refused at the samples' verdict (call 16) and when
        # asked again (call 32 of 60); never run, and the engine stays where it won.
        prefix = os.path.join(tmp, "engnocheck")
        out = lines(mpirun(SWITCH, 4, preload="tnbc", args=[60], timeout=180,
                           env={"TNBC_STATS": prefix, "TNBC_EXPLORE": "0"}).stdout)
        expect(out == switch_ref.get("out"), f"TNBC_EXPLORE=0: differs from plain MPICH: "
                                             f"{sorted(set(out) ^ set(switch_ref.get('out', [])))[:10]}")
        check_engine_sample(prefix, 4, never_afforded=True)

    s.check("adapt_switch under plain MPICH, 4 ranks", switch_plain)
    s.check("TNBC_ADAPT=measure, 4 ranks: paths switch mid-run and back (world, dup, split, "
            "Alltoallv, Bcast; call sites differ by rank): identical bytes", switch_local)
    s.check("the defaults on a full node: the engine's exchange sampled against MPI's blocking calls, "
            "its first choice agreed by the samples' costs, identical bytes", engine_first_local)

    def sums_in_background():
        # The decision's sums (adapt/tally.hpp), posted after a call, are completed by the
        # progress thread while the ranks sleep 200 ms (engine/background.hpp; a wide margin for
        # a loaded machine, where the thread waits for a core): the key's next call finds every
        # one complete, so nothing of them is exchanged right before it.  Left to MPI, each would
        # move only when that call waits for it (on 4 ranks most are not complete there).
        prefix = os.path.join(tmp, "sums")
        sums_idle_like_plain([16, 200], {"LD_PRELOAD": LIBS["tnbc"], "TNBC_ADAPT": "measure", "TNBC_ADAPT_WARMUP": "2",
                                         "TNBC_STATS": prefix})
        for r in range(4):
            sums = read_json(f"{prefix}.{r}.json")["adapt"]["sums"]
            expect(sums["posted"] >= 2 and sums["ready"] == sums["posted"],
                   f"rank {r}: sums not complete before the next call: {sums}")
            expect(sums["woke"] == sums["posted"], f"rank {r}: calls 200 ms apart, yet a sum did not wake "
                   f"the progress thread: {sums}")
            expect(read_json(f"{prefix}.{r}.json")["progress"]["started"],
                   f"rank {r}: sums woke the progress thread, yet it is not marked started")
    s.check("the decision's sums complete in the background between calls (ranks asleep): identical bytes",
            sums_in_background)

    def thread_ends_idle():
        # Early calls 2.5 s apart: each completes in the background, then the progress thread
        # idles past a second and ends (a live idle thread costs a full node's ranks:
        # docs/measurements/idle-thread.md), and the next call starts another.  A call whose op
        # found no thread would hang; one whose thread ended with its op in flight would too.
        prefix = os.path.join(tmp, "idle_end")
        sums_idle_like_plain([4, 2500], engine({"LD_PRELOAD": LIBS["tnbc"], "TNBC_STATS": prefix}))
        for r in range(4):
            d = read_json(f"{prefix}.{r}.json")
            expect(d["alltoall"]["early_return"] == 4, f"rank {r}: not every call returned early: {d['alltoall']}")
            expect(d["progress"]["starts"] == 4, f"rank {r}: 4 calls 2.5 s apart, yet the progress thread "
                   f"started {d['progress']['starts']} times (once per call expected)")
            expect(d["progress"]["user_us"] + d["progress"]["system_us"] > 0,
                   f"rank {r}: the threads' CPU was not recorded: {d['progress']}")
    s.check("the progress thread ends after a second idle and starts again at the next call: identical bytes",
            thread_ends_idle)

    def thread_refused():
        # The system refuses the library's threads on rank 2 (fail_threads.so: EAGAIN, as under a
        # process limit).  At MPI_Init the start's collective tells every rank, so none runs the
        # engine (a rank running MPI's Alltoall beside peers in the engine's exchange would wait
        # for ever): one message, identical bytes, no early return, no thread.
        prefix = os.path.join(tmp, "refused")
        res = sums_idle_like_plain([8, 10], engine({"LD_PRELOAD": f"{LIBS['tnbc']} {FAIL_THREADS}", "TNBC_STATS": prefix,
                                                    "TNBCTEST_FAIL_THREAD_RANKS": "2"}))
        said = [l for l in res.stderr.splitlines() if "engine not started" in l]
        expect(len(said) == 1 and "cannot start a thread" in said[0], f"not one message naming the cause: {res.stderr}")
        for r in range(4):
            d = read_json(f"{prefix}.{r}.json")
            expect(d["alltoall"]["early_return"] == 0 and not d["progress"]["started"],
                   f"rank {r}: the engine ran though rank 2 could not start a thread: {d['alltoall']} {d['progress']}")
        # Refused later, when the thread that ended idle is started again on rank 1 (its third
        # start: the check at MPI_Init, the first call's, the second call's; the third call's
        # fails too): those calls run the same exchange on the calling thread, without returning
        # early, so the peers, which return early, meet it.  One message; identical bytes.
        prefix = os.path.join(tmp, "refused_later")
        res = sums_idle_like_plain([3, 1500], engine({"LD_PRELOAD": f"{LIBS['tnbc']} {FAIL_THREADS}", "TNBC_STATS": prefix,
                                                      "TNBCTEST_FAIL_THREAD_RANKS": "1",
                                                      "TNBCTEST_FAIL_THREAD_FROM": "3"}))
        said = [l for l in res.stderr.splitlines() if "cannot start the engine's progress thread" in l]
        expect(len(said) == 1 and said[0].startswith("tnbc[1]"), f"not one message from rank 1: {res.stderr}")
        for r in range(4):
            a = read_json(f"{prefix}.{r}.json")["alltoall"]
            want = (1, {"no_thread": 2}) if r == 1 else (3, {})
            expect((a["early_return"], a["fallback_reasons"]) == want, f"rank {r}: {a}, expected {want}")
        # Refused from rank 1's first engine call on, across replay_diff's shapes (Alltoallv with
        # gaps, derived datatypes, Bcast from several roots, split communicators): every call of
        # rank 1 runs on its calling thread, beside peers that return early.
        prefix = os.path.join(tmp, "refused_diff")
        out = lines(mpirun(PROG, 4, args=[tmp], timeout=120,
                           env=engine({"LD_PRELOAD": f"{LIBS['tnbc']} {FAIL_THREADS}", "TNBC_STATS": prefix,
                                       "TNBCTEST_FAIL_THREAD_RANKS": "1", "TNBCTEST_FAIL_THREAD_FROM": "2"})).stdout)
        expect(out == ref.get("out"), f"differs from plain MPICH: {sorted(set(out) ^ set(ref.get('out', [])))[:10]}")
        d = read_json(f"{prefix}.1.json")
        threadless = d["alltoall"]["fallback_reasons"].get("no_thread", 0), d["bcast"]["fallback_reasons"].get("no_thread", 0)
        expect(d["alltoall"]["early_return"] + d["bcast"]["early_return"] == 0 and threadless[0] >= 10 and threadless[1] >= 5,
               f"rank 1 did not run its calls on the calling thread: {d['alltoall']} {d['bcast']}")
        d = read_json(f"{prefix}.0.json")
        expect(d["alltoall"]["early_return"] >= 10, f"rank 0 hardly returned early beside it: {d['alltoall']}")
    s.check("the system refuses the progress thread: at MPI_Init no rank runs the engine (identical bytes, one "
            "message); at a later start the calls complete on the calling thread (identical bytes)", thread_refused)

    def sums_fork():
        # Each rank fork()s right after every call and its child exits through exit(): the keys it
        # inherited go, and with them the sums the parent's progress thread tests, under a lock
        # that slow_test.so (every PMPI_Test sleeps 20 ms first) makes it hold most of the time.
        # A child that waited for that lock would never exit (it has no progress thread to free
        # it): the run would time out.
        prefix = os.path.join(tmp, "sums_fork")
        sums_idle_like_plain([16, 100, 1], {"LD_PRELOAD": f"{LIBS['tnbc']} {SLOW_TEST}", "TNBCTEST_SLOW_TEST_US": "20000",
                                            "TNBC_ADAPT": "measure", "TNBC_ADAPT_WARMUP": "2", "TNBC_STATS": prefix})
        for r in range(4):
            sums = read_json(f"{prefix}.{r}.json")["adapt"]["sums"]
            expect(sums["woke"] >= 2, f"rank {r}: too few sums handed to the progress thread to fork beside: {sums}")
    s.check("a fork()ed child exits while the progress thread tests a sum (PMPI_Test slowed): identical bytes",
            sums_fork)

    def sums_close_together():
        # Calls a few milliseconds apart: a wake-up of the progress thread per sum would cost more
        # than the sum it completes early (engine/background.hpp), so they leave it asleep and
        # the next call completes them.  (TNBC_BLOCKING=mpi and no budget: no engine call wakes
        # it either.)  Waking it for every sum took 22-35 wake-ups a rank here for 5 sums, leaving
        # it asleep 3.  A sum whose interval a loaded machine stretched past 50 ms still wakes it
        # (CI, 2026-12-03: 5 of 20 sums, 44 wake-ups in all): such a thread naps while its sum is
        # pending and for its idle second, a few dozen wake-ups, never the thousands of one that
        # spins.  So at most half the sums wake it, and its wake-ups stay within a bound that
        # grows with the sums that did.
        prefix = os.path.join(tmp, "sums_close")
        sums_idle_like_plain([64, 1], {"LD_PRELOAD": LIBS["tnbc"], "TNBC_ADAPT": "measure", "TNBC_ADAPT_WARMUP": "2",
                                       "TNBC_EXPLORE": "0", "TNBC_BLOCKING": "mpi", "TNBC_STATS": prefix})
        stats = [read_json(f"{prefix}.{r}.json") for r in range(4)]
        sums = [d["adapt"]["sums"] for d in stats]
        posted, woke = sum(x["posted"] for x in sums), sum(x.get("woke", 0) for x in sums)
        wakeups = sum(d["progress"].get("wakeups", 0) for d in stats)
        expect(all(x["posted"] >= 2 for x in sums) and 2 * woke <= posted,
               f"calls a few ms apart, yet their sums woke the progress thread: {sums}")
        expect(wakeups < 2 * posted + 10 * woke,
               f"the progress thread woke {wakeups} times for {posted} sums, {woke} of which woke it: {sums}")
        # The thread starts only for work (progress.hpp): a rank that ran no engine call and
        # whose sums woke nothing has none, which costs a full node's ranks a few percent.
        for r, d in enumerate(stats):
            expect(d["progress"]["started"] == (d["adapt"]["sums"].get("woke", 0) > 0),
                   f"rank {r}: progress thread started {d['progress']['started']} with sums {d['adapt']['sums']}")
    s.check("sums of calls close together leave the progress thread asleep: identical bytes", sums_close_together)

    def orders_program():
        # trace_order: stack buffers sharing pages with live data, write(), threads, buffers
        # freed or unmapped unread, MPI_IN_PLACE, data handed to MPI_Sendrecv unread.
        for n in (2, 4):
            a = lines(mpirun(ORDERS, n, args=[os.path.join(tmp, "o1")]).stdout)
            b = lines(mpirun(ORDERS, n, preload="tnbc", env=engine({"TNBC_MIN_BYTES": "4K"}),
                             args=[os.path.join(tmp, "o2")]).stdout)
            expect(a and a == b, f"{n} ranks: differs from plain MPICH: {sorted(set(a) ^ set(b))[:6]}")
    s.check("trace_order's access patterns under libtnbc.so: identical bytes", orders_program)

    def fortran():
        a = lines(mpirun(MIXED_F, 4, timeout=60).stdout)
        b = lines(mpirun(MIXED_F, 4, preload="tnbc", env=engine({"TNBC_MIN_BYTES": "4K"}), timeout=60).stdout)
        expect(a and a == b, f"Fortran output differs: {a} vs {b}")
    s.check("Fortran program under libtnbc.so: identical output", fortran)

    def large_block():
        # One Alltoallv block over 2 GiB, on ranks 0 and 1 of 3 only: the engine moves it in
        # pieces of at most 1 GiB on every rank.  (When those two ranks ran the blocking call
        # alone, rank 2 waited for the engine's messages for ever: the time limit catches it.)
        ref = lines(mpirun(LARGE, 3, timeout=240).stdout)
        prefix = os.path.join(tmp, "large")
        out = lines(mpirun(LARGE, 3, preload="tnbc", env=engine({"TNBC_STATS": prefix}), timeout=240).stdout)
        expect(len(ref) == 3 and out == ref, f"differs from plain MPICH: {out} vs {ref}")
        for r in range(3):
            reasons = read_json(f"{prefix}.{r}.json")["alltoallv"]["fallback_reasons"]
            expect("large_block" not in reasons, f"rank {r} ran the blocking call: {reasons}")
    s.check("an Alltoallv block over 2 GiB on two of three ranks: the engine moves it, identical bytes",
            large_block)

    def with_plan():
        # A plan for every call site of trace_order, keyed as plans key call sites (module
        # basename + offset per frame): Alltoall and Alltoallv sources in reverse with per-node
        # priority (the Alltoallv's ranks receive 28-36 KiB per block on average: different
        # size classes, one entry for any class, as tnbc-order plan writes it), Bcast in 4
        # segments delivered 3 1 2 0 down 2 chains.
        trace_dir = os.path.join(tmp, "trace")
        mpirun(ORDERS, 4, preload="tnbc_trace", env={"TNBC_TRACE_DIR": trace_dir}, args=[os.path.join(tmp, "t")])
        dump = json.loads(subprocess.run([DUMP, os.path.join(trace_dir, "0.tnbct")], capture_output=True,
                                         text=True, check=True).stdout)
        plan = ["tnbc-plan 2"]
        entries = 0
        seen = set()
        for call in dump["calls"]:
            site = dump["callsites"][call["callsite"]]
            key = (site["id"], call["op"])
            if key in seen or call["op"] not in ("alltoall", "alltoallv", "bcast"):
                continue
            seen.add(key)
            key = ";".join(f"{os.path.basename(f['module'])}+0x{f['offset']:x}" for f in site["frames"])
            plan.append(f"site {key} {call['op']} comm=* class=*")
            if call["op"] in ("alltoall", "alltoallv"):
                plan.append("  order " + " ".join(str(i) for i in range(call["comm_size"] - 1, -1, -1)))
                plan += ["  per-node on", "end"]
            else:
                plan += ["  order 3 1 2 0", "  segments 4", "  tree chains 2", "  per-node off", "end"]
            entries += 1
        plan.append(f"end-of-plan {entries}")
        path = os.path.join(tmp, "orders.plan")
        with open(path, "w") as f:
            f.write("\n".join(plan) + "\n")
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "p")]).stdout)
        prefix = os.path.join(tmp, "planned")
        res = mpirun(ORDERS, 4, preload="tnbc", env=engine({"TNBC_PLAN": path, "TNBC_STATS": prefix}),
                     args=[os.path.join(tmp, "r")])
        expect(lines(res.stdout) == ref, "output differs from plain MPICH with a plan")
        expect(all(l.startswith("tnbc[0]: plan ") for l in messages(res.stderr)), f"unexpected messages: {res.stderr}")
        summary = [l for l in res.stderr.splitlines() if l.startswith("tnbc[0]: summary: ")]
        expect(len(summary) == 1 and "TNBC_PLAN" not in summary[0], f"summary of a plan in use: {summary}")
        for r in range(4):
            d = read_json(f"{prefix}.{r}.json")
            expect(d["alltoall"]["planned"] >= 2 and d["alltoallv"]["planned"] >= 1 and d["bcast"]["planned"] >= 1,
                   f"rank {r}: plan entries not used: {d['alltoall']} {d['alltoallv']} {d['bcast']}")
            # One node: per-node priority has no inter-node send to hold back.
            expect(d["node_priority"]["gated_sends"] == 0, f"rank {r}: gated on one node: {d}")
            # Every early call with a plan entry took its order from the plan (tnbc-stats: early order).
            for k in d["adapt"]["keys"]:
                expect(k["order_learned_calls"] == 0 and (k["order_plan_calls"] >= 1) == (k["early_calls"] >= 1),
                       f"rank {r}: {k['op']}: order sources {k}")
                # ... and the statistics name the entry's order per site (tnbc-stats' sites list).
                for site in k["sites"]:
                    want = [3, 1, 2, 0] if k["op"] == "bcast" else list(range(k["comm_size"] - 1, -1, -1))
                    expect(site.get("plan_order") == want, f"rank {r}: {k['op']}: plan order {site.get('plan_order')}")
        ref_plan["path"] = path
    ref_plan = {}
    s.check("with a plan: priorities used at every call site, identical bytes", with_plan)

    def says_what_it_decided():
        # TNBC_LOG=info (the default): one line per key when its path is decided or changes, with
        # why, and a closing summary, from rank 0; TNBC_LOG=quiet: neither.
        def said(env, iters):
            res = mpirun(CURC, 4, preload="tnbc", env={"TNBC_MIN_BYTES": "4K", **env},
                         args=[1 << 16, iters, "blocking", 0])
            return [l for l in res.stderr.splitlines() if l.startswith("tnbc[")]
        one_node = said({}, 5)
        expect(any(l.startswith("tnbc[0]: decided: alltoall of 256 KiB on communicator 0 (4 ranks, one node): "
                                "blocking") for l in one_node), f"no one-node line: {one_node}")
        expect(sum(l.startswith("tnbc[0]: summary: 0 of rank 0's 6 ") for l in one_node) == 1,
               f"not one summary: {one_node}")
        expect(all(l.startswith("tnbc[0]: ") for l in one_node), f"not from rank 0 only: {one_node}")
        # The data is read at once: the warm-up's reads leave no room, so a blocking run of 32
        # calls follows it before the early probe.  With an exploration budget the ranks vote at
        # call 38 whether they afford the probe; TNBC_EXPLORE=0 affords none.  (Whether the
        # default 1% affords it depends on the MPI's speed: under Open MPI, blocking calls of
        # 0.4 ms predicted a probe within it, in a CI run.)  The warm-up's room point votes on the
        # reads' timing, which on a loaded machine found room (under Open MPI in CI runs): then the
        # probe is asked for at that room point, the warm-up's 4th call ("blocking from call 4",
        # asked again at its end), or at call 7, and again after as many calls again.
        budgeted = said({"TNBC_ADAPT": "measure", "TNBC_EXPLORE": "0"}, 50)
        expect(any(re.search(r"\(4 ranks\): blocking from call (39|7|4), early not tried yet: on \d of its ranks a "
                             r"probe would take exploring past TNBC_EXPLORE's 0% of the time run so far", l)
                   for l in budgeted), f"no deferral said: {budgeted}")
        expect(any(re.match(r"tnbc\[0\]: summary: 0 of rank 0's 51 .*; exploring cost \d+ ms of the 0% \(0 ms\) "
                            r"allowed, (1 probe|[2-9] probes) of the early path deferred", l) for l in budgeted),
               f"no exploration in the summary: {budgeted}")
        # Without it (TNBC_EXPLORE=off), the early probe follows the run (calls 38 to 40, and 41,
        # where its vote is posted), decided at call 42.
        measured = said({"TNBC_ADAPT": "measure", "TNBC_EXPLORE": "off"}, 50)
        # Both paths ran: the summary says what the early calls saved or cost, as measured.
        expect(any(re.match(r"tnbc\[0\]: summary: \d+ of rank 0's 51 .*; by the mean intervals of the 1 key that ran "
                            r"both paths, the early calls (saved|cost) about \d+ ms", l) for l in measured),
               f"no measured saving in the summary: {measured}")
        expect(not any("mean intervals" in l for l in one_node), f"a saving said on one node: {one_node}")
        expect(any(re.search(r"\(4 ranks\): (returns early|blocking) from call \d+: measured [0-9.]+ ms per call "
                             r"returning early, [0-9.]+ ms blocking", l) for l in measured),
               f"no measured decision: {measured}")
        if MPI == "mpich":
            # (Under Open MPI the room point's vote came out otherwise in a CI run: the early probe
            # followed the warm-up, and the line is not said.)
            expect(any(re.search(r"\(4 ranks\): blocking for its warm-up and the 32 calls after it, before early is "
                                 r"first tried: the reads \d of the 4 ranks that observed its warm-up leave no room", l)
                       for l in measured), f"no line for the room point: {measured}")
            # 256 KiB blocks: scattered first, the others (4 candidates with the engine's exchange)
            # tried once the key's calls pay for a round: from its blocking call 400.
            expect(any(re.search(r"\(4 ranks\): blocking calls run MPI's 'scattered' algorithm first \(MPI's default "
                                 r"lost to it in every measurement here\), the others are tried from blocking call 400 "
                                 r"on \(a round costs at most 3% of the calls before it\)", l)
                       for l in measured), f"no line for the first choice: {measured}")
            # On 2 ranks MPI's default first: every algorithm sends one block each way there, and
            # scattered only adds the rank's own block as a message (docs/algorithms.md).
            pair = mpirun(CURC, 2, preload="tnbc", env={"TNBC_MIN_BYTES": "4K", "TNBC_LOG": "debug"},
                          args=[1 << 16, 2, "blocking", 0]).stderr.splitlines()
            for r in range(2):
                expect(any(re.match(rf"tnbc\[{r}\]: alltoall on communicator 0: blocking call 0 ran MPI's 'auto' in ", l)
                           for l in pair), f"rank {r}: not MPI's default on 2 ranks: {pair}")
            expect(not any("algorithm first" in l for l in pair), f"a first choice said on 2 ranks: {pair}")
            debug = said({"TNBC_LOG": "debug"}, 2)
            expect("tnbc[0]: MPI's algorithms: chosen per call for alltoall, bcast" in debug, debug)
            # TNBC_CHUNK_BYTES=auto in a job on one node: 1 MiB chunks on every rank.
            for r in range(4):
                expect(f"tnbc[{r}]: engine's Alltoall(v) bodies in chunks of 1048576 bytes (0: whole) (auto: a job "
                       "on one node)" in debug, f"rank {r}: no one-node chunk size: {debug}")
            # Per-call detail: every rank says what ran each blocking call, and how long it took.
            for r in range(4):
                for n in range(3):
                    expect(any(re.match(rf"tnbc\[{r}\]: alltoall on communicator 0: blocking call {n} ran MPI's "
                                        r"'\w+' in [0-9.]+ ms", l) for l in debug),
                           f"rank {r}: no line for blocking call {n}: {debug}")
        # Every call early (TNBC_ADAPT=off): a line per call that returned early.
        early = said({"TNBC_LOG": "debug", "TNBC_ADAPT": "off"}, 2)
        expect(sorted(int(m.group(1)) for l in early
                      if (m := re.match(r"tnbc\[0\]: alltoall on communicator 0: call (\d+) returned early in [0-9.]+ ms", l)))
               == [0, 1, 2], f"not a line per early call: {early}")
        expect(sum(bool(re.match(r"tnbc\[0\]: decided: alltoall of 256 KiB on communicator 0 \(4 ranks\): returns "
                                 r"early wherever it can \(TNBC_ADAPT=off", l)) for l in early) == 1,
               f"not one line for TNBC_ADAPT=off: {early}")
        # A memory bound below one call's send copy: no call returns early, and each rank says so
        # once, at its first call (the bound is a rank's own).
        short = said({"TNBC_ADAPT": "off", "TNBC_MAX_MEMORY": "64K"}, 3)
        for r in range(4):
            told = [l for l in short if l.startswith(f"tnbc[{r}]: decided: alltoall on communicator 0: call 0 ran to "
                                                     "completion before returning, since returning early would pass "
                                                     "TNBC_MAX_MEMORY")]
            expect(len(told) == 1, f"rank {r}: not one memory line: {short}")
        expect(any(re.match(r"tnbc\[0\]: summary: 0 of rank 0's 4 ", l) for l in short), f"calls returned early: {short}")
        quiet = said({"TNBC_LOG": "quiet"}, 5)
        expect(quiet == [], f"TNBC_LOG=quiet printed: {quiet}")
    s.check("TNBC_LOG=info says each key's path and why, and sums up at the end; quiet says nothing",
            says_what_it_decided)

    def vote_after_the_call():
        # A decision point's vote is measured at the call where the decision is due, posted after
        # it and decided at the key's next call (decide.hpp, PathChoice): the call between
        # keeps the path of the segment that ends.  Learning off (no room point), MPI's
        # algorithms off and no exploration budget (no probe point): 6 blocking warm-up calls
        # (0-5), an early probe (6-8), the decision due at call 9, which still returns early,
        # decided at call 10.  Rank 3 comes to call 9 800 ms late: the others complete the vote
        # without it until it comes.
        env = {"TNBC_ADAPT": "measure", "TNBC_LEARN": "0", "TNBC_ALGORITHMS": "0", "TNBC_BLOCKING": "mpi",
               "TNBC_EXPLORE": "off", "TNBC_MIN_BYTES": "4K", "TNBC_LOG": "debug"}
        args = [14, 9, 3, 800]
        res = mpirun(LATE, 4, preload="tnbc", env=env, args=args, timeout=120)
        plain = mpirun(LATE, 4, args=args, timeout=120)
        got, want = lines(res.stdout), lines(plain.stdout)
        expect(len(want) == 4 * 14 and got == want, f"differs from plain MPI: {sorted(set(got) ^ set(want))[:6]}")
        err = res.stderr.splitlines()
        for r in range(4):
            expect(any(re.match(rf"tnbc\[{r}\]: alltoall on communicator 0: call 9 returned early", l) for l in err),
                   f"rank {r}: call 9 did not keep the early probe's path: {err}")
        expect(any(re.search(r"tnbc\[0\]: decided: alltoall of 256 KiB on communicator 0 \(4 ranks\): (returns early|"
                             r"blocking) from call 10: measured", l) for l in err), f"not decided at call 10: {err}")
    def exploration_budget():
        # The probe point (adapt/policy.hpp, Policy::probe_points): after the 6 warm-up calls
        # the ranks vote whether their exploration budgets afford an early probe (TNBC_EXPLORE),
        # decided at call 7.  Learning off: no room point.  late_rank's key calls every ~40 ms.
        # TNBC_EXPLORE=0 affords nothing: no call of the 14 returns early, on any rank, and the
        # deferral is counted alike everywhere.  100 affords the probe (predicted 4 calls x a
        # ~40 ms interval, against the ~280 ms run): calls 7 to 9 return early.
        base = {"TNBC_ADAPT": "measure", "TNBC_LEARN": "0", "TNBC_ALGORITHMS": "0", "TNBC_BLOCKING": "mpi",
                "TNBC_MIN_BYTES": "4K", "TNBC_LOG": "debug"}
        args = [14, 0, 0, 0]
        want = lines(mpirun(LATE, 4, args=args, timeout=120).stdout)
        for share, early_from in (("0", None), ("100", 7)):
            prefix = os.path.join(tmp, f"explore{share}")
            res = mpirun(LATE, 4, preload="tnbc", env=dict(base, TNBC_EXPLORE=share, TNBC_STATS=prefix),
                         args=args, timeout=120)
            got = lines(res.stdout)
            expect(len(want) == 4 * 14 and got == want,
                   f"TNBC_EXPLORE={share}: differs from plain MPI: {sorted(set(got) ^ set(want))[:6]}")
            err = res.stderr.splitlines()
            for r in range(4):
                early = sorted(int(m.group(1)) for l in err
                               for m in [re.match(rf"tnbc\[{r}\]: alltoall on communicator 0: call (\d+) returned early", l)]
                               if m)
                explore = read_json(f"{prefix}.{r}.json")["adapt"]["explore"]
                if early_from is None:
                    expect(early == [], f"rank {r}: TNBC_EXPLORE=0 returned early at calls {early}")
                    expect(explore["bound"] == 0 and explore["probes_deferred"] == 1 and explore["spent_us"] == 0,
                           f"rank {r}: TNBC_EXPLORE=0: {explore}")
                else:
                    expect(early[:3] == [early_from, early_from + 1, early_from + 2],
                           f"rank {r}: TNBC_EXPLORE={share}: the early probe did not begin at call {early_from}: {early}")
                    expect(explore["bound"] == 1 and explore["probes_deferred"] == 0, f"rank {r}: {explore}")
            if early_from is None:
                expect(any(re.match(r"tnbc\[0\]: summary: 0 of rank 0's 14 .*1 probe of the early path deferred", l)
                           for l in err), f"TNBC_EXPLORE=0: no deferral in the summary: {err[-3:]}")
    s.check("the exploration budget: TNBC_EXPLORE=0 defers the early probe on every rank alike, 100 affords it; "
            "identical bytes", exploration_budget)

    s.check("a decision point's vote, posted after its call and decided at the next, with one rank late there: "
            "identical bytes", vote_after_the_call)

    def watchdog_said(res):
        return [l for l in res.stderr.splitlines() if ": watchdog: " in l]

    def expect_rank_3_named(said):
        # Ranks 0-2 each report once, after the 1 s bound, that nothing came from rank 3; rank 3 never.
        for r in range(3):
            mine = [l for l in said if l.startswith(f"tnbc[{r}]: watchdog: ")]
            expect(len(mine) == 1 and "on a communicator of 4 ranks) has made no progress for 1 s" in mine[0]
                   and "nothing yet from rank 3," in mine[0], f"rank {r}: {mine}")
        expect(not any(l.startswith("tnbc[3]: watchdog: ") for l in said), f"rank 3 reported: {said}")

    def watchdog_names_the_late_rank():
        # Rank 3 comes to call 1 2.5 s after the others, which returned early and wait for its
        # data: with TNBC_WATCHDOG=1 each of them says, once, that nothing came from rank 3 (and
        # the bytes are still plain MPI's); with TNBC_WATCHDOG=0 nobody says anything.
        args = [3, 1, 3, 2500]
        plain = mpirun(LATE, 4, args=args, timeout=120)
        for bound in ("1", "0"):
            res = mpirun(LATE, 4, preload="tnbc", env={"TNBC_ADAPT": "off", "TNBC_WATCHDOG": bound}, args=args,
                         timeout=120)
            expect(lines(res.stdout) == lines(plain.stdout), f"TNBC_WATCHDOG={bound}: differs from plain MPI")
            if bound == "0":
                expect(watchdog_said(res) == [], f"TNBC_WATCHDOG=0 reported: {watchdog_said(res)}")
            else:
                expect_rank_3_named(watchdog_said(res))
    s.check("the watchdog names the rank an early call still waits for, once per rank, and stays quiet when "
            "off", watchdog_names_the_late_rank)

    def watchdog_names_the_stopped_rank():
        # Rank 3 is stopped by SIGSTOP (every thread of it, its progress thread too) as it comes to
        # call 1, for 4 s, while the others have returned early from it and wait for its data (a
        # stop at a chosen point inside its own exchange would race with its progress thread).  Each of
        # them says once, within the 1 s bound and while rank 3 is still stopped, that nothing
        # came from rank 3; after SIGCONT the job ends with plain MPI's bytes.
        plain = mpirun(LATE, 4, args=[3, 1, 3, 0], timeout=120)
        res = mpirun(LATE, 4, preload="tnbc", env={"TNBC_ADAPT": "off", "TNBC_WATCHDOG": "1"},
                     args=[3, 1, 3, 4000, "stop"], timeout=120)
        expect(lines(res.stdout) == lines(plain.stdout), "a stopped rank: differs from plain MPI")
        expect_rank_3_named(watchdog_said(res))
    s.check("a rank stopped by SIGSTOP at an exchange the others are in: their watchdog names it within the "
            "bound; identical bytes after SIGCONT", watchdog_names_the_stopped_rank)

    def barrier_watchdog_names_the_stopped_rank():
        # Rank 3 is stopped for 4 s before the MPI_Barrier that follows call 2 (the shared-memory
        # barrier's second: MPICH's runs the first, TNBC_BARRIER_AFTER=1), which the others wait
        # in: each says once, after the 1 s bound, that rank 3 is not yet in it; nobody says
        # anything with TNBC_WATCHDOG=0, and the bytes are plain MPI's either way.
        args = [4, 2, 3, 4000, "stop-at-barrier"]
        plain = mpirun(LATE, 4, args=[4, 2, 3, 0], timeout=120)
        for bound in ("1", "0"):
            res = mpirun(LATE, 4, preload="tnbc", env={"TNBC_ADAPT": "off", "TNBC_WATCHDOG": bound,
                                                       "TNBC_BARRIER_AFTER": "1"}, args=args, timeout=120)
            expect(lines(res.stdout) == lines(plain.stdout), f"TNBC_WATCHDOG={bound}: differs from plain MPI")
            said = watchdog_said(res)
            if bound == "0":
                expect(said == [], f"TNBC_WATCHDOG=0 reported: {said}")
                continue
            for r in range(3):
                mine = [l for l in said if l.startswith(f"tnbc[{r}]: watchdog: ")]
                expect(len(mine) == 1 and "MPI_Barrier on a communicator of 4 ranks (the shared-memory barrier's "
                       "call 2 on a node of 4 of them) has waited 1 s: not yet in it on this node: rank 3." in mine[0],
                       f"rank {r}: {mine}")
            expect(not any(l.startswith("tnbc[3]: watchdog: ") for l in said), f"rank 3 reported: {said}")
    s.check("a rank stopped by SIGSTOP before an MPI_Barrier the others are in: their watchdog names it within "
            "the bound, once; quiet when off; identical bytes", barrier_watchdog_names_the_stopped_rank)

    def watchdog_sees_a_stuck_progress_thread():
        # The progress thread's own watchdog runs in its rounds: a round that never ends says
        # nothing there.  slow_test.so holds rank 0's progress thread 3 s in its first
        # PMPI_Testsome (as a fault on a page only it publishes, or a blocked MPI call, would
        # hold it) while its program's thread waits for the engine's exchange (TNBC_BLOCKING=engine:
        # every call run to completion): rank 0 says once, after the 1 s bound, what its progress
        # thread is held in; the others, where they report, name rank 0; plain bytes.
        args = [3, 0, 0, 0]
        plain = mpirun(LATE, 4, args=args, timeout=120)
        env = {"LD_PRELOAD": f"{LIBS['tnbc']} {SLOW_TEST}", "TNBC_BLOCKING": "engine", "TNBC_WATCHDOG": "1"}
        res = mpirun(LATE, 4, env=env, args=args, timeout=120,
                     rank_env=[{"TNBCTEST_STALL_TESTSOME_MS": "3000"}, {}, {}, {}])
        expect(lines(res.stdout) == lines(plain.stdout), "a stuck progress thread: differs from plain MPI")
        said = watchdog_said(res)
        stuck = [l for l in said if "progress thread has been in one round" in l]
        # (The round began before the wait, which looks once a second: 1 or 2 s by then.)
        expect(len(stuck) == 1 and re.match(r"tnbc\[0\]: watchdog: this rank's progress thread has been in one "
                                            r"round for [12] s \(posting and testing the MPI requests", stuck[0]),
               f"rank 0 did not say, once, what its progress thread is held in: {said}")
        # (What rank 0 had sent before its thread was held, if anything, depends on the transport.)
        others = [l for l in said if not l.startswith("tnbc[0]: ")]
        expect(all(re.search(r"from ranks? 0\b", l) for l in others), f"another rank named another rank: {others}")
    s.check("a progress thread held in one round: its rank's waiting thread says so within the bound, the others "
            "name that rank; identical bytes", watchdog_sees_a_stuck_progress_thread)

    def per_node_entry_unused():
        # The plan without the entry of trace_order's first Alltoall site: its key (64 KiB blocks
        # on MPI_COMM_WORLD) agrees its shape at that first call, with no entry anywhere, so the
        # per-node entry of the second site (same key) takes no turns: one message says so.
        with open(ref_plan.get("path", ""), encoding="utf-8") as f:
            text = f.read().split("\n")
        blocks, cur = [], None
        for line in text:
            if line.startswith("site "):
                cur = [line]
            elif cur is not None:
                cur.append(line)
                if line == "end":
                    blocks.append(cur)
                    cur = None
        first = next(i for i, b in enumerate(blocks) if b[0].split()[2] == "alltoall")
        second_site = next(b[0].split()[1] for i, b in enumerate(blocks) if i > first and b[0].split()[2] == "alltoall")
        kept = [b for i, b in enumerate(blocks) if i != first]
        path = os.path.join(tmp, "unused.plan")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(["tnbc-plan 2"] + [l for b in kept for l in b] + [f"end-of-plan {len(kept)}"]) + "\n")
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "u")]).stdout)
        res = mpirun(ORDERS, 4, preload="tnbc", env=engine({"TNBC_PLAN": path}), args=[os.path.join(tmp, "uu")])
        expect(lines(res.stdout) == ref, "output differs from plain MPICH")
        msgs = [l for l in res.stderr.splitlines() if "not taken" in l]
        expect(len(msgs) == 1 and msgs[0].startswith(f"tnbc[0]: plan: per-node turns of site {second_site} not taken"),
               f"expected one message from rank 0 about {second_site}: {res.stderr}")
    s.check("a per-node entry whose key agreed no shape at its first call: no turns, one message, identical bytes",
            per_node_entry_unused)

    def plan_forces_paths():
        # The same plan with every Alltoall site forced blocking and every Bcast site forced
        # early ("return"), measured on one node (TNBC_ADAPT=measure): the plan wins from the
        # first call, without probes, and the bytes are MPICH's.
        with open(ref_plan.get("path", ""), encoding="utf-8") as f:
            text = f.read()
        out_lines, op = [], None
        for line in text.splitlines():
            if line.startswith("site "):
                op = line.split()[2]
            if line.strip() == "end" and op:
                out_lines.append("  return " + ("blocking" if op == "alltoall" else "early"))
                op = None
            out_lines.append(line)
        path = os.path.join(tmp, "forced.plan")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(out_lines) + "\n")
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "pf")]).stdout)
        prefix = os.path.join(tmp, "forced")
        res = mpirun(ORDERS, 4, preload="tnbc", args=[os.path.join(tmp, "f")],
                     env={"TNBC_PLAN": path, "TNBC_STATS": prefix, "TNBC_ADAPT": "measure", "TNBC_MIN_BYTES": "4K"})
        expect(lines(res.stdout) == ref, "output differs from plain MPICH with a forcing plan")
        for r in range(4):
            d = read_json(f"{prefix}.{r}.json")
            reasons = d["alltoall"]["fallback_reasons"]
            expect(reasons.get("plan", 0) >= 1 and "adapt_probe" not in reasons,
                   f"rank {r}: alltoall not forced blocking: {d['alltoall']}")
            expect(d["bcast"]["early_return"] >= 1 and "adapt_probe" not in d["bcast"]["fallback_reasons"],
                   f"rank {r}: bcast not forced early: {d['bcast']}")
    s.check("a plan's 'return blocking' / 'return early' decide from the first call, identical bytes",
            plan_forces_paths)

    def with_plan_on_cluster(placement, first, second):
        # Per-node priority needs two nodes to gate anything: 2 x 2 ranks.
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "pc")]).stdout)
        prefix = os.path.join(tmp, f"pernode_{placement}")
        out = lines(cluster_run(ORDERS, args=[os.path.join(tmp, "c")], preload="tnbc", placement=placement,
                                env=engine({"TNBC_PLAN": ref_plan.get("path", ""), "TNBC_STATS": prefix}),
                                timeout=180).stdout)
        expect(out == ref, f"differs from plain MPICH: {sorted(set(out) ^ set(ref))[:6]}")
        # The plan orders sources 3 2 1 0: on each node the member that comes first injects
        # first.  It never waits for its turn; the other one must have waited at least once.
        gated = gated_sends(prefix, 4)
        expect(all(gated[r] == 0 for r in first), f"the first rank of a node waited for its turn: {gated}")
        expect(all(gated[r] > 0 for r in second), f"the second rank of a node never waited: {gated}")
        # No 'window' in the plan: TNBC_CHUNK_WINDOW's 2 (each rank has 2 peers on the other node).
        windows = [read_json(f"{prefix}.{r}.json")["node_priority"]["send_window_max"] for r in range(4)]
        expect(windows == [2] * 4, f"send windows {windows}, expected TNBC_CHUNK_WINDOW's 2")

    def edited_plan(name, edit):
        """The plan of with_plan with each line replaced by edit(op of its entry, line)."""
        with open(ref_plan.get("path", ""), encoding="utf-8") as f:
            text = f.read().split("\n")
        op = None
        for i, line in enumerate(text):
            if line.startswith("site "):
                op = line.split()[2]
            text[i] = edit(op, line)
        path = os.path.join(tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(text))
        return path

    def alltoallv_turns_on_cluster():
        # The same plan with per-node priority for the Alltoallv alone: its ranks find the entry
        # by their own receive sizes (different size classes), agree on it at the first call and
        # take turns in its order 3 2 1 0; the bytes are MPICH's.  (With each rank following its
        # own entry, IS-like class S once hung.)  trace_order makes one Alltoallv: whether the
        # second member of a node reaches its sends while the first still sends is timing (it
        # did not, once in six runs), so every rank must have taken turns in every Alltoallv
        # and in nothing else, and the first members never wait.  The entry's `window 6` is every
        # rank's send window (TNBC_CHUNK_WINDOW stays 2): it is a sender's own, bytes unchanged.
        def edit(op, line):
            if line.strip() != "per-node on":
                return line
            return "  per-node on\n  window 6" if op == "alltoallv" else "  per-node off"
        path = edited_plan("alltoallv_turns.plan", edit)
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "vc")]).stdout)
        prefix = os.path.join(tmp, "vturns")
        out = lines(cluster_run(ORDERS, args=[os.path.join(tmp, "vcc")], preload="tnbc",
                                env=engine({"TNBC_PLAN": path, "TNBC_STATS": prefix}), timeout=180).stdout)
        expect(out == ref, f"differs from plain MPICH: {sorted(set(out) ^ set(ref))[:6]}")
        gated = gated_sends(prefix, 4)
        expect(all(gated[r] == 0 for r in (1, 3)), f"the first rank of a node waited for its turn: {gated}")
        for r in range(4):
            d = read_json(f"{prefix}.{r}.json")
            turns, calls = d["node_priority"]["turn_calls"], d["alltoallv"]["calls"]
            expect(calls >= 1 and turns == calls, f"rank {r}: {turns} calls took turns, {calls} Alltoallv calls")
            window = d["node_priority"]["send_window_max"]
            expect(window == 6, f"rank {r}: send window {window}, the plan's 'window 6' not taken")

    def wide_window_on_cluster():
        # 2 nodes x 4 ranks: each rank has 4 peers on the other node, so under per-node turns its
        # send window is 4 synchronous sends, not the TNBC_CHUNK_WINDOW=2 set here
        # (schedule::send_window, as tnbc-sim's predictions at scale set it).  The same plan's
        # sites with their orders for 8 ranks (sources 7 .. 0): identical bytes, the first member
        # of each node never waits for its turn, the last one does.
        eight = "  order " + " ".join(str(r) for r in range(7, -1, -1))
        path = edited_plan("eight.plan",
                           lambda op, line: eight if line.startswith("  order ") and op in ("alltoall", "alltoallv") else line)
        ref = lines(mpirun(ORDERS, 8, args=[os.path.join(tmp, "w8")], timeout=120).stdout)
        prefix = os.path.join(tmp, "wide")
        out = lines(cluster_run(ORDERS, args=[os.path.join(tmp, "w8c")], ppn=4, preload="tnbc",
                                env=engine({"TNBC_PLAN": path, "TNBC_STATS": prefix, "TNBC_CHUNK_WINDOW": "2"}),
                                timeout=240).stdout)
        expect(ref and out == ref, f"differs from plain MPICH: {sorted(set(out) ^ set(ref))[:6]}")
        gated = gated_sends(prefix, 8)
        # Nodes {0..3} and {4..7}: ranks 3 and 7 come first in the order 7 .. 0, ranks 0 and 4 last.
        expect(gated[3] == 0 and gated[7] == 0, f"the first rank of a node waited for its turn: {gated}")
        expect(gated[0] > 0 and gated[4] > 0, f"the last rank of a node never waited: {gated}")
        windows = [read_json(f"{prefix}.{r}.json")["node_priority"]["send_window_max"] for r in range(8)]
        expect(windows == [4] * 8, f"send windows {windows}, expected one chunk per peer on the other node (4)")

    def no_shared_window():
        # Open MPI's one-sided component for UCX makes no shared windows.  The node's turn
        # counters are the engine's own shared-memory segment (shim/shm_segment.hpp), not an MPI
        # window: turns are taken all the same, without a message, identical bytes.
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "nw")]).stdout)
        prefix = os.path.join(tmp, "nowin")
        res = cluster_run(ORDERS, args=[os.path.join(tmp, "nwc")], preload="tnbc",
                          env=engine({"TNBC_PLAN": ref_plan.get("path", ""), "TNBC_STATS": prefix,
                                      "OMPI_MCA_osc": "ucx"}), timeout=180)
        expect(lines(res.stdout) == ref, f"differs from plain {MPI}: {sorted(set(lines(res.stdout)) ^ set(ref))[:6]}")
        msgs = [l for l in res.stderr.splitlines() if "per-node priority off" in l]
        expect(not msgs, f"per-node priority turned off: {msgs}")
        # Nodes {0, 1} and {2, 3}; the plan orders sources 3 2 1 0: ranks 0 and 2 wait their turn.
        gated = gated_sends(prefix, 4)
        expect(gated[1] == 0 and gated[3] == 0 and gated[0] > 0 and gated[2] > 0,
               f"turns not taken in the plan's order: {gated}")

    def turn_counters_fail():
        # The node's turn counters cannot be shared when shm_open fails on one of its ranks
        # (fail_shm_open.so, preloaded beside libtnbc.so).  That node's ranks agree to go
        # without turns and its first rank says so once; the other node still takes turns; no
        # hang, identical bytes.  Nodes {0, 1} and {2, 3}; the plan orders sources 3 2 1 0, so
        # with turns ranks 0 and 2 wait theirs.
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "tf")]).stdout)
        # Rank 3 cannot open the segment rank 2 made; rank 0 cannot make one.
        for failing, quiet, why in ((3, 0, "failed on another rank"), (0, 2, "shm_open: Permission denied")):
            prefix = os.path.join(tmp, f"turnfail{failing}")
            res = cluster_run(ORDERS, args=[os.path.join(tmp, f"tfc{failing}")], preload=["tnbc", FAIL_SHM],
                              env=engine({"TNBC_PLAN": ref_plan.get("path", ""), "TNBC_STATS": prefix,
                                          "TNBCTEST_FAIL_SHM_PREFIX": "/tnbc-turns-",
                                          "TNBCTEST_FAIL_SHM_RANKS": str(failing)}), timeout=180)
            out = lines(res.stdout)
            expect(out == ref, f"rank {failing} failing: differs from plain {MPI}: {sorted(set(out) ^ set(ref))[:6]}")
            msgs = [l for l in messages(res.stderr) if "per-node" in l]
            off = 2 if failing >= 2 else 0
            expect(len(msgs) == 1 and msgs[0].startswith(f"tnbc[{off}]: per-node priority off on this node")
                   and why in msgs[0], f"rank {failing} failing: expected one message from rank {off} ({why}): {msgs}")
            gated = gated_sends(prefix, 4)
            expect(gated[off] == 0 and gated[off + 1] == 0 and gated[quiet] > 0 and gated[quiet + 1] == 0,
                   f"rank {failing} failing: expected turns on the other node only: {gated}")

    def bad_plan():
        path = os.path.join(tmp, "bad.plan")
        with open(path, "w") as f:
            f.write("tnbc-plan 2\nsite x alltoall comm=* class=*\n  order 0 0\n")
        prefix = os.path.join(tmp, "badplan")
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "p2")]).stdout)
        res = mpirun(ORDERS, 4, preload="tnbc", env=engine({"TNBC_PLAN": path, "TNBC_STATS": prefix}),
                     args=[os.path.join(tmp, "b")])
        msgs = messages(res.stderr)
        expect(len(msgs) == 1 and msgs[0].startswith(f"tnbc[0]: TNBC_PLAN={path}: line ")
               and msgs[0].endswith("; using default priorities"), f"expected one message from rank 0: {msgs}")
        expect(lines(res.stdout) == ref, "output differs from plain MPICH with a bad plan")
        expect(read_json(prefix + ".0.json")["alltoall"]["planned"] == 0, "a bad plan was used")
        nope = os.path.join(tmp, "nope.plan")
        missing = mpirun(ORDERS, 2, preload="tnbc", env={"TNBC_PLAN": nope}, args=[os.path.join(tmp, "m")])
        expect(f"tnbc[0]: TNBC_PLAN={nope}: cannot open: No such file or directory; using default priorities"
               in missing.stderr, missing.stderr)
    s.check("a corrupt or missing plan: one message from rank 0, defaults, identical bytes", bad_plan)

    def foreign_plan():
        # A well-formed plan for call sites this program does not have (as after a rebuild: sites
        # are module + offset): nothing to refuse at the start, so the closing summary says that
        # no call matched it, and the calls ran as without a plan.
        path = os.path.join(tmp, "foreign.plan")
        with open(path, "w") as f:
            f.write("tnbc-plan 2\nsite nosuch+0x10 alltoall comm=* class=*\n  order 3 2 1 0\n"
                    "  per-node off\nend\nend-of-plan 1\n")
        prefix = os.path.join(tmp, "foreign")
        ref = lines(mpirun(ORDERS, 4, args=[os.path.join(tmp, "fp")]).stdout)
        res = mpirun(ORDERS, 4, preload="tnbc", env=engine({"TNBC_PLAN": path, "TNBC_STATS": prefix}),
                     args=[os.path.join(tmp, "f")])
        expect(lines(res.stdout) == ref, "output differs from plain MPICH with a foreign plan")
        summary = [l for l in res.stderr.splitlines() if l.startswith("tnbc[0]: summary: ")]
        expect(len(summary) == 1 and "none matched an entry of TNBC_PLAN" in summary[0]
               and "a rebuilt program needs a new trace and plan" in summary[0], f"summary: {summary}")
        expect(all(read_json(f"{prefix}.{r}.json")[op]["planned"] == 0 for r in range(4)
                   for op in ("alltoall", "alltoallv", "bcast")), "a foreign plan's entry was used")
    s.check("a plan for other call sites: the summary says none matched, identical bytes", foreign_plan)

    def special_plan_files():
        # Read naively, /dev/zero grows without end, a FIFO blocks MPI_Init and a folder reads as
        # an empty plan: each must be named for what it is, once, and the run must go on.
        fifo = os.path.join(tmp, "plan.fifo")
        os.mkfifo(fifo)
        ref = lines(mpirun(ORDERS, 2, args=[os.path.join(tmp, "sp")]).stdout)
        for path, why in (("/dev/zero", "not a regular file (a character device)"),
                          (fifo, "not a regular file (a FIFO)"), (tmp, "is a directory")):
            res = mpirun(ORDERS, 2, preload="tnbc", env=engine({"TNBC_PLAN": path}),
                         args=[os.path.join(tmp, "s")], timeout=60)
            msgs = messages(res.stderr)
            expect(msgs == [f"tnbc[0]: TNBC_PLAN={path}: {why}; using default priorities"], f"{path}: {msgs}")
            expect(lines(res.stdout) == ref, f"{path}: output differs from plain MPICH")
    s.check("a device, a FIFO or a folder as the plan: one message naming it, defaults", special_plan_files)

    def on_cluster():
        prefix = os.path.join(tmp, "cluster")
        out = lines(cluster_run(PROG, args=[tmp], preload="tnbc", env=engine({"TNBC_STATS": prefix}),
                                timeout=240).stdout)
        expect(out == ref.get("out"), f"2 x 2 ranks differ from plain: {sorted(set(out) ^ set(ref.get('out', [])))[:10]}")
        check_stats(prefix, 4)
    def barrier_between():
        # Barriers between early-returning collectives on 2 nodes: the leaders of the
        # shared-memory barrier must run the same collective whatever each has in flight.
        res = cluster_run(OVERLAP, args=[1 << 20, 3, "blocking", 0, 0], preload="tnbc",
                          env=engine({"TNBC_LOG": "debug"}), timeout=90)
        expect("result mode=blocking" in res.stdout, res.stdout)
        # TNBC_CHUNK_BYTES=auto in a job across nodes: 64 KiB chunks on every rank.
        for r in range(4):
            expect(f"tnbc[{r}]: engine's Alltoall(v) bodies in chunks of 65536 bytes (0: whole) (auto: a job across "
                   "nodes)" in res.stderr, f"rank {r}: no chunk size across nodes: {res.stderr[-2000:]}")
    def switch_on_cluster(name, env, placement="block"):
        """adapt_switch on 2 emulated nodes with `env`: prints what plain MPICH prints; the prefix
        of its statistics."""
        prefix = os.path.join(tmp, name)
        out = lines(cluster_run(SWITCH, args=[60], preload="tnbc", env=dict(env, TNBC_STATS=prefix), timeout=240,
                                placement=placement).stdout)
        diff = sorted(set(out) ^ set(switch_ref.get("out", [])))
        expect(out == switch_ref.get("out"), f"differs from plain MPICH: {diff[:10]}")
        return prefix

    def switch_cluster():
        # The default on 2 nodes, without the exploration budget: nothing is on one node; every
        # key runs its 6 warm-up calls blocking, probes early, and is decided by all its ranks
        # together.  MPI's algorithms are
        # tried from each key's second blocking call (TNBC_ALGORITHMS_AFTER): a key makes fewer
        # than the default 16 here.
        prefix = switch_on_cluster("switchc", {"TNBC_ALGORITHMS_AFTER": "1", "TNBC_EXPLORE": "off"})
        for r in range(4):
            keys = read_json(f"{prefix}.{r}.json")["adapt"]["keys"]
            world = [k for k in keys if k["op"] == "alltoall" and k["comm_size"] == 4]
            expect(world and all(k["decisions"] >= 1 for k in world), f"rank {r}: no decisions: {keys}")
            expect(all(k["blocking_calls"] >= 6 and k["early_calls"] >= 2 for k in world),
                   f"rank {r}: not 6 blocking warm-up calls, then an early probe: {world}")
            # The split's halves {0, 2} and {1, 3} each span both nodes with block placement.
            expect(not any(k["one_node"] for k in keys), f"rank {r}: a key on one node: {keys}")
            # The engine's exchange run blocking is a candidate of every key spanning nodes
            # (TNBC_BLOCKING=auto): tried, so its blocking calls switched between MPI and the engine.
            for k in keys:
                a = k["algorithm"]
                expect(a["mean_us"].get("engine", 0) > 0 and k["engine_blocking_calls"] >= 1 and
                       k["blocking_calls"] > k["engine_blocking_calls"],
                       f"rank {r}: {k['op']} on communicator {k['comm']} did not try the engine blocking: {k}")
        check_sites(prefix, 4, cluster=True)
        check_algorithms(prefix, 4)

    def engine_blocking_cluster():
        # TNBC_BLOCKING=engine: every blocking call (the warm-up, the runs, the probes) runs the
        # engine's exchange to completion, between early calls of the same keys.
        prefix = switch_on_cluster("engblk", {"TNBC_BLOCKING": "engine"})
        for r in range(4):
            for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]:
                expect(k["blocking_calls"] >= 6 and k["engine_blocking_calls"] == k["blocking_calls"] and
                       k["algorithm"]["chosen"] == "engine",
                       f"rank {r}: {k['op']} on communicator {k['comm']}: blocking calls not on the engine: {k}")

    def engine_first_cluster():
        # The defaults on 2 nodes with no bound on exploring (TNBC_EXPLORE=off: in a job across
        # nodes the engine's samples ask the budgets, blocking.cpp, affords_engine_try).  Placed
        # cyclic, ranks {0, 2} and {1, 3} share a node: the split's halves lie within one node, the
        # world and its duplicate span both.  A key of either kind whose samples chose the engine
        # is checked by the program's intervals (blocking.cpp, schedule_check), and every rank
        # agrees on each step.
        prefix = switch_on_cluster("engfirstc", {"TNBC_EXPLORE": "off"}, placement="cyclic")
        for r in range(4):
            keys = read_json(f"{prefix}.{r}.json")["adapt"]["keys"]
            expect({k["one_node"] for k in keys} == {False, True},
                   f"rank {r}: placed cyclic, want keys within one node and across: {keys}")
        sampled, one_node = check_engine_sample(prefix, 4, job_spans=True)
        expect(sampled >= 1 and one_node >= 1,
               f"{sampled} keys sampled the engine on 2 nodes, {one_node} of them within one: want one of each")

    def engine_samples_refused_cluster():
        # TNBC_EXPLORE=0 on 2 nodes: no rank's budget affords the engine's samples in a job across
        # nodes, so a key whose weight calls for them (0.2 or more) is refused at its 12th blocking
        # call and asked again after its 24th and 48th (of 60), while the weight still calls for
        # them; it never runs the engine's exchange, and every rank counts the same refusals.
        prefix = switch_on_cluster("engrefc", {"TNBC_EXPLORE": "0"}, placement="cyclic")
        refused = {}
        for r in range(4):
            for k in read_json(f"{prefix}.{r}.json")["adapt"]["keys"]:
                if "engine" not in k["algorithm"]["mean_us"]:
                    continue
                e = k["algorithm"]["engine_sample"]
                expect(e["mpi_calls"] == e["engine_calls"] == 0 and not e["engine_first"] and
                       k["engine_blocking_calls"] == 0 and e["refusals"] <= 3,
                       f"rank {r}: {k['op']} on communicator {k['comm']}: the engine ran without a budget: {k}")
                members = "all" if k["comm_size"] == 4 else f"rank%2={r % 2}"
                refused.setdefault((k["comm"], members, k["op"], k["total_class"]), set()).add(e["refusals"])
        expect(all(len(v) == 1 for v in refused.values()), f"the ranks disagree on the refusals: {refused}")
        expect(any(v == {n} and n >= 1 for v in refused.values() for n in v),
               f"no key was refused its samples (adapt_switch's keys weigh 0.4-0.5): {refused}")

    root = os.geteuid() == 0
    if root:
        s.check("libtnbc.so on 2 emulated nodes x 2 ranks: identical bytes", on_cluster)
        s.check("libtnbc.so default on 2 emulated nodes x 2 ranks: decisions agreed, identical bytes",
                switch_cluster)
        s.check("TNBC_BLOCKING=engine on 2 emulated nodes: every blocking call on the engine, identical bytes",
                engine_blocking_cluster)
        s.check("the defaults on 2 emulated nodes placed cyclic, no bound on exploring: the engine's samples "
                "agreed, a key they chose (within one node or across) checked all the same, identical bytes",
                engine_first_cluster)
        s.check("TNBC_EXPLORE=0 on 2 emulated nodes: the engine's samples refused by the budgets, asked "
                "again, never run, identical bytes", engine_samples_refused_cluster)
        s.check("barriers between early-returning alltoalls on 2 nodes finish", barrier_between)
        # Nodes {0, 1} and {2, 3}: ranks 1 and 3 come first in the order 3 2 1 0.
        s.check("with a per-node plan on 2 emulated nodes x 2 ranks: identical bytes",
                lambda: with_plan_on_cluster("block", first=(1, 3), second=(0, 2)))
        # Nodes {0, 2} and {1, 3}: ranks 2 and 3 come first.
        s.check("the same with ranks dealt round robin (node members not consecutive)",
                lambda: with_plan_on_cluster("cyclic", first=(2, 3), second=(0, 1)))
        s.check("per-node turns for an Alltoallv whose ranks' sizes differ in class: agreed, taken, its plan's send "
                "window taken, identical bytes",
                alltoallv_turns_on_cluster)
        s.check("per-node turns on 2 emulated nodes x 4 ranks (4 peers on the other node each): identical bytes",
                wide_window_on_cluster)
        if MPI == "openmpi":
            s.check("a per-node plan where the MPI makes no shared window: turns taken (the engine's "
                    "own segment), identical bytes", no_shared_window)
        s.check("per-node turn counters that cannot be shared on one node (shm_open fails on one rank): "
                "that node goes without turns and says so once, the other takes them, identical bytes",
                turn_counters_fail)
    s.finish(skipped=None if root else "the 2-node checks (they need root for network namespaces)")


if __name__ == "__main__":
    main()
