"""Figures of the tp_layer bench (drawn by the controller from every config's metrics)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benches._energy_figures import energy_breakdown, has_energy
from benches._shared import grid_by
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    FAILED_COLOR,
    failed,
    failed_handle,
    format_ns,
    log_time_axis,
    mark_failed,
    markers,
    measured,
    provenance,
    provenance_handles,
    save,
    titled,
)
from sim.gemm.program import GemmProgram
from sim.gemm.shape import TilePlan
from sim.topology import Topology
from sim.tp.config import MODES, LayerConfig, gemm_shapes
from sim.tp.run import run_layer

Key = tuple[str, int, int, int, str, str]  # layer, hidden, tokens, tp, topology, mode
Grid = dict[Key, ConfigResult]
MODE_COLORS = {"serial": "#4c72b0", "gemm_ar": "#dd8452", "ag_rs": "#55a868"}
MODE_MARKERS = {"serial": "o", "gemm_ar": "s", "ag_rs": "^"}
HIDDEN_STYLES: dict[int, Any] = {8192: "-", 4096: "--"}
FIG_TOPOLOGY = "ring"
BREAKDOWN_TP = 4  # the TP degree of the gated real-size configs: some bars are measured
TIMELINE_COLORS = {
    "gemm1": "#c44e52",
    "gemm2": "#8172b3",
    "send": "#4c72b0",
    "forward": "#64b5cd",
    "reduce": "#55a868",
    "copy": "#937860",
}
TIMELINE = {"layer": "attn", "hidden": 4096, "tokens": 512, "tp": 4, "topology": "ring"}


def cell(params: Mapping[str, Any]) -> Key:
    """Where the figures draw a config: every axis of the sweep."""
    p = params
    return (p["layer"], p["hidden"], p["tokens"], p["tp"], p["topology"], p["mode"])


def figure_grid(results: Mapping[str, ConfigResult]) -> Grid:
    """The figures' grid: every config that ran (has a latency) by its cell; two configs in
    one cell are an error, never a silent overwrite."""
    return grid_by(results, lambda r: cell(r.params), keep=lambda r: "latency_ns" in r.metrics)


def _note(grid: Grid, topo: Topology) -> str:
    return provenance(grid.values(), f" on {topo.fingerprint}")


def _save(fig: Any, path: Path) -> Path:
    return save(fig, path, dpi=110)


def _tokens(grid: Grid, layer: str, hidden: int, tp: int) -> list[int]:
    return sorted({k[2] for k in grid if k[0] == layer and k[1] == hidden and k[3] == tp})


def _failed_handles(rows: Sequence[ConfigResult]) -> list[Any]:
    return [failed_handle()] if any(failed(r) for r in rows) else []


def breakdown_bars(
    grid: Grid, layer: str, hidden: int
) -> dict[int, dict[str, tuple[float, float]]]:
    """time_breakdown.png's data: per token count, per mode, (compute alone, exposed
    communication) as shares of the serial latency, at :data:`BREAKDOWN_TP` on the ring."""
    out: dict[int, dict[str, tuple[float, float]]] = {}
    for t in _tokens(grid, layer, hidden, BREAKDOWN_TP):
        serial = grid.get((layer, hidden, t, BREAKDOWN_TP, FIG_TOPOLOGY, "serial"))
        if serial is None:
            continue
        base = serial.metrics["latency_ns"]
        for mode in MODES:
            r = grid.get((layer, hidden, t, BREAKDOWN_TP, FIG_TOPOLOGY, mode))
            if r is not None:
                m = r.metrics
                out.setdefault(t, {})[mode] = (m["compute_ns"] / base, m["exposed_comm_ns"] / base)
    return out


def _breakdown(grid: Grid, topo: Topology, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tp = BREAKDOWN_TP
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), squeeze=False)
    fig.suptitle(
        f"Exposed communication (layer latency - compute alone) as % of the serial latency, "
        f"per mode; TP {tp}, {FIG_TOPOLOGY}\nunder each group: compute alone (the same GEMMs "
        f"in every mode) as % of serial\n{_note(grid, topo)}",
        fontsize=10,
    )
    drawn: list[ConfigResult] = []
    for ax, (layer, hidden) in zip(
        axes.flat, [(ly, h) for ly in ("mlp", "attn") for h in (4096, 8192)], strict=True
    ):
        data = breakdown_bars(grid, layer, hidden)
        tokens = sorted(data)
        xs, heights, faces, edges, hatches, top = [], [], [], [], [], 0.0
        for x, t in enumerate(tokens):
            for m, mode in enumerate(MODES):
                if mode not in data[t]:
                    continue
                r = grid[(layer, hidden, t, tp, FIG_TOPOLOGY, mode)]
                drawn.append(r)
                pos = x + (m - 1) * 0.27
                exposed = 100 * data[t][mode][1]
                color = MODE_COLORS[mode]
                xs.append(pos)
                heights.append(exposed)
                faces.append(color if measured(r) else "white")  # hollow: reused, not re-run
                edges.append(FAILED_COLOR if failed(r) else color)
                hatches.append("" if measured(r) else "//")
                top = max(top, exposed)
                mark_failed(ax, [pos], [exposed], [r])
            compute = {round(100 * v[0]) for v in data[t].values()}
            ax.text(
                x,
                0,
                "\ncompute " + "/".join(f"{c}%" for c in sorted(compute)),
                ha="center",
                va="top",
                fontsize=7,
                transform=ax.get_xaxis_transform(),
            )
            base = grid[(layer, hidden, t, tp, FIG_TOPOLOGY, "serial")].metrics["latency_ns"]
            ax.text(
                x,
                1.0,
                format_ns(base),
                ha="center",
                va="bottom",
                fontsize=7,
                transform=ax.get_xaxis_transform(),
            )
        for pos, h, face, edge, hatch in zip(xs, heights, faces, edges, hatches, strict=True):
            ax.bar(pos, h, 0.25, color=face, edgecolor=edge, hatch=hatch, linewidth=1.2)
        ax.set_xticks(range(len(tokens)))
        ax.set_xticklabels([f"{t} tokens" for t in tokens], fontsize=8)
        ax.tick_params(axis="x", pad=14)
        ax.set_ylabel("exposed communication, % of serial latency")
        ax.set_ylim(0, max(1.0, top * 1.15))
        ax.set_title(
            f"{layer}, hidden {hidden} (serial latency above each group)", fontsize=10, pad=12
        )
        ax.grid(axis="y", alpha=0.3)
    handles = [Patch(facecolor=MODE_COLORS[m], edgecolor=MODE_COLORS[m], label=m) for m in MODES]
    handles.append(Patch(facecolor="gray", edgecolor="gray", label="filled: measured in this run"))
    handles.append(
        Patch(
            facecolor="white",
            edgecolor="gray",
            hatch="//",
            label="hatched: reused from the baseline",
        )
    )
    handles += _failed_handles(drawn)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    # fixed margins: tight_layout measures every tick label, a third of drawing this figure
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.1, top=0.86, wspace=0.16, hspace=0.4)
    return _save(fig, path)


def speedup_series(
    grid: Grid, layer: str, tp: int
) -> dict[tuple[str, int], tuple[list[int], list[float], list[ConfigResult]]]:
    """speedup.png's data in one panel: per (mode, hidden), tokens, serial / mode latency,
    and the result each point stands for (measured only if both of its configs ran)."""
    out = {}
    for hidden in (8192, 4096):
        for mode in ("gemm_ar", "ag_rs"):
            xs, ys, rows = [], [], []
            for t in _tokens(grid, layer, hidden, tp):
                s = grid.get((layer, hidden, t, tp, FIG_TOPOLOGY, "serial"))
                r = grid.get((layer, hidden, t, tp, FIG_TOPOLOGY, mode))
                if s and r:
                    xs.append(t)
                    ys.append(s.metrics["latency_ns"] / r.metrics["latency_ns"])
                    # the point fails if either config failed; it is measured if both ran
                    pick = [x for x in (r, s) if failed(x)] or [x for x in (s,) if not measured(x)]
                    rows.append(pick[0] if pick else r)
            if xs:
                out[(mode, hidden)] = (xs, ys, rows)
    return out


def _speedup(grid: Grid, topo: Topology, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    tps = sorted({k[3] for k in grid if k[1] in HIDDEN_STYLES})
    cols = max(1, len(tps))
    fig, axes = plt.subplots(2, cols, figsize=(max(12, 5 * cols), 8), squeeze=False)
    fig.suptitle(
        f"Speed-up over serial (serial latency / mode latency) vs tokens, {FIG_TOPOLOGY}; "
        f"rows: layer, columns: TP degree\n{_note(grid, topo)}",
        fontsize=11,
    )
    drawn: list[ConfigResult] = []
    for row, layer in enumerate(("mlp", "attn")):
        for ax, tp in zip(axes[row], tps, strict=False):
            for (mode, hidden), (xs, ys, rows) in speedup_series(grid, layer, tp).items():
                color = MODE_COLORS[mode]
                ax.plot(xs, ys, HIDDEN_STYLES[hidden], color=color)
                markers(ax, xs, ys, rows, color)
                drawn += rows
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xscale("log", base=2)
            ticks = sorted({t for h in HIDDEN_STYLES for t in _tokens(grid, layer, h, tp)})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("tokens")
            ax.set_ylabel("speed-up over serial")
            ax.set_title(f"{layer}, TP {tp}", fontsize=10)
            ax.grid(True, alpha=0.3)
    handles: list[Any] = [
        Line2D([], [], color=MODE_COLORS[m], marker="o", label=m) for m in ("gemm_ar", "ag_rs")
    ]
    handles += [
        Line2D([], [], color="gray", linestyle=style, label=f"hidden {h}")
        for h, style in HIDDEN_STYLES.items()
    ]
    handles += provenance_handles(results=drawn)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.11, top=0.88, wspace=0.18, hspace=0.35)
    return _save(fig, path)


def scaling_note(
    layer: str,
    hidden: int,
    tokens: int,
    tps: Sequence[int],
    topology_for: Callable[[dict[str, Any]], Topology],
    layer_config: Callable[[dict[str, Any]], LayerConfig],
) -> str:
    """Why compute alone scales better than 1/TP, if it does ('' if not): a GEMM shard at a
    low TP degree whose operand K-panels do not fit SRAM, so the ``resident`` variant streams
    its tiles there (twice the HBM bytes, HBM-bound) while at the next degree they fit."""
    notes = []
    for tp in tps:
        params = {
            "layer": layer,
            "hidden": hidden,
            "tokens": tokens,
            "tp": tp,
            "topology": FIG_TOPOLOGY,
            "mode": "serial",
        }
        cfg, topo = layer_config(params), topology_for(params)
        for stage, shape in gemm_shapes(cfg, tp):
            mode = GemmProgram(shape, cfg.variant, topo).mode
            if mode in ("whole", "panel"):
                continue
            plan = TilePlan.of(shape, topo)
            need = 2 * plan.Kt * (plan.a_bytes + plan.b_bytes) + 2 * plan.m * plan.n * plan.bpe
            notes.append(
                f"Why more than 2x for 2x chips: at TP {tp}, {stage} ({shape.M}x{shape.K}x"
                f"{shape.N}, K = {shape.K}) needs {need / 2**20:.2f} MiB for two A+B "
                f"K-panels and two C tiles, more than the {topo.sram.capacity_bytes >> 20} MiB "
                f"SRAM, so '{cfg.variant}' streams its tiles ({mode}): twice the HBM bytes, "
                "HBM-bound at half the PE rate. At the next degree K halves and the panels fit."
            )
    return "\n".join(textwrap.fill(n, 60) for n in notes)


def _scaling(
    grid: Grid,
    topo: Topology,
    path: Path,
    topology_for: Callable[[dict[str, Any]], Topology],
    layer_config: Callable[[dict[str, Any]], LayerConfig],
) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(
        2, 2, figsize=(12, 8.4), squeeze=False, gridspec_kw={"height_ratios": [3, 2]}
    )
    hidden, tokens = 8192, 2048
    fig.suptitle(
        f"Strong scaling: latency vs TP degree, hidden {hidden}, {tokens} tokens, "
        f"{FIG_TOPOLOGY} (dotted: compute alone); below, each mode's latency over compute "
        f"alone\n{_note(grid, topo)}",
        fontsize=10,
    )
    drawn: list[ConfigResult] = []
    for col, layer in enumerate(("mlp", "attn")):
        ax, over = axes[0][col], axes[1][col]
        values: list[float] = []
        tps: list[int] = []
        for mode in MODES:
            pts = sorted(
                (
                    (k[3], r)
                    for k, r in grid.items()
                    if k[:3] == (layer, hidden, tokens) and k[4] == FIG_TOPOLOGY and k[5] == mode
                ),
                key=lambda point: point[0],
            )
            if not pts:
                continue
            xs = [p for p, _ in pts]
            rows = [r for _, r in pts]
            ys = [r.metrics["latency_ns"] for r in rows]
            comp = [r.metrics["compute_ns"] for r in rows]
            color, marker = MODE_COLORS[mode], MODE_MARKERS[mode]
            ax.plot(xs, ys, color=color)
            markers(ax, xs, ys, rows, color, marker=marker)
            ratio = [100 * (y / c - 1) for y, c in zip(ys, comp, strict=True)]
            over.plot(xs, ratio, color=color)
            markers(over, xs, ratio, rows, color, marker=marker)
            if mode == "serial":
                ax.plot(xs, comp, ":", color="gray")
            values += ys + comp
            tps = sorted(set(tps) | set(xs))
            drawn += rows
        for a in (ax, over):
            a.set_xscale("log", base=2)
            a.set_xticks(tps or [2, 4, 8])
            a.set_xticklabels([str(t) for t in tps or [2, 4, 8]])
            a.grid(True, which="both", alpha=0.3)
        over.set_xlabel("TP degree (chips)")
        over.set_ylabel("latency / compute alone - 1 (%)")
        ax.set_ylabel("latency (log scale)")
        if values:
            log_time_axis(ax, values)
        titled(ax, layer)
        note = scaling_note(layer, hidden, tokens, tps, topology_for, layer_config) if tps else ""
        if note:
            ax.text(
                0.98,
                0.97,
                note,
                transform=ax.transAxes,
                fontsize=7,
                ha="right",
                va="top",
                bbox={"facecolor": "#fff8e0", "edgecolor": "gray"},
            )
    handles = [Line2D([], [], color=MODE_COLORS[m], marker=MODE_MARKERS[m], label=m) for m in MODES]
    handles.append(Line2D([], [], linestyle=":", color="gray", label="compute alone"))
    handles += provenance_handles(results=drawn)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.11, top=0.89, wspace=0.2, hspace=0.12)
    return _save(fig, path)


def timeline_rows(lanes: Sequence[Mapping[tuple[int, str], Any]]) -> list[tuple[int, str]]:
    """The rows of every timeline panel: each (chip, engine) used by any mode, so the panels
    line up (a mode that leaves an engine idle shows an empty row)."""
    return sorted({key for per_mode in lanes for key in per_mode})


def _timeline(
    topo: Topology,
    topology_for: Callable[[dict[str, Any]], Topology],
    layer_config: Callable[[dict[str, Any]], LayerConfig],
    path: Path,
) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    t = TIMELINE
    runs, lanes = [], []
    for mode in MODES:
        params = {**t, "mode": mode}
        run = run_layer(layer_config(params), topology_for(params))
        log = run.log
        per: dict[tuple[int, str], list[tuple[float, float, str]]] = {}
        for i in range(len(log)):
            rec = log.record(i)
            per.setdefault((rec.chip, rec.engine), []).append(
                (rec.start_ps / 1e6, (rec.end_ps - rec.start_ps) / 1e6, rec.stage)
            )
        runs.append(run)
        lanes.append(per)
    order = timeline_rows(lanes)
    fig, axes = plt.subplots(
        len(MODES), 1, figsize=(13, 0.7 + 0.2 * len(order) * len(MODES)), sharex=True
    )
    fig.suptitle(
        f"Timeline per mode: {t['layer']}, hidden {t['hidden']}, {t['tokens']} tokens, "
        f"TP {t['tp']}, {t['topology']} (every chip's engines and links; the same rows in "
        "every panel)",
        fontsize=11,
    )
    used: set[str] = set()
    for ax, mode, run, per in zip(axes, MODES, runs, lanes, strict=True):
        for row, key in enumerate(order):
            for stage, color in TIMELINE_COLORS.items():
                bars = [(s, d) for s, d, st in per.get(key, ()) if st == stage]
                if bars:
                    used.add(stage)
                    ax.broken_barh(
                        bars,
                        (row - 0.4, 0.8),
                        color=color,
                        edgecolor="white" if stage.startswith("gemm") else color,
                        lw=0.4,  # white edges between GEMM groups only: small bars stay seen
                    )
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([f"chip {c}: {e}" for c, e in order], fontsize=7)
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.set_title(
            f"{mode}: latency {format_ns(run.latency_ps / 1e3)} (compute alone "
            f"{format_ns(run.compute_log.makespan_ps / 1e3)}, communication alone "
            f"{format_ns(run.comm_log.makespan_ps / 1e3)})",
            fontsize=10,
        )
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("time (µs)")
    handles = [Patch(color=c, label=s) for s, c in TIMELINE_COLORS.items() if s in used]
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=len(handles),
        fontsize=9,
    )
    fig.subplots_adjust(left=0.1, right=0.99, bottom=0.07, top=0.93, hspace=0.2)
    del topo
    return _save(fig, path)


def figures(
    results: Mapping[str, ConfigResult],
    outdir: Path,
    topo: Topology,
    topology_for: Callable[[dict[str, Any]], Topology],
    layer_config: Callable[[dict[str, Any]], LayerConfig],
) -> Sequence[Path]:
    """Time breakdown, speed-up over serial, strong scaling, and a timeline per mode."""
    import matplotlib

    matplotlib.use("Agg")
    grid = figure_grid(results)
    outdir.mkdir(parents=True, exist_ok=True)
    return [
        _breakdown(grid, topo, outdir / "time_breakdown.png"),
        _speedup(grid, topo, outdir / "speedup.png"),
        _scaling(grid, topo, outdir / "strong_scaling.png", topology_for, layer_config),
        _timeline(topo, topology_for, layer_config, outdir / "timeline.png"),
        *_energy(grid, topo, outdir),
    ]


def _energy(grid: Grid, topo: Topology, outdir: Path) -> list[Path]:
    """Energy by component per config: TP BREAKDOWN_TP on FIG_TOPOLOGY at the real hidden
    sizes, per layer, tokens and mode (none on a topology without energy)."""
    keys = sorted(
        (k for k in grid if k[3] == BREAKDOWN_TP and k[4] == FIG_TOPOLOGY and k[1] >= 4096),
        key=lambda k: (k[0], k[1], k[2], MODES.index(k[5])),
    )
    rows = [(f"{k[0]} h{k[1]} t{k[2]} {k[5]}", grid[k]) for k in keys]
    if not has_energy([r for _l, r in rows]):
        return []
    title = f"TP layer energy by component per config (TP {BREAKDOWN_TP}, {FIG_TOPOLOGY})"
    where = f" on {topo.fingerprint}"
    return [energy_breakdown(rows, outdir / "energy_breakdown.png", title, where)]
