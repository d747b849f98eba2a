"""Turn an op log into named numbers: busy time, occupancy, windows, utilisation, bytes.

Definitions (DESIGN.md "Metrics", docs/adr/0006):

* an engine's **busy** time is the time it is *held*: a DMA engine for its setup, the
  fetch unit for its service, the PE issue slot for T per tile-op. A stage's busy time
  is the union of its engines' held intervals.
* **in flight** (``inflight_ns``): the union of the records' ``[start, end)`` intervals,
  waiting for channels and latency included;
* ``hbm.busy_ns``: channel time of every burst moved, per pseudo-channel on average;
* composite window: first start to last end over all records (the kernel's latency);
  PE window: first GEMM issue to last GEMM retire; occupancy: busy / composite window;
* ``mac_util``: useful (real) MACs / (peak MAC/ns x latency), the end-to-end figure;
* ``pe_util``: MACs issued (padded) / (peak MAC/ns x PE window);
* ``useful_eff``: real MACs / padded MACs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sim.kernels.gemm import GemmRun
from sim.model import gemm_model, roofline_tflops
from sim.oplog import OpLog

__all__ = ["busy_ps", "gemm_metrics", "held_end", "stage_engine_table"]

PS = 1000.0  # ps per ns, for reporting only


def busy_ps(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> int:
    """Length of the union of intervals ``[start, end)`` (any order, overlaps merged)."""
    if len(start) == 0:
        return 0
    if len(start) > 1 and not bool(np.all(start[1:] >= start[:-1])):
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # a new merged run starts where a start lies beyond everything reached so far
    new_run = np.empty(len(start), dtype=bool)
    new_run[0] = True
    new_run[1:] = start[1:] > reach[:-1]
    run_end = np.empty(int(new_run.sum()), np.int64)
    last = np.flatnonzero(np.r_[new_run[1:], True])  # the last interval of each run
    run_end[:] = reach[last]
    return int((run_end - start[new_run]).sum())


def held_end(run: GemmRun) -> npt.NDArray[np.int64]:
    """When each record's engine is free again: DMA after setup, PE after T, fetch at end."""
    log, prog = run.log, run.program
    return _held(log.engine, log.start, log.end, prog.fetch_res, prog.pe_res, prog.setup, prog.T)


def _held(
    engine: npt.NDArray[np.int16],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    fetch_res: int,
    pe_res: int,
    setup: int,
    t: int,
) -> npt.NDArray[np.int64]:
    held = end.copy()
    dma = engine < fetch_res
    held[dma] = start[dma] + setup
    pe = engine == pe_res
    held[pe] = start[pe] + t
    return held


def _union_of(parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]) -> int:
    if len(parts) == 1:
        return busy_ps(*parts[0])
    return busy_ps(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def stage_engine_table(log: OpLog) -> dict[tuple[str, str], tuple[int, int]]:
    """``(stage, engine) -> (inflight_ps, records)`` for every pair present in the log."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    key = log.stage.astype(np.int64) * len(log.engines) + log.engine
    for k in np.flatnonzero(np.bincount(key)):
        sel = key == k
        stage, engine = divmod(int(k), len(log.engines))
        pair = (log.stages[stage], log.engines[engine])
        out[pair] = (busy_ps(log.start[sel], log.end[sel]), int(sel.sum()))
    return out


def gemm_metrics(run: GemmRun) -> dict[str, float]:
    """The flat metric dict of one GEMM run (names carry their units).

    Records are grouped by engine once (a stable radix sort of int16 codes); an engine
    serves in order, so its records are already in time order and need no further sort.
    """
    log, prog = run.log, run.program
    plan, topo = prog.plan, prog.topo
    order = np.argsort(log.engine, kind="stable")
    engine = log.engine[order]
    start, end, nbytes = log.start[order], log.end[order], log.nbytes[order]
    stage_of = log.stage[order]
    held = _held(engine, start, end, prog.fetch_res, prog.pe_res, prog.setup, prog.T)
    bounds = np.r_[0, np.cumsum(np.bincount(engine, minlength=len(log.engines)))]
    window = max(log.makespan_ps - int(start.min()), 1)
    spans: dict[int, slice] = {}
    stages: dict[int, list[int]] = {}
    for e_i in range(len(log.engines)):
        lo, hi = int(bounds[e_i]), int(bounds[e_i + 1])
        if hi > lo:
            st = int(stage_of[lo])
            if bool(np.any(stage_of[lo:hi] != st)):
                raise ValueError(f"engine {log.engines[e_i]} serves more than one stage")
            spans[e_i] = slice(lo, hi)
            stages.setdefault(st, []).append(e_i)
    pe = spans[prog.pe_res]
    pe_window = int(end[pe].max() - start[pe].min())
    issued_macs = int(log.macs[order][pe].sum())
    real_macs = plan.shape.macs

    def stage_bytes(name: str) -> int:
        s_i = log.stages.index(name)
        return int(sum(int(nbytes[spans[e]].sum()) for e in stages.get(s_i, [])))

    hbm_read, hbm_write = stage_bytes("dma_in"), stage_bytes("dma_out")
    dma = np.concatenate([nbytes[spans[e]] for e in spans if e < prog.fetch_res])
    bursts = int((-(-dma // topo.hbm.burst_bytes)).sum())
    latency_ns = log.makespan_ps / PS
    peak = topo.pe.peak_macs_per_ns
    moved = hbm_read + hbm_write
    intensity = 2 * real_macs / moved
    tflops = 2 * real_macs / latency_ns / 1000.0
    m: dict[str, float] = {
        "latency_ns": latency_ns,
        "composite_window_ns": window / PS,
        "pe_window_ns": pe_window / PS,
        "tile_ops": plan.tile_ops,
        "mac_util": real_macs / (peak * latency_ns),
        "pe_util": issued_macs / (peak * pe_window / PS),
        "useful_eff": real_macs / plan.padded_macs,
        "hbm_read_bytes": hbm_read,
        "hbm_write_bytes": hbm_write,
        "hbm_bytes": moved,
        "hbm.busy_ns": bursts * topo.hbm.burst_ps / topo.hbm.num_pcs / PS,
        "achieved_gbs": moved / latency_ns,
        "tflops": tflops,
        "arith_intensity_flop_per_byte": intensity,
        "roofline_frac": tflops / roofline_tflops(topo, intensity),
        "sram_bytes": prog.sram_bytes(),
        "buffers_a": prog.buffers.a,
        "buffers_b": prog.buffers.b,
        "buffers_c": prog.buffers.c,
    }
    for s_i, stage in enumerate(log.stages):
        engines = stages.get(s_i, [])
        per: dict[int, tuple[int, int]] = {}
        for e_i in engines:
            sl = spans[e_i]
            busy = int((held[sl] - start[sl]).sum())  # an engine holds one op at a time
            per[e_i] = (busy, busy_ps(start[sl], end[sl]))
        if len(engines) == 1:
            busy, inflight = per[engines[0]]
        else:
            busy = _union_of([(start[spans[e]], held[spans[e]]) for e in engines])
            inflight = _union_of([(start[spans[e]], end[spans[e]]) for e in engines])
        m[f"{stage}.busy_ns"] = busy / PS
        m[f"{stage}.inflight_ns"] = inflight / PS
        m[f"{stage}.occupancy"] = busy / window
        m[f"{stage}.records"] = sum(spans[e].stop - spans[e].start for e in engines)
        for e_i in engines:
            name = f"{stage}.{log.engines[e_i]}"
            busy, inflight = per[e_i]
            m[f"{name}.busy_ns"] = busy / PS
            m[f"{name}.inflight_ns"] = inflight / PS
            m[f"{name}.occupancy"] = busy / window
            m[f"{name}.records"] = spans[e_i].stop - spans[e_i].start
    model = gemm_model(plan.shape, prog.variant, topo)
    m["model_latency_ns"] = model.ideal_ps / PS
    m["model_mac_util"] = model.mac_util
    m["model_ratio"] = log.makespan_ps / model.ideal_ps
    m["bound_compute_ns"] = model.compute_bound_ps / PS
    m["bound_hbm_ns"] = model.hbm_bound_ps / PS
    m["bound_ns"] = model.lower_bound_ps / PS
    m["model_hbm_bytes"] = model.hbm_bytes
    return m
