"""Flat metrics of a collective run (nccl-tests' algbw and busbw, link and HBM loads)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sim.collectives.fast import SymmetricRun
from sim.collectives.run import CollectiveRun
from sim.fabric import (
    FORWARD,
    REDUCE,
    SEND,
    hbm_default,
)


def bus_factor(collective: str, chips: int) -> float:
    """nccl-tests' busbw / algbw (its ``doc/PERFORMANCE.md``): ``2(p-1)/p`` for allreduce,
    ``(p-1)/p`` for all_gather, reduce_scatter and alltoall, 1 for broadcast, reduce and
    sendrecv, so that busbw of a bandwidth-optimal ring reads as its link speed whatever the
    collective; 0 on one chip, where nothing moves."""
    if chips <= 1:
        return 0.0
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    return (2.0 if collective == "allreduce" else 1.0) * (chips - 1) / chips


def link_bytes(run: CollectiveRun) -> npt.NDArray[np.float64]:
    """Bytes carried by each link direction (indexed as ``run.network.links``)."""
    log = run.log
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    links = len(run.network.links)
    out = np.bincount(
        log.engine[is_link].astype(np.int64),
        weights=log.nbytes[is_link].astype(np.float64),
        minlength=links,
    )[:links]
    return out.astype(np.float64)


def hbm_bytes(run: CollectiveRun) -> npt.NDArray[np.float64]:
    """HBM bytes per chip (sends that read HBM, copies, reductions: see :func:`fabric_program`)."""
    prog = run.compiled.program
    per_op = np.asarray(
        [
            hbm_default(k, b) if m < 0 else m
            for k, b, m in zip(prog.kind, prog.nbytes, prog.hbm, strict=True)
        ],
        dtype=np.float64,
    )
    chip = np.asarray(prog.src, dtype=np.int64)
    return np.bincount(chip, weights=per_op, minlength=run.chips).astype(np.float64)


def collective_metrics(run: CollectiveRun) -> dict[str, float]:
    """Flat metrics of one run (GB = 1e9 bytes, as nccl-tests): time, bandwidths, loads."""
    if isinstance(run, SymmetricRun):  # the same numbers, in closed form from one chip
        return run.metrics()
    log, p = run.log, run.chips
    t_ps = run.time_ps
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    dur = (log.end - log.start).astype(np.float64)
    links = len(run.network.links)
    per_link = link_bytes(run)
    link_busy = np.bincount(
        log.engine[is_link].astype(np.int64), weights=dur[is_link], minlength=links
    )
    reduce_busy = np.bincount(
        log.chip[log.stage == REDUCE].astype(np.int64),
        weights=dur[log.stage == REDUCE],
        minlength=p,
    )
    time_ns = t_ps / 1000
    algbw = run.nbytes / time_ns if t_ps else 0.0
    used = per_link[per_link > 0]
    return {
        "time_ns": time_ns,
        "algbw_gbs": algbw,
        "busbw_gbs": algbw * bus_factor(run.schedule.collective, p),
        "wrong": float(run.wrong),
        "count": float(run.schedule.count),
        "channels": float(run.channels),  # 0: the ring order and its reverse (or not a ring)
        "transfers": float(np.count_nonzero(log.stage == SEND)),
        "records": float(len(log)),
        "link_bytes_max": float(per_link.max(initial=0.0)),
        "link_bytes_total": float(per_link.sum()),
        "links_used": float(len(used)),
        "link_util_peak": float(link_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
        "hbm_bytes_max": float(hbm_bytes(run).max(initial=0.0)),
        "reduce_util_peak": float(reduce_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
    }
