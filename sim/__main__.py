"""``python -m sim gemm``: simulate GEMM shapes and print their key metrics.

A library demo and a quick look at a topology; the benches (``pytest --npubench gemm``)
are the gated, figure-drawing way to run sweeps.
"""

from __future__ import annotations

import argparse
import sys

from sim.analysis import gemm_metrics
from sim.errors import NpuSimError
from sim.kernels.gemm import VARIANTS, GemmShape, run_gemm
from sim.topology import load_topology

DEFAULT_SHAPES = [
    "16x32x16",
    "32x64x32",
    "64x128x64",
    "128x128x128",
    "256x256x256",
    "128x1024x128",
    "1024x64x256",
    "512x512x512",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gemm = sub.add_parser("gemm", help="simulate GEMM shapes in every variant")
    gemm.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES, help="MxKxN, e.g. 512x512x512")
    gemm.add_argument("--variant", choices=VARIANTS, action="append", help="default: all")
    gemm.add_argument("--topology", default="npu-1h", help="shipped name or path to a YAML file")
    args = parser.parse_args(argv)
    try:
        topo = load_topology(args.topology)
        shapes = [GemmShape.parse(s) for s in args.shapes]
    except NpuSimError as exc:
        parser.error(str(exc))
    print(f"topology {topo.fingerprint}")
    print(
        f"{'shape':>14} {'variant':>14} {'latency us':>11} {'model us':>9} {'mac_util':>8} "
        f"{'useful':>6} {'HBM MiB':>8} {'TFLOP/s':>8}"
    )
    for shape in shapes:
        for variant in args.variant or VARIANTS:
            try:
                m = gemm_metrics(run_gemm(shape, variant, topo))
            except NpuSimError as exc:  # SRAM too small, over a budget: say so, go on
                print(f"{shape!s:>14} {variant:>14}  skipped: {exc}")
                continue
            print(
                f"{shape!s:>14} {variant:>14} {m['latency_ns'] / 1000:>11.3f} "
                f"{m['model_latency_ns'] / 1000:>9.3f} {m['mac_util']:>8.3f} "
                f"{m['useful_eff']:>6.3f} {m['hbm_bytes'] / 2**20:>8.3f} {m['tflops']:>8.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
