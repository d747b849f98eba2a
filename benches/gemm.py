"""The GEMM bench: cheap shapes x 4 operand-staging variants gated, heavy shapes regen-only.

``pytest --npubench gemm -n auto`` runs the gated sweep against ``baselines/gemm.json``
and draws four figures into ``npubench-artifacts/gemm/``; ``--regen-baselines`` also
runs the regen-only configs and rewrites the baseline file. Everything hardware comes
from the topology file (``sim/topologies/npu-1h.yaml``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benches import _gemm_systolic as systolic
from pytest_npubench import Bench, ConfigResult, Metric, Result
from sim import gemm_metrics, load_topology
from sim.datacheck import DataCheckError, check_gemm_data
from sim.kernels.gemm import STAGES, VARIANTS, GemmShape, TilePlan, check_coverage
from sim.kernels.gemm import run_gemm as simulate_gemm
from sim.model import roofline_tflops
from sim.trace import write_trace

TOPOLOGY = load_topology(os.environ.get("NPUBENCH_TOPOLOGY", "npu-1h"))

Shape = tuple[int, int, int]
GATED: list[Shape] = [
    (16, 32, 16),  # under-tile
    (32, 64, 32),  # one tile
    (24, 48, 40),  # not tile multiples, under-tile
    (100, 300, 200),  # not tile multiples
    (128, 128, 128),
    (256, 256, 256),
    (128, 1024, 128),  # deep K
    (1024, 64, 256),  # shallow K
    (128, 8192, 160),  # resident: A and B do not fit whole -> row/column panels
]
REGEN_ONLY: list[Shape] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 1024, 8192),
    (1, 4096, 4096),  # decode-like, tall-skinny
    (8, 4096, 4096),
    (32, 4096, 4096),
]
#: shapes that exist to reach one mode: only the variant that has that mode runs them
MODE_SHAPES: dict[Shape, str] = {(128, 8192, 160): "resident"}
#: the data-moving check replays every byte; regen-only giants would take minutes
FUNCTIONAL_MAX_TILE_OPS = 16384
ENGINE_OF = {"dma_in": ("dma0", "dma1"), "fetch": ("fetch",), "gemm": ("pe",), "dma_out": ("dma2",)}
LATENCY_TOLERANCE = 0.001


def _metric_spec() -> dict[str, Metric]:
    """Exact counters gated at 0, times at the latency tolerance, the rest recorded only."""
    info = {"gate": False}
    exact = {"tolerance": 0.0, "gate": True}
    timed = {"tolerance": LATENCY_TOLERANCE, "gate": True}
    spec = {
        "latency_ns": Metric("ns", "lower", **timed),
        "composite_window_ns": Metric("ns", "lower", **info),
        "pe_window_ns": Metric("ns", "lower", **timed),
        "tile_ops": Metric("1", "lower", **exact),
        "mac_util": Metric("1", "higher", **info),
        "pe_util": Metric("1", "higher", **info),
        "useful_eff": Metric("1", "higher", **info),
        "hbm_read_bytes": Metric("B", "lower", **exact),
        "hbm_write_bytes": Metric("B", "lower", **exact),
        "hbm_bytes": Metric("B", "lower", **exact),
        "hbm.busy_ns": Metric("ns", "lower", **timed),
        "achieved_gbs": Metric("GB/s", "higher", **info),
        "tflops": Metric("TFLOP/s", "higher", **info),
        "arith_intensity_flop_per_byte": Metric("FLOP/B", "higher", **info),
        "roofline_frac": Metric("1", "higher", **info),
        "sram_bytes": Metric("B", "lower", **exact),
        "buffers_a": Metric("1", "lower", **exact),
        "buffers_b": Metric("1", "lower", **exact),
        "buffers_c": Metric("1", "lower", **exact),
        "model_latency_ns": Metric("ns", "lower", **info),
        "model_mac_util": Metric("1", "higher", **info),
        "model_ratio": Metric("1", "lower", **info),
        "bound_compute_ns": Metric("ns", "lower", **info),
        "bound_hbm_ns": Metric("ns", "lower", **info),
        "bound_ns": Metric("ns", "lower", **info),
        "model_hbm_bytes": Metric("B", "lower", **info),
    }
    for stage in STAGES:
        for scope in (stage, *(f"{stage}.{e}" for e in ENGINE_OF[stage])):
            spec[f"{scope}.busy_ns"] = Metric("ns", "lower", **timed)
            spec[f"{scope}.inflight_ns"] = Metric("ns", "lower", **timed)
            spec[f"{scope}.occupancy"] = Metric("1", "higher", **info)
            spec[f"{scope}.records"] = Metric("1", "lower", **exact)
    return spec


METRICS = _metric_spec()


def config_id(params: dict[str, Any]) -> str:
    m, k, n = params["shape"]
    return f"{m}x{k}x{n}-{params['variant']}" + systolic.id_suffix(params)


def run(params: dict[str, Any]) -> Result:
    """Simulate one config; check coverage and replay its data (bytes really move)."""
    shape = GemmShape(*params["shape"])
    sim_run = simulate_gemm(shape, params["variant"], systolic.topology_for(params, TOPOLOGY))
    problems = []
    try:
        check_coverage(sim_run)
    except AssertionError as exc:
        problems.append(str(exc))
    if sim_run.program.plan.tile_ops <= FUNCTIONAL_MAX_TILE_OPS:
        try:
            check_gemm_data(sim_run)
        except DataCheckError as exc:
            problems.append(f"data check: {exc}")
    metrics = {k: v for k, v in gemm_metrics(sim_run).items() if k in METRICS}
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def excluded(params: dict[str, Any]) -> bool:
    """A shape that exists for one mode runs only with the variant that has that mode."""
    wanted = MODE_SHAPES.get(tuple(params["shape"]))
    return (wanted is not None and params["variant"] != wanted) or systolic.excluded(params)


STAGE_NAMES = {"dma_in": "DMA in", "fetch": "Fetch", "gemm": "GEMM", "dma_out": "DMA out"}


def _us(ns: float) -> str:
    return f"{ns / 1000:.3g} us"


def explain(current: Mapping[str, float], baseline: Mapping[str, float]) -> list[str]:
    """Where the time went: stage busy times and windows, current vs baseline, largest first.

    e.g. "DMA in in flight +38% (12.1 -> 16.7 us)", "GEMM busy unchanged", per engine where
    it moved. Busy is time an engine is held; in flight includes channel waits and latency.
    """
    items = [(f"{STAGE_NAMES[s]} busy", f"{s}.busy_ns") for s in STAGES]
    items += [(f"{STAGE_NAMES[s]} in flight", f"{s}.inflight_ns") for s in STAGES]
    items += [("composite window", "composite_window_ns"), ("PE window", "pe_window_ns")]
    items += [
        (f"{STAGE_NAMES[s]} {what} on {e}", f"{s}.{e}.{key}")
        for s in STAGES
        for e in ENGINE_OF[s]
        if len(ENGINE_OF[s]) > 1
        for what, key in (("busy", "busy_ns"), ("in flight", "inflight_ns"))
    ]
    rows = []
    for label, key in items:
        if key not in current or key not in baseline:
            continue
        before, after = baseline[key], current[key]
        change = (after - before) / before if before else (0.0 if after == before else None)
        rows.append((label, before, after, change, key.count(".") == 2))
    lines = []
    for label, before, after, change, per_engine in sorted(
        rows, key=lambda r: -(abs(r[3]) if r[3] is not None else float("inf"))
    ):
        if change == 0.0:
            if not per_engine:
                lines.append(f"{label} unchanged ({_us(after)})")
        elif change is None:
            lines.append(f"{label} new ({_us(before)} -> {_us(after)})")
        else:
            lines.append(f"{label} {change:+.2%} ({_us(before)} -> {_us(after)})")
    return lines


def trace(params: dict[str, Any], path: Path, limit: int) -> Path:
    """Write the config's op log as Chrome trace-event JSON (merged above ``limit`` events)."""
    topo = systolic.topology_for(params, TOPOLOGY)
    sim_run = simulate_gemm(GemmShape(*params["shape"]), params["variant"], topo)
    return write_trace(sim_run.log, path, limit=limit, title=f"gemm[{config_id(params)}]")


def meta() -> dict[str, Any]:
    pe = TOPOLOGY.pe
    return {
        "topology": TOPOLOGY.name,
        "topology_fingerprint": TOPOLOGY.fingerprint,
        "tile_mkn": [pe.tile_m, pe.tile_k, pe.tile_n],
        "bytes_per_element": TOPOLOGY.bpe,
        "functional_check_max_tile_ops": FUNCTIONAL_MAX_TILE_OPS,
    }


# --- figures ---------------------------------------------------------------------------------

VARIANT_COLORS = {
    "load_ref": "#4c72b0",
    "double_buffer": "#dd8452",
    "prefetch": "#8172b3",
    "resident": "#55a868",
}
STAGE_COLORS = {"dma_in": "#8172b3", "fetch": "#64b5cd", "gemm": "#c44e52", "dma_out": "#937860"}


def _shape_label(shape: Shape) -> str:
    label = "x".join(map(str, shape))
    if TilePlan.of(GemmShape(*shape), TOPOLOGY).under_tile:
        label += "\n(under-tile)"
    return label


def _by_shape(results: dict[str, ConfigResult]) -> dict[Shape, dict[str, ConfigResult]]:
    grid: dict[Shape, dict[str, ConfigResult]] = {}
    for res in results.values():
        grid.setdefault(tuple(res.params["shape"]), {})[res.params["variant"]] = res
    return dict(sorted(grid.items(), key=lambda kv: (kv[0][0] * kv[0][1] * kv[0][2], kv[0])))


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """Stage breakdown, measured utilisation, theory vs measured, roofline."""
    import matplotlib

    matplotlib.use("Agg")
    grid = _by_shape(systolic.tile_results(results))
    outdir.mkdir(parents=True, exist_ok=True)
    pe_models = systolic.systolic_vs_tile(results, TOPOLOGY, outdir / "systolic_vs_tile.png")
    if not grid:  # only systolic-PE configs were selected (-k systolic)
        return [pe_models]
    paths = [
        _stage_breakdown(grid, outdir / "stage_breakdown.png"),
        _mac_utilization(grid, outdir / "mac_utilization.png"),
        _theory_vs_measured(grid, outdir / "theoretical_vs_measured.png"),
        _roofline(grid, outdir / "roofline.png"),
    ]
    paths.append(pe_models)
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _source_note(grid: dict[Shape, dict[str, ConfigResult]]) -> str:
    reused = sum(r.source == "baseline" for row in grid.values() for r in row.values())
    total = sum(len(row) for row in grid.values())
    note = f"{total} configs on {TOPOLOGY.fingerprint}"
    if reused:
        note += f"; {reused} regen-only configs drawn from baseline values"
    return note


def _stage_breakdown(grid: dict[Shape, dict[str, ConfigResult]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    shapes = list(grid)
    cols = 4
    rows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    width = 0.2
    for ax, shape in zip(axes.flat, shapes, strict=False):
        row = grid[shape]
        variants = [v for v in VARIANTS if v in row]
        for s_i, stage in enumerate(STAGES):
            xs = [v_i + (s_i - 1.5) * width for v_i in range(len(variants))]
            ys = [row[v].metrics[f"{stage}.busy_ns"] / 1000 for v in variants]
            ax.bar(xs, ys, width, color=STAGE_COLORS[stage], label=stage)
        for v_i, v in enumerate(variants):
            window = row[v].metrics["composite_window_ns"] / 1000
            ax.hlines(
                window,
                v_i - 0.45,
                v_i + 0.45,
                colors="black",
                linewidth=1.5,
                label="composite window" if v_i == 0 else None,
            )
        ax.set_xticks(range(len(variants)), [v.replace("_", "\n") for v in variants], fontsize=8)
        ax.set_title(_shape_label(shape).replace("\n", " "), fontsize=9)
        ax.set_ylabel("busy time (µs)", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    for ax in list(axes.flat)[len(shapes) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle(
        "GEMM stage breakdown: busy (engine held) time per stage (DMA in, fetch, GEMM, DMA out) "
        "per variant; each panel has its own scale\n" + _source_note(grid),
        y=0.995,
        fontsize=11,
    )
    height = 3.2 * rows  # inches; keep ~1 inch on top for the title and the legend
    # fixed margins: tight_layout over this many panels costs seconds on every gated run
    fig.subplots_adjust(
        left=0.045, right=0.99, bottom=0.45 / height, top=1 - 1.0 / height, wspace=0.28, hspace=0.42
    )
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=5,
        frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.42 / height),
    )
    return _save(fig, path)


def _grouped(ax: Any, grid: dict[Shape, dict[str, ConfigResult]], metric: str) -> None:
    shapes = list(grid)
    width = 0.8 / len(VARIANTS)
    for v_i, variant in enumerate(VARIANTS):
        xs, ys = [], []
        for s_i, shape in enumerate(shapes):
            if variant in grid[shape]:
                xs.append(s_i + (v_i - (len(VARIANTS) - 1) / 2) * width)
                ys.append(grid[shape][variant].metrics[metric])
        ax.bar(xs, ys, width, color=VARIANT_COLORS[variant], label=variant)
    ax.set_xticks(
        range(len(shapes)), [_shape_label(s) for s in shapes], rotation=60, ha="right", fontsize=7
    )
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)


def _mac_utilization(grid: dict[Shape, dict[str, ConfigResult]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(13, 11), sharex=True)
    _grouped(top, grid, "mac_util")
    top.set_ylabel("mac_util\n(useful MACs / (peak x latency))")
    top.legend(loc="upper left", ncol=len(VARIANTS))
    _grouped(mid, grid, "pe_util")
    mid.set_ylabel("pe_util\n(MACs issued / (peak x PE window))")
    _grouped(bottom, grid, "useful_eff")
    bottom.set_ylabel("useful efficiency\n(real MACs / padded MACs)")
    fig.suptitle(
        "Simulator-measured utilisation per shape and variant: end to end (mac_util), "
        "while the PE is busy (pe_util), and padding (useful_eff)\n" + _source_note(grid),
        fontsize=11,
    )
    fig.tight_layout()
    return _save(fig, path)


def _theory_vs_measured(grid: dict[Shape, dict[str, ConfigResult]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    shapes = list(grid)
    fig, axes = plt.subplots(len(VARIANTS), 1, figsize=(13, 12), sharex=True)
    width = 0.38
    for ax, variant in zip(axes, VARIANTS, strict=True):
        xs = [i for i, s in enumerate(shapes) if variant in grid[s]]
        rows = [grid[shapes[i]][variant].metrics for i in xs]
        ax.bar(
            [x - width / 2 for x in xs],
            [m["model_mac_util"] for m in rows],
            width,
            color="white",
            edgecolor=VARIANT_COLORS[variant],
            hatch="//",
            label="model (steady-state pipeline, sim.model)",
        )
        ax.bar(
            [x + width / 2 for x in xs],
            [m["mac_util"] for m in rows],
            width,
            color=VARIANT_COLORS[variant],
            label="simulator (measured)",
        )
        for x, m in zip(xs, rows, strict=True):
            ratio = m["model_ratio"]
            label = f"{ratio:.3f}" if abs(ratio - 1) < 0.0005 else f"{ratio:.3f}*"
            top = max(m["model_mac_util"], m["mac_util"])
            ax.annotate(label, (x, top + 0.02), ha="center", fontsize=6.5, rotation=90)
        ax.set_ylim(0, 1.3)
        ax.set_ylabel(f"{variant}\nmac_util")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, ncol=2)
    axes[-1].set_xticks(
        range(len(shapes)), [_shape_label(s) for s in shapes], rotation=60, ha="right", fontsize=7
    )
    fig.suptitle(
        "Model vs simulator mac_util (useful MACs / (peak x latency)); numbers are "
        "simulated / modelled latency\n* marks a gap: start-up transients the steady-state "
        "model folds into fill + drain, and HBM channels shared by the A, B and C streams in "
        "issue order\n" + _source_note(grid),
        fontsize=10,
    )
    fig.tight_layout()
    return _save(fig, path)


def _roofline(grid: dict[Shape, dict[str, ConfigResult]], path: Path) -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(10, 6.5))
    points = [r for row in grid.values() for r in row.values()]
    ai = [r.metrics["arith_intensity_flop_per_byte"] for r in points]
    lo, hi = min(ai) / 2, max(ai) * 2
    xs = np.geomspace(lo, hi, 200)
    ax.plot(
        xs,
        [roofline_tflops(TOPOLOGY, x) for x in xs],
        color="black",
        linewidth=2,
        label="roofline: min(compute roof, HBM roof)",
    )
    compute_roof = 2 * TOPOLOGY.pe.peak_macs_per_ns / 1000
    ax.axhline(
        compute_roof,
        color="grey",
        linestyle=":",
        label=f"compute roof {compute_roof:.2f} TFLOP/s (PE peak)",
    )
    bw = float(TOPOLOGY.hbm.bw)
    ax.plot(
        xs, bw * xs / 1000, color="grey", linestyle="--", label=f"HBM roof {bw:g} GB/s x intensity"
    )
    for variant in VARIANTS:
        for under in (False, True):
            sel = [
                r
                for r in points
                if r.params["variant"] == variant
                and TilePlan.of(GemmShape(*r.params["shape"]), TOPOLOGY).under_tile == under
            ]
            if sel:
                ax.scatter(
                    [r.metrics["arith_intensity_flop_per_byte"] for r in sel],
                    [r.metrics["tflops"] for r in sel],
                    color=VARIANT_COLORS[variant],
                    marker="x" if under else "o",
                    s=40 if under else 28,
                    label=f"{variant}" + (" (under-tile)" if under else ""),
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte actually moved)")
    ax.set_ylabel("achieved TFLOP/s (useful FLOPs / latency)")
    ax.grid(which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(
        "GEMM roofline: every config under the compute and HBM roofs from the topology\n"
        + _source_note(grid),
        fontsize=11,
    )
    fig.tight_layout()
    return _save(fig, path)


BENCH = Bench(
    name="gemm",
    sweep={"shape": GATED + REGEN_ONLY, "variant": list(VARIANTS), "pe": list(systolic.PE_MODELS)},
    run=run,
    metrics=METRICS,
    config_id=config_id,
    exclude=excluded,
    regen_only=lambda p: tuple(p["shape"]) in REGEN_ONLY,
    figures=figures,
    fingerprint=lambda: TOPOLOGY.fingerprint,
    topology=TOPOLOGY.to_dict,
    meta=meta,
    summary_metrics=["latency_ns", "mac_util", "pe_util", "useful_eff", "hbm_bytes"],
    explain=explain,
    trace=trace,
)
