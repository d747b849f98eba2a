"""Every collective x algorithm on a two-level topology at pod scale (issue 25's target:
p = 256 in <= 2 s each).

    python benchmarks/ccl_two_level.py                      # p = 8 x 32 = 256, 64 MiB and 1 MiB
    python benchmarks/ccl_two_level.py --outer 8 --exact    # p = 64, fast path vs event engine
    python benchmarks/ccl_two_level.py --sizes 64 --topos h100 --timeout 60 --only direct

Topologies (both two switch dimensions, no ring dimension, so no half-ring tie, ADR 0022):

* ``h100``: ``h100-sxm-8x4`` with its outer dimension grown to ``--outer`` nodes (8 GPUs on
  an NVSwitch with 18 ports, rails of NDR NICs across nodes), its ``collectives:`` section
  reset to the neutral runtime (no launch, Simple at line rate, today's channels). Why: the
  fast paths of ``run.FAST_PATHS`` take only the neutral runtime, and ``protocol: auto``
  runs the model of every call before it runs the call; a launch is a shift of every record
  (``run.run_schedule``) and changes no cost.
* ``npu``: npu-1h's links on both dimensions (switch 8 x switch ``--outer``, 50 GB/s, 1 us
  per hop, one port), npu-1h's chunk and staging buffers.

Sizes: 64 MiB (as ADR 0024 measured the hierarchical algorithms on h100-sxm-8x4; 256 KiB
per chip and segment at p = 256, so every message is cut into the staging minimum of
chunks) and 1 MiB (the latency-bound end: 4 KiB per chip at p = 256). Issue 25's ring
targets use 256 MiB on a one-level ring; here 256 MiB only adds chunks per message
(chunk_kib 1024) and so cost, without changing which structure applies.

Each row runs in its own process (its own peak RSS, ``ru_maxrss``) with a CPU timeout and
prints: collective, algorithm, topology, p, size, path (``event``: the full program through
the event engine, also where a fast path tried its groups and none passed; otherwise the
class of the fast path's run), the representative chips it timed, CPU s of the call and its
metrics, peak RSS, records stored and in the full log, simulated time, ``#wrong``, the
ops estimate of ``sim.collectives.budget`` and whether the default budget refuses it, and
with ``--exact`` (p <= 64) whether the fast path's op log equals the event engine's
(SHA-256 over every column). The ops budget is raised (``NPUBENCH_OPS_BUDGET``) as
``ccl_scale.py`` does, so the table shows cost, not refusals.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

MIB = 1 << 20
CASES: tuple[tuple[str, str], ...] = (
    ("allreduce", "ring"),
    ("allreduce", "direct"),
    ("allreduce", "halving_doubling"),
    ("allreduce", "double_binary_tree"),
    ("allreduce", "nvls"),
    ("allreduce", "hierarchical"),
    ("allreduce", "tree_ring"),
    ("all_gather", "ring"),
    ("all_gather", "direct"),
    ("all_gather", "recursive_doubling"),
    ("all_gather", "hierarchical"),
    ("reduce_scatter", "ring"),
    ("reduce_scatter", "direct"),
    ("reduce_scatter", "recursive_halving"),
    ("reduce_scatter", "hierarchical"),
    ("alltoall", "direct"),
    ("alltoall", "pairwise"),
    ("broadcast", "ring"),
    ("broadcast", "binary_tree"),
    ("broadcast", "direct"),
    ("reduce", "ring"),
    ("reduce", "binary_tree"),
    ("reduce", "direct"),
    ("sendrecv", "direct"),
)
NEUTRAL = {"launch_ns": None, "step_sync_ns": None, "channels": None, "protocol": None}


def topology(name: str, outer: int) -> object:
    from sim import load_topology

    if name == "h100":
        t = load_topology("h100-sxm-8x4")
        dims = [d.to_dict() if hasattr(d, "to_dict") else d for d in _dims(t)]
        dims[1]["size"] = outer
        t = t.replace_dimensions(dims)
        return t.replace_collectives(**NEUTRAL, protocols=None)
    t = load_topology("npu-1h")
    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    return t.replace_dimensions(
        [{"shape": "switch", "size": 8, **link}, {"shape": "switch", "size": outer, **link}]
    )


def _dims(t: object) -> list[dict[str, object]]:
    data = t.to_dict()  # type: ignore[attr-defined]
    return [dict(d) for d in data["chips"]["dimensions"]]


def _sha(log: object) -> str:
    from sim.oplog import COLUMNS

    h = hashlib.sha256()
    for c in COLUMNS:
        h.update(log.column(c).tobytes())  # type: ignore[attr-defined]
    return h.hexdigest()[:16]


def one(collective: str, algorithm: str, topo_name: str, outer: int, mib: int, exact: bool) -> dict:
    from sim.collectives import collective_metrics, run_collective
    from sim.collectives.budget import estimate_collective
    from sim.collectives.run import CollectiveRun, run_schedule
    from sim.fabric import build_network
    from sim.limits import DEFAULT_OPS_BUDGET, OPS_BUDGET_ENV

    topo = topology(topo_name, outer)
    nbytes = mib * MIB
    est = estimate_collective(topo, nbytes, algorithm, None)
    refused = est.records + est.hops > DEFAULT_OPS_BUDGET
    os.environ[OPS_BUDGET_ENV] = "50000000"
    row: dict[str, object] = {
        "collective": collective,
        "algorithm": algorithm,
        "topology": topo_name,
        "p": topo.chips.count,  # type: ignore[attr-defined]
        "mib": mib,
        "estimate": est.records + est.hops,
        "refused": refused,
    }
    c0 = time.process_time()
    try:
        run = run_collective(topo, nbytes, algorithm, collective)  # type: ignore[arg-type]
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc)[:90]}"
        return row
    m = collective_metrics(run)
    cpu = time.process_time() - c0
    log = run.log
    rep = getattr(log, "rep", None)
    quotient = getattr(run, "quotient", None)
    group = getattr(run, "group", None) or getattr(quotient, "group", None)
    timed_whole = type(run) is CollectiveRun or (hasattr(run, "quotient") and quotient is None)
    row.update(
        path="event" if timed_whole else type(run).__name__,
        reps=topo.chips.count // group.order if group is not None else topo.chips.count,  # type: ignore[attr-defined]
        cpu=cpu,
        rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        stored=len(rep) if rep is not None else len(log),
        records=len(log),
        time_us=m["time_ns"] / 1000,
        wrong=run.wrong,
        same="",
    )
    if exact and type(run) is not CollectiveRun:
        from sim.collectives.catalog import build_schedule

        net = build_network(topo)  # type: ignore[arg-type]
        sched = build_schedule(topo, nbytes, algorithm, collective, network=net)  # type: ignore[arg-type]
        c0 = time.process_time()
        ref = run_schedule(sched, net)
        row["exact_cpu"] = time.process_time() - c0
        same = _sha(ref.log) == _sha(log) and ref.wrong == run.wrong
        row["same"] = "identical" if same else "DIFFERENT"
    return row


def spawn(case: tuple[str, str], topo: str, outer: int, mib: int, exact: bool, timeout: float):
    cmd = [sys.executable, __file__, "--one", *case, topo, str(outer), str(mib), str(int(exact))]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"collective": case[0], "algorithm": case[1], "topology": topo, "timeout": timeout}
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or "").strip().splitlines()[-1:] or ["?"]
        return {"collective": case[0], "algorithm": case[1], "topology": topo, "error": tail[0]}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


HEAD = (
    f"{'collective':<14} {'algorithm':<18} {'topo':<5} {'p':>4} {'MiB':>4} {'path':<12} "
    f"{'reps':>4} "
    f"{'cpu s':>7} {'rss MiB':>7} {'stored':>8} {'records':>9} {'sim us':>9} {'#wrong':>6} "
    f"{'est ops':>9} {'default':>7} {'vs event engine':>26}"
)


def line(r: dict, outer: int, mib: int) -> str:
    p = r.get("p", 8 * outer)
    lead = f"{r['collective']:<14} {r['algorithm']:<18} {r['topology']:<5} {p:>4} {mib:>4} "
    if "timeout" in r:
        return lead + f"{'?':<12} {'':>4} {'> ' + str(int(r['timeout'])):>7}   (CPU timeout)"
    if "error" in r:
        return lead + f"n/a: {r['error']}"
    same = r["same"] and f"{r['same']} (event {float(r['exact_cpu']):.2f} s)"
    verdict = "refused" if r["refused"] else "ok"
    return lead + (
        f"{r['path']:<12} {r['reps']:>4} {float(r['cpu']):7.2f} {float(r['rss']):7.0f} "
        f"{r['stored']:>8} "
        f"{r['records']:>9} {float(r['time_us']):9.1f} {r['wrong']:>6} {r['estimate']:>9} "
        f"{verdict:>7} {same:>26}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outer", type=int, default=32, help="nodes (outer dimension size)")
    ap.add_argument("--sizes", default="64,1", help="MiB, comma separated")
    ap.add_argument("--topos", default="h100,npu")
    ap.add_argument("--only", default="", help="algorithm or collective names, comma separated")
    ap.add_argument("--exact", action="store_true", help="compare with the event engine")
    ap.add_argument("--timeout", type=float, default=120.0, help="CPU s per row")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    cases = [c for c in CASES if not only or only & set(c)]
    print(f"two-level: switch 8 x switch {a.outer} = {8 * a.outer} chips; timeout {a.timeout} s")
    print(HEAD)
    for mib in (int(s) for s in a.sizes.split(",")):
        for topo in a.topos.split(","):
            for case in cases:
                r = spawn(case, topo, a.outer, mib, a.exact, a.timeout)
                print(line(r, a.outer, mib), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        coll, algo, topo, outer, mib, exact = sys.argv[2:8]
        print(json.dumps(one(coll, algo, topo, int(outer), int(mib), exact == "1")))
    else:
        main()
