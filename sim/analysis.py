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
    held = log.end.copy()
    dma = log.engine < prog.fetch_res
    held[dma] = log.start[dma] + prog.setup
    pe = log.engine == prog.pe_res
    held[pe] = log.start[pe] + prog.T
    return held


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
    """The flat metric dict of one GEMM run (names carry their units)."""
    log, prog = run.log, run.program
    plan, topo = prog.plan, prog.topo
    window = max(log.makespan_ps - int(log.start.min()), 1)
    held = held_end(run)
    gemm = log.stage == log.stages.index("gemm")
    pe_window = int(log.end[gemm].max() - log.start[gemm].min())
    issued_macs = int(log.macs[gemm].sum())
    real_macs = plan.shape.macs
    dma_in = log.stage == log.stages.index("dma_in")
    dma_out = log.stage == log.stages.index("dma_out")
    hbm_read = int(log.nbytes[dma_in].sum())
    hbm_write = int(log.nbytes[dma_out].sum())
    dma = dma_in | dma_out
    bursts = int((-(-log.nbytes[dma] // topo.hbm.burst_bytes)).sum())
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
        sel = log.stage == s_i
        busy = busy_ps(log.start[sel], held[sel])
        m[f"{stage}.busy_ns"] = busy / PS
        m[f"{stage}.inflight_ns"] = busy_ps(log.start[sel], log.end[sel]) / PS
        m[f"{stage}.occupancy"] = busy / window
        m[f"{stage}.records"] = int(sel.sum())
        for e_i in np.flatnonzero(np.bincount(log.engine[sel], minlength=len(log.engines))):
            one = sel & (log.engine == e_i)
            name = f"{stage}.{log.engines[int(e_i)]}"
            busy = int((held[one] - log.start[one]).sum())  # an engine holds one op at a time
            m[f"{name}.busy_ns"] = busy / PS
            m[f"{name}.inflight_ns"] = busy_ps(log.start[one], log.end[one]) / PS
            m[f"{name}.occupancy"] = busy / window
            m[f"{name}.records"] = int(one.sum())
    model = gemm_model(plan.shape, prog.variant, topo)
    m["model_latency_ns"] = model.ideal_ps / PS
    m["model_mac_util"] = model.mac_util
    m["model_ratio"] = log.makespan_ps / model.ideal_ps
    m["bound_compute_ns"] = model.compute_bound_ps / PS
    m["bound_hbm_ns"] = model.hbm_bound_ps / PS
    m["bound_ns"] = model.lower_bound_ps / PS
    m["model_hbm_bytes"] = model.hbm_bytes
    return m
