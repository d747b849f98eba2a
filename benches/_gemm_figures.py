"""Figures of the gemm bench (drawn by the controller from every config's metrics): stage
breakdown, measured utilisation, theory vs measured, roofline, and the systolic-PE pairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benches import _gemm_systolic as systolic
from benches._energy_figures import energy_breakdown, has_energy, perf_per_watt
from benches._gemm_roofline import draw_roofline
from benches._gemm_roofline import roofline_labels as roofline_labels
from benches._shared import bench_topology, grid_by
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    REUSED_ALPHA,
    bars,
    mark_failed,
    markers,
    measured,
    provenance,
    provenance_handles,
    save,
    time_unit,
    titled,
)
from sim import VARIANTS, GemmShape
from sim.gemm.layout import STAGES
from sim.gemm.shape import TilePlan

TOPOLOGY = bench_topology()  # the bench's own (one topology file per run)

Shape = tuple[int, int, int]
STAGE_NAMES = {"dma_in": "DMA in", "fetch": "Fetch", "gemm": "GEMM", "dma_out": "DMA out"}
VARIANT_COLORS = {
    "load_ref": "#4c72b0",
    "double_buffer": "#dd8452",
    "prefetch": "#8172b3",
    "resident": "#55a868",
}
STAGE_COLORS = {"dma_in": "#8172b3", "fetch": "#64b5cd", "gemm": "#c44e52", "dma_out": "#937860"}
Grid = dict[Shape, dict[str, ConfigResult]]
#: every value here is simulated (the file was theoretical_vs_measured.png, a misnomer)
MODEL_FIGURE = "model_vs_simulated.png"
#: model_vs_simulated.png marks a config whose simulated / modelled latency is off by more
RATIO_BAND = 0.01


def _shape_label(shape: Shape, newline: bool = True) -> str:
    label = "x".join(map(str, shape))
    if TilePlan.of(GemmShape(*shape), TOPOLOGY).under_tile:
        label += "\n(under-tile)" if newline else " (under-tile)"
    return label


def figure_grid(results: Mapping[str, ConfigResult]) -> Grid:
    """The tile-PE results (what the four figures draw; systolic_vs_tile.png draws the
    others) per shape then variant, shapes by M*K*N (smallest first), the figures' order.
    Two results in one cell are an error, never a silent overwrite."""
    cells = grid_by(
        systolic.tile_results(results),
        lambda r: (_shape(r), r.params["variant"], systolic.pe_model(r.params)),
    )
    grid: Grid = {}
    for (shape, variant, _), res in cells.items():
        grid.setdefault(shape, {})[variant] = res
    return dict(sorted(grid.items(), key=lambda kv: (kv[0][0] * kv[0][1] * kv[0][2], kv[0])))


def _shape(result: ConfigResult) -> Shape:
    m, k, n = result.params["shape"]
    return (m, k, n)


def _all(grid: Grid) -> list[ConfigResult]:
    return [r for row in grid.values() for r in row.values()]


def _note(grid: Grid) -> str:
    return provenance(_all(grid), f" on {TOPOLOGY.fingerprint}")


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """Stage breakdown, simulated utilisation, model vs simulated, roofline."""
    import matplotlib

    matplotlib.use("Agg")
    grid = figure_grid(results)
    outdir.mkdir(parents=True, exist_ok=True)
    pe_models = systolic.systolic_vs_tile(results, TOPOLOGY, outdir / "systolic_vs_tile.png")
    if not grid:  # only systolic-PE configs were selected (-k systolic)
        return [pe_models]
    paths = [
        _stage_breakdown(grid, outdir / "stage_breakdown.png"),
        _mac_utilization(grid, outdir / "mac_utilization.png"),
        _model_vs_simulated(grid, outdir / MODEL_FIGURE),
        _roofline(grid, outdir / "roofline.png"),
    ]
    paths.append(pe_models)
    if has_energy(_all(grid)):
        rows = [
            (f"{_shape_label(shape, newline=False)} {v}", row[v])
            for shape, row in grid.items()
            for v in VARIANTS
            if v in row
        ]
        title = "GEMM energy by component per config (shape, variant)"
        paths.append(energy_breakdown(rows, outdir / "energy_breakdown.png", title, _where()))
        paths.append(
            perf_per_watt(
                grid, VARIANTS, VARIANT_COLORS, _shape_label, outdir / "perf_per_watt.png", _where()
            )
        )
    return paths


def _where() -> str:
    return f" on {TOPOLOGY.fingerprint}"


def stage_panel(row: dict[str, ConfigResult]) -> dict[str, Any]:
    """What one stage_breakdown panel draws: its time unit, per variant the stage busy times
    and end-to-end latency in that unit, and whether the panel is reused from the baseline."""
    variants = [v for v in VARIANTS if v in row]
    largest = max(
        max(row[v].metrics["latency_ns"], *(row[v].metrics[f"{s}.busy_ns"] for s in STAGES))
        for v in variants
    )
    divisor, unit = time_unit(largest)
    return {
        "unit": unit,
        "variants": variants,
        "busy": {s: [row[v].metrics[f"{s}.busy_ns"] / divisor for v in variants] for s in STAGES},
        "latency": [row[v].metrics["latency_ns"] / divisor for v in variants],
        "reused": [not measured(row[v]) for v in variants],
    }


def _stage_breakdown(grid: Grid, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.ticker import MaxNLocator

    shapes = list(grid)
    cols = 4
    rows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows + 1.2), squeeze=False)
    width = 0.2
    for ax, shape in zip(axes.flat, shapes, strict=False):
        panel = stage_panel(grid[shape])
        n = len(panel["variants"])
        alphas = [REUSED_ALPHA if reused else 1.0 for reused in panel["reused"]]
        xs, heights, colors = [], [], []
        for s_i, stage in enumerate(STAGES):
            xs += [v_i + (s_i - 1.5) * width for v_i in range(n)]
            heights += panel["busy"][stage]
            colors += [to_rgba(STAGE_COLORS[stage], a) for a in alphas]
        bars(ax, xs, heights, width, colors)
        ax.hlines(
            panel["latency"],
            [i - 0.45 for i in range(n)],
            [i + 0.45 for i in range(n)],
            colors="black",
            linewidth=1.5,
        )
        row = [grid[shape][v] for v in panel["variants"]]
        mark_failed(ax, list(range(n)), panel["latency"], row)  # on the latency line
        ax.set_xlim(-0.6, 3.6)
        ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.set_xticks(range(n), [v.replace("_", "\n") for v in panel["variants"]], fontsize=8)
        reused = all(panel["reused"])
        title = _shape_label(shape, newline=False) + ("  [reused from baseline]" if reused else "")
        titled(ax, title, fontsize=9, color="dimgray" if reused else "black")
        ax.set_ylim(0, max(max(heights), *panel["latency"]) * 1.06)
        ax.set_ylabel(f"time ({panel['unit']})", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    for ax in list(axes.flat)[len(shapes) :]:
        ax.axis("off")
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Artist] = [
        Line2D([], [], color="black", linewidth=1.5, label="end-to-end latency")
    ]
    handles += [Patch(color=STAGE_COLORS[s], label=f"{STAGE_NAMES[s]} busy") for s in STAGES]
    handles += [Patch(color="gray", alpha=REUSED_ALPHA, label="pale: reused from the baseline")]
    height = 3.0 * rows + 1.2
    fig.suptitle(
        "GEMM stage breakdown per shape and variant: time each stage's engines were busy (bars) "
        "against the end-to-end latency (black line)\nStages overlap, so bars may sum past the "
        "line; the gap from the tallest bar to the line is time no stage is busy. Panels in "
        "order of M*K*N, each on its own scale\n" + _note(grid),
        y=1 - 0.08 / height,
        fontsize=10,
    )
    # fixed margins: tight_layout over this many panels costs seconds on every gated run
    fig.subplots_adjust(
        left=0.045,
        right=0.99,
        bottom=0.4 / height,
        top=1 - 1.25 / height,
        wspace=0.28,
        hspace=0.45,
    )
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=6,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.8 / height),
        fontsize=9,
    )
    return save(fig, path)


def _variant_bars(ax: Any, grid: Grid, metric: str) -> None:
    """Grouped bars per shape, one per variant; reused configs pale."""
    from matplotlib.colors import to_rgba

    width = 0.8 / len(VARIANTS)
    xs, heights, colors, rows = [], [], [], []
    for v_i, variant in enumerate(VARIANTS):
        for s_i, shape in enumerate(grid):
            res = grid[shape].get(variant)
            if res is not None:
                xs.append(s_i + (v_i - (len(VARIANTS) - 1) / 2) * width)
                heights.append(res.metrics[metric])
                alpha = 1.0 if measured(res) else REUSED_ALPHA
                colors.append(to_rgba(VARIANT_COLORS[variant], alpha))
                rows.append(res)
    bars(ax, xs, heights, width, colors)
    mark_failed(ax, xs, heights, rows)


def useful_efficiency(grid: Grid) -> list[float]:
    """useful_eff per shape: real / padded MACs depends on the shape and the tile only, so
    every variant of a shape has the same value (mac_utilization.png draws it once)."""
    values = []
    for shape, row in grid.items():
        seen = {r.metrics["useful_eff"] for r in row.values()}
        if len(seen) != 1:
            raise ValueError(f"useful_eff of {shape} differs between variants: {sorted(seen)}")
        values.append(seen.pop())
    return values


def _shape_axis(ax: Any, grid: Grid) -> None:
    ax.set_xticks(
        range(len(grid)), [_shape_label(s) for s in grid], rotation=60, ha="right", fontsize=7
    )
    ax.set_xlim(-0.6, len(grid) - 0.4)


def _mac_utilization(grid: Grid, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    fig, (top, mid, bottom) = plt.subplots(
        3, 1, figsize=(13, 10), sharex=True, gridspec_kw={"height_ratios": [3, 3, 1.6]}
    )
    _variant_bars(top, grid, "mac_util")
    top.set_ylabel("mac_util\nuseful MACs / (peak x latency)")
    _variant_bars(mid, grid, "pe_util")
    mid.set_ylabel("pe_util\nMACs issued / (peak x PE window)")
    reused = [not any(measured(r) for r in row.values()) for row in grid.values()]
    bars(
        bottom,
        list(range(len(grid))),
        useful_efficiency(grid),
        0.6,
        [to_rgba("gray", REUSED_ALPHA if r else 1.0) for r in reused],
    )
    bottom.set_ylabel("useful efficiency\nreal / padded MACs\n(same for every variant)")
    for ax in (top, mid, bottom):
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    _shape_axis(bottom, grid)
    handles = [Patch(color=VARIANT_COLORS[v], label=v) for v in VARIANTS]
    handles.append(Patch(color="gray", alpha=REUSED_ALPHA, label="pale: reused from the baseline"))
    top.legend(handles=handles, loc="upper left", ncol=len(handles), fontsize=8)
    fig.suptitle(
        "Simulator-measured utilisation per shape (in order of M*K*N) and variant: end to end "
        "(mac_util), while the PE is busy (pe_util), and padding to whole tiles (useful "
        "efficiency)\n" + _note(grid),
        fontsize=10,
    )
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.12, top=0.93, hspace=0.08)
    return save(fig, path)


def model_ratios(grid: Grid) -> dict[str, list[tuple[int, float, bool]]]:
    """Per variant, (shape index, simulated / modelled latency, measured?) of each config."""
    return {
        variant: [
            (i, row[variant].metrics["model_ratio"], measured(row[variant]))
            for i, row in enumerate(grid.values())
            if variant in row
        ]
        for variant in VARIANTS
    }


def _model_vs_simulated(grid: Grid, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 9), sharex=True)
    offset = 0.8 / len(VARIANTS)
    for v_i, variant in enumerate(VARIANTS):
        color = VARIANT_COLORS[variant]
        dx = (v_i - (len(VARIANTS) - 1) / 2) * offset
        rows = [(i + dx, row[variant]) for i, row in enumerate(grid.values()) if variant in row]
        xs = [x for x, _ in rows]
        model = [r.metrics["model_mac_util"] for _, r in rows]
        sim = [r.metrics["mac_util"] for _, r in rows]
        top.vlines(xs, model, sim, color=color, linewidth=1)
        markers(top, xs, sim, [r for _, r in rows], color, markersize=5)
        # the model's dash over the dot and wider than it: both stay visible where they agree
        top.plot(
            xs,
            model,
            marker="_",
            markersize=13,
            color="black",
            markeredgewidth=1.4,
            ls="none",
            zorder=5,
        )
        points = model_ratios(grid)[variant]
        ratio_xs = [i + dx for i, _, _ in points]
        ratios = [ratio for _, ratio, _ in points]
        markers(bottom, ratio_xs, ratios, [r for _, r in rows], color, markersize=6)
        for x, ratio in zip(ratio_xs, ratios, strict=True):
            if abs(ratio - 1) > RATIO_BAND:
                bottom.annotate(
                    f"{ratio:.3f}",
                    (x, ratio),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize=7,
                    color=color,
                )
    top.set_ylim(0, 1.05)
    top.set_ylabel("mac_util\n(useful MACs / (peak x latency))")
    top.grid(axis="y", alpha=0.3)
    bottom.axhline(1.0, color="black", linewidth=0.8)
    bottom.axhspan(1 - RATIO_BAND, 1 + RATIO_BAND, color="green", alpha=0.12)
    bottom.set_ylabel("simulated / modelled latency")
    bottom.grid(axis="y", alpha=0.3)
    _shape_axis(bottom, grid)
    handles = [Line2D([], [], color=VARIANT_COLORS[v], marker="o", label=v) for v in VARIANTS]
    handles += [
        Line2D(
            [],
            [],
            color="black",
            marker="_",
            markersize=13,
            markeredgewidth=1.4,
            linestyle="none",
            label="model (steady-state pipeline, sim.model)",
        ),
        *provenance_handles("simulator, ", results=_all(grid)),
    ]
    top.legend(handles=handles, loc="upper left", ncol=4, fontsize=8)
    fig.suptitle(
        "Model vs simulated: mac_util of each (top), and the ratio simulated / modelled latency "
        f"(bottom; green band: within {RATIO_BAND:.0%}, ratios outside it are printed)\n"
        "Away from 1: start-up transients the steady-state model folds into fill + drain, or HBM "
        "channels shared by the A, B and C streams in issue order\n" + _note(grid),
        fontsize=10,
    )
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.13, top=0.88, hspace=0.06)
    return save(fig, path)


def _roofline(grid: Grid, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 7))
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte actually moved)")
    ax.set_ylabel("achieved TFLOP/s (useful FLOPs / latency)")
    ax.grid(which="both", alpha=0.25)
    ax.set_title(
        "GEMM roofline: every config under the compute and HBM roofs of the topology; each shape "
        "(MxKxN) labelled at its fastest variant\n" + _note(grid),
        fontsize=10,
    )
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.09, top=0.91)
    draw_roofline(ax, grid, TOPOLOGY, VARIANT_COLORS)
    return save(fig, path)
