"""Analytic models: GEMM ideal-pipeline latency, utilisation and roofline bounds (here), and the
collectives' alpha-beta-gamma models (``sim.collective_model``, re-exported here).

Every constant comes from the :class:`~sim.topology.Topology` the simulator also reads
(the predecessor copied ``HBM_GBS = 256.0``, ``T_STAGE = 16.0``, ``D_STAGES = 3`` and
``BPE = 2`` into its model; here they are ``topo.hbm.bw``, ``topo.pe.stage_ps``,
``topo.pe.pipeline_stages`` and ``topo.bpe``).

The ideal pipeline of a variant is ``fill + (N - 1) * II + drain`` for N tile-ops, where
the initiation interval II is the slowest of its recurrences with no contention between
tile-ops. It is exact where nothing contends (one tile-op; a compute-bound resident GEMM)
and optimistic elsewhere. The roofline bounds are true lower bounds for every variant:
the PE cannot issue faster than one tile-op per T, and HBM cannot move the variant's
bytes faster than its aggregate bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.collective_model import lower_bounds_ps, textbook_ps
from sim.collective_model import model as collective_model
from sim.hbm import transfer_channels
from sim.kernels.gemm import GemmProgram, GemmShape
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "GemmModel",
    "collective_model",
    "gemm_model",
    "lower_bounds_ps",
    "roofline_tflops",
    "textbook_ps",
]


@dataclass(frozen=True)
class GemmModel:
    ideal_ps: int
    ii_ps: float
    mac_util: float
    compute_bound_ps: int
    hbm_bound_ps: int
    hbm_bytes: int

    @property
    def lower_bound_ps(self) -> int:
        return max(self.compute_bound_ps, self.hbm_bound_ps)


def _burst_time(prog: GemmProgram, transfers: list[tuple[int, int]]) -> int:
    """Channel time of transfers issued together: the busiest channel's bursts."""
    load: dict[int, int] = {}
    for addr, nbytes in transfers:
        for c, cnt in transfer_channels(prog.topo.hbm, addr, nbytes):
            load[c] = load.get(c, 0) + cnt
    return max(load.values()) * prog.topo.hbm.burst_ps


def model_hbm_bytes(prog: GemmProgram) -> int:
    """Bytes the variant moves between HBM and SRAM (padded tiles), counted analytically."""
    p = prog.plan
    out = p.out_tiles * p.c_bytes
    if prog.mode == "whole":
        return p.Mt * p.Kt * p.a_bytes + p.Kt * p.Nt * p.b_bytes + out
    if prog.mode == "panel":
        return p.Mt * p.Kt * p.a_bytes + p.tile_ops * p.b_bytes + out
    return p.tile_ops * (p.a_bytes + p.b_bytes) + out


def gemm_model(shape: GemmShape, variant: str, topo: Topology) -> GemmModel:
    """The analytic model of one GEMM variant on one topology."""
    prog = GemmProgram(shape, variant, topo)
    p = prog.plan
    n = p.tile_ops
    setup, lat, f, t = prog.setup, prog.lat, prog.fetch_ps, prog.T
    drain = prog.retire
    a0, b0 = prog.a_addr(0, 0), prog.b_addr(0, 0)
    load_in = setup + _burst_time(prog, [(a0, p.a_bytes), (b0, p.b_bytes)]) + lat
    store = setup + _burst_time(prog, [(prog.c_addr(0), p.c_bytes)]) + lat
    if prog.mode == "load_ref":
        fill, ii = load_in + f, float(load_in + f)
    elif prog.mode == "double_buffer":
        # loads go in pairs (two buffers): fetch i ends at ceil((i+1)/2) (L + f) (+f if odd i)
        fill, ii = load_in + f, max((load_in + f) / 2, f, t)
        if ii == (load_in + f) / 2:
            last_fetch = -(-n // 2) * (load_in + f) + (1 - n % 2) * f
            ii = (last_fetch - fill) / (n - 1) if n > 1 else ii
    elif prog.mode == "whole":
        a_all, b_all = p.Mt * p.Kt * p.a_bytes, p.Kt * p.Nt * p.b_bytes
        staging = setup + _burst_time(prog, [(a0, a_all), (b0, b_all)]) + lat
        fill, ii = staging + f, float(max(f, t))
    else:  # panel: A row panel resident, B streamed double-buffered
        panel = setup + _burst_time(prog, [(a0, p.Kt * p.a_bytes), (b0, p.b_bytes)]) + lat
        load_b = setup + _burst_time(prog, [(b0, p.b_bytes)]) + lat
        fill, ii = panel + f, max((load_b + f) / 2, f, t)
    ideal = fill + round((n - 1) * ii) + drain + store
    pe_window = (n - 1) * max(ii, t) + drain
    hbm_bytes = model_hbm_bytes(prog)
    return GemmModel(
        ideal_ps=int(ideal),
        ii_ps=ii,
        mac_util=n * t / pe_window,
        compute_bound_ps=n * t,
        hbm_bound_ps=ps_for_bytes(hbm_bytes, topo.hbm.bw),
        hbm_bytes=hbm_bytes,
    )


def roofline_tflops(topo: Topology, intensity_flop_per_byte: float) -> float:
    """Attainable TFLOP/s at an arithmetic intensity: min(compute roof, HBM roof)."""
    compute_roof = 2 * topo.pe.peak_macs_per_ns / 1000.0
    hbm_roof = float(topo.hbm.bw) * intensity_flop_per_byte / 1000.0
    return min(compute_roof, hbm_roof)
