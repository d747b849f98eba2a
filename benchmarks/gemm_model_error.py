"""How well does ``sim.model`` explain the simulator? sim/model latency over random shapes.

    python benchmarks/gemm_model_error.py            # 10,000 shapes, dims 1..2048
    python benchmarks/gemm_model_error.py 500 --seed 3

For every shape and every variant it simulates the GEMM on npu-1h, evaluates the
steady-state model (``gemm_model(...).ideal_ps``) and the strict lower bound
(``bound_ns``), and prints per variant the geometric mean and the extremes of
simulated / modelled latency, the worst shapes, and the number of times the bound was
beaten (must be 0). Targets (issue 11): geomean within 2 %, max within 10 %.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

from sim import load_topology
from sim.kernels.gemm import VARIANTS, GemmShape, run_gemm
from sim.model import gemm_model

Row = tuple[str, str, str, float, bool, str]


def _one(dims: tuple[int, int, int]) -> list[Row]:
    topo = load_topology("npu-1h")
    shape = GemmShape(*dims)
    rows = []
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        model = gemm_model(shape, variant, topo)
        beaten = run.latency_ps < model.lower_bound_ps
        ratio = run.latency_ps / model.ideal_ps
        rows.append((variant, str(shape), run.program.mode, ratio, beaten, model.limiter))
    return rows


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shapes", nargs="?", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-dim", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    dims = [tuple(rng.randint(1, args.max_dim) for _ in range(3)) for _ in range(args.shapes)]
    by_variant: dict[str, list[Row]] = defaultdict(list)
    with ProcessPoolExecutor(args.workers) as pool:
        for rows in pool.map(_one, dims, chunksize=16):
            for row in rows:
                by_variant[row[0]].append(row)
    print(f"{args.shapes} random shapes, dims 1..{args.max_dim}, seed {args.seed}, npu-1h")
    print(
        f"{'variant':>14} {'n':>6} {'geomean':>8} {'min':>7} {'max':>7} {'|err|>2%':>9} "
        f"{'bound beaten':>12}"
    )
    for variant in VARIANTS:
        rows = by_variant[variant]
        ratios = [r[3] for r in rows]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        off = sum(abs(x - 1) > 0.02 for x in ratios)
        beaten = sum(r[4] for r in rows)
        print(
            f"{variant:>14} {len(rows):>6} {geo:>8.4f} {min(ratios):>7.4f} {max(ratios):>7.4f} "
            f"{off:>9} {beaten:>12}"
        )
    print("worst shapes (sim/model furthest from 1) per variant:")
    for variant in VARIANTS:
        worst = sorted(by_variant[variant], key=lambda r: -abs(math.log(r[3])))[:3]
        text = ", ".join(f"{r[1]} ({r[2]}, {r[5]}-bound) {r[3]:.4f}" for r in worst)
        print(f"  {variant:>14}: {text}")


if __name__ == "__main__":
    main(sys.argv[1:])
