"""``python -m sim calibrate``: fit topology values to a measured nccl-tests table.

::

    python -m sim calibrate --measured all_reduce.txt --topology mi300x-8 \\
        --fit collectives.launch_ns,collectives.step_sync_ns [--algorithm ring] \\
        [--collective all_reduce] [--out mi300x-8-calibrated.yaml] [--bounds KEY=LO:HI ...] \\
        [--inplace] [--force]

Reads the table, simulates every size with the topology at the table's rank count, fits the
keys (:mod:`sim.calibrate.fit`) and writes the calibrated YAML (the input's text with the
fitted values in, their lines tagged ``# [calibrated: ...]``, a header saying what was fitted
to what) and a PNG of measured vs simulated busbw beside it. Never overwrites the input; an
existing output only with ``--force``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from collections.abc import Sequence
from pathlib import Path

from sim.calibrate.bands import band_errors
from sim.calibrate.evaluate import DEFAULT_EXACT_UP_TO, Setup, edited, simulate, topology_path
from sim.calibrate.files import write_atomic
from sim.calibrate.fit import (
    DEFAULT_MAX_EVALUATIONS,
    MAX_KEYS,
    FitKey,
    default_bounds,
    fit,
    parse_bounds,
)
from sim.calibrate.nccltests import read_table
from sim.calibrate.report import Curves, busbw_gbs, draw_figure, header, size_text, tag
from sim.calibrate.yamlkeys import edit, find
from sim.errors import InputError, NpuSimError
from sim.inputfile import read_text

__all__ = ["add_parser", "calibrate"]

MAX_TOPOLOGY_BYTES = 1 << 20


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The ``calibrate`` subcommand's options."""
    cal = sub.add_parser(
        "calibrate",
        help="fit topology values to a measured nccl-tests / rccl-tests table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument("--measured", required=True, help="nccl-tests output (a text file)")
    cal.add_argument("--topology", required=True, help="shipped name or path to a YAML file")
    cal.add_argument(
        "--fit", required=True, help=f"KEY[,KEY...]: up to {MAX_KEYS} dotted keys of the YAML"
    )
    cal.add_argument("--algorithm", default="ring", help="the simulated algorithm (ring)")
    cal.add_argument("--collective", help="override the collective the table names")
    cal.add_argument("--out", help="the calibrated YAML (default: <topology>-calibrated.yaml)")
    cal.add_argument("--bounds", action="append", default=[], help="KEY=LO:HI (repeatable)")
    cal.add_argument("--inplace", action="store_true", help="fit the in-place times")
    cal.add_argument("--force", action="store_true", help="replace an existing --out")
    cal.add_argument(
        "--max-evaluations",
        type=int,
        default=DEFAULT_MAX_EVALUATIONS,
        help=f"cap on simulated sweeps ({DEFAULT_MAX_EVALUATIONS})",
    )
    cal.add_argument(
        "--exact-up-to",
        type=int,
        default=DEFAULT_EXACT_UP_TO,
        help="bytes: the fit simulates sizes up to this and extends the line above "
        f"(default {size_text(DEFAULT_EXACT_UP_TO)}); the report simulates every size",
    )


def _outputs(args: argparse.Namespace, source: Path) -> tuple[Path, Path]:
    out = Path(args.out) if args.out else Path(f"{source.stem}-calibrated.yaml")
    if out.suffix not in (".yaml", ".yml"):
        raise InputError(f"--out {out}: the calibrated topology is a .yaml file")
    figure = out.with_suffix(".png")
    if out.resolve() == source.resolve():
        raise InputError(f"--out {out} is the input topology; calibration never overwrites it")
    for path in (out, figure):
        if path.exists() and not args.force:
            raise InputError(f"{path} exists; pass --force to replace it, or another --out")
    return out, figure


def _keys(args: argparse.Namespace, text: str, source: str) -> list[FitKey]:
    names = [k.strip() for k in args.fit.split(",") if k.strip()]
    if not 1 <= len(names) <= MAX_KEYS:
        raise InputError(f"--fit names {len(names)} keys; fit 1 to {MAX_KEYS} at a time")
    if len(set(names)) != len(names):
        raise InputError(f"--fit {args.fit}: a key is named twice")
    bounds = parse_bounds(args.bounds)
    unknown = sorted(set(bounds) - set(names))
    if unknown:
        raise InputError(f"--bounds names {', '.join(unknown)}, which --fit does not")
    keys = []
    for name in names:
        spot = find(text, source, name)
        lo, hi = bounds.get(name) or default_bounds(spot)
        keys.append(FitKey(spot, lo, hi))
    return keys


def calibrate(args: argparse.Namespace) -> int:
    """Run the subcommand; every problem of the input is an :class:`NpuSimError`."""
    started = time.perf_counter()
    if args.max_evaluations < 1:
        raise InputError(f"--max-evaluations {args.max_evaluations} must be at least 1")
    table = read_table(args.measured, args.collective)
    source = Path(topology_path(args.topology))
    text = read_text(source, what="topology file", limit=MAX_TOPOLOGY_BYTES, error=InputError)
    out, figure = _outputs(args, source)
    half = "in-place" if args.inplace else "out-of-place"
    rows = [r for r in table.rows if r.size > 0 and r.measured(args.inplace) is not None]
    measured = [r.measured(args.inplace).time_us for r in rows]  # type: ignore[union-attr]
    if not rows or min(measured) <= 0:
        raise InputError(
            f"{args.measured}: no row with a positive {half} time"
            + ("" if args.inplace else "; try --inplace")
        )
    sizes = [r.size for r in rows]
    setup = Setup(text, str(source), table.ranks)
    try:
        keys = _keys(args, setup.text, str(source))

        def times(lits: Sequence[str], exact_all: bool = False) -> tuple[list[float], list[bool]]:
            topo = edited(setup, dict(zip([k.spot for k in keys], lits, strict=True)))
            run = simulate(
                topo, sizes, args.algorithm, table.collective, args.exact_up_to, exact_all
            )
            return [t / 1e6 for t in run.time_ps], list(run.exact)

        def objective(lits: tuple[str, ...]) -> float:
            sim, _ = times(lits)
            return sum(abs(math.log(s / m)) for s, m in zip(sim, measured, strict=True)) / len(
                sizes
            )

        print(
            f"{table.source}: {table.collective}, {setup.ranks} ranks, {len(sizes)} sizes; "
            f"fitting {', '.join(k.key for k in keys)} on {source} ({args.algorithm})"
        )
        result = fit(keys, objective, args.max_evaluations)
        start_us, _ = times([k.spot.text for k in keys])
        fitted_us, exact = times(result.literals, exact_all=True)
    finally:
        setup.close()
    before = band_errors(sizes, start_us, measured)
    after = band_errors(sizes, fitted_us, measured)
    curves = Curves(
        table.collective,
        args.algorithm,
        setup.ranks,
        tuple(sizes),
        tuple(measured),
        tuple(start_us),
        tuple(fitted_us),
        tuple(exact),
    )
    digest = hashlib.sha256(Path(args.measured).read_bytes()).hexdigest()
    lines = header(
        measured=str(args.measured),
        sha256=digest,
        topology=str(source),
        half=half,
        curves=curves,
        result=result,
        before=before,
        after=after,
        figure=figure.name,
    )
    spots = {
        find(text, str(source), k.key): lit for k, lit in zip(keys, result.literals, strict=True)
    }
    body = edit(text, spots, tag(str(args.measured), after))
    write_atomic(out, "\n".join(lines) + "\n" + body)
    fitted = ", ".join(f"{k.key} = {lit}" for k, lit in zip(keys, result.literals, strict=True))
    title = (
        f"{Path(args.measured).name} vs simulated {table.collective} ({args.algorithm}, "
        f"{setup.ranks} ranks) on {source.name}\nfitted {fitted}\n"
        f"geomean error {after.describe()}"
    )
    draw_figure(figure, curves, title)
    _print_sizes(curves)
    for line in lines[6:]:
        print(line[2:])
    print(f"wrote {out} and {figure} in {time.perf_counter() - started:.1f} s")
    return 0


def _print_sizes(c: Curves) -> None:
    meas = busbw_gbs(c.collective, c.ranks, c.sizes, c.measured_us)
    sim = busbw_gbs(c.collective, c.ranks, c.sizes, c.fitted_us)
    print(
        f"{'size':>10} {'measured us':>12} {'simulated us':>13} {'busbw meas':>11} "
        f"{'busbw sim':>10} {'sim/meas':>9}"
    )
    for s, tm, ts, bm, bs, e in zip(
        c.sizes, c.measured_us, c.fitted_us, meas, sim, c.exact, strict=True
    ):
        ratio = ts and tm / ts
        mark = "" if e else "  (line extended)"
        print(
            f"{size_text(s):>10} {tm:>12.2f} {ts:>13.2f} {bm:>11.2f} {bs:>10.2f} "
            f"{ratio:>9.3f}{mark}"
        )


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The subcommand with its errors as one usage error each (exit 2, no traceback)."""
    try:
        return calibrate(args)
    except NpuSimError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"{exc.filename or ''}: {exc.strerror}; pick another --out")
