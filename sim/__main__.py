"""``python -m sim gemm``: simulate GEMM shapes and print their key metrics.

A library demo and a quick look at a topology; the benches (``pytest --npubench gemm``)
are the gated, figure-drawing way to run sweeps.

``python -m sim scalesim -c CFG -t TOPOLOGY.csv [-o OUTDIR]``: SCALE-Sim's own files through
the closed-form systolic model (``sim.systolic``); prints a table and writes
``OUTDIR/COMPUTE_REPORT.csv`` with SCALE-Sim's columns.

``python -m sim calibrate --measured FILE --topology YAML --fit KEY[,KEY...]``: fit topology
values to a measured nccl-tests table (``sim.calibrate.cli``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from sim.calibrate import cli as calibrate_cli
from sim.errors import NpuSimError
from sim.gemm.metrics import gemm_metrics
from sim.gemm.run import run_gemm
from sim.gemm.shape import VARIANTS, GemmShape
from sim.scalesim_files import read_scalesim_config, read_scalesim_topology
from sim.systolic import (
    compute_report_csv,
    simulate_layers,
)
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


def plain_text(rst: str) -> str:
    """A docstring as a terminal shows it: no ``literal`` backticks, no :role:`x` markup, no
    ``::`` literal-block markers (a line that is only ``::`` goes, a trailing one becomes ``:``)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", rst)
    text = text.replace("``", "")
    lines = [line for line in text.splitlines() if line.strip() != "::"]
    return "\n".join(re.sub(r"::$", ":", line) for line in lines).strip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description=plain_text(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    gemm = sub.add_parser("gemm", help="simulate GEMM shapes in every variant")
    gemm.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES, help="MxKxN, e.g. 512x512x512")
    gemm.add_argument("--variant", choices=VARIANTS, action="append", help="default: all")
    gemm.add_argument("--topology", default="npu-1h", help="shipped name or path to a YAML file")
    scale = sub.add_parser(
        "scalesim", help="SCALE-Sim cfg + topology CSV through the closed-form systolic model"
    )
    scale.add_argument("-c", dest="cfg", required=True, help="SCALE-Sim .cfg file")
    scale.add_argument("-t", dest="topology", required=True, help="SCALE-Sim topology .csv")
    scale.add_argument("-o", dest="outdir", default=".", help="where COMPUTE_REPORT.csv goes")
    calibrate_cli.add_parser(sub)
    calibrate = sub.choices["calibrate"]
    calibrate.description = plain_text(calibrate.description or "")
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        return calibrate_cli.run(parser, args)
    if args.command == "scalesim":
        return _scalesim(parser, args.cfg, args.topology, Path(args.outdir))
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


def _scalesim(parser: argparse.ArgumentParser, cfg_path: str, topo_path: str, outdir: Path) -> int:
    try:  # a bad file, or one over a budget (sim.limits): one usage error, no traceback
        cfg = read_scalesim_config(cfg_path)
        layers = read_scalesim_topology(topo_path)
        reports = simulate_layers(layers, cfg.array)
    except NpuSimError as exc:
        parser.error(str(exc))
    array = cfg.array
    print(f"{cfg.path}: {array.rows}x{array.cols} array, dataflow {array.dataflow}")
    for note in cfg.notes:
        print(f"note: {note}")
    print(
        f"{'layer':>16} {'Sr':>7} {'Sc':>7} {'T':>7} {'folds':>7} {'cycles':>12} "
        f"{'util %':>7} {'map eff %':>9} {'comp util %':>11}"
    )
    for r in reports:
        print(
            f"{r.name:>16} {r.sr:>7} {r.sc:>7} {r.t:>7} {r.folds:>7} {r.total_cycles:>12} "
            f"{r.overall_util_pct:>7.2f} {r.mapping_efficiency_pct:>9.2f} "
            f"{r.compute_util_pct:>11.2f}"
        )
    print(f"{'total':>16} {'':>31} {sum(r.total_cycles for r in reports):>12}")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        out = outdir / "COMPUTE_REPORT.csv"
        out.write_text(compute_report_csv(reports))
    except OSError as exc:
        parser.error(f"{outdir}: cannot write COMPUTE_REPORT.csv ({exc.strerror}); pick another -o")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
