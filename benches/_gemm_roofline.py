"""gemm/roofline.png: every tile-PE config under the compute and HBM roofs of the topology,
each shape's variants joined by a thin line and the shape named once, at its fastest variant,
in a label placed where it covers no marker, no roof line and no other label (a leader line
points at the point when the label had to move away from it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_npubench import ConfigResult
from pytest_npubench.plotting import REUSED_ALPHA, log_axis, mark_failed, markers, measured
from sim import VARIANTS, GemmShape, Topology, roofline_tflops
from sim.gemm.shape import TilePlan

Shape = tuple[int, int, int]
Grid = dict[Shape, dict[str, ConfigResult]]
#: offsets tried for a label (points): rings of 8 directions, nearest first
_RINGS = (10, 20, 32, 48, 68, 92, 120)
_DIRECTIONS = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))


def roofline_labels(grid: Grid) -> dict[str, tuple[float, float]]:
    """What roofline.png writes where: each shape (MxKxN) at its fastest variant's point;
    shapes whose points nearly coincide share one label, one shape per line."""
    spots: list[tuple[float, float, list[str]]] = []
    for shape, row in grid.items():
        best = max(row.values(), key=lambda r: r.metrics["tflops"])
        x, y = best.metrics["arith_intensity_flop_per_byte"], best.metrics["tflops"]
        name = "x".join(map(str, shape))
        for sx, sy, names in spots:
            if abs(math.log10(x / sx)) < 0.08 and abs(math.log10(y / sy)) < 0.06:
                names.append(name)
                break
        else:
            spots.append((x, y, [name]))
    return {"\n".join(names): (x, y) for x, y, names in spots}


def _overlaps(a: Any, b: Any) -> bool:
    return bool(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)


def _covers(box: Any, points: Sequence[tuple[float, float]], pad: float) -> bool:
    return any(
        box.x0 - pad < px < box.x1 + pad and box.y0 - pad < py < box.y1 + pad for px, py in points
    )


def place_labels(
    ax: Any,
    labels: Mapping[str, tuple[float, float]],
    points: Sequence[tuple[float, float]],
    lines: Sequence[Sequence[tuple[float, float]]],
    avoid: Sequence[Any] = (),
    fontsize: float = 6.5,
) -> dict[str, Any]:
    """Write each label near its data point where its box covers no point of ``points`` (data
    coordinates, markers), no vertex of ``lines`` (densely sampled curves), no label placed
    before it and no box of ``avoid`` (display coordinates, e.g. the legend), inside the axes;
    the nearest free offset wins, a leader line drawn when it is not the nearest ring. The
    limits and figure size must be final. Returns each label's text artist."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    marker_px = [tuple(to_px(p)) for p in points]
    line_px = [tuple(to_px(p)) for line in lines for p in line]
    frame = ax.get_window_extent(renderer)
    taken: list[Any] = list(avoid)
    scale = fig.dpi / 72
    placed: dict[str, Any] = {}
    for text, (x, y) in sorted(labels.items(), key=lambda kv: -kv[1][1]):
        artist = None
        for ring in _RINGS:
            for dx, dy in _DIRECTIONS:
                norm = math.hypot(dx, dy)
                off = (ring * dx / norm, ring * dy / norm)
                ha = "left" if dx > 0 else "right" if dx < 0 else "center"
                va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
                candidate = ax.annotate(
                    text,
                    (x, y),
                    xytext=off,
                    textcoords="offset points",
                    fontsize=fontsize,
                    color="dimgray",
                    ha=ha,
                    va=va,
                    zorder=6,
                )
                box = candidate.get_window_extent(renderer)
                inside = (
                    frame.x0 <= box.x0
                    and box.x1 <= frame.x1
                    and frame.y0 <= box.y0
                    and box.y1 <= frame.y1
                )
                free = (
                    inside
                    and not _covers(box, marker_px, 4 * scale)
                    and not _covers(box, line_px, 1.5 * scale)
                    and not any(_overlaps(box, other) for other in taken)
                )
                if free:
                    artist = candidate
                    taken.append(box)
                    break
                candidate.remove()
            if artist is not None:
                break
        if artist is None:  # nowhere free: the nearest spot, above the point
            artist = ax.annotate(
                text,
                (x, y),
                xytext=(0, 10),
                textcoords="offset points",
                fontsize=fontsize,
                color="dimgray",
                ha="center",
                va="bottom",
            )
        elif ring > _RINGS[1]:
            artist.remove()
            artist = ax.annotate(
                text,
                (x, y),
                xytext=off,
                textcoords="offset points",
                fontsize=fontsize,
                color="dimgray",
                ha=ha,
                va=va,
                zorder=6,
                arrowprops={
                    "arrowstyle": "-",
                    "color": "silver",
                    "lw": 0.6,
                    "shrinkA": 0,
                    "shrinkB": 3,
                },
            )
        placed[text] = artist
    return placed


def draw_roofline(ax: Any, grid: Grid, topo: Topology, colors: Mapping[str, str]) -> dict[str, Any]:
    """Draw the roofs, the points (each shape's variants joined) and the legend into ``ax``;
    return the placed labels."""
    import numpy as np
    from matplotlib.lines import Line2D

    from pytest_npubench.plotting import provenance_handles

    points = [r for row in grid.values() for r in row.values()]
    ai = [r.metrics["arith_intensity_flop_per_byte"] for r in points]
    lo, hi = min(ai) / 2, max(ai) * 2
    roof_xs = np.geomspace(lo, hi, 400)
    compute_roof = 2 * topo.pe.peak_macs_per_ns / 1000
    bw = float(topo.hbm.bw)
    roof = [(x, roofline_tflops(topo, x)) for x in roof_xs]
    ax.plot(*zip(*roof, strict=True), color="black", linewidth=2)
    ax.axhline(compute_roof, color="grey", linestyle=":")
    hbm_line = [(x, bw * x / 1000) for x in roof_xs]
    ax.plot(*zip(*hbm_line, strict=True), color="grey", linestyle="--")
    for row in grid.values():  # a shape's variants, joined: the label names all of them
        pts = sorted(
            (r.metrics["arith_intensity_flop_per_byte"], r.metrics["tflops"]) for r in row.values()
        )
        if len(pts) > 1:
            ax.plot(*zip(*pts, strict=True), color="lightgray", linewidth=0.8, zorder=1)
    for variant in VARIANTS:
        for under in (False, True):
            sel = [
                r
                for r in points
                if r.params["variant"] == variant
                and TilePlan.of(GemmShape(*r.params["shape"]), topo).under_tile == under
            ]
            if not sel:
                continue
            xs = [r.metrics["arith_intensity_flop_per_byte"] for r in sel]
            ys = [r.metrics["tflops"] for r in sel]
            if under:  # an x has no face: a reused one is pale instead of hollow
                for ran in (True, False):
                    pts = [
                        (x, y) for x, y, r in zip(xs, ys, sel, strict=True) if measured(r) == ran
                    ]
                    if pts:
                        ax.plot(
                            [x for x, _ in pts],
                            [y for _, y in pts],
                            marker="x",
                            markersize=7,
                            linestyle="none",
                            color=colors[variant],
                            alpha=1.0 if ran else REUSED_ALPHA,
                        )
                mark_failed(ax, xs, ys, sel)
            else:
                markers(ax, xs, ys, sel, colors[variant], markersize=6)
    log_axis(ax, "x", minor_grid=0.25)
    log_axis(ax, "y", minor_grid=0.25)
    ax.set_xlim(lo, hi)
    low = min(r.metrics["tflops"] for r in points)
    ax.set_ylim(low / 2, compute_roof * 1.6)
    handles = [
        Line2D([], [], color="black", linewidth=2, label="roofline: min(compute, HBM roof)"),
        Line2D(
            [], [], color="grey", linestyle=":", label=f"compute roof {compute_roof:.3g} TFLOP/s"
        ),
        Line2D([], [], color="grey", linestyle="--", label=f"HBM roof {bw:g} GB/s x intensity"),
        Line2D([], [], color="lightgray", linewidth=0.8, label="one shape's variants"),
        *(Line2D([], [], color=colors[v], marker="o", linestyle="none", label=v) for v in VARIANTS),
        Line2D([], [], color="gray", marker="x", linestyle="none", label="under-tile shape"),
        *provenance_handles(results=points),
    ]
    legend = ax.legend(handles=handles, fontsize=8, loc="lower right")
    renderer = ax.figure.canvas.get_renderer()
    xy = [(r.metrics["arith_intensity_flop_per_byte"], r.metrics["tflops"]) for r in points]
    ceiling = [(x, compute_roof) for x in roof_xs]
    return place_labels(
        ax,
        roofline_labels(grid),
        xy,
        [roof, hbm_line, ceiling],
        avoid=[legend.get_window_extent(renderer)],
    )
