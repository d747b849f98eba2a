"""The ccl bench's two-level system (not a bench: the name starts with ``_``): nodes of the
topology file's chips on one switch, the nodes joined by a second switch (``chips.dimensions``:
switch ``chips.count`` x switch ``nodes``, ADR 0021), every link the file's ``link_bw_gbs`` and
``link_latency_ns``. The hierarchical algorithms (``hierarchical``: reduce-scatter up the
dimensions, all-gather back down, as ASTRA-sim runs them; ``tree_ring``: NCCL's tree across
nodes with the node's exchange inside) run beside the flat ones, so a design review sees
what the second level costs and which algorithm wins where.

Every collective with every algorithm it runs there (allreduce without ``torus2d``, which
needs a torus, and ``nvls``, which needs one switch; ``hierarchical`` also for all_gather
and reduce_scatter) on 2 and 4 nodes. Gated, at 2 nodes: allreduce at 4 KiB, 1 MiB and 64
MiB, the other collectives at 16 KiB and 4 MiB (4 nodes take the same code paths, and the
model's critical path over their whole program costs about 1 s a config). The rest
regen-only. Ids ``[<collective>-]two_level-p<chips>-<algorithm>-<size>``.
The figure: bus bandwidth against size at 2 nodes, one panel per collective, one line per
algorithm, simulated and modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benches._ccl_collective_figures import COLORS as COLLECTIVE_COLORS
from benches._ccl_collective_figures import SIZE_IS, model_busbw
from benches._ccl_sweep import KIB, MIB, MORE_COLLECTIVES, MORE_SIZES, SIZES, size_label
from pytest_npubench import ConfigResult, Sweep
from pytest_npubench.plotting import (
    log_axis,
    markers,
    provenance,
    provenance_handles,
    save,
    titled,
)
from sim import Topology
from sim.collectives import COLLECTIVE_ALGORITHMS, bus_factor

TWO_LEVEL = "two_level"
NODES = (2, 4)
FIGURE = "busbw_two_level.png"
HIERARCHICAL = {
    "allreduce": ("hierarchical", "tree_ring"),
    "all_gather": ("hierarchical",),
    "reduce_scatter": ("hierarchical",),
}
FLAT_ONLY = ("torus2d", "nvls")  # a torus; one switch
ALL = ("allreduce", *MORE_COLLECTIVES)


def algorithms(collective: str) -> list[str]:
    """The algorithms a collective runs on the two-level system (module docstring)."""
    flat = [a for a in COLLECTIVE_ALGORITHMS[collective] if a not in FLAT_ONLY]
    return flat + [a for a in HIERARCHICAL.get(collective, ()) if a not in flat]


def two_level(topo: Topology, chips: int) -> Topology:
    """``topo``'s chips as nodes of ``chips.count`` on a switch, ``chips / chips.count`` nodes
    on a second switch; both dimensions on the file's link."""
    node = topo.chips.count
    if chips % node or chips <= node:
        raise ValueError(f"{TWO_LEVEL}: {chips} chips is not 2 or more nodes of {node}")
    link = {"link_bw_gbs": topo.chips.link_bw_gbs, "link_latency_ns": topo.chips.link_latency_ns}
    inner = {"shape": "switch", "size": node, **link}
    return topo.replace_dimensions([inner, {"shape": "switch", "size": chips // node, **link}])


#: gated sizes per collective kind, by the index of the node count in NODES
GATED: dict[str, dict[int, tuple[int, ...]]] = {
    "allreduce": {0: (4 * KIB, MIB, 64 * MIB)},
    "more": {0: (16 * KIB, 4 * MIB)},
}


def sweeps(node: int) -> list[Sweep]:
    """One sweep group per collective on the two-level system of nodes of ``node`` chips."""
    chips = [node * n for n in NODES]

    def gated_for(collective: str) -> Any:
        table = GATED["allreduce" if collective == "allreduce" else "more"]

        def gated(params: dict[str, Any]) -> bool:
            at = chips.index(params["chips"])
            return params["size"] in table.get(at, ())

        return gated

    out = []
    for c in ALL:
        axes: dict[str, list[Any]] = {
            "topology": [TWO_LEVEL],
            "chips": chips,
            "algorithm": algorithms(c),
            "size": SIZES if c == "allreduce" else MORE_SIZES,
        }
        if c != "allreduce":
            axes = {"collective": [c], **axes}
        out.append(Sweep(axes, gated=gated_for(c)))
    return out


#: the other collectives' figure colours, allreduce's as its figures draw them (halving-
#: doubling like recursive doubling, the double binary tree like the binary tree), and the
#: hierarchical algorithms'
COLORS = {
    **COLLECTIVE_COLORS,
    "halving_doubling": COLLECTIVE_COLORS["recursive_doubling"],
    "double_binary_tree": COLLECTIVE_COLORS["binary_tree"],
    "hierarchical": "#da8bc3",
    "tree_ring": "#17becf",
}


def caption(node: int) -> str:
    return (
        f"Bus bandwidth (nccl-tests busbw) against message size on {NODES[0]} nodes of {node} "
        "chips (switch inside a node, a second switch across nodes, the topology file's link "
        "on both), one panel per collective, one line per algorithm (hierarchical and "
        "tree_ring beside the flat ones): simulated (markers, hollow where reused from the "
        "baseline) and the model (dashed)."
    )


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES[::2])
    ax.set_xticklabels([size_label(s) for s in SIZES[::2]], rotation=45, ha="right")
    ax.set_xlabel("message size (powers of 1024)")
    ax.minorticks_off()


def figure(grid: Mapping[Any, ConfigResult], outdir: Path, node: int, where: str) -> Path | None:
    """busbw vs size per collective at ``NODES[0]`` nodes (module docstring); None when the
    grid has no two-level configs (a run selected others)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    chips = node * NODES[0]
    by: dict[tuple[str, str], dict[int, ConfigResult]] = {}
    for key, r in grid.items():
        if key.topology == TWO_LEVEL and key.chips == chips:
            by.setdefault((key.collective, key.algorithm), {})[key.size] = r
    if not by:
        return None
    drawn = [r for rows in by.values() for r in rows.values()]
    fig, axes = plt.subplots(2, 4, figsize=(20, 9.5), squeeze=False, sharex=True)
    fig.suptitle(
        f"Bus bandwidth vs message size, {NODES[0]} nodes x {node} chips = {chips} chips "
        "(switch x switch; nccl-tests busbw, GB = 1e9 B; log scale)\n"
        "markers: simulated; dashed: the model (sim.collective_model) at the same size\n"
        + provenance(drawn, f" plotted on {where}"),
        fontsize=11,
    )
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.13, top=0.84, wspace=0.2, hspace=0.2)
    used: list[str] = []
    for ax, collective in zip(axes.flat, ALL, strict=False):
        for algorithm in algorithms(collective):
            rows = by.get((collective, algorithm), {})
            xs = sorted(rows)
            if not xs:
                continue
            color = COLORS[algorithm]
            drawn_rows = [rows[s] for s in xs]
            ys = [r.metrics["busbw_gbs"] for r in drawn_rows]
            ax.plot(xs, ys, color=color)
            ax.plot(xs, model_busbw(ys, drawn_rows), color=color, linestyle="--", linewidth=1)
            markers(ax, xs, ys, drawn_rows, color, marker="o", markersize=5)
            used += [algorithm] if algorithm not in used else []
        size_is = SIZE_IS.get(collective, "the buffer")
        factor = f"{bus_factor(collective, chips):.3g}"
        titled(ax, f"{collective}\nsize: {size_is}; busbw = algbw x {factor}", fontsize=10)
        log_axis(ax)
        ax.set_ylabel("busbw (GB/s, log scale)")
        ax.grid(True, which="major", alpha=0.3)
    legend_ax = axes.flat[len(ALL)]
    legend_ax.axis("off")
    for ax in axes[1][: len(ALL) - 4]:
        _size_axis(ax)
    handles = [Line2D([], [], color=COLORS[a], label=a) for a in used]
    handles.append(Line2D([], [], color="gray", linestyle="--", label="model"))
    legend_ax.legend(handles=handles + provenance_handles(), loc="center", fontsize=10)
    return save(fig, outdir / FIGURE)


def two_level_figures(
    grid: Mapping[Any, ConfigResult], outdir: Path, node: int, where: str
) -> Sequence[Path]:
    got = figure(grid, outdir, node, where)
    return [got] if got is not None else []
