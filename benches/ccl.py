"""The ccl bench: allreduce over sizes, algorithms, chip topologies and chip counts.

Every algorithm valid on each of ring, fully_connected, switch and torus2d (``torus2d``,
rows then columns, only on the torus) runs on 4, 6, 8, 9, 12 and 16 chips, 1 KiB .. 256 MiB
by x4. Gated (:func:`gated`, every algorithm x topology): 8 chips at 4 KiB, 256 KiB and
16 MiB (latency-, mid- and bandwidth-bound), 4 chips at 64 MiB, 16 chips at 64 KiB, 6
chips (not a power of two: the halving-doubling fold, a 2 x 3 torus) and 9 chips (odd: the
shifted second tree, a 3 x 3 torus whose ring order needs a wrap link) at 1 MiB. The rest
is regen-only: a normal run draws its figures from the baseline values. Each config
simulates one allreduce (``sim.collectives``), checks
it like nccl-tests (``#wrong`` from a replay of the op log must be 0) and against lower
bounds no allreduce can beat, and sets the analytic model (``sim.collectives.model``) beside
it. Byte and record counters are gated exactly (tolerance 0), the time at 0.1 %.
Bandwidths follow nccl-tests: ``algbw = bytes / time``, ``busbw = algbw * 2(p-1)/p``,
GB = 1e9 bytes. Everything hardware comes from the topology file; the sweep only
overrides the chip count and interconnect (``Topology.replace_chips``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benches._shared import bench_topology, chips_meta, grid_by, trace_writer
from pytest_npubench import Bench, ConfigResult, Metric, Result, Sweep
from pytest_npubench.plotting import (
    markers,
    measured,
    ns_tick_formatter,
    provenance,
    provenance_handles,
    save,
    titled,
)
from sim import OpLog, Topology, allreduce, collective_metrics, collective_model
from sim.collectives import ALGORITHMS, algorithms_for, bounds_ps, bus_factor

TOPOLOGY = bench_topology()

KIB, MIB = 1024, 1024 * 1024
SIZES = [KIB * 4**i for i in range(10)]  # 1 KiB .. 256 MiB, nccl-tests style
TOPOLOGIES = ["ring", "fully_connected", "switch", "torus2d"]
CHIPS = [4, 6, 8, 9, 12, 16]
GATED_CHIPS = 8  # the chip count the figures draw
GATED_SIZES = {
    8: (4 * KIB, 256 * KIB, 16 * MIB),
    4: (64 * MIB,),
    16: (64 * KIB,),
    6: (MIB,),
    9: (MIB,),
}
TORUS_DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3), 12: (3, 4), 16: (4, 4)}


def gated(params: dict[str, Any]) -> bool:
    """Whether a config is gated (runs in every ``--npubench ccl``), per the module docstring."""
    return params["size"] in GATED_SIZES.get(params["chips"], ())


_INFO = {"gate": False}
_EXACT = Metric("1", "lower")  # counters: gated, tolerance 0
METRICS = {
    "time_ns": Metric("ns", "lower", tolerance=0.001),
    "time_us": Metric("us", "lower", **_INFO),
    "algbw_gbs": Metric("GB/s", "higher", **_INFO),
    "busbw_gbs": Metric("GB/s", "higher", **_INFO),
    "wrong": Metric("elements", "lower", **_INFO),
    "model_time_ns": Metric("ns", "lower", **_INFO),
    "textbook_time_ns": Metric("ns", "lower", **_INFO),
    "sim_model_ratio": Metric("1", "lower", **_INFO),
    "bound_ns": Metric("ns", "lower", **_INFO),
    "algo_bound_busbw_gbs": Metric("GB/s", "higher", **_INFO),
    "link_bytes_max": Metric("B", "lower"),
    "link_bytes_total": Metric("B", "lower"),
    "links_used": _EXACT,
    "transfers": _EXACT,
    "records": _EXACT,
    "hbm_bytes_max": Metric("B", "lower"),
    "link_util_peak": Metric("1", "higher", **_INFO),
    "reduce_util_peak": Metric("1", "higher", **_INFO),
}


def size_label(nbytes: int) -> str:
    """1 KiB, 4 KiB, ..., 256 MiB: sizes as powers of 1024, as nccl-tests sweeps them."""
    if nbytes >= MIB and nbytes % MIB == 0:
        return f"{nbytes // MIB} MiB"
    return f"{nbytes // KIB} KiB" if nbytes % KIB == 0 else f"{nbytes} B"


def config_id(params: dict[str, Any]) -> str:
    size = size_label(params["size"]).replace(" ", "")
    return f"{params['topology']}-p{params['chips']}-{params['algorithm']}-{size}"


def topology_for(params: dict[str, Any]) -> Topology:
    """The topology file's hardware with the config's chip count and interconnect."""
    chips = params["chips"]
    dims = TORUS_DIMS.get(chips, (1, chips))
    return TOPOLOGY.replace_chips(count=chips, topology=params["topology"], torus_dims=dims)


def run(params: dict[str, Any]) -> Result:
    """Simulate one allreduce, check #wrong (op-log replay) and the lower bounds, model it."""
    topo = topology_for(params)
    size, algorithm = params["size"], params["algorithm"]
    sim_run = allreduce(topo, size, algorithm)
    got = collective_metrics(sim_run)
    mod = collective_model(topo, algorithm, size)
    bounds = bounds_ps(topo, size)
    problems = []
    if sim_run.wrong:
        total = sim_run.chips * sim_run.schedule.count
        problems.append(
            f"#wrong = {sim_run.wrong} of {total} elements differ from the sum: {sim_run.problem}"
        )
    for what in ("bandwidth", "latency", "reduce", "hbm"):
        bound = getattr(bounds, what)
        if sim_run.time_ps < bound:
            problems.append(f"time {sim_run.time_ps} ps beats the {what} bound {bound:.0f} ps")
    resource_ps = max(mod.busiest_link_ps, mod.busiest_engine_ps, mod.busiest_hbm_ps)
    algo_bound = (
        size * bus_factor("allreduce", sim_run.chips) / (resource_ps / 1000) if size else 0.0
    )
    metrics = {
        **{k: v for k, v in got.items() if k in METRICS},
        "time_us": got["time_ns"] / 1000,
        "model_time_ns": mod.time_ps / 1000,
        "textbook_time_ns": mod.textbook_ps / 1000,
        "sim_model_ratio": sim_run.time_ps / mod.time_ps if mod.time_ps else 1.0,
        "bound_ns": bounds.time_ps / 1000,
        "algo_bound_busbw_gbs": algo_bound,
    }
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def op_log(params: dict[str, Any]) -> OpLog:
    """The config's op log (one process per chip, one lane per link), for its trace."""
    return allreduce(topology_for(params), params["size"], params["algorithm"]).log


trace = trace_writer("ccl", config_id, op_log)


def meta() -> dict[str, Any]:
    chips = TOPOLOGY.chips
    return chips_meta(
        TOPOLOGY,
        reduce_gbs=chips.reduce_gbs,
        chunk_kib=chips.chunk_kib,
        staging_buffers=chips.staging_buffers,
        bytes_per_element=TOPOLOGY.bpe,
        torus_dims={str(p): list(d) for p, d in TORUS_DIMS.items()},
        gated_chips=GATED_CHIPS,
        gated_sizes={str(p): list(v) for p, v in GATED_SIZES.items()},
    )


# --- figures ---------------------------------------------------------------------------------

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
CHIP_MARKERS = {4: "^", 6: "v", 8: "o", 9: "D", 12: "P", 16: "s"}
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
        titled(ax, topology)
        ax.set_yscale("log")
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
        titled(ax, topology)
        ax.set_ylabel("allreduce time (log scale)")
        _size_axis(ax)
        ax.grid(True, which="major", alpha=0.3)
        handles = [Line2D([], [], color=ALGO_COLORS[a], label=a) for a in algorithms_for(topology)]
        handles += [Line2D([], [], color="gray", linestyle="--", label="alpha-beta-gamma model")]
        ax.legend(handles=handles + provenance_handles(), fontsize=7, loc="upper left")
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
    }


def _best_algorithm(grid: Grid, path: Path) -> Path:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    fig, axes = _panels(
        "Fastest allreduce algorithm (simulated) by message size and chip count; second line: "
        "how much slower the runner-up is\n"
        f"grey 'ring=HD': a tie (within {TIE:.1%}); outlined cells were measured in this run, "
        "the rest reused from the baseline\n" + _note(list(grid.values()))
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
            cells.append(row)
        ax.imshow(cells, cmap=cmap, vmin=0, vmax=len(order) + 1, aspect="auto", origin="lower")
        ax.set_xticks(range(len(SIZES)))
        ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
        ax.set_yticks(range(len(CHIPS)))
        ax.set_yticklabels([str(c) for c in CHIPS])
        ax.set_xlabel("message size (bytes, powers of 1024)")
        ax.set_ylabel("chips")
        titled(ax, topology)
    handles = [Patch(color=ALGO_COLORS[a], label=f"{ALGO_SHORT[a]} = {a}") for a in order]
    handles.append(Patch(color=TIE_COLOR, label="tie"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.subplots_adjust(bottom=0.14)
    return save(fig, path)


def _sim_vs_model(grid: Grid, path: Path) -> Path:
    from matplotlib.lines import Line2D

    ratios = [r.metrics["sim_model_ratio"] for r in grid.values()]
    errors = [abs(math.log(x)) for x in ratios if x > 0]
    geomean = math.exp(sum(errors) / len(errors)) - 1 if errors else 0.0
    fig, axes = _panels(
        "Simulated / modelled time per config (1: model exact; >1: contention the model "
        "misses; <1: overlap it misses)\n"
        f"geomean |error| {geomean:.1%}, worst {max(ratios, default=1):.2f}x and "
        f"{min(ratios, default=1):.2f}x; hollow: reused from the baseline (not re-run)\n"
        + _note(list(grid.values()))
    )
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            for chips in CHIPS:
                xs, rows = _series(grid, topology, chips, algorithm)
                if not xs:
                    continue
                ys = [r.metrics["sim_model_ratio"] for r in rows]
                color = ALGO_COLORS[algorithm]
                if chips == GATED_CHIPS:
                    ax.plot(xs, ys, color=color, alpha=0.9)
                markers(
                    ax,
                    xs,
                    ys,
                    rows,
                    color,
                    marker=CHIP_MARKERS[chips],
                    markersize=6 if chips == GATED_CHIPS else 4,
                    alpha=0.9,
                    zorder=3 if algorithm == "ring" else 2,  # ring is exact: keep it seen
                )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log", base=2)
        ax.set_ylim(0.4, 2.5)
        ax.set_yticks([0.5, 0.75, 1, 1.25, 1.5, 2])
        ax.set_yticklabels(["0.5", "0.75", "1", "1.25", "1.5", "2"])
        ax.minorticks_off()
        ax.set_ylabel("simulated / model time")
        titled(ax, topology)
        _size_axis(ax)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=ALGO_COLORS[a], label=a) for a in ALGORITHMS]
    handles += [
        Line2D(
            [],
            [],
            color="gray",
            marker=CHIP_MARKERS[c],
            linestyle="-" if c == GATED_CHIPS else "none",
            label=f"{c} chips",
        )
        for c in CHIPS
    ]
    handles += provenance_handles()
    fig.legend(handles=handles, loc="lower center", ncol=len(handles) // 2 + 1, fontsize=8)
    fig.subplots_adjust(bottom=0.15)
    return save(fig, path)


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """busbw and time vs size, the fastest algorithm per size x chips, sim vs model."""
    import matplotlib

    matplotlib.use("Agg")
    grid = figure_grid(results)
    outdir.mkdir(parents=True, exist_ok=True)
    return [
        _busbw_vs_size(grid, outdir / "busbw_vs_size.png"),
        _time_vs_size(grid, outdir / "time_vs_size.png"),
        _best_algorithm(grid, outdir / "best_algorithm.png"),
        _sim_vs_model(grid, outdir / "sim_vs_model.png"),
    ]


CAPTIONS = {
    "busbw_vs_size.png": (
        f"Bus bandwidth (nccl-tests busbw) against message size at {GATED_CHIPS} chips, one "
        "panel per interconnect, log scale so the latency-bound small messages show. The "
        "dashed line per algorithm is that algorithm's own bound on that topology (its "
        "busiest link direction, reduce engine or HBM never idle): a curve approaches its own "
        "line, not the link speed. Hollow markers are reused from the baseline."
    ),
    "time_vs_size.png": (
        f"Allreduce time against message size at {GATED_CHIPS} chips: simulated (markers) and "
        "the alpha-beta-gamma model (dashed), ticks in ns/µs/ms. Flat at the left: latency "
        "bound; slope 1 at the right: bandwidth bound. Hollow markers are reused."
    ),
    "best_algorithm.png": (
        "The fastest algorithm per message size and chip count; the second line is how much "
        "slower the runner-up is. Grey cells are ties (within 0.1 %), outlined cells were "
        "measured in this run, the rest come from the baseline."
    ),
    "sim_vs_model.png": (
        "Simulated / modelled time for every config (all chip counts): above 1 the model "
        "misses contention, below 1 it misses overlap. Lines join the 8-chip configs; hollow "
        "markers are reused from the baseline (not re-run)."
    ),
}


#: one group per interconnect, each with the algorithms it can run (torus2d only on the torus)
SWEEP = [
    Sweep(
        {"topology": [t], "chips": CHIPS, "algorithm": list(algorithms_for(t)), "size": SIZES},
        gated=gated,
    )
    for t in TOPOLOGIES
]

BENCH = Bench(
    name="ccl",
    sweep=SWEEP,
    run=run,
    metrics=METRICS,
    config_id=config_id,
    figures=figures,
    fingerprint=lambda: TOPOLOGY.fingerprint,
    topology=TOPOLOGY.to_dict,
    meta=meta,
    summary_metrics=["time_us", "algbw_gbs", "busbw_gbs", "wrong"],
    trace=trace,
    captions=CAPTIONS,
)
