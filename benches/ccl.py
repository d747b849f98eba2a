"""The ccl bench: nccl-tests' collectives over sizes, algorithms, chip topologies and chip
counts.

Every algorithm valid on each of ring, fully_connected, switch and torus2d (``torus2d``,
rows then columns, only on the torus) runs on 4, 6, 8, 9, 12 and 16 chips, 1 KiB .. 256 MiB
by x4. Gated (:func:`gated`, every algorithm x topology): 8 chips at 4 KiB, 256 KiB and
16 MiB (latency-, mid- and bandwidth-bound), 4 chips at 64 MiB, 16 chips at 64 KiB, 6
chips (not a power of two: the halving-doubling fold, a 2 x 3 torus) and 9 chips (odd: the
shifted second tree, a 3 x 3 torus whose ring order needs a wrap link) at 1 MiB. The rest
is regen-only: a normal run draws its figures from the baseline values.

The other collectives (all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv;
``sim.collectives.catalog``) are a ``collective`` axis: one group per collective and
interconnect, every algorithm it runs, 8 chips at every size and 4, 6, 9 and 16 chips at
1 KiB .. 64 MiB by x16, ids in nccl-tests' naming
``<collective>-<topology>-p<chips>-<algorithm>-<size>`` (allreduce keeps its ids, which have
no collective). Gated: 8 chips at 1 MiB, 6 and 9 chips at 16 KiB (every collective x
algorithm x topology x chip-count class); the rest regen-only. Sizes follow nccl-tests: the
output of all_gather, the input of reduce_scatter, one chip's send buffer of alltoall
(rounded down to whole blocks, as nccl-tests does), the buffer of broadcast and reduce (root:
chip 0), what each chip sends in sendrecv.

The two-level system (:mod:`benches._ccl_two_level`): nodes of the file's ``chips.count``
on a switch, 2 and 4 nodes on a second switch, the file's link on both; every collective
with the hierarchical algorithms (``hierarchical``, ``tree_ring``) beside the flat ones,
ids ``[<collective>-]two_level-p<chips>-<algorithm>-<size>``, gated at 2 nodes.

Each config simulates one collective (``sim.collectives``), checks it like nccl-tests
(``#wrong`` from a replay of the op log must be 0) and against lower bounds no schedule of
that collective can beat (``sim.collective_bounds``), and sets the analytic model
(``sim.collective_model``) beside it. The program it timed must order every op after the
ops that produced its data (``CollectiveRun.dependency_race``, from the dependency graph, no
timing: a race the symmetric timing hides fails here). Byte and record counters are gated
exactly (tolerance 0), the time at 0.1 %. Bandwidths follow nccl-tests: ``algbw = bytes /
time``, ``busbw = algbw * factor`` with its factors (``2(p-1)/p`` allreduce, ``(p-1)/p`` all_gather,
reduce_scatter and alltoall, 1 broadcast, reduce and sendrecv), GB = 1e9 bytes. Everything
hardware comes from the topology file; the sweep only overrides the chip count and
interconnect (``Topology.replace_chips``).
"""

from __future__ import annotations

from typing import Any

from benches._ccl_collective_figures import figure_name
from benches._ccl_figures import figure_grid as figure_grid
from benches._ccl_figures import figures
from benches._ccl_paths import with_paths
from benches._ccl_sweep import (
    CHIPS,
    GATED_CHIPS,
    GATED_SIZES,
    MORE_CHIPS,
    MORE_COLLECTIVES,
    MORE_GATED_SIZES,
    MORE_SIZES,
    SIZES,
    TOPOLOGIES,
    TORUS_DIMS,
    gated,
    gated_more,
    size_label,
)
from benches._ccl_two_level import FIGURE as TWO_LEVEL_FIGURE
from benches._ccl_two_level import NODES as TWO_LEVEL_NODES
from benches._ccl_two_level import TWO_LEVEL, two_level
from benches._ccl_two_level import caption as two_level_caption
from benches._ccl_two_level import sweeps as two_level_sweeps
from benches._energy import energy_meta, energy_spec, energy_values
from benches._invariants import ccl_invariants
from benches._shared import bench_topology, chips_meta, trace_writer
from pytest_npubench import Bench, Metric, Result, Sweep
from sim import (
    OpLog,
    Topology,
    allreduce,
    collective_bounds,
    collective_metrics,
    collective_model,
    run_collective,
)
from sim.collectives import COLLECTIVE_ALGORITHMS, CollectiveRun, algorithms_for, bus_factor
from sim.energy import FJ_PER_PJ, collective_counts, energy_of

TOPOLOGY = bench_topology()

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
METRICS |= energy_spec(
    TOPOLOGY,
    0.001,
    {
        "pj_per_byte_moved": Metric("pJ/B", "lower", **_INFO),
        "pj_per_message_byte": Metric("pJ/B", "lower", **_INFO),
    },
)


def _energy(sim_run: CollectiveRun, topo: Topology, got: dict[str, float]) -> dict[str, float]:
    """Energy, power, pJ per byte moved over the links (every hop) and per message byte."""
    if topo.energy is None:
        return {}
    per_dimension = len(set(topo.energy.link_fj)) > 1
    energy = energy_of(collective_counts(sim_run, topo, got, per_dimension), topo.energy)
    pj = energy.total_fj / FJ_PER_PJ
    moved = got["link_bytes_total"]
    return {
        **energy_values(topo, energy),
        "pj_per_byte_moved": pj / moved if moved else 0.0,
        "pj_per_message_byte": pj / sim_run.nbytes if sim_run.nbytes else 0.0,
    }


def config_id(params: dict[str, Any]) -> str:
    """``<topology>-p<chips>-<algorithm>-<size>`` (allreduce), with ``<collective>-`` in front
    for the other collectives (nccl-tests' names)."""
    size = size_label(params["size"]).replace(" ", "")
    head = f"{params['collective']}-" if "collective" in params else ""
    return f"{head}{params['topology']}-p{params['chips']}-{params['algorithm']}-{size}"


def topology_for(params: dict[str, Any]) -> Topology:
    """The topology file's hardware with the config's chip count and interconnect."""
    chips = params["chips"]
    if params["topology"] == TWO_LEVEL:
        return two_level(TOPOLOGY, chips)
    dims = TORUS_DIMS.get(chips, (1, chips))
    return TOPOLOGY.replace_chips(count=chips, topology=params["topology"], torus_dims=dims)


def simulate(params: dict[str, Any]) -> CollectiveRun:
    """The config's collective, simulated (allreduce through ``sim.allreduce``)."""
    topo, size, algorithm = topology_for(params), params["size"], params["algorithm"]
    collective = params.get("collective", "allreduce")
    if collective == "allreduce":
        return allreduce(topo, size, algorithm)
    return run_collective(topo, size, algorithm, collective)


def run(params: dict[str, Any]) -> Result:
    """Simulate one collective, check #wrong (op-log replay) and the lower bounds, model it."""
    topo = topology_for(params)
    size, algorithm = params["size"], params["algorithm"]
    collective = params.get("collective", "allreduce")
    sim_run = simulate(params)
    got = collective_metrics(sim_run)
    mod = collective_model(topo, algorithm, size, collective)
    bounds = collective_bounds(topo, size, collective)
    problems = []
    if sim_run.wrong:
        total = sim_run.chips * sim_run.schedule.count
        what = "the sum" if collective == "allreduce" else f"what {collective} defines"
        problems.append(
            f"#wrong = {sim_run.wrong} of {total} elements differ from {what}: {sim_run.problem}"
        )
    for what in ("bandwidth", "latency", "reduce", "hbm"):
        bound = getattr(bounds, what)
        if sim_run.time_ps < bound:
            problems.append(f"time {sim_run.time_ps} ps beats the {what} bound {bound:.0f} ps")
    resource_ps = max(mod.busiest_link_ps, mod.busiest_engine_ps, mod.busiest_hbm_ps)
    moved = size if collective == "allreduce" else sim_run.nbytes  # alltoall: whole blocks
    algo_bound = (
        moved * bus_factor(collective, sim_run.chips) / (resource_ps / 1000)
        if moved and resource_ps
        else 0.0
    )
    metrics = {
        **{k: v for k, v in got.items() if k in METRICS},
        "time_us": got["time_ns"] / 1000,
        "model_time_ns": mod.time_ps / 1000,
        "textbook_time_ns": mod.textbook_ps / 1000,
        "sim_model_ratio": sim_run.time_ps / mod.time_ps if mod.time_ps else 1.0,
        "bound_ns": bounds.time_ps / 1000,
        "algo_bound_busbw_gbs": algo_bound,
        **_energy(sim_run, topo, got),
    }
    # the timed program's dependency graph orders every producer before its consumers
    race = sim_run.dependency_race()
    if race:
        problems.append(f"dependency check: {race}")
    # derived metrics, each link record, the alpha-beta time (issue 26)
    problems += ccl_invariants(sim_run, metrics, params, topo, (moved, resource_ps))
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def op_log(params: dict[str, Any]) -> OpLog:
    """The config's op log (one process per chip, one lane per link), for its trace."""
    return simulate(params).log


trace = trace_writer("ccl", config_id, op_log)


def meta() -> dict[str, Any]:
    chips = TOPOLOGY.chips
    return chips_meta(
        TOPOLOGY,
        reduce_gbs=chips.reduce_gbs,
        chunk_kib=chips.chunk_kib,
        staging_buffers=chips.staging_buffers,
        bytes_per_element=TOPOLOGY.bpe,
        collectives_gated_sizes={str(p): list(v) for p, v in MORE_GATED_SIZES.items()},
        torus_dims={str(p): list(d) for p, d in TORUS_DIMS.items()},
        gated_chips=GATED_CHIPS,
        gated_sizes={str(p): list(v) for p, v in GATED_SIZES.items()},
        two_level_nodes=list(TWO_LEVEL_NODES),
        **energy_meta(TOPOLOGY),
    )


CAPTIONS = {
    "energy_per_byte_vs_size.png": (
        f"Allreduce energy per message byte (all chips: HBM, links per hop, reductions, static "
        f"power over the time) against size at {GATED_CHIPS} chips, one panel per "
        "interconnect, one line per algorithm. Hollow markers are reused from the baseline."
    ),
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
    **{
        figure_name(c): (
            f"{c}: bus bandwidth (nccl-tests busbw) against message size at {GATED_CHIPS} "
            "chips, one panel per interconnect, one line per algorithm: simulated (markers, "
            "hollow where reused from the baseline) and the model (dashed)."
        )
        for c in MORE_COLLECTIVES
    },
    TWO_LEVEL_FIGURE: two_level_caption(TOPOLOGY.chips.count),
}


#: one group per interconnect, each with the algorithms it can run (torus2d only on the torus);
#: then one group per other collective and interconnect, with a ``collective`` axis
SWEEP = [
    Sweep(
        {"topology": [t], "chips": CHIPS, "algorithm": list(algorithms_for(t)), "size": SIZES},
        gated=with_paths(gated),
    )
    for t in TOPOLOGIES
] + [
    Sweep(
        {
            "collective": [c],
            "topology": [t],
            "chips": chips,
            "algorithm": list(COLLECTIVE_ALGORITHMS[c]),
            "size": sizes,
        },
        gated=with_paths(gated_more),
    )
    for c in MORE_COLLECTIVES
    for t in TOPOLOGIES
    for chips, sizes in (([GATED_CHIPS], SIZES), (MORE_CHIPS, MORE_SIZES))
]

#: the two-chip cases of the alpha-beta check (:mod:`benches._alpha_beta`: one message each
#: way, no contention), gated: without them it times sendrecv alone
SWEEP += [
    Sweep(
        {
            "collective": [c],
            "topology": ["fully_connected", "switch"],
            "chips": [2],
            "algorithm": algorithms,
            "size": [64 * 1024, 4 * 1024 * 1024],
        },
        gated=True,
    )
    for c, algorithms in (
        ("allreduce", ["direct"]),
        ("reduce", ["direct"]),
        ("broadcast", ["direct", "ring"]),
    )
]

#: the two-level system (switch x switch, :mod:`benches._ccl_two_level`): every collective with
#: the hierarchical algorithms beside the flat ones
SWEEP += two_level_sweeps(TOPOLOGY.chips.count)

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
