"""``nvls`` (allreduce on a switch that reduces, docs/adr/0021 decision 3): the simulator
against its model and its lower bound over a sweep, and the wall time of large runs.

    python benchmarks/nvls.py              # the sweep and the speed table
    python benchmarks/nvls.py --speed      # only the speed table (8 chips, 18 ports)

The sweep: p in 2, 4, 8, 16; ports in 1, 4, 18 (25 GB/s each way, 250 ns, the switch
reducing at 25 GB/s per port); sizes 4 KiB .. 256 MiB; on tests/data/topologies/nvls-8.yaml
(fp32, 1 MiB chunks, HBM at 1024 GB/s). Per config: the time, busbw, model / sim, the nvls
lower bound / sim (must be <= 1), #wrong (must be 0). The speed table: 8 chips, 18 ports,
1 MiB .. 8 GiB of fp32, the wall time of ``sim.allreduce(topo, n, "nvls")`` (schedule,
program, event loop and replay).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import sim
from sim.collectives import collective_model
from sim.collectives.nvls_model import nvls_bounds
from sim.topology import Topology, load_topology

YAML = Path(__file__).resolve().parents[1] / "tests" / "data" / "topologies" / "nvls-8.yaml"


def switch(base: Topology, p: int, ports: int) -> Topology:
    dim = {"shape": "switch", "size": p, "ports": ports, "link_bw_gbs": 25}
    dim.update(link_latency_ns=250, switch_reduce_gbs=25)
    return base.replace_dimensions([dim])


def sweep(base: Topology) -> None:
    print(
        f"{'p':>3} {'ports':>5} {'bytes':>10} {'sim us':>11} {'busbw':>7} {'model/sim':>9}"
        f" {'bound/sim':>9} {'wrong':>5}"
    )
    errors = []
    for p in (2, 4, 8, 16):
        for ports in (1, 4, 18):
            topo = switch(base, p, ports)
            for n in (4 << 10, 256 << 10, 1 << 20, 16 << 20, 256 << 20):
                run = sim.allreduce(topo, n, "nvls")
                t = run.time_ps
                model = collective_model(topo, "nvls", n).time_ps / t
                bound = max(nvls_bounds(topo, n)) / t
                busbw = 2 * (p - 1) / p * n / (t / 1000)
                errors.append(abs(math.log(model)))
                print(
                    f"{p:>3} {ports:>5} {n:>10} {t / 1e6:>11.1f} {busbw:>7.1f} {model:>9.3f}"
                    f" {bound:>9.3f} {run.wrong:>5}"
                )
    geo = math.exp(sum(errors) / len(errors)) - 1
    worst = math.exp(max(errors)) - 1
    print(f"model: geomean |log(model/sim)| = {100 * geo:.1f} %, worst {100 * worst:.0f} %")


def speed(base: Topology) -> None:
    topo = switch(base, 8, 18)
    print(f"{'bytes':>12} {'wall s':>7} {'sim ms':>9} {'busbw GB/s':>10} {'ops':>8} {'wrong':>5}")
    for n in (1 << 20, 64 << 20, 1 << 30, 8 << 30):
        t0 = time.perf_counter()
        run = sim.allreduce(topo, n, "nvls")
        wall = time.perf_counter() - t0
        busbw = 2 * 7 / 8 * n / (run.time_ps / 1000)
        ops = len(run.compiled.program)
        print(
            f"{n:>12} {wall:>7.2f} {run.time_ps / 1e9:>9.3f} {busbw:>10.1f} {ops:>8} {run.wrong:>5}"
        )


if __name__ == "__main__":
    topo = load_topology(YAML)
    if "--speed" not in sys.argv:
        sweep(topo)
    speed(topo)
