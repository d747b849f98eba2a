"""How fast is the collectives simulator? Wall time of the largest allreduce configs.

    python benchmarks/ccl_speed.py          # 16 and 32 chips, 256 MiB, every algorithm x topology
    python benchmarks/ccl_speed.py 8 64          # 8 chips, 64 MiB
    python benchmarks/ccl_speed.py 32 256 1      # one run each (best = worst)

For each valid (topology, algorithm) pair it times ``allreduce`` (schedule, dependency
graph, event-driven timing, op log and the exact functional check) and, separately,
``collective_metrics`` and the analytic ``model`` (its critical path times the program once
without contention); it prints the best and worst of three runs (wall, and the CPU time of
the best: on a shared machine wall time is inflated by other processes), the model's wall
and CPU time, the op-log records and the simulated time. Targets (issue 10): every
algorithm under 1 s at 32 chips and 256 MiB on a 2-core machine; the model under 2 s.
"""

from __future__ import annotations

import os
import sys
import time

from sim import load_topology
from sim.collectives import algorithms_for, allreduce, collective_metrics
from sim.collectives.model import model
from sim.limits import OPS_BUDGET_ENV

TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")
DIMS = {4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8)}


def main(chips: int, mib: int, reps: int = 3) -> None:
    # direct at 32 chips x 256 MiB plans 4.3e6 operations, over sim.limits' default budget
    os.environ.setdefault(OPS_BUDGET_ENV, "20000000")
    base = load_topology()
    nbytes = mib * 1024 * 1024
    print(
        f"allreduce of {mib} MiB on {chips} chips ({base.name}, chunk {base.chips.chunk_kib} KiB)"
    )
    print(
        f"{'topology':<16} {'algorithm':<17} {'best s':>7} {'worst s':>8} {'cpu s':>6} "
        f"{'metrics s':>9} "
        f"{'model s':>8} {'m cpu s':>7} {'records':>8} {'time us':>10} {'busbw':>7} {'#wrong':>6}"
    )
    total = 0.0
    for kind in TOPOLOGIES:
        topo = base.replace_chips(
            count=chips, topology=kind, torus_dims=DIMS.get(chips, (1, chips))
        )
        for algorithm in algorithms_for(kind):
            walls, cpus = [], []
            for _ in range(reps):
                t0, c0 = time.perf_counter(), time.process_time()
                run = allreduce(topo, nbytes, algorithm)
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            t0 = time.perf_counter()
            metrics = collective_metrics(run)
            metrics_s = time.perf_counter() - t0
            t0, c0 = time.perf_counter(), time.process_time()
            model(topo, algorithm, nbytes)
            model_s, model_cpu = time.perf_counter() - t0, time.process_time() - c0
            total += max(walls) + metrics_s + model_s
            print(
                f"{kind:<16} {algorithm:<17} {min(walls):7.3f} {max(walls):8.3f} "
                f"{cpus[walls.index(min(walls))]:6.3f} {metrics_s:9.3f} "
                f"{model_s:8.3f} {model_cpu:7.3f} {len(run.log):8d} "
                f"{metrics['time_ns'] / 1000:10.1f} {metrics['busbw_gbs']:7.2f} {run.wrong:6d}"
            )
    print(f"sum of worst-case wall times: {total:.2f} s")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    if args:
        main(*(args + [16, 256, 3][len(args) :]))
    else:
        for chips in (16, 32):
            main(chips, 256)
