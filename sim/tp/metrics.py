"""A layer run's metrics: latency, the runs alone, exposed communication, overlap, bytes, model."""

from __future__ import annotations

import numpy as np

from sim.gemm.model import gemm_model
from sim.tp.config import gemm_shapes
from sim.tp.run import LayerRun
from sim.units import PS_PER_NS, ps_for_bytes

__all__ = ["layer_metrics"]


def _model(run: LayerRun) -> dict[str, float]:
    """Analytic times (ps): GEMMs from ``sim.gemm.model.gemm_model``, collectives alpha-beta."""
    cfg, topo, net = run.cfg, run.topo, run.net
    p = net.chips
    g = {st: gemm_model(sh, cfg.variant, topo).ideal_ps for st, sh in gemm_shapes(cfg, p)}
    n = cfg.tokens * cfg.hidden * topo.bpe
    hops = net.hops(run.net.ring_order()[0], run.net.ring_order()[1])
    a = hops * net.latency_ps
    pass_ps = (p - 1) * a + ps_for_bytes((p - 1) * n // (2 * p), net.link_bw)  # one ring pass
    ag = pass_ps if cfg.layer == "mlp" and cfg.mode == "ag_rs" else 0
    comm = 2 * pass_ps if cfg.mode != "ag_rs" else ag + pass_ps
    g1, g2 = g.get("gemm1", 0), g["gemm2"]
    compute = g1 + g2
    if cfg.mode == "serial":
        lat = compute + comm
    elif cfg.mode == "gemm_ar":
        k = cfg.chunks
        ar = 2 * ((p - 1) * a + ps_for_bytes((p - 1) * n // (2 * p * k), net.link_bw))
        lat = g1 + g2 // k + ar + (k - 1) * max(g2 // k, ar)
    else:
        step_ag = ag // max(1, p - 1)
        step_rs = pass_ps // (p - 1)
        lat1 = g1 // p + (p - 1) * max(g1 // p, step_ag) if g1 else 0
        lat = lat1 + g2 // p + (p - 1) * max(g2 // p, step_rs) + step_rs
    return {"compute": compute, "comm": comm, "latency": lat}


def layer_metrics(run: LayerRun) -> dict[str, float]:
    """Latency, the runs alone, exposed communication, overlap efficiency, bytes, model."""
    lat, comp, comm = run.latency_ps, run.compute_log.makespan_ps, run.comm_log.makespan_ps
    log, p = run.log, run.net.chips
    link = log.mask(stage="send") | log.mask(stage="forward")
    per_chip = np.bincount(
        log.chip[link].astype(np.int64), weights=log.nbytes[link].astype(np.float64), minlength=p
    )
    hbm = run.built.prog.hbm_bytes(p)
    small = min(comp, comm)
    hidden = comp + comm - lat
    mod = _model(run)
    return {
        "latency_ns": lat / PS_PER_NS,
        "compute_ns": comp / PS_PER_NS,
        "comm_ns": comm / PS_PER_NS,
        "exposed_comm_ns": (lat - comp) / PS_PER_NS,
        "overlap_eff": hidden / small if small else 0.0,
        "bound_ns": max(comp, comm) / PS_PER_NS,
        "serial_sum_ns": (comp + comm) / PS_PER_NS,
        "hbm_bytes_max": max(hbm),
        "link_bytes_max": int(per_chip.max()),
        "link_bytes_total": int(per_chip.sum()),
        "transfers": int(np.count_nonzero(log.mask(stage="send"))),
        "records": len(log),
        "model_latency_ns": mod["latency"] / PS_PER_NS,
        "model_compute_ns": mod["compute"] / PS_PER_NS,
        "model_comm_ns": mod["comm"] / PS_PER_NS,
        "model_bound_ns": max(mod["compute"], mod["comm"]) / PS_PER_NS,
        "sim_model_ratio": lat / mod["latency"] if mod["latency"] else 1.0,
    }
