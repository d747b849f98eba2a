"""SCALE-Sim against sim.systolic on the same files: cycles, equal yes/no, wall time, ratio.

    python benchmarks/vs_scalesim.py --scalesim-python /work/scalesim-venv/bin/python \\
        tests/data/scalesim/gpt2.csv tests/data/scalesim/Resnet18.csv
    SCALESIM_PYTHON=... python benchmarks/vs_scalesim.py --dataflow os --layers FC,Conv5_s \\
        tests/data/scalesim/Resnet18.csv
    python benchmarks/vs_scalesim.py --from-reference tests/data/scalesim/Resnet18.csv

Both run on one core each, one after the other: SCALE-Sim (``benchmarks/scalesim_driver.py``
under its own interpreter, one layer at a time, pinned with ``taskset -c 0`` where it exists),
then ours in this process (pinned to the same core). SCALE-Sim's time per layer is its
``run_scale`` in-process (report writing included, interpreter start-up excluded); ours is
the best of ``--repeat`` runs of ``simulate_layer``, and the whole-file line is the best of
``--repeat`` runs of reading the cfg and topology, every layer and the COMPUTE_REPORT text.
SCALE-Sim takes about a millisecond per simulated cycle, so whole files take it hours
(gpt2: 7-22 M cycles per dataflow); ``--layers`` picks layers, and ``--from-reference``
reuses the SCALE-Sim rows (with their wall times, measured on this machine) that
``make_scalesim_reference.py`` committed instead of running SCALE-Sim again.
Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.scalesim_files import read_scalesim_config, read_scalesim_topology  # noqa: E402
from sim.systolic import (  # noqa: E402
    ArrayConfig,
    compute_report_csv,
    simulate_layer,
)

DRIVER = ROOT / "benchmarks" / "scalesim_driver.py"
REFERENCE = ROOT / "tests" / "data" / "scalesim_reference.json"
DEFAULT_CFG = ROOT / "tests" / "data" / "scalesim" / "scale.cfg"


def _pin() -> list[str]:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    return ["taskset", "-c", "0"] if shutil.which("taskset") else []


def _scalesim_rows(
    python: str, cfg: Path, topo: Path, df: str, layers: list[str]
) -> dict[str, dict[str, object]]:
    cmd = [*_pin(), python, str(DRIVER), str(cfg), str(topo), df, "--layers", ",".join(layers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {rec["layer"]: rec for rec in map(json.loads, out.splitlines())}


def _reference_rows(cfg: Path, topo: Path, df: str) -> dict[str, dict[str, object]]:
    rows = json.loads(REFERENCE.read_text())["layers"]
    return {
        r["layer"]: r
        for r in rows
        if (r["cfg"], r["topology"], r["dataflow"]) == (cfg.name, topo.name, df)
    }


def _ours_file_s(cfg: Path, topo: Path, df: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        conf = read_scalesim_config(cfg)
        array = ArrayConfig(conf.array.rows, conf.array.cols, df)
        compute_report_csv([simulate_layer(x, array) for x in read_scalesim_topology(topo)])
        best = min(best, time.perf_counter() - t0)
    return best


def _ours_layer_s(layer: object, array: ArrayConfig, repeat: int) -> tuple[int, float]:
    best = float("inf")
    cycles = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        cycles = simulate_layer(layer, array).total_cycles  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
    return cycles, best


def _cpu_columns(their_cpu: float | None, ours_s: float) -> str:
    """SCALE-Sim's CPU time and its ratio to our wall time (ours is microseconds: its CPU
    time is below the clock's resolution, and wall >= CPU, so the ratio is conservative)."""
    if their_cpu is None:
        return f" {'-':>9} {'-':>9}"
    return f" {their_cpu:>9.3f} {their_cpu / ours_s:>8.0f}x"


def compare(args: argparse.Namespace, topo: Path, df: str) -> tuple[int, int, float, float]:
    """Print one block; return (layers compared, mismatches, SCALE-Sim s, ours s)."""
    conf = read_scalesim_config(args.cfg)
    array = ArrayConfig(conf.array.rows, conf.array.cols, df)
    layers = read_scalesim_topology(topo)
    wanted = [x.name for x in layers if not args.layers or x.name in args.layers]
    if args.from_reference:
        theirs = _reference_rows(args.cfg, topo, df)
        source = "SCALE-Sim rows and times from tests/data/scalesim_reference.json"
    else:
        theirs = _scalesim_rows(args.scalesim_python, args.cfg, topo, df, wanted)
        source = "SCALE-Sim run now"
    print(f"\n== {topo.name}, {array.rows}x{array.cols}, {df} ({source})")
    print(
        f"{'layer':>10} {'SCALE-Sim cyc':>13} {'ours cyc':>10} {'equal':>5} "
        f"{'SCALE-Sim s':>11} {'ours s':>9} {'ratio':>9} {'SS cpu s':>9} {'cpu ratio':>9}"
    )
    n = bad = their_total = all_cycles = 0
    t_theirs = t_ours = 0.0
    cpu_theirs: float | None = 0.0  # None once a row has no CPU time (older reference rows)
    for layer in layers:
        if layer.name not in wanted:
            continue
        cycles, ours_s = _ours_layer_s(layer, array, args.repeat)
        all_cycles += cycles
        rec = theirs.get(layer.name)
        if rec is None:
            print(f"{layer.name:>10} {'not run':>13} {cycles:>10}")
            continue
        their_cycles = int(rec["compute_report"][2])  # type: ignore[index]
        their_s = float(rec["wall_s"])  # type: ignore[arg-type]
        equal = their_cycles == cycles
        n, bad, their_total = n + 1, bad + (not equal), their_total + their_cycles
        t_theirs, t_ours = t_theirs + their_s, t_ours + ours_s
        raw_cpu = rec.get("cpu_s")
        their_cpu = None if raw_cpu is None else float(raw_cpu)  # type: ignore[arg-type]
        if cpu_theirs is not None:
            cpu_theirs = None if their_cpu is None else cpu_theirs + their_cpu
        print(
            f"{layer.name:>10} {their_cycles:>13} {cycles:>10} {'yes' if equal else 'NO':>5} "
            f"{their_s:>11.3f} {ours_s:>9.2e} {their_s / ours_s:>8.0f}x"
            + _cpu_columns(their_cpu, ours_s)
        )
    if n:
        print(
            f"{'layers':>10} {n:>13} {'':>10} {bad:>4}! {t_theirs:>11.3f} {t_ours:>9.2e} "
            f"{t_theirs / t_ours:>8.0f}x"
            + _cpu_columns(cpu_theirs, t_ours)
            + "   (sum over the layers compared; ! = mismatches)"
        )
    whole = _ours_file_s(args.cfg, topo, df, args.repeat)
    print(
        f"{'ours, whole file':>24} ({len(layers)} layers, read + simulate + report): {whole:.2e} s"
    )
    if n == len(layers):
        print(f"{'whole file ratio':>24}: {t_theirs / whole:.0f}x (measured, wall / wall)")
        if cpu_theirs is not None:
            print(
                f"{'whole file, CPU':>24}: SCALE-Sim {cpu_theirs:.3f} s CPU -> "
                f"{cpu_theirs / whole:.0f}x (its CPU time / our wall time)"
            )
    elif n and not args.layers:
        est = t_theirs / their_total * all_cycles
        print(
            f"{'whole file, ESTIMATE':>24}: SCALE-Sim ~{est:.0f} s at its measured "
            f"{t_theirs / their_total * 1e3:.2f} ms/cycle x {all_cycles} cycles -> "
            f"~{est / whole:.0f}x (extrapolated, not measured)"
        )
    return n, bad, t_theirs, whole


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("topologies", nargs="+", type=Path)
    p.add_argument("--cfg", type=Path, default=DEFAULT_CFG)
    p.add_argument("--dataflow", action="append", choices=["os", "ws", "is"])
    p.add_argument("--layers", type=lambda s: s.split(","), default=[])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--scalesim-python", default=os.environ.get("SCALESIM_PYTHON", ""))
    p.add_argument("--from-reference", action="store_true")
    args = p.parse_args()
    if not args.from_reference and not args.scalesim_python:
        p.error("give --scalesim-python PATH or set SCALESIM_PYTHON, or use --from-reference")
    _pin()
    total_n = total_bad = 0
    for topo in args.topologies:
        for df in args.dataflow or ["os", "ws", "is"]:
            n, bad, _, _ = compare(args, topo, df)
            total_n, total_bad = total_n + n, total_bad + bad
    print(f"\nTOTAL: {total_n} layer runs compared, {total_bad} cycle mismatches")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
