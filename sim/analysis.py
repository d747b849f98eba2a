"""Turn an op log into named numbers: busy time, occupancy, windows, utilisation, bytes.

Definitions (DESIGN.md "Metrics"):

* busy time of a set of records: the length of the union of their [start, end) intervals;
* composite window: first start to last end over all records (the kernel's latency);
* PE window: first GEMM issue to last GEMM retire;
* occupancy: busy / composite window;
* ``mac_util``: MACs issued (padded) / (peak MAC/ns x PE window);
* ``useful_eff``: real MACs / padded MACs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sim.kernels.gemm import GemmRun
from sim.model import gemm_model
from sim.oplog import OpLog

__all__ = ["busy_ps", "gemm_metrics", "stage_engine_table"]

PS = 1000.0  # ps per ns, for reporting only


def busy_ps(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> int:
    """Length of the union of intervals ``[start, end)`` (any order, overlaps merged)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # a new merged run starts where a start lies beyond everything reached so far
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_id = np.cumsum(new_run) - 1
    run_start = s[new_run]
    run_end = np.zeros(len(run_start), dtype=np.int64)
    np.maximum.at(run_end, run_id, e)
    return int((run_end - run_start).sum())


def stage_engine_table(log: OpLog) -> dict[tuple[str, str], tuple[int, int]]:
    """``(stage, engine) -> (busy_ps, records)`` for every pair present in the log."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    key = log.stage.astype(np.int64) * len(log.engines) + log.engine
    for k in np.unique(key):
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
    gemm = log.mask(stage="gemm")
    pe_window = int(log.end[gemm].max() - log.start[gemm].min())
    issued_macs = int(log.macs[gemm].sum())
    real_macs = plan.shape.macs
    hbm_read = int(log.nbytes[log.mask(stage="dma_in")].sum())
    hbm_write = int(log.nbytes[log.mask(stage="dma_out")].sum())
    latency_ns = log.makespan_ps / PS
    m: dict[str, float] = {
        "latency_ns": latency_ns,
        "composite_window_ns": window / PS,
        "pe_window_ns": pe_window / PS,
        "tile_ops": plan.tile_ops,
        "mac_util": issued_macs / (topo.pe.peak_macs_per_ns * pe_window / PS),
        "useful_eff": real_macs / plan.padded_macs,
        "hbm_read_bytes": hbm_read,
        "hbm_write_bytes": hbm_write,
        "hbm_bytes": hbm_read + hbm_write,
        "achieved_gbs": (hbm_read + hbm_write) / latency_ns,
        "tflops": 2 * real_macs / latency_ns / 1000.0,
        "arith_intensity_flop_per_byte": 2 * real_macs / (hbm_read + hbm_write),
        "sram_bytes": prog.sram_bytes(prog.mode),
    }
    for stage in log.stages:
        sel = log.mask(stage=stage)
        busy = busy_ps(log.start[sel], log.end[sel])
        m[f"{stage}.busy_ns"] = busy / PS
        m[f"{stage}.occupancy"] = busy / window
        m[f"{stage}.records"] = int(sel.sum())
    for (stage, engine), (busy, count) in stage_engine_table(log).items():
        m[f"{stage}.{engine}.busy_ns"] = busy / PS
        m[f"{stage}.{engine}.occupancy"] = busy / window
        m[f"{stage}.{engine}.records"] = count
    model = gemm_model(plan.shape, run.program.variant, topo)
    m["model_latency_ns"] = model.ideal_ps / PS
    m["model_mac_util"] = model.mac_util
    m["bound_compute_ns"] = model.compute_bound_ps / PS
    m["bound_hbm_ns"] = model.hbm_bound_ps / PS
    m["bound_ns"] = model.lower_bound_ps / PS
    m["model_hbm_bytes"] = model.hbm_bytes
    return m
