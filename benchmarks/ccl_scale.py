"""Collectives at pod scale: how the simulator's cost grows with the chip count.

    python benchmarks/ccl_scale.py                 # the table below (a few minutes)
    python benchmarks/ccl_scale.py --quick         # without the p = 4096 and direct rows
    python benchmarks/ccl_scale.py --direct        # only the direct rows (ADR 0026)

Each row runs in its own process (so its peak RSS is its own) and prints: collective,
algorithm, topology, p, the path taken (``symmetric``: timed, stored and checked from one
chip, sim.collectives.fast; ``event``: the full program through the event engine), CPU
seconds, peak RSS (``ru_maxrss``), op-log records stored and in the full log, the simulated
time and ``#wrong``. Up to p = 64 it also runs the exact event engine on the full program and
prints whether the two op logs are identical (SHA-256 over every column). Then it fits the
cost exponent ``CPU ~ p^a`` of each path (least squares in log-log over p >= 64 for the
symmetric path, over every row for the event engine).

Targets (issue 25): ring allreduce of 256 MiB on a ring, p = 1024 in <= 1 s and <= 500 MiB,
p = 4096 in <= 5 s; ``direct`` on a 32-chip ring in <= 1 s (not met: it runs the event
engine before ADR 0026; now by symmetry: the ``direct`` rows, p = 8..128 at 64 and 256 MiB,
compared with the event engine where it fits: p <= 32 at 256 MiB, p <= 64 at 64 MiB);
cost near-linear in p for symmetric cases.

ASTRA-sim 2 (analytical, congestion-aware, built outside the repository as
../shared/astra-sim/README.md says; ``benchmarks/astra_peer.py`` runs it set up alike, with
our topology's link bandwidth and latency) runs beside each ring row up to ``--astra-max P``
(default 256; its p = 1024 pipelined takes ~4 minutes) in the same run: its simulated time,
the difference to ours, its CPU and wall seconds and peak RSS, and the ratios (its CPU over
ours; its wall over our wall), then its fixed cost (the best of three runs of a 1 KiB
allreduce on 4 chips: its start-up, which its whole run at small p mostly is). Where it is
not built, the script says so and quotes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

MIB = 1 << 20
ASTRA_QUOTED = {64: 0.35, 256: 9.1}  # wall s, ring allreduce, congestion-aware, pipelined


def _sha(log: object) -> str:
    from sim.oplog import COLUMNS

    h = hashlib.sha256()
    for c in COLUMNS:
        h.update(log.column(c).tobytes())  # type: ignore[attr-defined]
    return h.hexdigest()[:16]


def one(p: int, algorithm: str, mib: int, exact: bool) -> dict[str, object]:
    """One row, in this process."""
    from sim import load_topology
    from sim.collectives import allreduce, build_schedule, collective_metrics, run_schedule
    from sim.collectives.fast import SymmetricRun
    from sim.fabric import SymmetricLog, build_network
    from sim.limits import OPS_BUDGET_ENV

    os.environ.setdefault(OPS_BUDGET_ENV, "50000000")
    topo = load_topology().replace_chips(count=p, topology="ring")
    c0, w0 = time.process_time(), time.perf_counter()
    run = allreduce(topo, mib * MIB, algorithm)
    m = collective_metrics(run)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    log = run.log
    stored = len(log.rep) if isinstance(log, SymmetricLog) else len(log)
    row: dict[str, object] = {
        "p": p,
        "algorithm": algorithm,
        "path": "symmetric" if isinstance(run, SymmetricRun) else "event",
        "cpu": cpu,
        "wall": wall,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stored": stored,
        "records": len(log),
        "time_us": m["time_ns"] / 1000,
        "wrong": run.wrong,
        "same": "",
    }
    if exact:
        net = build_network(topo)
        c0 = time.process_time()
        ref = run_schedule(build_schedule(topo, mib * MIB, algorithm, network=net), net)
        row["exact_cpu"] = time.process_time() - c0
        row["same"] = "identical" if _sha(ref.log) == _sha(log) else "DIFFERENT"
    return row


def spawn(p: int, algorithm: str, mib: int, exact: bool) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(p), algorithm, str(mib), str(int(exact))],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def exponent(rows: list[dict[str, object]], key: str) -> float:
    xs = [math.log(float(r["p"])) for r in rows]  # type: ignore[arg-type]
    ys = [math.log(max(float(r[key]), 1e-6)) for r in rows]  # type: ignore[arg-type]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def direct_rows() -> None:
    """direct allreduce on rings (sim.collectives.fast_direct), 64 and 256 MiB."""
    print("allreduce, direct algorithm, ring topology (npu-1h links)")
    print(
        f"{'MiB':>4} {'p':>4} {'path':<9} {'cpu s':>7} {'rss MiB':>8} {'stored':>8} "
        f"{'records':>10} {'sim time us':>12} {'#wrong':>6} {'vs event engine':>28}"
    )
    for mib in (64, 256):
        for p in (8, 16, 32, 64, 128):
            exact = p <= (64 if mib == 64 else 32)
            r = spawn(p, "direct", mib, exact=exact)
            same = r["same"] and f"{r['same']} (event {float(r['exact_cpu']):.2f} s)"  # type: ignore[arg-type]
            print(
                f"{mib:>4} {p:>4} {r['path']:<9} {float(r['cpu']):7.2f} "  # type: ignore[arg-type]
                f"{float(r['rss']):8.0f} {r['stored']:>8} {r['records']:>10} "  # type: ignore[arg-type]
                f"{float(r['time_us']):12.1f} {r['wrong']:>6} {same or '-':>28}",  # type: ignore[arg-type]
                flush=True,
            )


def main(quick: bool) -> None:
    mib = 256
    ps = [8, 16, 32, 64, 128, 256, 1024] + ([] if quick else [2048, 4096])
    print(f"allreduce of {mib} MiB, ring algorithm, ring topology (npu-1h links)")
    head = (
        f"{'collective':<10} {'algorithm':<9} {'topology':<8} {'p':>5} {'path':<9} "
        f"{'cpu s':>7} {'rss MiB':>8} {'stored':>8} {'records':>10} {'sim time us':>12} "
        f"{'#wrong':>6} {'vs event engine (<= 64)':>24}"
    )
    print(head)
    rows = []
    for p in ps:
        r = spawn(p, "ring", mib, exact=p <= 64)
        rows.append(r)
        same = r["same"] and f"{r['same']} (event {float(r['exact_cpu']):.2f} s)"  # type: ignore[arg-type]
        print(
            f"{'allreduce':<10} {'ring':<9} {'ring':<8} {p:>5} {r['path']:<9} "
            f"{float(r['cpu']):7.2f} {float(r['rss']):8.0f} {r['stored']:>8} "  # type: ignore[arg-type]
            f"{r['records']:>10} {float(r['time_us']):12.1f} {r['wrong']:>6} {same:>24}"  # type: ignore[arg-type]
        )
    big = [r for r in rows if int(r["p"]) >= 64]  # type: ignore[call-overload]
    exact = [r for r in rows if "exact_cpu" in r]
    print(f"cost exponent, symmetric path (p >= 64): CPU ~ p^{exponent(big, 'cpu'):.2f}")
    print(f"cost exponent, event engine (p <= 64):   CPU ~ p^{exponent(exact, 'exact_cpu'):.2f}")
    if not quick:
        direct_rows()
    astra_rows(rows, mib)


def astra_rows(rows: list[dict[str, object]], mib: int) -> None:
    """ASTRA-sim on the ring rows' configs, measured here, and the ratios."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import astra_peer

    why = astra_peer.available()
    if why:
        print(f"ASTRA-sim: {why}; QUOTED, not measured (../shared/astra-sim/README.md):")
        for p, wall in ASTRA_QUOTED.items():
            print(f"  ring allreduce p={p}: {wall} s wall (quoted)")
        return
    from sim import load_topology

    chips = load_topology().chips
    most = int(sys.argv[sys.argv.index("--astra-max") + 1]) if "--astra-max" in sys.argv else 256
    print(
        f"ASTRA-sim 2 beside it (congestion-aware, pipelined, both directions; "
        f"{chips.link_bw_gbs} GB/s, {chips.link_latency_ns} ns hops), same run:"
    )
    print(
        f"{'p':>5} {'ours us':>10} {'ASTRA us':>10} {'diff':>7} {'our cpu':>8} {'A cpu':>7} "
        f"{'A wall':>7} {'A MiB':>6} {'cpu ratio':>9} {'wall ratio':>10}"
    )
    for r in rows:
        p = int(r["p"])  # type: ignore[call-overload]
        if p > most:
            continue
        a = astra_peer.run_allreduce(p, mib * MIB, chips.link_bw_gbs, chips.link_latency_ns)
        ours_us, theirs_us = float(r["time_us"]), float(a["sim_ns"]) / 1000  # type: ignore[arg-type]
        cpu, wall = float(r["cpu"]), float(r["wall"])  # type: ignore[arg-type]
        a_cpu, a_wall, a_rss = float(a["cpu"]), float(a["wall"]), float(a["rss"])
        print(
            f"{p:>5} {ours_us:10.1f} {theirs_us:10.1f} {(ours_us / theirs_us - 1) * 100:+6.2f}% "
            f"{cpu:8.3f} {a_cpu:7.3f} {a_wall:7.3f} {a_rss:6.0f} "
            f"{a_cpu / max(cpu, 1e-9):8.1f}x {a_wall / max(wall, 1e-9):9.1f}x"
            + ("" if a["rss_is"] == "own" else "  (A MiB: an upper bound)")
        )
    # its fixed cost: a 1 KiB allreduce on a 4-chip ring (start-up, reading the set-up and
    # the traces): at small p its whole run is mostly this, and 10x asks a tenth of it of us
    floor = min(
        float(astra_peer.run_allreduce(4, 1024, chips.link_bw_gbs, chips.link_latency_ns)["cpu"])
        for _ in range(3)
    )
    print(
        f"ASTRA-sim's fixed cost (p = 4, 1 KiB, best of 3): {floor * 1000:.1f} ms CPU; "
        f"a tenth of it: {floor * 100:.2f} ms"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        p, algorithm, mib, exact = sys.argv[2:6]
        print(json.dumps(one(int(p), algorithm, int(mib), exact == "1")))
    elif "--direct" in sys.argv:
        direct_rows()
    else:
        main("--quick" in sys.argv)
