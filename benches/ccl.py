"""The ccl bench: allreduce over sizes, algorithms, chip topologies and chip counts.

Gated: 8 chips, every algorithm valid on each of ring, fully_connected, switch and torus2d
(``torus2d``, rows then columns, only on the torus), 1 KiB .. 256 MiB by x4. Regen-only:
the same on 4 and 16 chips. Each config simulates one allreduce (``sim.kernels.allreduce``),
checks it like nccl-tests (``#wrong`` elements must be 0) and against lower bounds no
schedule can beat, and sets the analytic model (``sim.collective_model``) beside it.
Bandwidths follow nccl-tests: ``algbw = bytes / time``, ``busbw = algbw * 2(p-1)/p``,
GB = 1e9 bytes. Everything hardware comes from the topology file; the sweep only
overrides the chip count and interconnect (``Topology.replace_chips``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_npubench import Bench, ConfigResult, Metric, Result
from sim import load_topology
from sim.collective_model import lower_bounds_ps, model
from sim.kernels.allreduce import ALGORITHMS, algorithms_for, allreduce, collective_metrics
from sim.topology import Topology
from sim.trace import write_trace

TOPOLOGY = load_topology(os.environ.get("NPUBENCH_TOPOLOGY", "npu-1h"))

KIB, MIB = 1024, 1024 * 1024
SIZES = [KIB * 4**i for i in range(10)]  # 1 KiB .. 256 MiB, nccl-tests style
TOPOLOGIES = ["ring", "fully_connected", "switch", "torus2d"]
CHIPS = [4, 8, 16]
GATED_CHIPS = 8
TORUS_DIMS = {4: (2, 2), 8: (2, 4), 16: (4, 4)}

_INFO = {"gate": False}
METRICS = {
    "time_ns": Metric("ns", "lower", tolerance=0.001),
    "size_bytes": Metric("B", "higher", **_INFO),
    "count": Metric("elements", "higher", **_INFO),
    "time_us": Metric("us", "lower", **_INFO),
    "algbw_gbs": Metric("GB/s", "higher", **_INFO),
    "busbw_gbs": Metric("GB/s", "higher", **_INFO),
    "wrong": Metric("elements", "lower", **_INFO),
    "model_time_ns": Metric("ns", "lower", **_INFO),
    "textbook_time_ns": Metric("ns", "lower", **_INFO),
    "sim_model_ratio": Metric("1", "lower", **_INFO),
    "bound_ns": Metric("ns", "lower", **_INFO),
    "link_bytes_max": Metric("B", "lower", **_INFO),
    "link_bytes_mean": Metric("B", "lower", **_INFO),
    "link_util_peak": Metric("1", "higher", **_INFO),
    "injected_bytes_max": Metric("B", "lower", **_INFO),
    "reduce_util_peak": Metric("1", "higher", **_INFO),
    "transfers": Metric("1", "lower", **_INFO),
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
    """Simulate one allreduce, check #wrong and the lower bounds, model it."""
    topo = topology_for(params)
    size, algorithm = params["size"], params["algorithm"]
    sim_run = allreduce(topo, size, algorithm)
    got = collective_metrics(sim_run)
    mod = model(topo, algorithm, size)
    bandwidth_ps, latency_ps = lower_bounds_ps(topo, size)
    problems = []
    if sim_run.wrong:
        total = sim_run.chips * sim_run.schedule.count
        problems.append(f"#wrong = {sim_run.wrong} of {total} elements differ from the sum")
    for what, bound in (("bandwidth", bandwidth_ps), ("latency", latency_ps)):
        if sim_run.time_ps < bound:
            problems.append(f"time {sim_run.time_ps} ps beats the {what} bound {bound:.0f} ps")
    metrics = {
        **{k: v for k, v in got.items() if k in METRICS},
        "size_bytes": float(size),
        "time_us": got["time_ns"] / 1000,
        "model_time_ns": mod.time_ps / 1000,
        "textbook_time_ns": mod.textbook_ps / 1000,
        "sim_model_ratio": sim_run.time_ps / mod.time_ps if mod.time_ps else 1.0,
        "bound_ns": max(bandwidth_ps, latency_ps) / 1000,
    }
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def trace(params: dict[str, Any], path: Path, limit: int) -> Path:
    """Write the config's op log (one process per chip, one lane per link) as trace JSON."""
    sim_run = allreduce(topology_for(params), params["size"], params["algorithm"])
    return write_trace(sim_run.log, path, limit=limit, title=f"ccl[{config_id(params)}]")


def meta() -> dict[str, Any]:
    chips = TOPOLOGY.chips
    return {
        "topology": TOPOLOGY.name,
        "topology_fingerprint": TOPOLOGY.fingerprint,
        "link_bw_gbs": chips.link_bw_gbs,
        "link_latency_ns": chips.link_latency_ns,
        "reduce_gbs": chips.reduce_gbs,
        "chunk_kib": chips.chunk_kib,
        "bytes_per_element": TOPOLOGY.bpe,
        "torus_dims": {str(p): list(d) for p, d in TORUS_DIMS.items()},
        "gated_chips": GATED_CHIPS,
    }


# --- figures ---------------------------------------------------------------------------------

ALGO_COLORS = {
    "ring": "#4c72b0",
    "direct": "#dd8452",
    "halving_doubling": "#55a868",
    "tree": "#c44e52",
    "torus2d": "#8172b3",
}
ALGO_SHORT = {
    "ring": "ring",
    "direct": "direct",
    "halving_doubling": "HD",
    "tree": "tree",
    "torus2d": "2D",
}
CHIP_MARKERS = {4: "^", 8: "o", 16: "s"}
TIE = 0.001  # best_algorithm.png names every algorithm within 0.1 % of the fastest
Grid = dict[tuple[str, int, str, int], ConfigResult]


def _grid(results: dict[str, ConfigResult]) -> Grid:
    return {
        (r.params["topology"], r.params["chips"], r.params["algorithm"], r.params["size"]): r
        for r in results.values()
        if "time_ns" in r.metrics
    }


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
    ax.set_xlabel("message size (bytes, powers of 1024)")
    ax.minorticks_off()


def _source_note(grid: Grid) -> str:
    reused = sum(r.source == "baseline" for r in grid.values())
    note = f"{len(grid)} configs on {TOPOLOGY.fingerprint}"
    if reused:
        note += f"; {reused} regen-only configs drawn from baseline values"
    return note


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def _series(
    grid: Grid, topology: str, chips: int, algorithm: str, metric: str
) -> tuple[list[int], list[float]]:
    pts = [
        (s, grid[topology, chips, algorithm, s].metrics[metric])
        for s in SIZES
        if (topology, chips, algorithm, s) in grid
    ]
    return [s for s, _ in pts], [v for _, v in pts]


def _panels(title: str) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), squeeze=False)
    fig.suptitle(title, fontsize=12)
    return fig, axes.flat


def _busbw_vs_size(grid: Grid, path: Path) -> Path:
    fig, axes = _panels(
        f"Allreduce bus bandwidth vs message size, {GATED_CHIPS} chips "
        f"(busbw = algbw x 2(p-1)/p, GB = 1e9 B)\n{_source_note(grid)}"
    )
    peak = float(TOPOLOGY.chips.link_bw)
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            xs, ys = _series(grid, topology, GATED_CHIPS, algorithm, "busbw_gbs")
            if xs:
                ax.plot(xs, ys, marker="o", color=ALGO_COLORS[algorithm], label=algorithm)
        ax.axhline(
            peak, color="black", linestyle=":", label=f"link peak ({peak:g} GB/s, one direction)"
        )
        ax.set_title(topology)
        ax.set_ylabel("busbw (GB/s)")
        _size_axis(ax)
        ax.set_ylim(0, 1.12 * max([peak, *ax.get_ylim()[1:]]))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


def _time_vs_size(grid: Grid, path: Path) -> Path:
    from matplotlib.lines import Line2D

    fig, axes = _panels(
        f"Allreduce time vs message size, {GATED_CHIPS} chips: simulated (markers) and "
        f"alpha-beta-gamma model (dashed)\n{_source_note(grid)}"
    )
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            color = ALGO_COLORS[algorithm]
            xs, sim = _series(grid, topology, GATED_CHIPS, algorithm, "time_us")
            _, mod = _series(grid, topology, GATED_CHIPS, algorithm, "model_time_ns")
            if not xs:
                continue
            ax.plot(xs, sim, marker="o", linestyle="none", color=color, label=algorithm)
            ax.plot(xs, [m / 1000 for m in mod], linestyle="--", color=color)
        ax.set_yscale("log")
        ax.set_title(topology)
        ax.set_ylabel("time (us, log scale)")
        _size_axis(ax)
        ax.grid(True, which="major", alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        handles += [
            Line2D([], [], color="gray", marker="o", linestyle="none", label="simulated"),
            Line2D([], [], color="gray", linestyle="--", label="alpha-beta-gamma model"),
        ]
        ax.legend(handles=handles, fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


def _best_algorithm(grid: Grid, path: Path) -> Path:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    fig, axes = _panels(
        "Fastest allreduce algorithm (simulated) by message size and chip count "
        f"('ring=HD': within {TIE:.1%} of each other)\n" + _source_note(grid)
    )
    order = list(ALGORITHMS)
    cmap = ListedColormap(["#dddddd", *(ALGO_COLORS[a] for a in order)])
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        cells = []
        for chips in CHIPS:
            row = []
            for size in SIZES:
                times = {
                    a: grid[topology, chips, a, size].metrics["time_ns"]
                    for a in algorithms_for(topology)
                    if (topology, chips, a, size) in grid
                }
                ranked = sorted(times, key=lambda a: (times[a], order.index(a)))
                best = ranked[0] if ranked else None
                row.append(0 if best is None else order.index(best) + 1)
                tied = [a for a in ranked[1:] if best and times[a] <= times[best] * (1 + TIE)]
                label = "=".join(ALGO_SHORT[a] for a in ranked[: 1 + len(tied)]) or "n/a"
                ax.text(
                    SIZES.index(size),
                    CHIPS.index(chips),
                    label,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if best else "black",
                )
            cells.append(row)
        ax.imshow(cells, cmap=cmap, vmin=0, vmax=len(order), aspect="auto", origin="lower")
        ax.set_xticks(range(len(SIZES)))
        ax.set_xticklabels([size_label(s) for s in SIZES], rotation=45, ha="right")
        ax.set_yticks(range(len(CHIPS)))
        ax.set_yticklabels([str(c) for c in CHIPS])
        ax.set_xlabel("message size (bytes, powers of 1024)")
        ax.set_ylabel("chips")
        ax.set_title(topology)
    handles = [Patch(color=ALGO_COLORS[a], label=f"{ALGO_SHORT[a]} = {a}") for a in order]
    fig.legend(handles=handles, loc="lower center", ncol=len(order), fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return _save(fig, path)


def _sim_vs_model(grid: Grid, path: Path) -> Path:
    from matplotlib.lines import Line2D

    ratios = [r.metrics["sim_model_ratio"] for r in grid.values()]
    errors = [abs(math.log(x)) for x in ratios if x > 0]
    geomean = math.exp(sum(errors) / len(errors)) - 1 if errors else 0.0
    fig, axes = _panels(
        "Simulated / modelled time per config (1: model exact; >1: contention the model "
        "misses; <1: overlap it misses)\n"
        f"geomean |error| {geomean:.1%}, worst {max(ratios, default=1):.2f}x and "
        f"{min(ratios, default=1):.2f}x, over {_source_note(grid)}"
    )
    for ax, topology in zip(axes, TOPOLOGIES, strict=True):
        for algorithm in algorithms_for(topology):
            for chips in CHIPS:
                xs, ys = _series(grid, topology, chips, algorithm, "sim_model_ratio")
                if xs:
                    ax.plot(
                        xs,
                        ys,
                        marker=CHIP_MARKERS[chips],
                        color=ALGO_COLORS[algorithm],
                        linestyle="-" if chips == GATED_CHIPS else "none",
                        markersize=6 if chips == GATED_CHIPS else 4,
                        alpha=0.9,
                        zorder=3 if algorithm == "ring" else 2,  # ring is exact: keep it seen
                    )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log", base=2)
        ax.set_ylim(0.4, 2.5)
        ax.set_yticks([0.5, 0.75, 1, 1.25, 1.5, 2])
        ax.set_yticklabels(["0.5", "0.75", "1", "1.25", "1.5", "2"])
        ax.set_ylabel("simulated / model time")
        ax.set_title(topology)
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
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, path)


def figures(results: dict[str, ConfigResult], outdir: Path) -> Sequence[Path]:
    """busbw and time vs size, the fastest algorithm per size x chips, sim vs model."""
    import matplotlib

    matplotlib.use("Agg")
    grid = _grid(results)
    outdir.mkdir(parents=True, exist_ok=True)
    return [
        _busbw_vs_size(grid, outdir / "busbw_vs_size.png"),
        _time_vs_size(grid, outdir / "time_vs_size.png"),
        _best_algorithm(grid, outdir / "best_algorithm.png"),
        _sim_vs_model(grid, outdir / "sim_vs_model.png"),
    ]


BENCH = Bench(
    name="ccl",
    sweep={"topology": TOPOLOGIES, "chips": CHIPS, "algorithm": list(ALGORITHMS), "size": SIZES},
    run=run,
    metrics=METRICS,
    config_id=config_id,
    exclude=lambda p: p["algorithm"] not in algorithms_for(p["topology"]),
    regen_only=lambda p: p["chips"] != GATED_CHIPS,
    figures=figures,
    fingerprint=lambda: TOPOLOGY.fingerprint,
    topology=TOPOLOGY.to_dict,
    meta=meta,
    summary_metrics=["size_bytes", "count", "time_us", "algbw_gbs", "busbw_gbs", "wrong"],
    trace=trace,
)
