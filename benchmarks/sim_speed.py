"""How fast is the GEMM simulator? Prints wall time, tile-ops/s and peak RSS per config.

    python benchmarks/sim_speed.py            # 512^3 .. 4096^3, every variant
    python benchmarks/sim_speed.py 8192x1024x8192

Each config runs in a fresh subprocess so its peak RSS is its own; wall time is the best
of three runs of ``run_gemm`` (the simulation, op log included) is shown next to the
worst (usually the first, which pays for touching fresh memory). Targets on a 2-core
machine (issue 2): 512^3 under 20 ms; 4096^3 under 1 s and 1 GiB in every variant.
"""

from __future__ import annotations

import json
import subprocess
import sys

SHAPES = ["512x512x512", "1024x1024x1024", "2048x2048x2048", "4096x4096x4096"]
VARIANTS = ["load_ref", "double_buffer", "resident"]

CHILD = """
import json, resource, sys, time
from sim import load_topology
from sim.kernels.gemm import run_gemm
from sim.analysis import gemm_metrics
topo = load_topology()
shape, variant = sys.argv[1], sys.argv[2]
times = []
for _ in range(3):
    t = time.perf_counter()
    run = run_gemm(shape, variant, topo)
    times.append(time.perf_counter() - t)
    del run
run = run_gemm(shape, variant, topo)
t = time.perf_counter()
gemm_metrics(run)
metrics_s = time.perf_counter() - t
print(json.dumps({
    "tile_ops": run.program.plan.tile_ops, "records": len(run.log),
    "wall_s": max(times), "best_s": min(times),
    "metrics_s": metrics_s, "latency_us": run.latency_ps / 1e6, "mode": run.program.mode,
    "extrapolated": run.log.meta["extrapolated_blocks"], "blocks": run.program.num_blocks,
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def main(shapes: list[str]) -> None:
    idle = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, resource, numpy, sim.kernels.gemm;"
                "print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    print(f"python + numpy + sim imported: {idle:.0f} MiB RSS")
    head = (
        f"{'shape':>16} {'variant':>14} {'mode':>8} {'tile-ops':>10} {'records':>9} "
        f"{'worst ms':>9} {'best ms':>8} {'tile-ops/s':>11} {'metrics ms':>10} {'RSS MiB':>8} "
        f"{'filled':>7} {'sim us':>12}"
    )
    print(head)
    for shape in shapes:
        for variant in VARIANTS:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, shape, variant],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out)
            filled = f"{100 * r['extrapolated'] / r['blocks']:.0f}%"
            print(
                f"{shape:>16} {variant:>14} {r['mode']:>8} {r['tile_ops']:>10} "
                f"{r['records']:>9} {1000 * r['wall_s']:>9.1f} {1000 * r['best_s']:>8.1f} "
                f"{r['tile_ops'] / r['wall_s']:>11.3g} {1000 * r['metrics_s']:>10.1f} "
                f"{r['rss_mib']:>8.0f} {filled:>7} {r['latency_us']:>12.1f}"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or SHAPES)
