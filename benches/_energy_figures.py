"""Energy figures (docs/adr/0027), drawn from the configs' energy metrics: the breakdown by
component per config (gemm, tp_layer), perf/W against shape (gemm) and pJ per byte against
message size per algorithm (ccl). Pale bars and hollow markers are reused from the baseline,
as in every other figure. A run on a topology without ``energy:`` draws none of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benches._energy import COMPONENT_NAMES
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    REUSED_ALPHA,
    bars,
    log_axis,
    mark_failed,
    markers,
    measured,
    provenance,
    provenance_handles,
    save,
)
from sim.energy import ENERGY_COMPONENTS

COMPONENT_COLORS = {
    "mac": "#c44e52",
    "hbm_read": "#4c72b0",
    "hbm_write": "#8da0cb",
    "sram_read": "#55a868",
    "sram_write": "#a6d854",
    "fetch": "#64b5cd",
    "link": "#dd8452",
    "reduce": "#8172b3",
    "static": "#999999",
}
ALGORITHM_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def has_energy(results: Sequence[ConfigResult]) -> bool:
    return bool(results) and all("energy_uj" in r.metrics for r in results)


def energy_breakdown(
    rows: Sequence[tuple[str, ConfigResult]], path: Path, title: str, where: str
) -> Path:
    """One stacked bar per config: each component's share of its energy (the bar sums to 1),
    the total in µJ written above; pale bars are reused from the baseline."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    n = len(rows)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.32 * n + 2), 6.2))
    bottoms = [0.0] * n
    for name, component in ENERGY_COMPONENTS.items():
        shares = [r.metrics[name] / r.metrics["energy_uj"] for _l, r in rows]
        colors = [
            to_rgba(COMPONENT_COLORS[component], 1.0 if measured(r) else REUSED_ALPHA)
            for _l, r in rows
        ]
        _stacked(ax, bottoms, shares, colors)
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    totals = ax.twinx()
    xs = list(range(n))
    markers(
        totals,
        xs,
        [r.metrics["energy_uj"] for _l, r in rows],
        [r for _l, r in rows],
        "black",
        markersize=3,
    )
    log_axis(totals)
    totals.set_ylabel("total energy (µJ, black dots, log scale)")
    ax.set_xticks(xs, [label for label, _r in rows], rotation=70, ha="right", fontsize=7)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("share of the config's energy (stacked bars)")
    handles = [
        Patch(color=COMPONENT_COLORS[c], label=COMPONENT_NAMES[c])
        for c in ENERGY_COMPONENTS.values()
    ]
    handles.append(Patch(color="gray", alpha=REUSED_ALPHA, label="pale: reused from the baseline"))
    handles += provenance_handles("total: ", [r for _l, r in rows])
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=7,
        fontsize=7,
        bbox_to_anchor=(0.5, 0.915),
        frameon=False,
    )
    fig.suptitle(f"{title}\n{provenance([r for _l, r in rows], where)}", fontsize=10)
    fig.subplots_adjust(left=0.06, right=0.95, bottom=0.3, top=0.8)
    return save(fig, path)


def _stacked(ax: Any, bottoms: list[float], heights: list[float], colors: list[Any]) -> None:
    from matplotlib.collections import PolyCollection

    verts = [
        [(x - 0.4, b), (x - 0.4, b + h), (x + 0.4, b + h), (x + 0.4, b)]
        for x, (b, h) in enumerate(zip(bottoms, heights, strict=True))
    ]
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="none"))


def perf_per_watt(
    grid: Mapping[Any, Mapping[str, ConfigResult]],
    variants: Sequence[str],
    colors: Mapping[str, str],
    label: Callable[[Any], str],
    path: Path,
    where: str,
) -> Path:
    """TFLOP/s per W per shape (grouped bars per variant) above pJ per useful MAC."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 8), sharex=True)
    width = 0.8 / len(variants)
    for ax, metric in ((top, "tflops_per_w"), (bottom, "pj_per_useful_mac")):
        xs, heights, cs, drawn = [], [], [], []
        for v_i, variant in enumerate(variants):
            for s_i, shape in enumerate(grid):
                res = grid[shape].get(variant)
                if res is None:
                    continue
                xs.append(s_i + (v_i - (len(variants) - 1) / 2) * width)
                heights.append(res.metrics[metric])
                cs.append(to_rgba(colors[variant], 1.0 if measured(res) else REUSED_ALPHA))
                drawn.append(res)
        bars(ax, xs, heights, width, cs)
        mark_failed(ax, xs, heights, drawn)
        ax.grid(axis="y", alpha=0.3)
    top.set_ylabel("TFLOP/s per W\n(useful FLOPs / energy)")
    bottom.set_ylabel("pJ per useful MAC\n(all energy / real MACs)")
    log_axis(bottom)
    bottom.set_xticks(
        range(len(grid)), [label(s) for s in grid], rotation=60, ha="right", fontsize=7
    )
    handles = [Patch(color=colors[v], label=v) for v in variants]
    handles.append(Patch(color="gray", alpha=REUSED_ALPHA, label="pale: reused from the baseline"))
    top.legend(handles=handles, loc="upper left", ncol=len(handles), fontsize=8)
    results = [r for row in grid.values() for r in row.values()]
    fig.suptitle(
        "GEMM energy efficiency per shape (in order of M*K*N) and variant: TFLOP/s per W "
        "(static power included) and pJ per useful MAC\n" + provenance(results, where),
        fontsize=10,
    )
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.14, top=0.92, hspace=0.08)
    return save(fig, path)


def pj_per_byte_vs_size(
    panels: Mapping[str, Mapping[str, list[ConfigResult]]], path: Path, where: str
) -> Path:
    """pJ per message byte against message size, one panel per interconnect, one line per
    algorithm; hollow markers are reused from the baseline."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.6 * len(panels), 4.6), squeeze=False, sharey=True
    )
    every: list[ConfigResult] = []
    for ax, (topology, by_algorithm) in zip(axes.flat, panels.items(), strict=True):
        for i, (algorithm, rows) in enumerate(sorted(by_algorithm.items())):
            rows = sorted(rows, key=lambda r: r.params["size"])
            xs = [r.params["size"] for r in rows]
            ys = [r.metrics["pj_per_message_byte"] for r in rows]
            color = ALGORITHM_COLORS[i % len(ALGORITHM_COLORS)]
            ax.plot(xs, ys, color=color, linewidth=1, label=algorithm)
            markers(ax, xs, ys, rows, color, markersize=4)
            every += rows
        log_axis(ax, "x", base=2)
        log_axis(ax, "y", minor_grid=0.3)
        ax.set_title(f"topology: {topology}", fontsize=9)
        ax.set_xlabel("message size (bytes)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper right")
    axes.flat[0].set_ylabel("pJ per message byte (all chips, static included)")
    fig.legend(
        handles=provenance_handles(results=every),
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        "Allreduce energy per message byte against size: latency-bound sizes pay static power "
        "per byte; large sizes approach the links' and HBM's per-byte energy\n"
        + provenance(every, where),
        fontsize=10,
    )
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.2, top=0.84, wspace=0.08)
    return save(fig, path)
