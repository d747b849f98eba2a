"""How close is the simulator to published measurements of real systems? Preset vs table.

    python benchmarks/vs_published.py                      # every (preset, table) pair found
    python benchmarks/vs_published.py --algorithm ring     # one algorithm
    python benchmarks/vs_published.py --pair tests/data/mi300x-8-sketch.yaml \\
        tests/data/published/mi300x-rccl-all_reduce_perf.txt --max-bytes 1048576

For each pair of a preset topology and a published nccl-tests / rccl-tests table (``PAIRS``
below; a pair whose preset or table is not there yet is skipped with a note), it simulates
every size of the table (at the table's rank count, with each algorithm the preset's
interconnect can run, or ``--algorithm``) and prints per size the published and simulated
time and busbw and their ratio, then the geomean error per size band (< 1 MiB, 1..64 MiB,
> 64 MiB) and overall (``sim.calibrate.bands``), and the whole run's wall time. Sizes the
simulator cannot run (over its ops budget) extend the line of the largest ones it can and
are marked; ``--exact-up-to`` does that above a size on purpose, for a quick look.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from sim.calibrate.bands import band_errors
from sim.calibrate.evaluate import Setup, simulate
from sim.calibrate.nccltests import read_table
from sim.calibrate.report import busbw_gbs, size_text
from sim.collectives import algorithms_for
from sim.errors import NpuSimError
from sim.inputfile import read_text

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "data" / "published"
#: (preset, published table), paths from the repository root
PAIRS = [
    ("sim/topologies/mi300x-8.yaml", "tests/data/published/mi300x-rccl-all_reduce_perf.txt"),
    ("sim/topologies/h100-sxm-8.yaml", "tests/data/published/h100-sxm-nccl-all_reduce_perf.txt"),
    ("sim/topologies/mi350x-8.yaml", "tests/data/published/mi350x-rccl-all_reduce_perf.txt"),
]


def compare(preset: Path, published: Path, algorithms: list[str], args: argparse.Namespace) -> None:
    """Print the per-size table and the band errors of one pair, per algorithm."""
    table = read_table(published)
    half = "in-place" if args.inplace else "out-of-place"
    rows = [
        r
        for r in table.rows
        if 0 < r.size <= args.max_bytes and r.measured(args.inplace) is not None
    ]
    sizes = [r.size for r in rows]
    measured = [r.measured(args.inplace).time_us for r in rows]  # type: ignore[union-attr]
    text = read_text(preset, what="topology file", limit=1 << 20, error=NpuSimError)
    setup = Setup(text, str(preset), table.ranks)
    try:
        topo = setup.topology
        kind = topo.chips.topology
        print(
            f"== {preset.name} vs {published.name}: {table.collective}, {setup.ranks} ranks, "
            f"{len(sizes)} sizes, {half} ({topo.fingerprint}, {kind})"
        )
        for algorithm in algorithms or list(algorithms_for(kind)):
            started = time.perf_counter()
            run = simulate(
                topo,
                sizes,
                algorithm,
                table.collective,
                exact_up_to=math.inf if args.exact_up_to is None else args.exact_up_to,
            )
            sim_us = [t / 1e6 for t in run.time_ps]
            pub_bw = busbw_gbs(table.collective, setup.ranks, sizes, measured)
            sim_bw = busbw_gbs(table.collective, setup.ranks, sizes, sim_us)
            print(f"-- {algorithm}")
            print(
                f"{'size':>10} {'published us':>13} {'simulated us':>13} "
                f"{'published busbw':>16} {'simulated busbw':>16} {'sim/pub':>8}"
            )
            for s, pm, sm, pb, sb, exact in zip(
                sizes, measured, sim_us, pub_bw, sim_bw, run.exact, strict=True
            ):
                mark = "" if exact else "  (line extended)"
                print(
                    f"{size_text(s):>10} {pm:>13.2f} {sm:>13.2f} {pb:>16.2f} {sb:>16.2f} "
                    f"{sm and pm / sm:>8.3f}{mark}"
                )
            errors = band_errors(sizes, sim_us, measured)
            print(f"geomean error: {errors.describe()}")
            print(f"({time.perf_counter() - started:.1f} s)")
    finally:
        setup.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("PRESET", "TABLE"),
        help="compare this pair instead of PAIRS (repeatable)",
    )
    parser.add_argument("--algorithm", action="append", default=[], help="default: every one")
    parser.add_argument("--inplace", action="store_true", help="compare the in-place times")
    parser.add_argument("--max-bytes", type=int, default=1 << 62, help="leave out larger sizes")
    parser.add_argument(
        "--exact-up-to", type=int, help="bytes: extend the line above this size (quick look)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    pairs = (
        [(Path(p), Path(t)) for p, t in args.pair]
        if args.pair
        else [(ROOT / p, ROOT / t) for p, t in PAIRS]
    )
    compared = 0
    for preset, published in pairs:
        missing = [str(p) for p in (preset, published) if not p.is_file()]
        if missing:
            print(f"skip {preset.name} vs {published.name}: {', '.join(missing)} not there yet")
            continue
        try:
            compare(preset, published, args.algorithm, args)
        except NpuSimError as exc:
            print(f"error {preset.name} vs {published.name}: {exc}")
            continue
        compared += 1
    print(f"{compared} of {len(pairs)} pairs compared in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
