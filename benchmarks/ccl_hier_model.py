"""Hierarchical collectives: the per-dimension model against the simulator, and the
multi-node preset's times (the cluster-scale issue).

    python benchmarks/ccl_hier_model.py                  # 200 random configs + the preset table
    python benchmarks/ccl_hier_model.py 60 --seed 3 --no-preset
    python benchmarks/ccl_hier_model.py 2000 --runtime h100-sxm-8x4 --no-preset

Part 1 draws networks of 2 or 3 dimensions (ring, fully_connected or switch, 2..5 chips
each, bandwidth 12.5..200 GB/s, latency 100..2000 ns, a NIC latency on half the switches)
on npu-1h's chip, an algorithm (hierarchical or tree_ring; hierarchical reduce_scatter and
all_gather too) and a size log-uniform in 1 KiB..16 MiB, simulates it (#wrong must be 0)
and models it (``sim.collectives.per_dimension``; with ``--runtime NAME``, on that topology
file's runtime, e.g. h100-sxm-8x4's protocols and launch, through
``sim.collectives.collective_model``). It prints the error quantiles of
``model / sim - 1``, the same for the unpipelined textbook sum, how many runs beat the
lower bounds (must be 0) and the worst configs.

Part 2 prints time and bus bandwidth of every algorithm on ``h100-sxm-8x4`` at 1 MiB,
64 MiB and 1 GiB, as the file gives it (today every transfer takes lane 0: one of the 18
NVLink ports, 20.56 GB/s, until channels put rings on the other ports) and with the 18
ports merged into one of 18 x 20.56 GB/s (what 18 channels would give a ring).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np

from sim import load_topology
from sim.collectives import collective_metrics, collective_model, run_collective
from sim.collectives.per_dimension import dimension_bounds_ps, dimension_model_ps
from sim.topology import DimensionConfig, Topology

BASE = load_topology()


def with_dims(dims: tuple[DimensionConfig, ...], topo: Topology = BASE) -> Topology:
    chips = dataclasses.replace(topo.chips, dimensions=dims, count=math.prod(d.size for d in dims))
    return dataclasses.replace(topo, chips=chips)


def draw(rng: np.random.Generator) -> tuple[tuple[DimensionConfig, ...], str, str, int]:
    nd = int(rng.integers(2, 4))
    dims = []
    for _ in range(nd):
        shape = str(rng.choice(["ring", "fully_connected", "switch"]))
        size = int(rng.integers(2, 6 if nd == 2 else 4))
        kw: dict[str, float] = {}
        if shape == "switch" and rng.random() < 0.5:
            kw["nic_latency_ns"] = float(rng.choice([500, 2000]))
        bw = float(rng.choice([12.5, 25, 50, 100, 200]))
        lat = float(rng.choice([100, 500, 1000, 2000]))
        dims.append(DimensionConfig(shape, size, bw, lat, **kw))  # type: ignore[arg-type]
    algorithm = str(rng.choice(["hierarchical", "tree_ring"]))
    collective = "allreduce"
    if algorithm == "hierarchical" and rng.random() < 0.3:
        collective = str(rng.choice(["reduce_scatter", "all_gather"]))
    nbytes = int(2 ** rng.uniform(10, 24)) // 4 * 4
    return tuple(dims), algorithm, collective, nbytes


def model_check(n: int, seed: int, worst: int = 5, runtime: str | None = None) -> None:
    rng = np.random.default_rng(seed)
    collectives = load_topology(runtime).collectives if runtime else None
    errs, texts, rows = [], [], []
    beaten = wrong = 0
    t0 = time.perf_counter()
    for _ in range(n):
        dims, algorithm, collective, nbytes = draw(rng)
        topo = with_dims(dims)
        if collectives is not None:
            topo = dataclasses.replace(topo, collectives=collectives)
        run = run_collective(topo, nbytes, algorithm, collective)
        # under a runtime: the chosen protocol's network and the launch
        model = collective_model if collectives is not None else dimension_model_ps
        m = model(topo, algorithm, nbytes, collective)
        b = dimension_bounds_ps(topo, nbytes, collective)
        wrong += run.wrong > 0
        beaten += b.time_ps > run.time_ps
        err = m.time_ps / run.time_ps - 1
        errs.append(err)
        texts.append(m.textbook_ps / run.time_ps - 1)
        name = "x".join(f"{d.shape[0]}{d.size}" for d in dims)
        rows.append(
            (
                abs(err),
                f"{name:12s} {algorithm:12s} {collective:14s} {nbytes:>9d} B  "
                f"model / sim {m.time_ps / run.time_ps:.3f}",
            )
        )
    e, t = np.abs(errs), np.abs(texts)
    print(
        f"# per-dimension model vs simulator: {n} configs, seed {seed}, "
        f"runtime {runtime or 'npu-1h'}, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print("| | median | p90 | p95 | max | mean | share within 5 % |")
    print("|---|---|---|---|---|---|---|")
    for label, x in (("model", e), ("textbook sum", t)):
        q = np.percentile(x, [50, 90, 95, 100]) * 100
        print(
            f"| {label} | {q[0]:.1f} % | {q[1]:.1f} % | {q[2]:.1f} % | {q[3]:.1f} % | "
            f"{x.mean() * 100:.1f} % | {(x <= 0.05).mean() * 100:.0f} % |"
        )
    logs = np.abs(np.log1p(np.asarray(errs)))
    print(f"\ngeomean |log(sim / model)|: {np.expm1(logs.mean()) * 100:.2f} %")
    for algorithm in ("hierarchical", "tree_ring"):
        mine = [x for x, (_e, text) in zip(logs, rows, strict=True) if f" {algorithm} " in text]
        print(f"  {algorithm}: {np.expm1(np.mean(mine)) * 100:.2f} % over {len(mine)}")
    print(f"runs with #wrong > 0: {wrong}; runs faster than their lower bound: {beaten}")
    print("worst configs (|model/sim - 1|):")
    for err, text in sorted(rows, reverse=True)[:worst]:
        print(f"  {err * 100:5.1f} %  {text}")


ALGORITHMS = ("hierarchical", "tree_ring", "ring", "halving_doubling", "double_binary_tree")
SIZES = (1 << 20, 64 << 20, 1 << 30)


def preset_table() -> None:
    topo = load_topology("h100-sxm-8x4")
    node, rail = topo.chips.dimensions
    merged = dataclasses.replace(node, ports=1, link_bw_gbs=node.link_bw_gbs * node.ports)
    variants = {
        "as the file gives it (each message spread over its first hop's 18 ports)": topo,
        "18 NVLink ports merged (one port of 370 GB/s)": topo.replace_dimensions((merged, rail)),
    }
    for label, t in variants.items():
        print(f"\n# h100-sxm-8x4, {label}: time and busbw of an allreduce")
        print("| algorithm | " + " | ".join(f"{s >> 20} MiB" for s in SIZES) + " | #wrong |")
        print("|---|" + "---|" * (len(SIZES) + 1))
        for algorithm in ALGORITHMS:
            cells, bad = [], 0
            for size in SIZES:
                run = run_collective(t, size, algorithm)
                m = collective_metrics(run)
                bad += run.wrong
                cells.append(f"{m['time_ns'] / 1e3:.1f} us, {m['busbw_gbs']:.1f} GB/s")
            print(f"| {algorithm} | " + " | ".join(cells) + f" | {bad} |")
        lb = [dimension_bounds_ps(t, s).time_ps / 1e6 for s in SIZES]
        print("| lower bound | " + " | ".join(f"{x:.1f} us" for x in lb) + " | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-preset", action="store_true")
    ap.add_argument("--worst", type=int, default=5, help="list this many of the worst configs")
    ap.add_argument("--runtime", help="a topology file whose collectives runtime to use")
    args = ap.parse_args()
    model_check(args.n, args.seed, args.worst, args.runtime)
    if not args.no_preset:
        preset_table()


if __name__ == "__main__":
    main()
