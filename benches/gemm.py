"""The GEMM bench: cheap shapes x 4 operand-staging variants gated, heavy shapes regen-only.

``pytest --npubench gemm -n auto`` runs the gated sweep against ``baselines/gemm.json``
and draws four figures into ``npubench-artifacts/gemm/``; ``--regen-baselines`` also
runs the regen-only configs and rewrites the baseline file. Everything hardware comes
from the topology file (``sim/topologies/npu-1h.yaml``). The figures are in
``benches/_gemm_figures.py``, the systolic-PE configs in ``benches/_gemm_systolic.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benches import _gemm_paths as paths
from benches import _gemm_systolic as systolic
from benches._energy import energy_explain, energy_meta, energy_spec, energy_values
from benches._gemm_figures import STAGE_NAMES, Shape, figures
from benches._gemm_figures import figure_grid as figure_grid
from benches._invariants import gemm_invariants
from benches._shared import bench_topology, topology_meta, trace_writer
from pytest_npubench import Bench, Metric, Result, Sweep
from sim import VARIANTS, GemmShape, OpLog, check_coverage, gemm_metrics
from sim import run_gemm as simulate_gemm
from sim.energy import FJ_PER_PJ, energy_of, gemm_counts, power_w
from sim.gemm.datacheck import DataCheckError, check_gemm_data
from sim.gemm.layout import STAGES
from sim.gemm.metrics import hbm_channel_busy

TOPOLOGY = bench_topology()

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
    info: dict[str, Any] = {"gate": False}
    exact: dict[str, Any] = {"tolerance": 0.0, "gate": True}
    timed: dict[str, Any] = {"tolerance": LATENCY_TOLERANCE, "gate": True}
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
        "hbm.busiest_pc_ns": Metric("ns", "lower", **info),
        "achieved_gbs": Metric("GB/s", "higher", **info),
        "tflops": Metric("TFLOP/s", "higher", **info),
        "arith_intensity_flop_per_byte": Metric("FLOP/B", "higher", **info),
        "roofline_frac": Metric("1", "higher", **info),
        "sram_bytes": Metric("B", "lower", **exact),
        "sram_read_bytes": Metric("B", "lower", **exact),
        "sram_write_bytes": Metric("B", "lower", **exact),
        "fetch_bytes": Metric("B", "lower", **exact),
        "macs_issued": Metric("1", "lower", **exact),
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
    efficiency = {
        "tflops_per_w": Metric("TFLOP/s/W", "higher", **info),
        "pj_per_useful_mac": Metric("pJ", "lower", **info),
    }
    return {**spec, **energy_spec(TOPOLOGY, LATENCY_TOLERANCE, efficiency)}


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
    got = gemm_metrics(sim_run)
    counts = gemm_counts(sim_run, got)
    got |= {"sram_read_bytes": counts.sram_read, "sram_write_bytes": counts.sram_write}
    metrics = {k: v for k, v in got.items() if k in METRICS}
    _channel, busiest_ps, _total = hbm_channel_busy(sim_run.program)
    metrics["hbm.busiest_pc_ns"] = busiest_ps / 1000
    if sim_run.program.plan.tile_ops <= FUNCTIONAL_MAX_TILE_OPS:
        try:
            check_gemm_data(sim_run)
        except DataCheckError as exc:
            text = str(exc)
            if "busiest HBM pseudo-channel" not in text:  # a hazard: the C check says it
                text += f"; {_channel_line(metrics)}"
            problems.append(f"data check: {text}")
    metrics |= _energy(sim_run.program.topo, counts, metrics, shape.macs)
    problems += gemm_invariants(sim_run, metrics)  # derived metrics, engines' records (issue 26)
    return Result(metrics=metrics, ok=not problems, message="; ".join(problems))


def _energy(topo: Any, counts: Any, metrics: dict[str, Any], useful_macs: int) -> dict[str, float]:
    """Energy, power and the GEMM's efficiencies (TFLOP/s per W, pJ per useful MAC)."""
    if topo.energy is None:
        return {}
    energy = energy_of(counts, topo.energy)
    watts = power_w(energy)
    return {
        **energy_values(topo, energy),
        "tflops_per_w": metrics["tflops"] / watts if watts else 0.0,
        "pj_per_useful_mac": energy.total_fj / FJ_PER_PJ / useful_macs,
    }


def excluded(params: dict[str, Any]) -> bool:
    """A shape that exists for one mode runs only with the variant that has that mode."""
    wanted = MODE_SHAPES.get(tuple(params["shape"]))
    return (wanted is not None and params["variant"] != wanted) or systolic.excluded(params)


def _us(ns: float) -> str:
    return f"{ns / 1000:.3g} us"


def _balance(metrics: Mapping[str, float]) -> float | None:
    mean = metrics.get("hbm.busy_ns")
    busiest = metrics.get("hbm.busiest_pc_ns")
    return busiest / mean if mean and busiest is not None else None


def _channel_line(current: Mapping[str, float], baseline: Mapping[str, float] | None = None) -> str:
    """How busy the busiest HBM pseudo-channel was against the mean (``hbm.busy_ns``)."""
    ratio = _balance(current)
    if ratio is None:
        return "no HBM traffic"
    was = _balance(baseline or {})
    then = f" (baseline {was:.2f}x)" if was is not None else ""
    return (
        f"busiest HBM pseudo-channel {_us(current['hbm.busiest_pc_ns'])} busy, {ratio:.2f}x "
        f"the mean of {_us(current['hbm.busy_ns'])}{then}"
    )


def explain(current: Mapping[str, float], baseline: Mapping[str, float]) -> list[str]:
    """Where the time went: stage busy times and windows, current vs baseline, largest first.

    e.g. "DMA in in flight +38% (12.1 -> 16.7 us)", "GEMM busy unchanged", per engine where
    it moved. Busy is time an engine is held; in flight includes channel waits and latency.
    First, how busy the busiest HBM pseudo-channel was against the mean (a striping that
    piles bursts on one channel shows there before anywhere else).
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
    energy = energy_explain(current, baseline)
    for label, key in items:
        if key not in current or key not in baseline:
            continue
        before, after = baseline[key], current[key]
        change = (after - before) / before if before else (0.0 if after == before else None)
        rows.append((label, before, after, change, key.count(".") == 2))
    lines = [_channel_line(current, baseline)] if "hbm.busiest_pc_ns" in current else []
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
    return energy + lines


def op_log(params: dict[str, Any]) -> OpLog:
    """The config's op log, for its trace."""
    topo = systolic.topology_for(params, TOPOLOGY)
    return simulate_gemm(GemmShape(*params["shape"]), params["variant"], topo).log


trace = trace_writer("gemm", config_id, op_log)


def meta() -> dict[str, Any]:
    pe = TOPOLOGY.pe
    return topology_meta(
        TOPOLOGY,
        tile_mkn=[pe.tile_m, pe.tile_k, pe.tile_n],
        bytes_per_element=TOPOLOGY.bpe,
        functional_check_max_tile_ops=FUNCTIONAL_MAX_TILE_OPS,
        **energy_meta(TOPOLOGY),
    )


CAPTIONS = {
    "energy_breakdown.png": (
        "Per config (shape, variant), each energy component's share of the config's energy "
        "(MACs, HBM read and write, SRAM read and write, PE operand fetch, static power over "
        "the latency); the total in µJ above each bar. Per-access energies from the topology's "
        "energy: section (docs/adr/0027). Pale bars are reused from the baseline."
    ),
    "perf_per_watt.png": (
        "TFLOP/s per W (useful FLOPs over all energy, static included) and pJ per useful MAC "
        "per shape and variant: where a variant that keeps the latency moves more bytes, its "
        "efficiency drops here. Pale bars are reused from the baseline."
    ),
    "stage_breakdown.png": (
        "One panel per shape (in order of M*K*N), one bar group per variant: how long each "
        "stage's engines were busy (DMA in, fetch, GEMM, DMA out) against the end-to-end "
        "latency (black line). Stages overlap, so a variant whose tallest bar reaches the line "
        "is bound by that stage; a gap below the line is time no stage is busy. Each panel has "
        "its own scale and unit; pale panels are regen-only shapes reused from the baseline."
    ),
    "mac_utilization.png": (
        "Simulated utilisation per shape and variant: mac_util (useful MACs / (peak x "
        "latency), the end-to-end number), pe_util (while the PE is busy) and, once per shape, "
        "the useful efficiency (real / padded MACs: what tile padding costs). Pale bars are "
        "reused from the baseline."
    ),
    "model_vs_simulated.png": (
        "Top: the analytic model's mac_util (dash) and the simulator's (dot) per config. "
        "Bottom: simulated / modelled latency; the green band is within 1 %, ratios outside "
        "it are printed. Hollow dots are reused from the baseline."
    ),
    "roofline.png": (
        "Achieved TFLOP/s against arithmetic intensity (FLOP per HBM byte moved) under the "
        "compute and HBM roofs of the topology; each shape is labelled at its fastest "
        "variant. A point far under its roof is latency- or pipeline-bound, not "
        "bandwidth-bound. Hollow points are reused from the baseline."
    ),
}


#: the cheap shapes gated, then the heavy ones regen-only; each shape x variant x PE model
#: (exclude= keeps a mode shape's variant and the systolic PE's pairs: they sit between the
#: other variants of their shape, where a group of their own could not list them)
SWEEP = [
    Sweep({"shape": shapes, "variant": list(VARIANTS), "pe": list(systolic.PE_MODELS)}, gated=g)
    for shapes, g in ((GATED, True), (REGEN_ONLY, False))
]
SWEEP += paths.SWEEP  # one gated config per path the groups above gate nowhere

BENCH = Bench(
    name="gemm",
    sweep=SWEEP,
    run=run,
    metrics=METRICS,
    config_id=config_id,
    exclude=excluded,
    figures=figures,
    fingerprint=lambda: TOPOLOGY.fingerprint,
    topology=TOPOLOGY.to_dict,
    meta=meta,
    summary_metrics=["latency_ns", "mac_util", "pe_util", "useful_eff", "hbm_bytes"],
    explain=explain,
    trace=trace,
    captions=CAPTIONS,
)
