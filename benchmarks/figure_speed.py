"""CPU seconds of drawing every bench's figures from a saved results set, per bench and per
figure, for this checkout and (optionally) another one side by side.

    python benchmarks/figure_speed.py                       # this checkout, 3 repeats
    python benchmarks/figure_speed.py --against /work/main  # main (before) vs this (after)
    python benchmarks/figure_speed.py --against /work/main --repeats 5 --bench gemm

The results come from a run's ``npubench-artifacts/results.json`` (``pytest --npubench all -n 2
-q`` writes one; ``--results`` to use another). Each checkout is timed in a fresh interpreter
with its own code first on ``sys.path`` and its own ``benches/``: the bench modules are found
and imported as the plugin's drawing child does (pytest_npubench.drawing), the results rebuilt
from the same payloads, and each bench's ``figures`` function called under the plugin's figure
context and ``reproducible_matplotlib`` settings (artifacts.draw), into a temporary folder.

A figure's time is the process CPU time from the end of the previous ``savefig`` (or the start
of the bench's figures call) to the end of its own: building it, drawing it and encoding the
PNG (the first figure of a bench also pays the bench's own data preparation). ``save`` is the
share spent inside ``savefig``. Each bench is drawn ``--repeats`` times in one process and the
best (smallest) time of each figure and bench is printed: the machine is shared, so the
minimum is the least noisy estimate. ``first`` is the bench's first pass, which also pays the
one-time costs (font loading, mathtext parser set-up) that every drawing process pays once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def child(root: Path, results_file: Path, repeats: int, only: list[str]) -> dict[str, Any]:
    """In a fresh interpreter: time every bench's figures drawn with the code under ``root``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.pyplot  # imported before timing, as the drawing child does

    from pytest_npubench.artifacts import draw
    from pytest_npubench.compare import ConfigResult
    from pytest_npubench.discover import bench_files, benches_in, import_bench_module
    from pytest_npubench.figure_context import for_bench, using

    data = json.loads(results_file.read_text(encoding="utf-8"))["benches"]
    marks: list[tuple[str, float, float]] = []  # (file name, CPU at savefig start, at end)
    savefig = matplotlib.figure.Figure.savefig

    def timed_savefig(self: Any, fname: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        out = savefig(self, fname, *args, **kwargs)
        marks.append((Path(str(fname)).name, start, time.process_time()))
        return out

    matplotlib.figure.Figure.savefig = timed_savefig  # type: ignore[method-assign]
    benches = [
        bench
        for path in bench_files([root / "benches"])
        for bench in benches_in(import_bench_module(path, root))
        if bench.figures is not None and bench.name in data and (not only or bench.name in only)
    ]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="npubench-figure-speed-") as tmp:
        for bench in benches:
            configs = data[bench.name]["configs"]
            results = {}
            for config_id, entry in configs.items():
                payload = {k: v for k, v in entry.items() if k != "params"}
                payload.update(bench=bench.name, config_id=config_id)
                results[config_id] = ConfigResult.from_payload(json.dumps(payload), bench)
            ordered = {
                c.config_id: results[c.config_id] for c in bench.configs if c.config_id in results
            }
            context, inputs = for_bench(
                bench.name, len(bench.configs), ordered, regen=False, fail_improvements=False
            )
            outdir = Path(tmp) / bench.name
            figures = bench.figures
            assert figures is not None
            passes = []
            for _ in range(repeats):
                marks.clear()
                start = time.process_time()

                def drawn(
                    figures: Any = figures,
                    context: Any = context,
                    inputs: Any = inputs,
                    outdir: Path = outdir,
                ) -> list[Any]:
                    with using(context):
                        return [figures(inputs, outdir)]

                draw(drawn, outdir, Path(tmp), use_mpl=True)
                total = time.process_time() - start
                per: dict[str, tuple[float, float]] = {}
                before = start
                for name, begin, end in marks:
                    per[name] = (end - before, end - begin)
                    before = end
                passes.append((total, per))
            out[bench.name] = {
                "first": passes[0][0],
                "best": min(total for total, _ in passes),
                "figures": {
                    name: [
                        min(per[name][0] for _, per in passes),
                        min(per[name][1] for _, per in passes),
                    ]
                    for name in passes[0][1]
                },
            }
    return out


def measure(root: Path, results_file: Path, repeats: int, only: list[str]) -> dict[str, Any]:
    """Run :func:`child` for the checkout at ``root`` in a new interpreter."""
    env = {**os.environ, "PYTHONPATH": str(root), "SOURCE_DATE_EPOCH": "0"}
    cmd = [sys.executable, __file__, "--child", str(root), "--results", str(results_file)]
    cmd += ["--repeats", str(repeats), *(arg for b in only for arg in ("--bench", b))]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"timing {root} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(columns: list[tuple[str, dict[str, Any]]]) -> None:
    """Per bench and figure, the best CPU seconds of each checkout (and save's share)."""
    names = [name for name, _ in columns]
    head = f"{'bench / figure':<36}" + "".join(f"{n:>22}" for n in names)
    if len(columns) == 2:
        head += f"{'after/before':>14}"
    print(head)
    print("-" * len(head))
    grand = [0.0] * len(columns)
    firsts = [0.0] * len(columns)
    benches = list(columns[-1][1])
    for bench in benches:
        rows = [c.get(bench) for _, c in columns]
        line = f"{bench:<36}"
        for i, row in enumerate(rows):
            best = row["best"] if row else float("nan")
            grand[i] += best
            firsts[i] += row["first"] if row else float("nan")
            line += f"{best:>14.2f} s{'':>6}"
        if len(rows) == 2 and rows[0] and rows[1]:
            line += f"{rows[1]['best'] / rows[0]['best']:>13.2f}x"
        print(line)
        figures = list(rows[-1]["figures"]) if rows[-1] else []
        for figure in figures:
            line = f"  {figure:<34}"
            cells = [r["figures"].get(figure) if r else None for r in rows]
            for c in cells:
                line += f"{c[0]:>8.3f} s (save {c[1]:5.3f})" if c else f"{'-':>22}"
            if len(cells) == 2 and cells[0] and cells[1]:
                line += f"{cells[1][0] / cells[0][0]:>13.2f}x"
            print(line)
    print("-" * len(head))
    line = f"{'all benches, best pass':<36}" + "".join(f"{g:>14.2f} s{'':>6}" for g in grand)
    if len(grand) == 2:
        line += f"{grand[1] / grand[0]:>13.2f}x"
    print(line)
    line = f"{'all benches, first pass':<36}" + "".join(f"{g:>14.2f} s{'':>6}" for g in firsts)
    if len(firsts) == 2:
        line += f"{firsts[1] / firsts[0]:>13.2f}x"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "npubench-artifacts/results.json")
    parser.add_argument("--against", type=Path, help="another checkout, timed as 'before'")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bench", action="append", default=[], help="only these benches")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    results = args.results.resolve()
    if args.child is not None:
        print(json.dumps(child(args.child, results, args.repeats, args.bench)))
        return
    if not results.is_file():
        sys.exit(f"no {results}: run `pytest --npubench all -n 2 -q` first")
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; best of "
        f"{args.repeats} passes, CPU seconds; results from {results}"
    )
    columns = []
    if args.against is not None:
        columns.append(
            (
                f"before ({args.against.name})",
                measure(args.against.resolve(), results, args.repeats, args.bench),
            )
        )
    columns.append((f"after ({ROOT.name})", measure(ROOT, results, args.repeats, args.bench)))
    table(columns)


if __name__ == "__main__":
    main()
