"""Derived metrics recomputed from their definitions and the run's exact counters (issue 26,
class 3: "derived numbers recomputed").

Each bench's ``run()`` reports ratios and rates (``mac_util``, ``busbw_gbs``,
``sim_model_ratio`` ...) that the baselines record but do not gate (``gate: false``), and
the headline figures are drawn from them. Here every one of them is computed again, from its
definition (the README, ``docs/adr/0006``, nccl-tests' ``doc/PERFORMANCE.md``) and from
counters read off the op log and the topology, never by calling the function that computed
it: ``mac_util == useful MACs / (peak x latency)`` with useful MACs ``M*K*N`` of the shape,
the peak from the topology's PE section and the latency the log's last end; ``busbw ==
algbw x factor`` with nccl-tests' factors written out below; ``sim_model_ratio == time /
model``. A mismatch is one problem naming the metric, its value and the recomputed one.

Floats are compared at a relative ``1e-9`` (the same formula in another order differs in
the last bits, a wrong counter by far more); counters that are integers (bytes, records) and
times that are whole picoseconds are compared exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from sim import OpLog

__all__ = [
    "NCCL_TESTS_BUS_FACTOR",
    "ccl_derived",
    "column_max_end",
    "column_min_start",
    "column_total",
    "compare",
    "gemm_derived",
    "tp_derived",
]

REL = 1e-9

#: nccl-tests' busbw / algbw (doc/PERFORMANCE.md) as ``(numerator of (p-1)/p, or 0 for 1)``:
#: allreduce ``2(p-1)/p``; all_gather, reduce_scatter, alltoall ``(p-1)/p``; the rest 1
NCCL_TESTS_BUS_FACTOR: dict[str, int] = {
    "allreduce": 2,
    "all_gather": 1,
    "reduce_scatter": 1,
    "alltoall": 1,
    "broadcast": 0,
    "reduce": 0,
    "sendrecv": 0,
}


def bus_factor_of(collective: str, p: int) -> float:
    """nccl-tests' factor for ``collective`` on ``p`` chips (0 on one chip: nothing moves)."""
    if p <= 1:
        return 0.0
    times = NCCL_TESTS_BUS_FACTOR[collective]
    return 1.0 if times == 0 else times * (p - 1) / p


def compare(
    metrics: Mapping[str, float], name: str, want: float, definition: str, *, exact: bool = False
) -> str | None:
    """A problem when metric ``name`` is not ``want`` (``definition`` says how it was got)."""
    if name not in metrics:
        return None
    got = float(metrics[name])
    ok = got == want if exact else abs(got - want) <= REL * max(abs(got), abs(want), 1e-300)
    if ok:
        return None
    return f"derived metric {name} = {got:.9g}, but {definition} = {want:.9g}"


def _problems(checks: Iterable[str | None]) -> list[str]:
    return [p for p in checks if p]


# -- a (possibly compressed) op log's columns, summed without writing it out -----------------


def _stored(log: OpLog, name: str) -> npt.NDArray[Any]:
    return log.stored[name]


def column_total(log: OpLog, values: npt.NDArray[Any] | None, mask: npt.NDArray[np.bool_]) -> int:
    """Sum of ``values`` (stored-record columns; None: count) over ``mask``, the copies of every
    period included (a copy repeats every column but the times, the op and the tile)."""

    def part(sl: slice) -> int:
        if values is None:
            return int(np.count_nonzero(mask[sl]))
        return int(values[sl][mask[sl]].sum())

    return part(slice(None)) + sum(r.n * part(slice(r.lo, r.hi)) for r in log.repeats)


def column_max_end(log: OpLog, mask: npt.NDArray[np.bool_]) -> int:
    end = _stored(log, "end")
    best = int(end[mask].max()) if mask.any() else 0
    for r in log.repeats:
        m = mask[r.lo : r.hi]
        if m.any():
            best = max(best, int(end[r.lo : r.hi][m].max()) + r.n * r.shift_ps)
    return best


def column_min_start(log: OpLog, mask: npt.NDArray[np.bool_]) -> int:
    start = _stored(log, "start")
    return int(start[mask].min()) if mask.any() else 0  # copies start after what they copy


# -- GEMM -------------------------------------------------------------------------------------


def peak_macs_per_ns(pe: Any) -> float:
    """The PE's peak from its section: a tile-op of ``m*k*n`` MACs per ``stage_ns`` (tile), one
    MAC per PE per cycle (systolic)."""
    if pe.model == "systolic":
        return float(pe.rows * pe.cols * 1000 / pe.cycle_ps)
    return float(pe.tile_m * pe.tile_k * pe.tile_n / pe.stage_ns)


def gemm_derived(sim_run: Any, metrics: Mapping[str, float]) -> list[str]:
    """Every derived GEMM metric against its definition over the log's counters."""
    log, topo = sim_run.log, sim_run.program.topo
    shape = sim_run.program.plan.shape
    m_, k_, n_ = shape.M, shape.K, shape.N
    useful = m_ * k_ * n_
    engines, stages = log.engines, log.stages
    eng, stg = _stored(log, "engine"), _stored(log, "stage")
    everything = np.ones(len(eng), dtype=bool)
    makespan = column_max_end(log, everything)
    first = column_min_start(log, everything)
    pe = eng == engines.index("pe")
    pe_window = column_max_end(log, pe) - column_min_start(log, pe)
    issued = column_total(log, _stored(log, "macs"), pe)
    nbytes = _stored(log, "nbytes")
    read = column_total(log, nbytes, stg == stages.index("dma_in"))
    write = column_total(log, nbytes, stg == stages.index("dma_out"))
    peak = peak_macs_per_ns(topo.pe)
    lat_ns, window_ns = makespan / 1000, (makespan - first) / 1000
    hbm_gbs = float(topo.hbm.hbm_to_router_bw_gbs)
    intensity = 2 * useful / (read + write)
    tflops = 2 * useful / lat_ns / 1000
    roof = min(2 * peak / 1000, hbm_gbs * intensity / 1000)
    bursts = column_total(
        log,
        -(-nbytes // topo.hbm.burst_bytes),
        np.isin(stg, [stages.index("dma_in"), stages.index("dma_out")]),
    )
    # one burst on one pseudo-channel (hbm_to_router_bw_gbs / num_pcs), whole ps rounded up
    burst_ps = math.ceil(
        Fraction(topo.hbm.burst_bytes * 1000 * topo.hbm.num_pcs)
        / Fraction(str(topo.hbm.hbm_to_router_bw_gbs))
    )
    c = metrics
    checks = [
        compare(c, "latency_ns", lat_ns, "the log's last end", exact=True),
        compare(c, "composite_window_ns", window_ns, "last end - first start", exact=True),
        compare(c, "pe_window_ns", pe_window / 1000, "last PE end - first PE start", exact=True),
        compare(c, "mac_util", useful / (peak * lat_ns), "useful MACs M*K*N / (peak x latency)"),
        compare(
            c, "pe_util", issued / (peak * pe_window / 1000), "MACs issued / (peak x PE window)"
        ),
        compare(c, "useful_eff", useful / issued, "useful MACs M*K*N / MACs issued"),
        compare(c, "hbm_read_bytes", read, "bytes of the dma_in records", exact=True),
        compare(c, "hbm_write_bytes", write, "bytes of the dma_out records", exact=True),
        compare(
            c, "hbm_bytes", read + write, "bytes of the dma_in and dma_out records", exact=True
        ),
        compare(c, "achieved_gbs", (read + write) / lat_ns, "HBM bytes / latency"),
        compare(c, "tflops", tflops, "2 M*K*N / latency"),
        compare(c, "arith_intensity_flop_per_byte", intensity, "2 M*K*N / HBM bytes"),
        compare(c, "roofline_frac", tflops / roof, "TFLOP/s / min(compute roof, HBM roof)"),
        compare(
            c,
            "hbm.busy_ns",
            bursts * burst_ps / topo.hbm.num_pcs / 1000,
            "bursts x burst time / pseudo-channels",
        ),
    ]
    if c.get("model_latency_ns"):
        model_ns = float(c["model_latency_ns"])
        checks.append(compare(c, "model_ratio", lat_ns / model_ns, "latency / model latency"))
        checks.append(
            compare(
                c, "model_mac_util", useful / (peak * model_ns), "M*K*N / (peak x model latency)"
            )
        )
    for key in c:
        if key.endswith(".occupancy"):
            busy = f"{key[: -len('occupancy')]}busy_ns"
            if busy in c:
                checks.append(compare(c, key, c[busy] / window_ns, f"{busy} / composite window"))
    return _problems(checks)


# -- collectives ------------------------------------------------------------------------------


def ccl_derived(
    sim_run: Any,
    metrics: Mapping[str, float],
    params: Mapping[str, Any],
    link_stages: tuple[int, ...],
    reduce_stage: int,
) -> list[str]:
    """algbw, busbw, the model ratio and the link loads against their definitions."""
    collective = params.get("collective", "allreduce")
    p = sim_run.chips
    c = metrics
    t_ps = sim_run.time_ps
    time_ns = t_ps / 1000
    nbytes = sim_run.schedule.nbytes
    algbw = nbytes / time_ns if t_ps else 0.0
    factor = bus_factor_of(collective, p)
    checks = [
        compare(c, "time_ns", time_ns, "the run's last end", exact=True),
        compare(c, "time_us", time_ns / 1000, "time_ns / 1000"),
        compare(c, "algbw_gbs", algbw, "bytes / time (nccl-tests)"),
        compare(c, "busbw_gbs", algbw * factor, f"algbw x nccl-tests' {collective} factor"),
        compare(c, "wrong", float(sim_run.wrong), "the replay's #wrong", exact=True),
    ]
    if c.get("model_time_ns"):
        checks.append(
            compare(c, "sim_model_ratio", time_ns / c["model_time_ns"], "time / model time")
        )
    log = sim_run.log
    symmetric = getattr(sim_run, "symmetric", None)
    # a symmetric log: its representatives' records and ``turns`` rotations (p for one chip
    # on a ring, p / 2 for direct's two on an even ring: ADR 0026)
    turns = int(getattr(log, "turns", p)) if symmetric is not None else 1
    st = (
        log.stored
        if symmetric is not None
        else {k: getattr(log, k) for k in ("stage", "engine", "nbytes", "start", "end", "chip")}
    )
    stage = st["stage"]
    on_link = np.isin(stage, link_stages)
    links = st["engine"][on_link].astype(np.int64)
    per_link = np.bincount(links, weights=st["nbytes"][on_link].astype(np.float64))
    busy = np.bincount(links, weights=(st["end"] - st["start"])[on_link].astype(np.float64))
    red = stage == reduce_stage
    red_busy = np.bincount(
        st["chip"][red].astype(np.int64), weights=(st["end"] - st["start"])[red].astype(np.float64)
    )
    checks += [
        compare(c, "records", float(len(log)), "records in the log", exact=True),
        compare(
            c,
            "transfers",
            float(turns * np.count_nonzero(stage == link_stages[0])),
            "send records",
            exact=True,
        ),
        compare(
            c,
            "link_bytes_total",
            float(turns * per_link.sum()),
            "bytes of the link records",
            exact=True,
        ),
        compare(
            c,
            "link_bytes_max",
            float(per_link.max(initial=0.0)),
            "bytes of the busiest link",
            exact=True,
        ),
        compare(
            c,
            "links_used",
            float(turns * np.count_nonzero(per_link)),
            "links with bytes",
            exact=True,
        ),
    ]
    if t_ps:
        checks.append(
            compare(
                c,
                "link_util_peak",
                float(busy.max(initial=0.0)) / t_ps,
                "busiest link's record time / time",
            )
        )
        checks.append(
            compare(
                c,
                "reduce_util_peak",
                float(red_busy.max(initial=0.0)) / t_ps,
                "busiest reduce engine's time / time",
            )
        )
    return _problems(checks)


def ccl_algo_bound(
    metrics: Mapping[str, float], moved: int, resource_ps: float, collective: str, p: int
) -> list[str]:
    """``algo_bound_busbw_gbs == bytes x factor / the busiest resource's time``."""
    if not moved or not resource_ps:
        return []
    factor = bus_factor_of(collective, p)
    want = moved * factor / (resource_ps / 1000)
    return _problems(
        [compare(metrics, "algo_bound_busbw_gbs", want, "bytes x factor / busiest resource time")]
    )


# -- tensor-parallel layers ------------------------------------------------------------------


def tp_derived(sim_run: Any, metrics: Mapping[str, float]) -> list[str]:
    """The layer's times, overlap, bound and model ratio against their definitions."""
    lat = sim_run.latency_ps
    comp = column_max_end(
        sim_run.compute_log, np.ones(len(sim_run.compute_log.stored["end"]), bool)
    )
    comm = column_max_end(sim_run.comm_log, np.ones(len(sim_run.comm_log.stored["end"]), bool))
    c = metrics
    small = min(comp, comm)
    log = sim_run.log
    send = log.mask(stage="send")
    link = send | log.mask(stage="forward")
    checks = [
        compare(c, "latency_ns", lat / 1000, "the layer's last end", exact=True),
        compare(c, "compute_ns", comp / 1000, "the GEMMs alone, last end", exact=True),
        compare(c, "comm_ns", comm / 1000, "the collectives alone, last end", exact=True),
        compare(c, "exposed_comm_ns", (lat - comp) / 1000, "latency - compute alone", exact=True),
        compare(
            c,
            "overlap_eff",
            (comp + comm - lat) / small if small else 0.0,
            "(compute + comm - latency) / min(compute, comm)",
        ),
        compare(c, "bound_ns", max(comp, comm) / 1000, "max(compute, comm)", exact=True),
        compare(c, "serial_sum_ns", (comp + comm) / 1000, "compute + comm", exact=True),
        compare(c, "transfers", float(np.count_nonzero(send)), "send records", exact=True),
        compare(c, "records", float(len(log)), "records in the log", exact=True),
        compare(
            c,
            "link_bytes_total",
            float(log.nbytes[link].sum()),
            "bytes of the link records",
            exact=True,
        ),
    ]
    if c.get("model_latency_ns"):
        checks.append(
            compare(
                c, "sim_model_ratio", lat / 1000 / c["model_latency_ns"], "latency / model latency"
            )
        )
    if "model_compute_ns" in c and "model_comm_ns" in c:
        checks.append(
            compare(
                c,
                "model_bound_ns",
                max(c["model_compute_ns"], c["model_comm_ns"]),
                "max(model compute, model comm)",
            )
        )
    return _problems(checks)
