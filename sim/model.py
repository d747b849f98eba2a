"""Analytic models: GEMM steady-state pipeline latency and lower bounds (the collectives'
alpha-beta-gamma models are in ``sim.collectives``).

Every constant comes from the :class:`~sim.topology.Topology` the simulator also reads
(the predecessor copied ``HBM_GBS = 256.0``, ``T_STAGE = 16.0``, ``D_STAGES = 3`` and
``BPE = 2`` into its model; here they are ``topo.hbm.bw``, ``topo.pe.stage_ps``,
``topo.pe.pipeline_stages`` and ``topo.bpe``), and the program's buffer counts from the
same :class:`~sim.kernels.gemm.GemmProgram` the simulator runs.

**The pipeline model** (``ideal_ps``) is ``fill + (N - 1) * II + drain`` for N tile-ops:
``fill`` is the first tile-op's data landing and being fetched, ``drain`` its issue to
retire plus the last write-back. The initiation interval II is the slowest recurrence of
the program (docs/adr/0006):

* a resource's work per tile-op: PE issue ``T``, fetch, each DMA engine's setup, and the
  HBM channels' share of the bytes the variant moves;
* a buffer ring: ``n`` buffers cycle through *load (setup + transfer + latency) -> the
  reads of its consumer -> release*, so ``n`` consumers take at least one cycle: operand
  tiles (``load_ref``/``double_buffer``/``prefetch``), A row and B column panels
  (``panel``), the C buffers (freed when their DMA out has read them, not when the write
  lands), and the PE operand slots.

**The lower bound** (``lower_bound_ps``, reported as ``bound_ns``) is what no schedule can
beat: the PE issues N tile-ops at most one per T after the first data can have arrived,
and HBM cannot move the variant's bytes faster than its aggregate bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sim.hbm import transfer_channels
from sim.kernels.gemm import GemmProgram, GemmShape
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "GemmModel",
    "gemm_model",
    "model_hbm_bytes",
    "roofline_tflops",
]


@dataclass(frozen=True)
class GemmModel:
    ideal_ps: int
    ii_ps: float
    limiter: str  # the recurrence that sets II
    mac_util: float  # useful MACs / (peak x ideal latency)
    compute_bound_ps: int
    hbm_bound_ps: int
    path_bound_ps: int
    hbm_bytes: int

    @property
    def lower_bound_ps(self) -> int:
        return max(self.compute_bound_ps, self.hbm_bound_ps, self.path_bound_ps)


def _burst_time(prog: GemmProgram, transfers: list[tuple[int, int]]) -> int:
    """Channel time of transfers issued together: the busiest channel's bursts."""
    load: dict[int, int] = {}
    for addr, nbytes in transfers:
        for c, cnt in transfer_channels(prog.topo.hbm, addr, nbytes):
            load[c] = load.get(c, 0) + cnt
    return max(load.values()) * prog.channels.burst_ps  # topo.hbm.burst_ps, derived once


def model_hbm_bytes(prog: GemmProgram) -> int:
    """Bytes the variant moves between HBM and SRAM (padded tiles), counted analytically."""
    p = prog.plan
    out = p.out_tiles * p.c_bytes
    if prog.mode == "whole":
        return p.Mt * p.Kt * p.a_bytes + p.Kt * p.Nt * p.b_bytes + out
    if prog.mode == "panel":
        return p.Mt * p.Kt * p.a_bytes + p.tile_ops * p.b_bytes + out
    return p.tile_ops * (p.a_bytes + p.b_bytes) + out


def _recurrences(prog: GemmProgram) -> dict[str, float]:
    """Lower limits on the initiation interval, one per recurrence of the program."""
    p, bu = prog.plan, prog.buffers
    n, kt = p.tile_ops, prog.Kt
    setup, lat, f, t = prog.setup, prog.lat, prog.fetch_ps, prog.T
    hbm = prog.topo.hbm
    out_xfer = _burst_time(prog, [(prog.c_addr(0), p.c_bytes)])
    per_op = Fraction(model_hbm_bytes(prog) - _staged_bytes(prog), n)
    ii: dict[str, float] = {
        "pe": t,
        "fetch": f,
        "dma out engine": setup / kt,
        "hbm": float(per_op * 1000 / hbm.bw),
        "pe operand slots": (f + prog.retire) / prog.slots,
    }
    # C buffers: first issue of j -> ... -> last retire -> DMA out released -> issue of j + c
    ring = bu.c * kt - kt + 1
    ii["c buffers"] = (prog.retire + setup + out_xfer) / ring
    if prog.mode in ("load_ref", "double_buffer", "prefetch"):
        xfer = _burst_time(prog, [(prog.a_addr(0, 0), p.a_bytes), (prog.b_addr(0, 0), p.b_bytes)])
        ii["operand buffers"] = (setup + xfer + lat + f) / prog.nbuf
        ii["dma in engines"] = setup
    elif prog.mode == "panel":
        pa, pb = kt * p.a_bytes, kt * p.b_bytes
        sb = setup + _burst_time(prog, [(prog.b_addr(0, 0), pb)]) + lat
        sa = setup + _burst_time(prog, [(prog.a_addr(0, 0), pa)]) + lat
        # a ring of n panel buffers, each held for its load and its consumers at full pace
        pace = max(f, t)
        ii["b panels"] = (sb + kt * pace) / (bu.b * kt)
        ii["a panels"] = (sa + prog.RK * pace) / (bu.a * prog.RK)
        ii["dma in engines"] = setup / kt
    return ii


def _issue_span(prog: GemmProgram, ii_all: dict[str, float], n: int) -> int:
    """First to last tile-op: ``(n - 1) II``, except that a ring of ``nbuf`` operand
    buffers only binds from tile-op ``nbuf`` on (the prologue's loads are all issued at
    once): tile-op ``i`` comes one ring cycle after tile-op ``i - nbuf``, and the first
    ``nbuf`` at the pace of the other recurrences."""
    ii = max(ii_all.values())
    ring = ii_all.get("operand buffers")
    if ring is None or ring < ii or n <= 1:
        return round((n - 1) * ii)
    others = max(v for k, v in ii_all.items() if k != "operand buffers")
    q, r = divmod(n - 1, prog.nbuf)
    return round(max((n - 1) * others, q * prog.nbuf * ring + r * others))


def _staged_bytes(prog: GemmProgram) -> int:
    """Bytes loaded before the first tile-op can start (not part of the steady state)."""
    p = prog.plan
    if prog.mode == "whole":
        return p.Mt * p.Kt * p.a_bytes + p.Kt * p.Nt * p.b_bytes
    return 0


def _fill_ps(prog: GemmProgram) -> int:
    """First tile-op: its operands land and are fetched."""
    p = prog.plan
    setup, lat, f = prog.setup, prog.lat, prog.fetch_ps
    a0, b0 = prog.a_addr(0, 0), prog.b_addr(0, 0)
    if prog.mode == "whole":
        a_all, b_all = p.Mt * p.Kt * p.a_bytes, p.Kt * p.Nt * p.b_bytes
        return setup + _burst_time(prog, [(a0, a_all), (b0, b_all)]) + lat + f
    if prog.mode == "panel":
        pa, pb = prog.Kt * p.a_bytes, prog.Kt * p.b_bytes
        return setup + _burst_time(prog, [(a0, pa), (b0, pb)]) + lat + f
    return setup + _burst_time(prog, [(a0, p.a_bytes), (b0, p.b_bytes)]) + lat + f


def gemm_model(
    shape: GemmShape, variant: str, topo: Topology, *, program: GemmProgram | None = None
) -> GemmModel:
    """The analytic model of one GEMM variant on one topology (``program``: that GEMM's
    program if already built; it is only read)."""
    prog = program if program is not None else GemmProgram(shape, variant, topo)
    p = prog.plan
    n = p.tile_ops
    store = prog.setup + _burst_time(prog, [(prog.c_addr(0), p.c_bytes)]) + prog.lat
    ii_all = _recurrences(prog)
    limiter = max(ii_all, key=lambda k: ii_all[k])
    ii = ii_all[limiter]
    ideal = _fill_ps(prog) + _issue_span(prog, ii_all, n) + prog.retire + store
    hbm_bytes = model_hbm_bytes(prog)
    # no schedule beats: the smallest possible first load, N issues T apart, retire, store
    first = prog.setup + _busiest(prog, p.a_bytes + p.b_bytes) + prog.lat + prog.fetch_ps
    path = first + (n - 1) * prog.T + prog.retire + store
    return GemmModel(
        ideal_ps=int(ideal),
        ii_ps=ii,
        limiter=limiter,
        mac_util=p.shape.macs / (topo.pe.peak_macs_per_ns * ideal / 1000),
        compute_bound_ps=n * prog.T,
        hbm_bound_ps=ps_for_bytes(hbm_bytes, topo.hbm.bw),
        path_bound_ps=path,
        hbm_bytes=hbm_bytes,
    )


def _busiest(prog: GemmProgram, nbytes: int) -> int:
    """Least time the busiest channel can take for ``nbytes`` spread perfectly."""
    hbm = prog.topo.hbm
    bursts = -(-nbytes // hbm.burst_bytes)
    return -(-bursts // hbm.num_pcs) * hbm.burst_ps


def roofline_tflops(topo: Topology, intensity_flop_per_byte: float) -> float:
    """Attainable TFLOP/s at an arithmetic intensity: min(compute roof, HBM roof)."""
    compute_roof = 2 * topo.pe.peak_macs_per_ns / 1000.0
    hbm_roof = float(topo.hbm.bw) * intensity_flop_per_byte / 1000.0
    return min(compute_roof, hbm_roof)
