"""Figures of the ccl bench (drawn by the controller from every config's metrics): allreduce's
busbw and time vs size, the fastest algorithm per size x chips, simulated vs modelled time;
and one busbw figure per other collective (:mod:`benches._ccl_collective_figures`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benches._ccl_collective_figures import collective_figures
from benches._ccl_nccltests import write_tables
from benches._ccl_sweep import CHIPS, GATED_CHIPS, SIZES, TOPOLOGIES, size_label
from benches._ccl_two_level import two_level_figures
from benches._energy_figures import has_energy, pj_per_byte_vs_size
from benches._shared import bench_topology, grid_by
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    failed,
    log_axis,
    mark_failed,
    markers,
    measured,
    ns_tick_formatter,
    provenance,
    provenance_handles,
    save,
    titled,
)
from sim.collectives import ALGORITHMS, algorithms_for

TOPOLOGY = bench_topology()  # the bench's own (one topology file per run)

ALGO_COLORS = {
    "ring": "#4c72b0",
    "direct": "#dd8452",
    "halving_doubling": "#55a868",
    "double_binary_tree": "#c44e52",
    "torus2d": "#8172b3",
}
ALGO_SHORT = {
    "ring": "ring",
    "direct": "direct",
    "halving_doubling": "HD",
    "double_binary_tree": "DBT",
    "torus2d": "2D",
}
TIE = 0.001  # best_algorithm.png calls algorithms within 0.1 % of the fastest a tie
TIE_COLOR = "#bbbbbb"
#: the collective of a config without a ``collective`` axis (every config of today's sweep)
ALLREDUCE = "allreduce"


class Cell(NamedTuple):
    """Where the figures draw a config: every parameter that tells two configs apart."""

    collective: str
    topology: str
    chips: int
    algorithm: str
    size: int


Grid = dict[Cell, ConfigResult]


def cell(params: Mapping[str, Any]) -> Cell:
    """The figure cell of a config's params (allreduce unless a group names its collective)."""
    return Cell(
        str(params.get("collective", ALLREDUCE)),
        params["topology"],
        params["chips"],
        params["algorithm"],
        params["size"],
    )


def figure_grid(results: Mapping[str, ConfigResult]) -> Grid:
    """The figures' grid: every config that ran (has a time) by its :class:`Cell`; two
    configs in one cell are an error, never a silent overwrite."""
    return grid_by(results, lambda r: cell(r.params), keep=lambda r: "time_ns" in r.metrics)


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
    ax.set_xlabel("message size (bytes, powers of 1024)")
    ax.minorticks_off()


def _at_chips(grid: Grid, chips: int) -> list[ConfigResult]:
    return [r for key, r in grid.items() if key.collective == ALLREDUCE and key.chips == chips]


def _allreduce(grid: Grid) -> list[ConfigResult]:
    return [r for key, r in grid.items() if key.collective == ALLREDUCE]


def _note(results: list[ConfigResult], what: str = "") -> str:
    return provenance(results, f"{what} on {TOPOLOGY.fingerprint}")


def _series(
    grid: Grid, topology: str, chips: int, algorithm: str
) -> tuple[list[int], list[ConfigResult]]:
    keys = [Cell(ALLREDUCE, topology, chips, algorithm, s) for s in SIZES]
    keys = [k for k in keys if k in grid]
    return [k.size for k in keys], [grid[k] for k in keys]


def _panels(title: str) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), squeeze=False)
    fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.1, top=0.86, wspace=0.18, hspace=0.42)
    return fig, axes.flat


def busbw_bounds(grid: Grid, topology: str) -> dict[str, float]:
    """Per algorithm on ``topology`` (at GATED_CHIPS), its own busbw bound at the largest size:
    what the algorithm could reach if its busiest resource never idled (not the link peak)."""
    bounds: dict[str, float] = {}
    for algorithm in algorithms_for(topology):
        _, rows = _series(grid, topology, GATED_CHIPS, algorithm)
        if rows:
            bounds[algorithm] = rows[-1].metrics["algo_bound_busbw_gbs"]
    return bounds


def _busbw_vs_size(grid: Grid, path: Path) -> Path:
    plotted = _at_chips(grid, GATED_CHIPS)
    fig, axes = _panels(
        f"Allreduce bus bandwidth vs message size, {GATED_CHIPS} chips (busbw = algbw x 2(p-1)/p, "
        "GB = 1e9 B; log scale, so the latency-bound small sizes show)\n"
        "dashed: each algorithm's own bound on this topology (its busiest link direction, "
        "reduce engine or HBM kept busy), not a link-speed ceiling\n" + _note(plotted, " plotted")
    )
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        bounds = busbw_bounds(grid, topology)
        for algorithm in algorithms_for(topology):
            color = ALGO_COLORS[algorithm]
            xs, rows = _series(grid, topology, GATED_CHIPS, algorithm)
            if not xs:
                continue
            ys = [r.metrics["busbw_gbs"] for r in rows]
            ax.plot(xs, ys, color=color, label=algorithm)
            markers(ax, xs, ys, rows, color, marker="o", markersize=5)
            ax.axhline(
                bounds[algorithm],
                color=color,
                linestyle="--",
                linewidth=1,
                label=f"{ALGO_SHORT[algorithm]}'s own bound {bounds[algorithm]:.3g} GB/s",
            )
        titled(ax, f"topology: {topology}")
        log_axis(ax, minor=False)
        ax.set_ylabel("busbw (GB/s, log scale)")
        _size_axis(ax)
        ax.grid(True, which="major", alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + provenance_handles(), fontsize=7, loc="lower right", ncol=2)
    return save(fig, path)


def _time_vs_size(grid: Grid, path: Path) -> Path:
    from matplotlib.lines import Line2D

    plotted = _at_chips(grid, GATED_CHIPS)
    fig, axes = _panels(
        f"Allreduce time vs message size, {GATED_CHIPS} chips: simulated (markers) and "
        "alpha-beta-gamma model (dashed), log scale\n" + _note(plotted, " plotted")
    )
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            color = ALGO_COLORS[algorithm]
            xs, rows = _series(grid, topology, GATED_CHIPS, algorithm)
            if not xs:
                continue
            ax.plot(xs, [r.metrics["model_time_ns"] for r in rows], linestyle="--", color=color)
            sim = [r.metrics["time_ns"] for r in rows]
            markers(ax, xs, sim, rows, color, marker="o", markersize=5)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ns_tick_formatter())
        titled(ax, f"topology: {topology}")
        ax.set_ylabel("allreduce time (log scale)")
        _size_axis(ax)
        ax.grid(True, which="major", alpha=0.3)
        handles = [
            Line2D(
                [],
                [],
                color=ALGO_COLORS[a],
                marker="o",
                markersize=5,
                linestyle="none",
                label=f"{a}, simulated",
            )
            for a in algorithms_for(topology)
        ]
        handles += [Line2D([], [], color="gray", linestyle="--", label="alpha-beta-gamma model")]
        ax.legend(
            handles=handles + provenance_handles(results=plotted), fontsize=7, loc="upper left"
        )
    return save(fig, path)


def fastest(grid: Grid, topology: str, chips: int, size: int) -> dict[str, Any] | None:
    """The fastest algorithm(s) of one cell of best_algorithm.png: ``winners`` (every algorithm
    within TIE of the fastest: a tie when more than one), ``margin`` (how much slower the next
    algorithm is, relative; None if there is none), ``measured`` (all its configs ran now)."""
    cells = {a: Cell(ALLREDUCE, topology, chips, a, size) for a in algorithms_for(topology)}
    times = {a: grid[c] for a, c in cells.items() if c in grid}
    if not times:
        return None
    order = list(ALGORITHMS)
    ranked = sorted(times, key=lambda a: (times[a].metrics["time_ns"], order.index(a)))
    best = times[ranked[0]].metrics["time_ns"]
    winners = [a for a in ranked if times[a].metrics["time_ns"] <= best * (1 + TIE)]
    rest = ranked[len(winners) :]
    margin = times[rest[0]].metrics["time_ns"] / best - 1 if rest and best else None
    return {
        "winners": winners,
        "margin": margin,
        "measured": all(measured(r) for r in times.values()),
        "failed": [r for r in times.values() if failed(r)],
    }


def _best_algorithm(grid: Grid, path: Path) -> Path:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    fig, axes = _panels(
        "Fastest allreduce algorithm (simulated) by message size and chip count; second line: "
        "how much slower the runner-up is\n"
        f"grey 'ring=HD': a tie (within {TIE:.1%}); outlined cells were measured in this run, "
        "the rest reused from the baseline\n" + _note(_allreduce(grid))
    )
    order = list(ALGORITHMS)
    cmap = ListedColormap(["#ffffff", TIE_COLOR, *(ALGO_COLORS[a] for a in order)])
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        cells = []
        for c_i, chips in enumerate(CHIPS):
            row = []
            for s_i, size in enumerate(SIZES):
                cell = fastest(grid, topology, chips, size)
                if cell is None:
                    row.append(0)
                    continue
                winners = cell["winners"]
                row.append(1 if len(winners) > 1 else order.index(winners[0]) + 2)
                label = "=".join(ALGO_SHORT[a] for a in winners)
                if cell["margin"] is not None:
                    label += f"\n+{cell['margin']:.0%}" if cell["margin"] >= 0.01 else "\n<1%"
                ax.text(
                    s_i,
                    c_i,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if len(winners) > 1 else "white",
                )
                if cell["measured"]:
                    ax.add_patch(
                        Rectangle(
                            (s_i - 0.5, c_i - 0.5),
                            1,
                            1,
                            fill=False,
                            edgecolor="black",
                            linewidth=1.5,
                        )
                    )
                if cell["failed"]:  # a red x on the cell of a failed config
                    mark_failed(ax, [s_i], [c_i], cell["failed"][:1])
            cells.append(row)
        ax.imshow(cells, cmap=cmap, vmin=0, vmax=len(order) + 1, aspect="auto", origin="lower")
        ax.set_xticks(range(len(SIZES)))
        ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
        ax.set_yticks(range(len(CHIPS)))
        ax.set_yticklabels([str(c) for c in CHIPS])
        ax.set_xlabel("message size (bytes, powers of 1024)")
        ax.set_ylabel("chips")
        titled(ax, f"topology: {topology}")
    handles = [Patch(color=ALGO_COLORS[a], label=f"{ALGO_SHORT[a]} = {a}") for a in order]
    handles.append(Patch(color=TIE_COLOR, label="tie"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.subplots_adjust(bottom=0.14)
    return save(fig, path)


def sim_vs_model_series(
    grid: Grid, topology: str, algorithm: str
) -> tuple[tuple[list[int], list[float], list[ConfigResult]], dict[int, tuple[float, float]]]:
    """sim_vs_model.png's data for one algorithm on one topology: the ratio at GATED_CHIPS
    per size (sizes, ratios, results) and, per size, the range (low, high) of the ratio over
    every chip count swept."""
    xs, rows = _series(grid, topology, GATED_CHIPS, algorithm)
    line = (xs, [r.metrics["sim_model_ratio"] for r in rows], rows)
    spread: dict[int, tuple[float, float]] = {}
    for chips in CHIPS:
        for size, r in zip(*_series(grid, topology, chips, algorithm), strict=True):
            ratio = r.metrics["sim_model_ratio"]
            lo, hi = spread.get(size, (ratio, ratio))
            spread[size] = (min(lo, ratio), max(hi, ratio))
    return line, spread


def _sim_vs_model(grid: Grid, path: Path) -> Path:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ratios = [r.metrics["sim_model_ratio"] for r in _allreduce(grid)]
    errors = [abs(math.log(x)) for x in ratios if x > 0]
    geomean = math.exp(sum(errors) / len(errors)) - 1 if errors else 0.0
    fig, axes = _panels(
        "Simulated / modelled time (1: model exact; >1: contention the model misses; <1: "
        f"overlap it misses)\nline: {GATED_CHIPS} chips, band: the range over "
        f"{min(CHIPS)}-{max(CHIPS)} chips; "
        f"geomean |error| {geomean:.1%}, worst {max(ratios, default=1):.2f}x and "
        f"{min(ratios, default=1):.2f}x over every chip count; hollow: reused from the "
        "baseline (not re-run)\n" + _note(_allreduce(grid))
    )
    drawn: list[ConfigResult] = []
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            (xs, ys, rows), spread = sim_vs_model_series(grid, topology, algorithm)
            color = ALGO_COLORS[algorithm]
            if spread:
                sizes = sorted(spread)
                ax.fill_between(
                    sizes,
                    [spread[s][0] for s in sizes],
                    [spread[s][1] for s in sizes],
                    color=color,
                    alpha=0.15,
                    linewidth=0,
                )
            if xs:
                ax.plot(xs, ys, color=color, alpha=0.9)
                markers(ax, xs, ys, rows, color, markersize=5, zorder=3)
                drawn += rows
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log", base=2)
        ax.set_ylim(0.4, 2.5)
        ax.set_yticks([0.5, 0.75, 1, 1.25, 1.5, 2])
        ax.set_yticklabels(["0.5", "0.75", "1", "1.25", "1.5", "2"])
        ax.minorticks_off()
        ax.set_ylabel("simulated / model time")
        titled(ax, f"topology: {topology}")
        _size_axis(ax)
        ax.grid(True, alpha=0.3)
    handles: list[Any] = [
        Line2D(
            [],
            [],
            color=ALGO_COLORS[a],
            marker="o",
            markersize=5,
            label=f"{a}, {GATED_CHIPS} chips",
        )
        for a in ALGORITHMS
    ]
    handles.append(Patch(color="gray", alpha=0.3, label=f"range over {len(CHIPS)} chip counts"))
    handles += provenance_handles(results=drawn)
    fig.legend(handles=handles, loc="lower center", ncol=(len(handles) + 1) // 2, fontsize=8)
    fig.subplots_adjust(bottom=0.15)
    return save(fig, path)


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """busbw and time vs size, the fastest algorithm per size x chips, sim vs model; busbw
    vs size per other collective; beside them (not figures: not listed), each 8-chip sweep as
    an nccl-tests table."""
    import matplotlib

    matplotlib.use("Agg")
    grid = figure_grid(results)
    outdir.mkdir(parents=True, exist_ok=True)
    write_tables(results, outdir, TOPOLOGY)
    return [
        _busbw_vs_size(grid, outdir / "busbw_vs_size.png"),
        _time_vs_size(grid, outdir / "time_vs_size.png"),
        _best_algorithm(grid, outdir / "best_algorithm.png"),
        _sim_vs_model(grid, outdir / "sim_vs_model.png"),
        *collective_figures(grid, outdir, TOPOLOGY.fingerprint),
        *two_level_figures(grid, outdir, TOPOLOGY.chips.count, TOPOLOGY.fingerprint),
        *_energy_figures(grid, outdir),
    ]


def _energy_figures(grid: Grid, outdir: Path) -> list[Path]:
    """pJ per message byte against size per algorithm, at GATED_CHIPS (none without energy)."""
    rows = _at_chips(grid, GATED_CHIPS)
    if not has_energy(rows):
        return []
    panels: dict[str, dict[str, list[ConfigResult]]] = {}
    for r in rows:
        panels.setdefault(r.params["topology"], {}).setdefault(r.params["algorithm"], []).append(r)
    where = f" on {TOPOLOGY.fingerprint}, {GATED_CHIPS} chips"
    return [pj_per_byte_vs_size(panels, outdir / "energy_per_byte_vs_size.png", where)]
