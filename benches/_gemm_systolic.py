"""The GEMM bench's systolic-PE configs and their figure (not a bench: the name starts with _).

A few gated shapes also run with the PE timed as a systolic array (``pe.model: systolic``,
docs/adr/0012): the same tiles, each tile-op timed as SCALE-Sim times that GEMM on an
array of ``tile_m x tile_n`` PEs (one PE per element of an output tile) in the
output-stationary dataflow, where a tile-op's partial sums stay in place. If the
topology's PE is already systolic, its own array is used. The figure puts the two PE
models side by side on those shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_npubench import ConfigResult
from pytest_npubench.plotting import REUSED_ALPHA, mark_failed, measured, save
from sim.topology import Topology

#: the ``pe`` sweep axis: how the PE times a tile-op
PE_MODELS = ("tile", "systolic")
#: (shape, variant) pairs that also run on the systolic PE; gated, so cheap
SYSTOLIC_CONFIGS: dict[tuple[int, ...], str] = {
    (256, 256, 256): "prefetch",
    (100, 300, 200): "prefetch",
}
DATAFLOW = "os"
COLORS = {"tile": "#4c72b0", "systolic": "#c44e52"}


def pe_model(params: Mapping[str, Any]) -> str:
    return str(params.get("pe", "tile"))


def dataflow(params: Mapping[str, Any]) -> str:
    """The systolic array's dataflow: the config's ``dataflow`` param, else :data:`DATAFLOW`."""
    return str(params.get("dataflow", DATAFLOW))


def topology_for(params: Mapping[str, Any], topo: Topology) -> Topology:
    """The topology a config runs on: ``topo``, or ``topo`` with a systolic PE."""
    if pe_model(params) == "tile" or topo.pe.model == "systolic":
        return topo
    return topo.with_systolic_pe(topo.pe.tile_m, topo.pe.tile_n, dataflow(params))


def excluded(params: Mapping[str, Any]) -> bool:
    """Only the SYSTOLIC_CONFIGS pairs run on the systolic PE (and the configs that name
    their dataflow: ``benches/_gemm_paths.py``)."""
    wanted = SYSTOLIC_CONFIGS.get(tuple(params["shape"]))
    named = "dataflow" in params
    return pe_model(params) == "systolic" and params["variant"] != wanted and not named


def id_suffix(params: Mapping[str, Any]) -> str:
    """``-systolic`` for the systolic-PE configs (``-systolic-ws``, ``-systolic-is`` for the
    other dataflows); tile configs keep their ids."""
    if pe_model(params) == "tile":
        return ""
    df = dataflow(params)
    return "-systolic" + ("" if df == DATAFLOW else f"-{df}")


def tile_results(results: Mapping[str, ConfigResult]) -> dict[str, ConfigResult]:
    """The tile-PE configs only (the other figures are about them)."""
    return {cid: r for cid, r in results.items() if pe_model(r.params) == "tile"}


def systolic_vs_tile(results: dict[str, ConfigResult], topo: Topology, path: Path) -> Path:
    """Latency and mac_util per systolic shape: the tile-PE config beside the systolic one."""
    import matplotlib.pyplot as plt

    pairs: dict[tuple[int, ...], dict[str, ConfigResult]] = {}
    for res in results.values():
        shape = tuple(res.params["shape"])
        if SYSTOLIC_CONFIGS.get(shape) == res.params["variant"] and "dataflow" not in res.params:
            pairs.setdefault(shape, {})[pe_model(res.params)] = res
    shapes = sorted(pairs, key=lambda s: (s[0] * s[1] * s[2], s))
    sys_topo = topology_for({"pe": "systolic"}, topo)
    systolic = sys_topo.pe
    labels = {
        "tile": f"tile PE: pipeline, a tile-op every {topo.pe.stage_ns:g} ns",
        "systolic": f"systolic PE: {systolic.rows}x{systolic.cols} {systolic.dataflow} array, "
        "SCALE-Sim's folds",
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    width = 0.38
    for ax, metric, unit in (
        (axes[0], "latency_ns", "latency (µs)"),
        (axes[1], "mac_util", "mac_util (useful MACs / (peak x latency))"),
    ):
        for i, model in enumerate(PE_MODELS):
            xs = [s_i + (i - 0.5) * width for s_i, s in enumerate(shapes) if model in pairs[s]]
            ys = [pairs[s][model].metrics[metric] for s in shapes if model in pairs[s]]
            if metric == "latency_ns":
                ys = [y / 1000 for y in ys]
            rows = [pairs[s][model] for s in shapes if model in pairs[s]]
            alphas = [1.0 if measured(r) else REUSED_ALPHA for r in rows]
            bars = ax.bar(xs, ys, width, color=COLORS[model], label=labels[model])
            for bar, alpha in zip(bars, alphas, strict=True):
                bar.set_alpha(alpha)
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
            mark_failed(ax, xs, ys, rows)
        ax.set_xticks(
            range(len(shapes)),
            [f"{'x'.join(map(str, s))}\n{SYSTOLIC_CONFIGS[s]}" for s in shapes],
            fontsize=8,
        )
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_ylim(0, 1.05)
    if not shapes:
        for ax in axes:
            ax.text(
                0.5, 0.5, "no systolic-PE config in this run", ha="center", transform=ax.transAxes
            )
    axes[0].legend(fontsize=7, loc="upper left")
    bars = [r for row in pairs.values() for r in row.values()]
    reused = sum(not measured(r) for r in bars)
    missing = 2 * len(shapes) - len(bars)
    note = (
        f"{len(bars) - reused} bars measured in this run, {reused} reused from the baseline (pale)"
    )
    if missing:
        note += f", {missing} not run (not selected)"
    fig.suptitle(
        "GEMM with the PE timed as a tile pipeline vs as a systolic array (pe.model), same "
        "tiles and memory system; the peaks differ: "
        f"{topo.pe.peak_macs_per_ns:g} vs {systolic.peak_macs_per_ns:g} MAC/ns\n"
        f"{note}; on {topo.fingerprint} (systolic PE: {sys_topo.fingerprint})",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.16, top=0.84, wspace=0.2)
    return save(fig, path, dpi=110)
