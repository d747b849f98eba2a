"""Figures of the ccl bench's other collectives (not a bench: the name starts with ``_``): per
collective, bus bandwidth against size at GATED_CHIPS chips, one panel per interconnect, one
line per algorithm; simulated (markers) and modelled (dashed). Drawn by
:func:`benches._ccl_figures.figures` from the same grid as the allreduce figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benches._ccl_sweep import GATED_CHIPS, MORE_COLLECTIVES, SIZES, TOPOLOGIES, size_label
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    log_axis,
    markers,
    provenance,
    provenance_handles,
    save,
    titled,
)
from sim.collectives import COLLECTIVE_ALGORITHMS, bus_factor

COLORS = {
    "ring": "#4c72b0",
    "direct": "#dd8452",
    "recursive_doubling": "#55a868",
    "recursive_halving": "#55a868",
    "pairwise": "#8172b3",
    "binary_tree": "#c44e52",
}
FACTOR = {c: f"{bus_factor(c, GATED_CHIPS):.3g}" for c in MORE_COLLECTIVES}
SIZE_IS = {
    "all_gather": "the output",
    "reduce_scatter": "the input",
    "alltoall": "one chip's send buffer",
    "broadcast": "the buffer, root 0",
    "reduce": "the buffer, root 0",
    "sendrecv": "what each chip sends",
}


def figure_name(collective: str) -> str:
    return f"busbw_{collective}.png"


Series = dict[tuple[str, str, str], dict[int, ConfigResult]]


def at_gated_chips(grid: Mapping[Any, ConfigResult]) -> Series:
    """The grid's configs at GATED_CHIPS by (collective, topology, algorithm), then size."""
    out: Series = {}
    for key, r in grid.items():
        if key.chips == GATED_CHIPS:
            out.setdefault((key.collective, key.topology, key.algorithm), {})[key.size] = r
    return out


def series(
    drawn: Series, collective: str, topology: str, algorithm: str
) -> tuple[list[int], list[ConfigResult]]:
    """A collective's configs at GATED_CHIPS on one topology with one algorithm, by size."""
    rows = drawn.get((collective, topology, algorithm), {})
    sizes = [s for s in SIZES if s in rows]
    return sizes, [rows[s] for s in sizes]


def model_busbw(ys: list[float], rows: list[ConfigResult]) -> list[float]:
    """The model's busbw at each simulated point: the simulated busbw scaled by sim / model
    time (the dashed lines; a point without a model time keeps its own)."""
    return [
        y * r.metrics["time_ns"] / r.metrics["model_time_ns"]
        if r.metrics.get("model_time_ns")
        else y
        for y, r in zip(ys, rows, strict=True)
    ]


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
    ax.set_xlabel("message size (bytes, powers of 1024)")
    ax.minorticks_off()


def busbw_figure(grid: Series, collective: str, path: Path, where: str) -> Path:
    """busbw vs size of one collective (module docstring)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    algorithms = COLLECTIVE_ALGORITHMS[collective]
    drawn = [r for t in TOPOLOGIES for a in algorithms for r in series(grid, collective, t, a)[1]]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), squeeze=False, sharex=True)
    fig.suptitle(
        f"{collective} bus bandwidth vs message size ({SIZE_IS[collective]}), {GATED_CHIPS} "
        f"chips (nccl-tests busbw = algbw x {FACTOR[collective]}, GB = 1e9 B; log scale)\n"
        "markers: simulated; dashed: the model (sim.collective_model) at the same size\n"
        + provenance(drawn, f" plotted on {where}"),
        fontsize=11,
    )
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.14, top=0.86, wspace=0.18, hspace=0.12)
    for ax, topology in zip(axes.flat, TOPOLOGIES, strict=True):
        for algorithm in algorithms:
            xs, rows = series(grid, collective, topology, algorithm)
            if not xs:
                continue
            color = COLORS[algorithm]
            ys = [r.metrics["busbw_gbs"] for r in rows]
            ax.plot(xs, ys, color=color)
            ax.plot(xs, model_busbw(ys, rows), color=color, linestyle="--", linewidth=1)
            markers(ax, xs, ys, rows, color, marker="o", markersize=5)
        titled(ax, f"topology: {topology}")
        log_axis(ax)
        ax.set_ylabel("busbw (GB/s, log scale)")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[1]:
        _size_axis(ax)
    handles = [Line2D([], [], color=COLORS[a], label=a) for a in algorithms]
    handles.append(Line2D([], [], color="gray", linestyle="--", label="model"))
    fig.legend(handles=handles + provenance_handles(), loc="lower center", ncol=6, fontsize=9)
    return save(fig, path)


def collective_figures(
    grid: Mapping[Any, ConfigResult], outdir: Path, where: str
) -> Sequence[Path]:
    """One busbw figure per collective that has configs in the grid."""
    present = {key.collective for key in grid}
    drawn = at_gated_chips(grid)
    return [
        busbw_figure(drawn, c, outdir / figure_name(c), where)
        for c in MORE_COLLECTIVES
        if c in present
    ]
