"""The tp_layer bench: tensor-parallel MLP and attention-output layers, GEMMs and collectives
on the same chips, with and without overlap (issue 15, docs/adr/0014-tensor-parallel-layer.md).

Sweep, per layer (``mlp``, ``attn``), two groups of TP degree 2, 4, 8 x interconnect (ring,
switch, fully connected) x mode (``serial``, ``gemm_ar``, ``ag_rs``): hidden 128 at 128
tokens, where the op log is replayed on integer matrices and every chip's output must equal
the unsharded ``X @ W1 @ W2`` exactly; and hidden 4096 / 8192 x tokens 128 .. 8192.

Each group has its own gated configs: every layer x mode x topology at hidden 128 (TP 2, 4,
8 on the ring, TP 2 and 4 elsewhere: :func:`gated_functional`) and at hidden 4096, 512 tokens,
TP 4 (:func:`gated_real`); the rest is regen-only. Each config runs the layer, its GEMMs
alone and its collectives alone (``sim.run_layer``) and checks that no mode
beats the bound ``max(compute, communication)`` and that ``serial`` is their sum within 1 %.
Counters are gated exactly (tolerance 0), times at 0.1 %. Everything hardware comes from the
topology file; the sweep only overrides the chip count and interconnect.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benches._energy import energy_meta, energy_spec, energy_values
from benches._invariants import tp_invariants
from benches._shared import bench_topology, chips_meta, trace_writer
from benches._tp_figures import figure_grid as figure_grid
from benches._tp_figures import figures
from pytest_npubench import Bench, Metric, Result, Sweep
from sim import LayerConfig, OpLog, Topology, check_layer_data, layer_metrics
from sim import run_layer as simulate_layer_run
from sim.energy import energy_of, layer_counts
from sim.tp.config import LAYERS, MODES
from sim.tp.depcheck import check_layer_dependencies

TOPOLOGY = bench_topology()

REAL_HIDDEN = [4096, 8192]
TOKENS = [128, 512, 2048, 8192]
TP = [2, 4, 8]
TOPOLOGIES = ["ring", "switch", "fully_connected"]
CHUNKS = 4  # gemm_ar: allreduce chunks (groups of token rows); benchmarks/tp_overlap.py sweeps it
FUNCTIONAL_HIDDEN = 128  # replayed on integer data (the only hidden size run at one token count)
FUNCTIONAL_MAX_MACS = 1 << 28  # the replay multiplies real matrices: keep it to small layers
GATED_REAL = {"hidden": 4096, "tokens": 512, "tp": 4}
SERIAL_SUM_TOLERANCE = 0.01  # serial = compute alone + communication alone, within 1 %
TIME_TOLERANCE = 0.001


def gated_functional(params: dict[str, Any]) -> bool:
    """Gated at hidden 128 (data replayed): TP 2, 4 and 8 on the ring, TP 2 and 4 on the others
    (two chips: both ring neighbours are one chip; issue 26's path coverage)."""
    return bool(params["topology"] == "ring" or params["tp"] in (2, 4))


def gated_real(params: dict[str, Any]) -> bool:
    """Gated at a real hidden size: hidden 4096 at 512 tokens on 4 chips."""
    return all(params[k] == v for k, v in GATED_REAL.items())


_INFO = {"gate": False}
_EXACT = Metric("1", "lower")
METRICS = {
    "latency_ns": Metric("ns", "lower", tolerance=TIME_TOLERANCE),
    "compute_ns": Metric("ns", "lower", tolerance=TIME_TOLERANCE),
    "comm_ns": Metric("ns", "lower", tolerance=TIME_TOLERANCE),
    "exposed_comm_ns": Metric("ns", "lower", **_INFO),
    "overlap_eff": Metric("1", "higher", **_INFO),
    "bound_ns": Metric("ns", "lower", **_INFO),
    "serial_sum_ns": Metric("ns", "lower", **_INFO),
    "hbm_bytes_max": Metric("B", "lower"),
    "link_bytes_max": Metric("B", "lower"),
    "link_bytes_total": Metric("B", "lower"),
    "transfers": _EXACT,
    "records": _EXACT,
    "model_latency_ns": Metric("ns", "lower", **_INFO),
    "model_compute_ns": Metric("ns", "lower", **_INFO),
    "model_comm_ns": Metric("ns", "lower", **_INFO),
    "model_bound_ns": Metric("ns", "lower", **_INFO),
    "sim_model_ratio": Metric("1", "lower", **_INFO),
    "wrong": Metric("elements", "lower", **_INFO),
}
METRICS |= energy_spec(TOPOLOGY, TIME_TOLERANCE, {"uj_per_token": Metric("uJ", "lower", **_INFO)})


def config_id(params: dict[str, Any]) -> str:
    return (
        f"{params['layer']}-h{params['hidden']}-t{params['tokens']}-p{params['tp']}-"
        f"{params['topology']}-{params['mode']}"
    )


def topology_for(params: dict[str, Any]) -> Topology:
    """The topology file's hardware with the config's TP degree and interconnect."""
    p = params["tp"]
    return TOPOLOGY.replace_chips(count=p, topology=params["topology"], torus_dims=(1, p))


def layer_config(params: dict[str, Any]) -> LayerConfig:
    return LayerConfig(params["layer"], params["tokens"], params["hidden"], params["mode"], CHUNKS)


def _macs(params: dict[str, Any]) -> int:
    t, h = params["tokens"], params["hidden"]
    return int(t * h * 4 * h * 2 if params["layer"] == "mlp" else t * h * h)


def run(params: dict[str, Any]) -> Result:
    """Run the layer and its two parts alone; replay small layers' data; check the bounds."""
    sim_run = simulate_layer_run(layer_config(params), topology_for(params))
    metrics = layer_metrics(sim_run)
    problems = []
    race = check_layer_dependencies(sim_run)  # every run: independent of timing (issue 26)
    if race:
        problems.append(race)
    wrong = 0
    if _macs(params) <= FUNCTIONAL_MAX_MACS:
        wrong, why = check_layer_data(sim_run)
        if wrong:
            problems.append(f"#wrong = {wrong}: {why}")
    lat, comp, comm = (
        sim_run.latency_ps,
        sim_run.compute_log.makespan_ps,
        sim_run.comm_log.makespan_ps,
    )
    if lat < max(comp, comm):
        problems.append(f"latency {lat} ps beats the bound max(compute {comp}, comm {comm}) ps")
    if params["mode"] == "serial" and abs(lat - comp - comm) > SERIAL_SUM_TOLERANCE * lat:
        problems.append(
            f"serial latency {lat} ps is not compute {comp} + communication {comm} ps within 1 %"
        )
    metrics["wrong"] = wrong
    topo = sim_run.topo
    if topo.energy is not None:
        counts = layer_counts(sim_run, int(metrics["link_bytes_total"]))
        metrics |= energy_values(topo, energy_of(counts, topo.energy))
        metrics["uj_per_token"] = metrics["energy_uj"] / params["tokens"]
    problems += tp_invariants(sim_run, metrics, topology_for(params))  # issue 26
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def op_log(params: dict[str, Any]) -> OpLog:
    """The layer's joint op log (one process per chip), for its trace."""
    return simulate_layer_run(layer_config(params), topology_for(params)).log


trace = trace_writer("tp_layer", config_id, op_log)


def meta() -> dict[str, Any]:
    return chips_meta(
        TOPOLOGY,
        chunks=CHUNKS,
        gemm_variant=LayerConfig("mlp", 1, 1, "serial").variant,
        functional_max_macs=FUNCTIONAL_MAX_MACS,
        gated_real=GATED_REAL,
        **energy_meta(TOPOLOGY),
    )


def cost(params: dict[str, Any]) -> float:
    return float(params["tokens"] * params["tp"] * (3 if params["mode"] == "gemm_ar" else 1))


CAPTIONS = {
    "energy_breakdown.png": "Per config (TP 4, ring, hidden 4096 and 8192), each energy "
    "component's share of the layer's energy on all chips; the total in µJ above each bar. "
    "Pale bars are reused from the baseline.",
    "time_breakdown.png": "Per mode, the layer latency split into compute alone (GEMMs run "
    "without communication) and exposed communication (latency - compute alone), across "
    "tokens, on an 8-chip ring.",
    "speedup.png": "Speed-up of gemm_ar and ag_rs over serial (serial latency / mode latency) "
    "vs tokens, one panel per TP degree, ring topology.",
    "strong_scaling.png": "Layer latency vs TP degree at fixed tokens, per mode (ring).",
    "timeline.png": "One config per mode: every chip's PE, reduce engine, HBM copies and "
    "links over time, on one time axis, so overlap shows as bars side by side.",
}


def _figures(results: Any, outdir: Path) -> Sequence[Path]:
    return figures(results, outdir, TOPOLOGY, topology_for, layer_config)


def _sweep(layer: str) -> list[Sweep]:
    """A layer's two groups: hidden 128 at one token count (the data replay), then the real
    hidden sizes at every token count; each with its own gated configs."""
    rest: dict[str, Sequence[Any]] = {"tp": TP, "topology": TOPOLOGIES, "mode": list(MODES)}
    functional: dict[str, Sequence[Any]] = {"hidden": [FUNCTIONAL_HIDDEN], "tokens": TOKENS[:1]}
    real: dict[str, Sequence[Any]] = {"hidden": REAL_HIDDEN, "tokens": TOKENS}
    return [
        Sweep({"layer": [layer], **functional, **rest}, gated=gated_functional),
        Sweep({"layer": [layer], **real, **rest}, gated=gated_real),
    ]


#: issue 26, races: each overlap mode replayed where the GEMM is the slow part (links idle,
#: so a collective op that does not wait for its GEMM block reads its rows before they are
#: written); hidden 256 at 512 tokens on 4 chips is compute-bound for both modes and cheap
RACE_SWEEP = Sweep(
    {
        "layer": ["mlp"],
        "hidden": [256],
        "tokens": [512],
        "tp": [4],
        "topology": ["ring"],
        "mode": ["gemm_ar", "ag_rs"],
    },
    gated=True,
)

BENCH = Bench(
    name="tp_layer",
    sweep=[*(group for layer in LAYERS for group in _sweep(layer)), RACE_SWEEP],  # layer by layer
    run=run,
    metrics=METRICS,
    config_id=config_id,
    figures=_figures,
    fingerprint=lambda: TOPOLOGY.fingerprint,
    topology=TOPOLOGY.to_dict,
    meta=meta,
    summary_metrics=["latency_ns", "compute_ns", "comm_ns", "overlap_eff", "wrong"],
    trace=trace,
    captions=CAPTIONS,
    cost=cost,
)
