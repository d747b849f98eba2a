"""How well does ``sim.gemm.model`` explain the simulator? sim/model latency over random shapes.

    python benchmarks/gemm_model_error.py            # 10,000 shapes, dims 1..2048
    python benchmarks/gemm_model_error.py 500 --seed 3
    python benchmarks/gemm_model_error.py --rows rows.jsonl   # also keep every row (resumable:
    python benchmarks/gemm_model_error.py --summarize rows.jsonl    # print the table of a file)
    python benchmarks/gemm_model_error.py --targets  # mac_util / roofline at 1024^3..4096^3

For every shape and every variant it simulates the GEMM on npu-1h, evaluates the
steady-state model (``gemm_model(...).ideal_ps``) and the strict lower bound
(``bound_ns``), and prints per variant the geometric mean and the extremes of
simulated / modelled latency, the worst shapes, and the number of times the bound was
beaten (must be 0). Targets (issue 11): geomean within 2 %, max within 10 %.

``--targets`` prints, for 1024^3, 2048^3 and 4096^3 and every variant, ``mac_util``,
``roofline_frac`` and sim/model (issue 11: ``prefetch`` >= 0.9 of its roofline bound
from 1024^3 up; ``resident`` mac_util >= 0.8 at 2048^3 and 4096^3).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sim import load_topology
from sim.gemm.model import gemm_model
from sim.gemm.run import run_gemm
from sim.gemm.shape import VARIANTS, GemmShape

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
    ap.add_argument("--rows", help="append every row to this JSON-lines file; skip done shapes")
    ap.add_argument("--summarize", help="only print the table of a rows file")
    ap.add_argument("--targets", action="store_true", help="only the large-shape targets")
    args = ap.parse_args(argv)
    if args.targets:
        targets()
        return
    if args.summarize:
        rows = _read(Path(args.summarize))
        report(rows, f"{len(rows) // len(VARIANTS)} shapes from {args.summarize}")
        return
    rng = random.Random(args.seed)
    dims = [tuple(rng.randint(1, args.max_dim) for _ in range(3)) for _ in range(args.shapes)]
    rows_all: list[Row] = []
    if args.rows and Path(args.rows).exists():
        rows_all = _read(Path(args.rows))
        seen = {r[1] for r in rows_all}
        dims = [d for d in dims if "x".join(map(str, d)) not in seen]
    with ProcessPoolExecutor(args.workers) as pool, contextlib.ExitStack() as stack:
        out = stack.enter_context(Path(args.rows).open("a")) if args.rows else None
        for rows in pool.map(_one, dims, chunksize=16):
            rows_all.extend(rows)
            if out:
                out.write("".join(json.dumps(r) + "\n" for r in rows))
                out.flush()
    what = f"{args.shapes} random shapes, dims 1..{args.max_dim}, seed {args.seed}, npu-1h"
    report(rows_all, what)


def targets() -> None:
    from sim.gemm.metrics import gemm_metrics

    topo = load_topology("npu-1h")
    print(
        f"{'shape':>16} {'variant':>14} {'mode':>13} {'mac_util':>9} {'roofline':>9} "
        f"{'sim/model':>9}"
    )
    for n in (1024, 2048, 4096):
        for variant in VARIANTS:
            run = run_gemm(GemmShape(n, n, n), variant, topo)
            m = gemm_metrics(run)
            print(
                f"{f'{n}x{n}x{n}':>16} {variant:>14} {run.program.mode:>13} "
                f"{m['mac_util']:>9.4f} {m['roofline_frac']:>9.4f} {m['model_ratio']:>9.4f}"
            )


def _read(path: Path) -> list[Row]:
    with path.open() as f:
        return [tuple(json.loads(line)) for line in f]  # type: ignore[misc]


def report(all_rows: list[Row], what: str) -> None:
    by_variant: dict[str, list[Row]] = defaultdict(list)
    for row in all_rows:
        by_variant[row[0]].append(row)
    print(what)
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
