"""How close is the collectives model to the simulator? Random configs, sim / model ratios.

    python benchmarks/ccl_model_error.py                 # 20,000 configs, a pool of 2 workers
    python benchmarks/ccl_model_error.py 2000 --seed 7 --workers 1

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

from sim import load_topology
from sim.collectives import ALGORITHMS, algorithms_for, allreduce, bounds_ps
from sim.collectives.model import model

TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")
Config = tuple[str, int, str, int]


def _dims(p: int) -> tuple[int, int]:
    best = (1, p)
    for r in range(1, math.isqrt(p) + 1):
        if p % r == 0:
            best = (r, p // r)
    return best


def estimated_transfers(p: int, algorithm: str, size: int, chunk: int, depth: int) -> int:
    """Roughly how many chunk transfers a config simulates: ``p (p-1)`` messages of the whole
    vector for direct, about ``4 p (p-1)`` messages of ``size / 2p`` for the others."""
    if algorithm == "direct":
        return p * (p - 1) * max(depth, -(-size // chunk))
    return 4 * p * (p - 1) * max(depth, -(-size // (2 * p * chunk)))


def draw(n: int, seed: int, ops: int) -> list[Config]:
    """``n`` random (topology, chips, algorithm, bytes) configs, reproducible from ``seed``."""
    base = load_topology()
    chunk, depth = base.chips.chunk_bytes, max(1, base.chips.staging_buffers // 2)
    rng = random.Random(seed)
    out: list[Config] = []
    while len(out) < n:
        kind = rng.choice(TOPOLOGIES)
        p = rng.randint(2, 32)
        algorithm = rng.choice(algorithms_for(kind))
        size = 2 * max(1, int(2 ** rng.uniform(0, 27)))  # 2 B .. 256 MiB, whole elements
        if rng.random() * estimated_transfers(p, algorithm, size, chunk, depth) <= ops:
            out.append((kind, p, algorithm, size))
    return out


def measure(cfg: Config) -> tuple[Config, float, bool, int]:
    """``(config, sim / model, beats a bound, #wrong)``."""
    kind, p, algorithm, size = cfg
    topo = load_topology().replace_chips(count=p, topology=kind, torus_dims=_dims(p))
    run = allreduce(topo, size, algorithm)
    predicted = model(topo, algorithm, size).time_ps
    return cfg, run.time_ps / predicted, run.time_ps < bounds_ps(topo, size).time_ps, run.wrong


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
    print(f"{'algorithm':<20} {'configs':>7} {'geomean':>8} {'max':>7} {'min':>7} {'>25%':>6}")
    for algorithm in ALGORITHMS:
        ratios = [r for (_k, _p, a, _s), r, _b, _w in results if a == algorithm]
        if not ratios:
            continue
        logs = [abs(math.log(r)) for r in ratios]
        geo = math.exp(sum(logs) / len(logs)) - 1
        off = sum(x > math.log(1.25) for x in logs) / len(logs)
        print(
            f"{algorithm:<20} {len(ratios):7d} {geo:8.2%} {max(ratios):7.3f} "
            f"{min(ratios):7.3f} {off:6.1%}"
        )
    logs = [abs(math.log(r)) for _c, r, _b, _w in results]
    print(f"{'all':<20} {len(logs):7d} {math.exp(sum(logs) / len(logs)) - 1:8.2%}")
    print("worst configs (topology, chips, algorithm, bytes: sim / model):")
    for cfg, ratio, _b, _w in sorted(results, key=lambda x: -abs(math.log(x[1])))[:12]:
        print(f"  {cfg[0]:<16} p={cfg[1]:<3} {cfg[2]:<19} {cfg[3]:>10} B: {ratio:.3f}")
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
    args = ap.parse_args()
    head = f"p 2..32, 2 B..256 MiB, thinned above {args.ops} transfers, seed {args.seed}"
    if args.summarise:  # the first N results of a run are the first N configs it drew
        with open(args.summarise) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        timed = [((tuple(c), r, b, w), cpu) for (c, r, b, w), cpu in rows]
        report(timed, head + f", the first {len(rows)} of a run", 0.0, args.workers)
        return
    t0 = time.perf_counter()
    configs = draw(args.configs, args.seed, args.ops)
    timed = []
    with ProcessPoolExecutor(args.workers) as pool, open(args.log, "w") as log:
        for got in pool.map(_timed, configs, chunksize=16):
            timed.append(got)
            log.write(json.dumps(got) + "\n")  # a partial run can be summarised from here
            log.flush()
    report(timed, head, time.perf_counter() - t0, args.workers)


if __name__ == "__main__":
    main()
