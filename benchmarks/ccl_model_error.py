"""How close is the collectives model to the simulator? Random configs, sim / model ratios.

    python benchmarks/ccl_model_error.py                 # 20,000 configs, a pool of 2 workers
    python benchmarks/ccl_model_error.py 2000 --seed 7 --workers 1
    python benchmarks/ccl_model_error.py 10000 --collectives more   # every other collective

With ``--collectives more`` each config draws a collective other than allreduce (all_gather,
reduce_scatter, alltoall, broadcast, reduce, sendrecv), one of its algorithms
(``sim.collectives.catalog``), a topology, p in 2..16 and a size as below, runs it with
``sim.run_collective`` and models it with ``sim.collective_model``; the table is per
(collective, algorithm) and the bound is ``sim.collective_bounds``.

Each config draws p in 2..32, a topology (ring, fully_connected, switch, torus2d with the
most square dims), a valid algorithm and a size log-uniform in 2 B..256 MiB (a config whose
estimated transfer count ``e`` exceeds ``--ops`` is kept with probability ``ops / e`` and
redrawn otherwise, so that 20,000 configs run in minutes: large direct runs are sampled
more thinly, not left out), simulates the
allreduce (``sim.collectives``, which also replays its op log: #wrong must be 0) and
models it (``sim.collectives.model.model``). It prints, per algorithm, the geomean of
``|log(sim / model)|`` as a percentage, the largest and smallest ratio and the share of
configs off by more than 25 %, the worst configs, how many runs beat the lower bounds
(must be 0) and the wall time. Targets (issue 10): geomean <= 2 %, max <= 1.25x.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from sim import collective_bounds, collective_model, load_topology, run_collective
from sim.collectives import ALGORITHMS, COLLECTIVE_ALGORITHMS, algorithms_for, allreduce, bounds_ps
from sim.collectives.model import model

TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")
MORE = tuple(c for c in COLLECTIVE_ALGORITHMS if c != "allreduce")
Config = tuple[Any, ...]  # (topology, chips, algorithm, bytes[, collective])


def _dims(p: int) -> tuple[int, int]:
    best = (1, p)
    for r in range(1, math.isqrt(p) + 1):
        if p % r == 0:
            best = (r, p // r)
    return best


def estimated_transfers(
    p: int, algorithm: str, size: int, chunk: int, depth: int, collective: str = "allreduce"
) -> int:
    """Roughly how many chunk transfers a config simulates: ``p (p-1)`` messages of the whole
    vector for direct, about ``4 p (p-1)`` messages of ``size / 2p`` for the others; for the
    other collectives, their messages times their chunks (``p (p-1)`` blocks of ``size / p``
    for the direct and pairwise ones, ``p`` or ``2 (p-1)`` whole or half vectors for the
    rooted ones and sendrecv)."""

    def k(nbytes: int) -> int:
        return max(depth, -(-nbytes // chunk))

    if collective == "allreduce":
        if algorithm == "direct":
            return p * (p - 1) * k(size)
        return 4 * p * (p - 1) * max(depth, -(-size // (2 * p * chunk)))
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 2 * p * k(size)
    if algorithm in ("recursive_doubling", "recursive_halving"):
        return 2 * p * k(size)
    return p * (p - 1) * k(size // p)


def draw(n: int, seed: int, ops: int, more: bool = False) -> list[Config]:
    """``n`` random (topology, chips, algorithm, bytes) configs, reproducible from ``seed``;
    ``more``: (topology, chips, algorithm, bytes, collective) of the other collectives, p in
    2..16."""
    base = load_topology()
    chunk, depth = base.chips.chunk_bytes, max(1, base.chips.staging_buffers // 2)
    rng = random.Random(seed)
    out: list[Config] = []
    while len(out) < n:
        kind = rng.choice(TOPOLOGIES)
        collective = rng.choice(MORE) if more else "allreduce"
        p = rng.randint(2, 16 if more else 32)
        algos = COLLECTIVE_ALGORITHMS[collective] if more else algorithms_for(kind)
        algorithm = rng.choice(algos)
        size = 2 * max(1, int(2 ** rng.uniform(0, 27)))  # 2 B .. 256 MiB, whole elements
        cost = estimated_transfers(p, algorithm, size, chunk, depth, collective)
        if rng.random() * cost <= ops:
            out.append(
                (kind, p, algorithm, size, collective) if more else (kind, p, algorithm, size)
            )
    return out


def measure(cfg: Config) -> tuple[Config, float, bool, int]:
    """``(config, sim / model, beats a bound, #wrong)``."""
    kind, p, algorithm, size = cfg[:4]
    topo = load_topology().replace_chips(count=p, topology=kind, torus_dims=_dims(p))
    if len(cfg) > 4:
        collective = cfg[4]
        run = run_collective(topo, size, algorithm, collective)
        predicted = collective_model(topo, algorithm, size, collective).time_ps
        bound = collective_bounds(topo, size, collective).time_ps
    else:
        run = allreduce(topo, size, algorithm)
        predicted = model(topo, algorithm, size).time_ps
        bound = bounds_ps(topo, size).time_ps
    ratio = run.time_ps / predicted if predicted else 1.0  # 1.0: both 0 (nothing moves)
    return cfg, ratio, run.time_ps < bound, run.wrong


def _group(cfg: Config) -> str:
    """The table's row of a config: its algorithm (allreduce), or collective and algorithm."""
    return cfg[2] if len(cfg) < 5 else f"{cfg[4]} {cfg[2]}"


def _order(group: str) -> tuple[int, str]:
    return (ALGORITHMS.index(group), "") if group in ALGORITHMS else (len(ALGORITHMS), group)


def _timed(cfg: Config) -> tuple[tuple[Config, float, bool, int], float]:  # (result, CPU s)
    c0 = time.process_time()
    got = measure(cfg)
    return got, time.process_time() - c0


Timed = tuple[tuple[Config, float, bool, int], float]


def report(timed: list[Timed], head: str, wall: float, workers: int) -> None:
    """Print the table of per-algorithm errors, the worst configs and the checks."""
    results = [r for r, _cpu in timed]
    cpu = sum(c for _r, c in timed)
    big = sum(cfg[3] >= 1 << 20 for cfg, _r, _b, _w in results)
    print(f"{len(results)} random configs ({head}; {big} of them >= 1 MiB)")
    print(f"{'algorithm':<36} {'configs':>7} {'geomean':>8} {'max':>7} {'min':>7} {'>25%':>6}")
    groups = sorted({_group(cfg) for cfg, _r, _b, _w in results}, key=_order)
    for group in groups:
        ratios = [r for cfg, r, _b, _w in results if _group(cfg) == group]
        algorithm = group
        logs = [abs(math.log(r)) for r in ratios]
        geo = math.exp(sum(logs) / len(logs)) - 1
        off = sum(x > math.log(1.25) for x in logs) / len(logs)
        print(
            f"{algorithm:<36} {len(ratios):7d} {geo:8.2%} {max(ratios):7.3f} "
            f"{min(ratios):7.3f} {off:6.1%}"
        )
    logs = [abs(math.log(r)) for _c, r, _b, _w in results]
    print(f"{'all':<36} {len(logs):7d} {math.exp(sum(logs) / len(logs)) - 1:8.2%}")
    print("worst configs (topology, chips, algorithm, bytes: sim / model):")
    for cfg, ratio, _b, _w in sorted(results, key=lambda x: -abs(math.log(x[1])))[:12]:
        what = cfg[2] if len(cfg) < 5 else f"{cfg[4]} {cfg[2]}"
        print(f"  {cfg[0]:<16} p={cfg[1]:<3} {what:<34} {cfg[3]:>10} B: {ratio:.3f}")
    print(f"runs below the lower bound: {sum(b for _c, _r, b, _w in results)}")
    print(f"runs with #wrong > 0: {sum(w > 0 for _c, _r, _b, w in results)}")
    clock = f"wall time: {wall:.1f} s with {workers} workers" if wall else "a partial run's log"
    print(f"{clock}, CPU time in workers {cpu:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="?", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--log", default=os.devnull, help="write each result as a JSON line here")
    ap.add_argument("--ops", type=int, default=20_000, help="thin above this many transfers")
    ap.add_argument("--summarise", metavar="LOG", help="report the results a --log holds so far")
    ap.add_argument(
        "--collectives",
        choices=("allreduce", "more"),
        default="allreduce",
        help="allreduce (p 2..32), or every other collective x algorithm (p 2..16)",
    )
    args = ap.parse_args()
    more = args.collectives == "more"
    chips = "p 2..16, every collective but allreduce" if more else "p 2..32"
    head = f"{chips}, 2 B..256 MiB, thinned above {args.ops} transfers, seed {args.seed}"
    if args.summarise:  # the first N results of a run are the first N configs it drew
        with open(args.summarise) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        timed = [((tuple(c), r, b, w), cpu) for (c, r, b, w), cpu in rows]
        report(timed, head + f", the first {len(rows)} of a run", 0.0, args.workers)
        return
    t0 = time.perf_counter()
    configs = draw(args.configs, args.seed, args.ops, more)
    timed = []
    with ProcessPoolExecutor(args.workers) as pool, open(args.log, "w") as log:
        for got in pool.map(_timed, configs, chunksize=16):
            timed.append(got)
            log.write(json.dumps(got) + "\n")  # a partial run can be summarised from here
            log.flush()
    report(timed, head, time.perf_counter() - t0, args.workers)


if __name__ == "__main__":
    main()
