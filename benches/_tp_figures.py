"""Figures of the tp_layer bench (drawn by the controller from every config's metrics)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benches._shared import grid_by
from pytest_npubench import ConfigResult
from pytest_npubench.plotting import (
    REUSED_ALPHA,
    format_ns,
    markers,
    measured,
    ns_tick_formatter,
    provenance,
    provenance_handles,
    save,
)
from sim.topology import Topology
from sim.tp.config import MODES, LayerConfig
from sim.tp.run import run_layer

Key = tuple[str, int, int, int, str, str]  # layer, hidden, tokens, tp, topology, mode
Grid = dict[Key, ConfigResult]
MODE_COLORS = {"serial": "#4c72b0", "gemm_ar": "#dd8452", "ag_rs": "#55a868"}
FIG_TOPOLOGY = "ring"
FIG_TP = 8
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


def _breakdown(grid: Grid, topo: Topology, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9), squeeze=False)
    fig.suptitle(
        f"Layer latency per mode, as a share of serial: compute alone (solid) + exposed "
        f"communication (hatched); TP {FIG_TP}, {FIG_TOPOLOGY}\n{_note(grid, topo)}",
        fontsize=11,
    )
    for ax, (layer, hidden) in zip(
        axes.flat, [(ly, h) for ly in ("mlp", "attn") for h in (4096, 8192)], strict=True
    ):
        tokens = _tokens(grid, layer, hidden, FIG_TP)
        for x, t in enumerate(tokens):
            serial = grid.get((layer, hidden, t, FIG_TP, FIG_TOPOLOGY, "serial"))
            if serial is None:
                continue
            base = serial.metrics["latency_ns"]
            for m, mode in enumerate(MODES):
                r = grid.get((layer, hidden, t, FIG_TP, FIG_TOPOLOGY, mode))
                if r is None:
                    continue
                comp = r.metrics["compute_ns"] / base
                exposed = r.metrics["exposed_comm_ns"] / base
                pos = x + (m - 1) * 0.27
                alpha = 1.0 if measured(r) else REUSED_ALPHA  # pale: reused, not re-run
                ax.bar(pos, comp, 0.25, color=MODE_COLORS[mode], alpha=alpha)
                ax.bar(
                    pos,
                    exposed,
                    0.25,
                    bottom=comp,
                    color="white",
                    hatch="//",
                    edgecolor=MODE_COLORS[mode],
                    alpha=alpha,
                )
            ax.text(x, 1.02, format_ns(base), ha="center", fontsize=7)
        ax.set_xticks(range(len(tokens)))
        ax.set_xticklabels([str(t) for t in tokens])
        ax.set_xlabel("tokens (batch x sequence)")
        ax.set_ylabel("time / serial latency")
        ax.set_ylim(0, 1.12)
        ax.set_title(f"{layer}, hidden {hidden} (serial latency above each group)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    from matplotlib.patches import Patch

    handles = [Patch(color=MODE_COLORS[m], label=m) for m in MODES]
    handles.append(Patch(facecolor="white", hatch="//", edgecolor="gray", label="exposed comm"))
    handles.append(Patch(color="gray", label="solid: measured in this run"))
    handles.append(Patch(color="gray", alpha=REUSED_ALPHA, label="pale: reused from the baseline"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    # fixed margins: tight_layout measures every tick label, a third of drawing this figure
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.1, top=0.89, wspace=0.16, hspace=0.3)
    return _save(fig, path)


def _speedup(grid: Grid, topo: Topology, path: Path) -> Path:
    import matplotlib.pyplot as plt

    tps = sorted({k[3] for k in grid})
    fig, axes = plt.subplots(1, len(tps), figsize=(5 * len(tps), 4.8), squeeze=False)
    fig.suptitle(
        f"Speed-up over serial (serial latency / mode latency) vs tokens, {FIG_TOPOLOGY}; "
        f"solid hidden 8192, dashed 4096\n{_note(grid, topo)}",
        fontsize=11,
    )
    for ax, tp in zip(axes.flat, tps, strict=True):
        for layer, marker in (("mlp", "o"), ("attn", "s")):
            for hidden, style in ((8192, "-"), (4096, "--")):
                for mode in ("gemm_ar", "ag_rs"):
                    xs, ys, rows = [], [], []
                    for t in _tokens(grid, layer, hidden, tp):
                        s = grid.get((layer, hidden, t, tp, FIG_TOPOLOGY, "serial"))
                        r = grid.get((layer, hidden, t, tp, FIG_TOPOLOGY, mode))
                        if s and r:
                            xs.append(t)
                            ys.append(s.metrics["latency_ns"] / r.metrics["latency_ns"])
                            rows.append(r if measured(s) else s)  # measured if both ran
                    if xs:
                        color = MODE_COLORS[mode]
                        label = f"{layer} {mode}" if hidden == 8192 else None
                        ax.plot(xs, ys, style, color=color, label=label)
                        markers(ax, xs, ys, rows, color, marker=marker)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens")
        ax.set_ylabel("speed-up over serial")
        ax.set_title(f"TP {tp}")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            handles = ax.get_legend_handles_labels()[0] + provenance_handles()
            ax.legend(handles=handles, fontsize=7, loc="upper right")
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.12, top=0.8, wspace=0.18)
    return _save(fig, path)


def _scaling(grid: Grid, topo: Topology, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), squeeze=False)
    hidden, tokens = 8192, 2048
    fig.suptitle(
        f"Strong scaling: latency vs TP degree, hidden {hidden}, {tokens} tokens, "
        f"{FIG_TOPOLOGY} (dotted: compute alone)\n{_note(grid, topo)}",
        fontsize=11,
    )
    for ax, layer in zip(axes.flat, ("mlp", "attn"), strict=True):
        for mode in MODES:
            pts = sorted(
                (
                    (k[3], r.metrics, r)
                    for k, r in grid.items()
                    if k[:3] == (layer, hidden, tokens) and k[4] == FIG_TOPOLOGY and k[5] == mode
                ),
                key=lambda point: point[0],
            )
            if not pts:
                continue
            xs = [p for p, _, _ in pts]
            ys = [m["latency_ns"] for _, m, _ in pts]
            ax.plot(xs, ys, color=MODE_COLORS[mode], label=mode)
            markers(ax, xs, ys, [r for _, _, r in pts], MODE_COLORS[mode])
            if mode == "serial":
                ax.plot(
                    xs,
                    [m["compute_ns"] for _, m, _ in pts],
                    ":",
                    color="gray",
                    label="compute alone",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks([2, 4, 8])
        ax.set_xticklabels(["2", "4", "8"])
        ax.set_xlabel("TP degree (chips)")
        ax.set_ylabel("latency (log scale)")
        ax.yaxis.set_major_formatter(ns_tick_formatter())
        ax.yaxis.set_minor_formatter(ns_tick_formatter())
        ax.set_title(layer)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            handles = ax.get_legend_handles_labels()[0] + provenance_handles()
            ax.legend(handles=handles, fontsize=8)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.12, top=0.8, wspace=0.2)
    return _save(fig, path)


def _timeline(
    topo: Topology,
    topology_for: Callable[[dict[str, Any]], Topology],
    layer_config: Callable[[dict[str, Any]], LayerConfig],
    path: Path,
) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(MODES), 1, figsize=(13, 3.2 * len(MODES)), sharex=True)
    t = TIMELINE
    fig.suptitle(
        f"Timeline per mode: {t['layer']}, hidden {t['hidden']}, {t['tokens']} tokens, "
        f"TP {t['tp']}, {t['topology']} (every chip's engines and links)",
        fontsize=11,
    )
    colors = {
        "gemm1": "#c44e52",
        "gemm2": "#8172b3",
        "send": "#4c72b0",
        "forward": "#64b5cd",
        "reduce": "#55a868",
        "copy": "#937860",
    }
    for ax, mode in zip(axes, MODES, strict=True):
        params = {**t, "mode": mode}
        run = run_layer(layer_config(params), topology_for(params))
        log = run.log
        lanes: dict[tuple[int, str], list[tuple[float, float, str]]] = {}
        for i in range(len(log)):
            rec = log.record(i)
            lanes.setdefault((rec.chip, rec.engine), []).append(
                (rec.start_ps / 1e6, (rec.end_ps - rec.start_ps) / 1e6, rec.stage)
            )
        order = sorted(lanes)
        for row, key in enumerate(order):
            for stage in colors:
                bars = [(s, d) for s, d, st in lanes[key] if st == stage]
                if bars:
                    ax.broken_barh(
                        bars,
                        (row - 0.4, 0.8),
                        color=colors[stage],
                        edgecolor="white" if stage.startswith("gemm") else colors[stage],
                        lw=0.4,  # white edges between GEMM groups only: small bars stay seen
                    )
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([f"chip {c}: {e}" for c, e in order], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(
            f"{mode}: latency {run.latency_ps / 1e6:.1f} µs (compute alone "
            f"{run.compute_log.makespan_ps / 1e6:.1f}, communication alone "
            f"{run.comm_log.makespan_ps / 1e6:.1f} µs)",
            fontsize=10,
        )
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("time (µs)")
    from matplotlib.patches import Patch

    fig.legend(
        handles=[Patch(color=c, label=s) for s, c in colors.items()],
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=len(colors),
        fontsize=9,
    )
    fig.subplots_adjust(left=0.1, right=0.99, bottom=0.1, top=0.92, hspace=0.2)
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
        _scaling(grid, topo, outdir / "strong_scaling.png"),
        _timeline(topo, topology_for, layer_config, outdir / "timeline.png"),
    ]
