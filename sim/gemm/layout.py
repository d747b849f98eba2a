"""A GEMM program's layout: mode, buffers, SRAM and HBM layout, op ids (closed forms), addresses.

Operands are stored pre-tiled in HBM (each tile contiguous, each matrix aligned to a full
channel stripe). DMA engine 0 streams A, engine 1 streams B, engine 2 writes C back.
"""

from __future__ import annotations

from sim.core import HBM, PE, Channels
from sim.gemm.buffers import Buffers, busiest_channel_ps, littles_depth
from sim.gemm.shape import VARIANTS, GemmShape, ShapeError, SramCapacityError, TilePlan
from sim.gemm.tile_op import tile_op_timing
from sim.hbm import align_up
from sim.topology import Topology
from sim.units import ps_for_bytes

__all__ = ["ENGINE_STREAMS", "MODES", "STAGES", "STREAMING", "ProgramLayout"]

#: every code path a program can take: the streaming variants, and resident's two modes
MODES = ("load_ref", "double_buffer", "prefetch", "whole", "panel")
STREAMING = ("load_ref", "double_buffer", "prefetch")
LEGACY = ("load_ref", "double_buffer")
OUTER_MAX_TILE_OPS = 1 << 15  # a panel row longer than this is not simulated twice
_POS_MEMO = 1 << 12  # op ids of positions kept (GemmProgram._pos), cleared when full
CHUNK_MIN = 32  # tile-ops per block at least, when an output tile is cut into chunks
STAGES = ("dma_in", "fetch", "gemm", "dma_out")
DMA_IN, FETCH, GEMM, DMA_OUT = range(4)
ENGINE_STREAMS = 3  # A loads, B loads, C stores
A_ENG, B_ENG, C_ENG = 0, 1, 2


class ProgramLayout:
    """Where every op and byte of one variant's program is, in closed form: its mode, its
    buffers and their SRAM, the op ids of every position and the HBM and SRAM addresses.

    Ids and addresses are arithmetic, so any block can be generated (``sim.gemm.blocks``)
    and any two blocks compared (``sim.gemm.program``) without their predecessors.
    """

    def __init__(
        self, shape: GemmShape, variant: str, topo: Topology, *, mode: str | None = None
    ) -> None:
        if variant not in VARIANTS:
            raise ShapeError(
                f"unknown GEMM variant {variant!r}; choose one of {', '.join(VARIANTS)}"
            )
        if topo.dma.engines < ENGINE_STREAMS:
            raise ShapeError(
                f"{topo.source}: key 'dma.engines' = {topo.dma.engines}: the GEMM kernels need "
                f"{ENGINE_STREAMS} DMA engines (A, B and C streams)"
            )
        self.shape, self.variant, self.topo = shape, variant, topo
        plan = self.plan = TilePlan.of(shape, topo)
        hbm = topo.hbm
        self.Mt, self.Kt, self.Nt = plan.Mt, plan.Kt, plan.Nt
        self.N = plan.tile_ops
        self.out_tiles = plan.out_tiles
        self.engines = (*(f"dma{e}" for e in range(topo.dma.engines)), "fetch", "pe")
        self.stages: tuple[str, ...] = STAGES
        self.channels = Channels(hbm.num_pcs, hbm.burst_ps)
        self.fetch_res, self.pe_res = topo.dma.engines, topo.dma.engines + 1
        self.stripe = hbm.num_pcs * hbm.burst_bytes
        # HBM layout: A tiles row-panel major, B tiles column-panel major, C tiles; each
        # matrix aligned to a channel stripe, so a panel is one contiguous transfer
        self.a_base = 0
        self.b_base = align_up(plan.Mt * plan.Kt * plan.a_bytes, self.stripe)
        self.c_base = align_up(self.b_base + plan.Kt * plan.Nt * plan.b_bytes, self.stripe)
        self.hbm_bytes = self.c_base + plan.out_tiles * plan.c_bytes
        self.setup, self.lat = topo.dma.setup_ps, hbm.latency_ps
        self.fetch_ps = ps_for_bytes(plan.a_bytes + plan.b_bytes, topo.fetch.bw)
        self.T, self.retire = tile_op_timing(topo)  # PE issue interval, issue-to-retire
        self.tile_macs = topo.pe.tile_macs
        self.slots = topo.pe.operand_slots
        self.RK = self.Nt * self.Kt  # tile-ops per row of output tiles
        self._chans: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        self.mode = mode or self._choose_mode()
        # a DMA out is issued D positions after its last tile-op (when it retires); the
        # contrast variants keep the issue point they always had (right after it)
        self.cout_delay = self._cout_delay(self.mode)
        if self.mode not in MODES:
            raise ShapeError(f"unknown GEMM mode {self.mode!r}; one of {', '.join(MODES)}")
        self.buffers = self._buffers(self.mode)
        need = self.sram_bytes()
        if need > topo.sram.capacity_bytes:
            raise SramCapacityError(
                f"GEMM {self.shape} {self.variant}: needs {need} bytes of SRAM for its buffers "
                f"({self.mode}: {self.buffers}), the topology has {topo.sram.capacity_bytes} "
                f"({topo.source}: sram.capacity_kib). "
                "Use a smaller K, another variant, or a larger SRAM."
            )
        self._panel = self.mode == "panel"
        # panel loads after the prologue: one per row / output tile but the first buffers' worth
        self._a_loads = max(0, self.Mt - self.buffers.a)
        self._b_loads = max(0, self.out_tiles - self.buffers.b)
        self.nbuf = self.buffers.a if self.mode in STREAMING else 0  # sets the op-id constants
        # SRAM layout: A buffers, B buffers, C buffers
        bu = self.buffers
        self.sa = 0
        self.sb = bu.a * self._a_unit()
        self.sc = self.sb + bu.b * self._b_unit()
        # how far (in blocks) a block's ops reach back and ahead: the signature caps
        kt = self.Kt
        back = -(-(self.nbuf + self.slots + self.cout_delay) // kt)
        self.cap_start = 3 + bu.c + back + (bu.b if self.mode == "panel" else 0)
        self.cap_end = 2 + -(-(self.nbuf + self.cout_delay) // kt)
        if self.mode == "panel":
            self.cap_end += bu.b
        self.cap_row = 1 + max(bu.b, bu.c, -(-self.slots // kt))
        # a deep K is cut into chunks of tile-ops, so that a long output tile can repeat
        # (and be extrapolated) within itself; a chunk reaches back at most one chunk
        reach = self.nbuf + self.slots + self.cout_delay + 2
        self.chunk = kt if kt <= CHUNK_MIN else max(CHUNK_MIN, reach)
        self.chunks = -(-kt // self.chunk)
        self.num_blocks = self.out_tiles * self.chunks
        # panel rows repeat (the fast path jumps whole rows after simulating about two)
        # when a row is short enough to simulate twice
        # (the first cap_start output tiles have signatures of their own: warm up past them)
        warm_rows = 3 + -(-self.cap_start // self.Nt)
        row_ok = self.mode == "panel" and self.Mt >= 2 * warm_rows and self.RK <= OUTER_MAX_TILE_OPS
        # likewise whole output tiles whose middle chunks repeat within the tile (a jump
        # inside every tile would hide the period of whole tiles), if the warm-up is short
        warm_tiles = 4 * (3 + self.cap_start)
        tile_ok = (
            self.chunks > 5
            and self.out_tiles > warm_tiles
            and warm_tiles * kt <= 4 * OUTER_MAX_TILE_OPS
        )
        self.outer_blocks, self.outer_until = 0, 0
        if row_ok:
            self.outer_blocks = self.Nt * self.chunks
            self.outer_until = self.outer_blocks * warm_rows
        elif tile_ok:
            self.outer_blocks, self.outer_until = self.chunks, self.chunks * warm_tiles

    @property
    def nbuf(self) -> int:
        """Tile loads in flight ahead of the fetch (streaming modes; 0 otherwise)."""
        return self._nbuf

    @nbuf.setter
    def nbuf(self, value: int) -> None:  # the op ids follow it (a test plants a smaller one)
        self._nbuf = value
        self._streamed = self.N - value  # tile-ops whose position issues two loads
        self._pos_memo: dict[int, int] = {}
        self._pro = self._prologue()

    # buffers and SRAM ---------------------------------------------------------------------
    def _a_unit(self) -> int:
        p = self.plan
        return {"whole": p.Mt * p.Kt * p.a_bytes, "panel": p.Kt * p.a_bytes}.get(
            self.mode, p.a_bytes
        )

    def _b_unit(self) -> int:
        p = self.plan
        return {"whole": p.Kt * p.Nt * p.b_bytes, "panel": p.Kt * p.b_bytes}.get(
            self.mode, p.b_bytes
        )

    def _cout_delay(self, mode: str) -> int:
        return 0 if mode in LEGACY else self.topo.pe.pipeline_stages

    def _c_depth(self, mode: str) -> int:
        """Output buffers: a C buffer is held from its first issue to its DMA out's release."""
        p = self.plan
        hold = (
            self.Kt * self.T + self.retire + self.setup + busiest_channel_ps(self.topo, p.c_bytes)
        )
        # and the first tile-op of j + c must come after the DMA out of j in program order
        order = 1 + -(-self._cout_delay(mode) // self.Kt)
        return max(order, littles_depth(hold, self.Kt * self.T))

    def _buffers(self, mode: str) -> Buffers:
        p, topo = self.plan, self.topo
        if mode == "load_ref":
            return Buffers(1, 1, 2)
        if mode == "double_buffer":
            return Buffers(2, 2, 2)
        cap = topo.sram.capacity_bytes
        nc = self._c_depth(mode)
        if mode == "prefetch":
            hold = (
                self.setup
                + busiest_channel_ps(topo, p.a_bytes + p.b_bytes)
                + self.lat
                + self.fetch_ps
            )
            depth = littles_depth(hold, self.T)
            room = (cap - nc * p.c_bytes) // (p.a_bytes + p.b_bytes)
            return Buffers(max(2, min(depth, room)), max(2, min(depth, room)), nc)
        if mode == "whole":
            return Buffers(1, 1, nc)
        # panel: A row panels are held for a row, B column panels for one output tile
        pa, pb = self.Kt * p.a_bytes, self.Kt * p.b_bytes
        row = self.Nt * self.Kt * self.T
        na = littles_depth(self.setup + busiest_channel_ps(topo, pa) + self.lat + row, row)
        tile = self.Kt * self.T
        nb = littles_depth(self.setup + busiest_channel_ps(topo, pb) + self.lat + tile, tile)
        while na * pa + nb * pb + nc * p.c_bytes > cap and (na > 2 or nb > 2):
            if nb >= na and nb > 2:
                nb -= 1
            else:
                na -= 1
        return Buffers(na, nb, nc)

    def sram_bytes(self, mode: str | None = None) -> int:
        """SRAM the program's buffers take (of ``mode``'s buffers if given)."""
        p = self.plan
        mode = mode or self.mode
        bu = self._buffers(mode) if mode != getattr(self, "mode", None) else self.buffers
        units = {
            "whole": (p.Mt * p.Kt * p.a_bytes, p.Kt * p.Nt * p.b_bytes),
            "panel": (p.Kt * p.a_bytes, p.Kt * p.b_bytes),
        }.get(mode, (p.a_bytes, p.b_bytes))
        return bu.a * units[0] + bu.b * units[1] + bu.c * p.c_bytes

    def _fits(self, mode: str) -> bool:
        p = self.plan
        if mode == "panel":  # at least two panels of each and two C tiles
            return (
                2 * self.Kt * (p.a_bytes + p.b_bytes) + 2 * p.c_bytes
                <= self.topo.sram.capacity_bytes
            )
        return self.sram_bytes(mode) <= self.topo.sram.capacity_bytes

    def _choose_mode(self) -> str:
        if self.variant != "resident":
            return self.variant
        for mode in ("whole", "panel"):
            if self._fits(mode):
                return mode
        return "prefetch"  # not even a panel pair fits: stream tiles, prefetched

    # op ids (closed forms, so any block can be generated without its predecessors) -------
    #
    # Program order is the issue order of a software-pipelined kernel, position by
    # position (tile-op t): ``[fetch t, gemm t, <loads whose buffer fetch t freed>,
    # <dma out of block j if t == last(j) + cout_delay>]``, after a prologue of the
    # first loads. Order matters for the HBM channels (each serves in program order),
    # so a DMA is placed where the kernel issues it in time. DMA outs past the last
    # position close the last block.
    def _prologue(self) -> int:
        if self.mode == "whole":
            return 2
        if self.mode == "panel":
            return min(self.buffers.a, self.Mt) + min(self.buffers.b, self.out_tiles)
        return 2 * min(self.nbuf, self.N)

    def _couts_before(self, t: int) -> int:
        """DMA outs emitted at positions < t (t <= N)."""
        return min(self.out_tiles, max(0, (t - self.cout_delay) // self.Kt))

    def _loads_before(self, t: int) -> int:
        """Loads emitted at positions < t, after the prologue."""
        if self.mode == "whole":
            return 0
        if self.mode == "panel":
            na, nb = self.buffers.a, self.buffers.b
            rows = min(max(0, t // self.RK), max(0, self.Mt - na))
            cols = min(max(0, t // self.Kt), max(0, self.out_tiles - nb))
            return rows + cols
        return 2 * max(0, min(t, self.N - self.nbuf))

    def _pos(self, t: int) -> int:
        """Id of position t's first op (its fetch); t == N gives the tail's first op."""
        known = self._pos_memo.get(t)  # neighbouring blocks ask for the same positions
        if known is None:
            if len(self._pos_memo) >= _POS_MEMO:
                self._pos_memo.clear()
            known = self._pos_memo[t] = self._position(t)
        return known

    def _position(self, t: int) -> int:
        couts = (t - self.cout_delay) // self.Kt  # _couts_before(t), inline (the hot path)
        couts = 0 if couts < 0 else self.out_tiles if couts > self.out_tiles else couts
        if self._nbuf:  # streaming: _loads_before(t) = 2 max(0, min(t, N - nbuf))
            loads = t if t < self._streamed else self._streamed
            return self._pro + 2 * t + (2 * loads if loads > 0 else 0) + couts
        if self._panel:  # _loads_before(t), inline: A row panels and B column panels issued
            rows, cols = t // self.RK, t // self.Kt
            rows = 0 if rows < 0 else rows if rows < self._a_loads else self._a_loads
            cols = 0 if cols < 0 else cols if cols < self._b_loads else self._b_loads
            return self._pro + 2 * t + rows + cols + couts
        return self._pro + 2 * t + self._loads_before(t) + couts

    def _a_point(self, t: int) -> bool:
        """Position t (last fetch of a row) emits the A panel of row r + buffers.a."""
        return (t + 1) % self.RK == 0 and (t + 1) // self.RK - 1 + self.buffers.a < self.Mt

    def _b_point(self, t: int) -> bool:
        return (t + 1) % self.Kt == 0 and (t + 1) // self.Kt - 1 + self.buffers.b < self.out_tiles

    def _loads_at(self, t: int) -> int:
        if self.mode == "whole":
            return 0
        if self.mode == "panel":
            return int(self._a_point(t)) + int(self._b_point(t))
        return 2 if t + self.nbuf < self.N else 0

    def span(self, b: int) -> tuple[int, int, int]:
        """Block b: its output tile j and its positions [p0, p1) (a chunk of j's tile-ops)."""
        j, c = divmod(b, self.chunks)
        p0 = j * self.Kt + c * self.chunk
        return j, p0, min(p0 + self.chunk, (j + 1) * self.Kt)

    def first_op(self, b: int) -> int:
        return 0 if b == 0 else self._pos(self.span(b)[1])

    def num_ops(self) -> int:
        return self._pos(self.N) + self.out_tiles - self._couts_before(self.N)

    def first_tile(self, b: int) -> int:
        return self.span(b)[1]

    def fetch_id(self, i: int) -> int:
        return self._pos(i)

    def gemm_id(self, i: int) -> int:
        return self._pos(i) + 1

    def load_ids(self, i: int) -> tuple[int, int]:
        """Ids of the A and B loads of tile-op i (streaming modes)."""
        if i < self.nbuf:
            return 2 * i, 2 * i + 1
        at = self._pos(i - self.nbuf) + 2
        return at, at + 1

    def cout_id(self, j: int) -> int:
        t = (j + 1) * self.Kt - 1 + self.cout_delay
        if t < self.N:
            return self._pos(t) + 2 + self._loads_at(t)
        return self._pos(self.N) + j - self._couts_before(self.N)

    def a_panel_id(self, r: int) -> int:
        na, nb = self.buffers.a, self.buffers.b
        if r < na:
            return 0 if r == 0 else 1 + min(nb, self.out_tiles) + r - 1
        return self._pos((r - na + 1) * self.RK - 1) + 2

    def b_panel_id(self, q: int) -> int:
        nb = self.buffers.b
        if q < nb:
            return 1 + q
        t = (q - nb + 1) * self.Kt - 1
        return self._pos(t) + 2 + int(self._a_point(t))

    # addresses ----------------------------------------------------------------------------
    def a_addr(self, mi: int, ki: int) -> int:
        """HBM address of A tile (mi, ki); a row panel is contiguous."""
        return self.a_base + (mi * self.Kt + ki) * self.plan.a_bytes

    def b_addr(self, ki: int, ni: int) -> int:
        """HBM address of B tile (ki, ni); a column panel is contiguous."""
        return self.b_base + (ni * self.Kt + ki) * self.plan.b_bytes

    def c_addr(self, j: int) -> int:
        return self.c_base + j * self.plan.c_bytes

    def sram_a(self, i: int) -> int:
        """SRAM address of the A tile tile-op i reads."""
        b, ki = divmod(i, self.Kt)
        mi = b // self.Nt
        if self.mode == "whole":
            return self.sa + (mi * self.Kt + ki) * self.plan.a_bytes
        if self.mode == "panel":
            return self.sa + (mi % self.buffers.a) * self._a_unit() + ki * self.plan.a_bytes
        return self.sa + (i % self.buffers.a) * self.plan.a_bytes

    def sram_b(self, i: int) -> int:
        b, ki = divmod(i, self.Kt)
        ni = b % self.Nt
        if self.mode == "whole":
            return self.sb + (ni * self.Kt + ki) * self.plan.b_bytes
        if self.mode == "panel":
            return self.sb + (b % self.buffers.b) * self._b_unit() + ki * self.plan.b_bytes
        return self.sb + (i % self.buffers.b) * self.plan.b_bytes

    def sram_c(self, j: int) -> int:
        return self.sc + (j % self.buffers.c) * self.plan.c_bytes

    def buffer_name(self, space: int, addr: int) -> str:
        """What lives at ``addr`` of ``space`` (for the data checker's messages)."""
        p = self.plan
        if space == HBM:
            if addr < self.b_base:
                return "A in HBM"
            if addr < self.c_base:
                return "B in HBM"
            return f"C tile {(addr - self.c_base) // p.c_bytes} in HBM"
        if space == PE:
            return f"PE operand slot {addr // (p.a_bytes + p.b_bytes)}"
        if addr < self.sb:
            return f"A buffer {(addr - self.sa) // self._a_unit()}"
        if addr < self.sc:
            return f"B buffer {(addr - self.sb) // self._b_unit()}"
        return f"C buffer {(addr - self.sc) // p.c_bytes}"
