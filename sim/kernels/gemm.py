"""GEMM ``C[M,N] = A[M,K] @ B[K,N]``: tile plan, the three operand-staging programs, checks.

The tile plan walks (mi, ni, ki) output-stationary with ki innermost; partial tiles are
padded, so every tile-op moves and computes a full ``m x k x n`` tile. Operands are stored
pre-tiled in HBM (each tile contiguous, each matrix aligned to a full channel stripe).

DMA engine 0 streams A, engine 1 streams B, engine 2 writes C back. Programs, one block
per output tile (i = tile-op, j = output tile, Kt tile-ops per output tile):

* ``load_ref``: per tile-op, load A and B tiles into one buffer each; load i waits for
  fetch i-1 (the buffer is free once fetched). The reference.
* ``double_buffer``: two buffers per operand; load i waits for fetch i-2.
* ``resident``: when A, B and two C tiles fit in SRAM, stage A and B whole first (one
  transfer each); otherwise keep a row panel of A resident (two panel buffers: the panel
  of row r+1 loads during row r) and stream B tiles double-buffered.

Every tile-op: fetch (SRAM -> PE, both tiles) after its loads; GEMM issue after its fetch.
Output tile j is written by a DMA out after its last tile-op retires; two C buffers, so
the first tile-op of j waits for the DMA out of j-2. The DMA out of j is placed in program
order after the loads that the kernel issues before it in time (the next ``nbuf``
tile-ops'), so in-order queues do not stall prefetches behind it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.core import (
    COPY,
    DMA,
    FETCH_COPY,
    HBM,
    MAC,
    PE,
    PIPE,
    SERVE,
    SRAM,
    Access,
    Channels,
    Op,
    simulate,
)
from sim.errors import InputError
from sim.hbm import align_up, transfer_channels
from sim.limits import check_gemm, check_gemm_blocks, shape_dims, whole_number
from sim.oplog import OpLog, copies
from sim.pe import tile_op_timing
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "ENGINE_STREAMS",
    "MODES",
    "STAGES",
    "VARIANTS",
    "Buffers",
    "GemmProgram",
    "GemmRun",
    "GemmShape",
    "ShapeError",
    "SramCapacityError",
    "TilePlan",
    "check_coverage",
    "functional_check",
    "littles_depth",
    "run_gemm",
]

Variant = Literal["load_ref", "double_buffer", "prefetch", "resident"]
VARIANTS: tuple[Variant, ...] = ("load_ref", "double_buffer", "prefetch", "resident")
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


class ShapeError(InputError):
    """An impossible GEMM shape or variant."""


class SramCapacityError(InputError):
    """A variant's buffers do not fit in SRAM."""


@dataclass(frozen=True)
class GemmShape:
    M: int
    K: int
    N: int

    def __post_init__(self) -> None:
        for name in ("M", "K", "N"):  # numpy integers become ints; bools, floats are refused
            dim = whole_number(
                getattr(self, name), f"GEMM dimension {name}", minimum=1, error=ShapeError
            )
            object.__setattr__(self, name, dim)

    @classmethod
    def parse(cls, text: str) -> GemmShape:
        """``"512x512x512"`` (M x K x N) -> GemmShape."""
        return cls(*shape_dims(text, ShapeError))

    def __str__(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N


@dataclass(frozen=True)
class TilePlan:
    """The padded tile grid of one shape on one topology."""

    shape: GemmShape
    m: int
    k: int
    n: int
    bpe: int

    @classmethod
    def of(cls, shape: GemmShape, topo: Topology) -> TilePlan:
        return cls(shape, topo.pe.tile_m, topo.pe.tile_k, topo.pe.tile_n, topo.bpe)

    @cached_property
    def Mt(self) -> int:
        return -(-self.shape.M // self.m)

    @cached_property
    def Kt(self) -> int:
        return -(-self.shape.K // self.k)

    @cached_property
    def Nt(self) -> int:
        return -(-self.shape.N // self.n)

    @cached_property
    def tile_ops(self) -> int:
        return self.Mt * self.Nt * self.Kt

    @cached_property
    def out_tiles(self) -> int:
        return self.Mt * self.Nt

    @cached_property
    def a_bytes(self) -> int:
        return self.m * self.k * self.bpe

    @cached_property
    def b_bytes(self) -> int:
        return self.k * self.n * self.bpe

    @cached_property
    def c_bytes(self) -> int:
        return self.m * self.n * self.bpe

    @cached_property
    def padded_macs(self) -> int:
        return self.tile_ops * self.m * self.k * self.n

    @property
    def under_tile(self) -> bool:
        s = self.shape
        return s.M < self.m or s.K < self.k or s.N < self.n

    def coords(self, i: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
        """(mi, ni, ki) of tile-op indices ``i`` (ki innermost, then ni, then mi)."""
        return i // (self.Nt * self.Kt), (i // self.Kt) % self.Nt, i % self.Kt


# --- the programs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Buffers:
    """How many SRAM buffers a program holds per operand and for C (docs/adr/0006).

    ``a`` and ``b`` count tile buffers (streaming modes), row/column panel buffers
    (``panel``) or 1 (``whole``: the operand staged entire); ``c`` counts output tiles.
    """

    a: int
    b: int
    c: int


def littles_depth(hold_ps: int, interval_ps: int) -> int:
    """Buffers needed to keep one consumer per ``interval_ps`` fed when each is held ``hold_ps``.

    Little's law: items in flight = arrival rate x time in the system, so
    ``ceil(hold / interval)`` buffers sustain the rate; one more absorbs the jitter of
    contention (a buffer is refilled only after its consumer has released it).
    """
    return -(-hold_ps // interval_ps) + 1


def _busiest_channel_ps(topo: Topology, nbytes: int) -> int:
    """Time the busiest pseudo-channel needs for one transfer of ``nbytes`` (aligned start)."""
    hbm = topo.hbm
    bursts = -(-nbytes // hbm.burst_bytes)
    return -(-bursts // hbm.num_pcs) * hbm.burst_ps


class GemmProgram:
    """One variant's program for one shape, generated block by block (one output tile each).

    Program order per block ``b`` = (mi, ni), by mode (ids are arithmetic, so any block can
    be generated without its predecessors):

    * streaming (``load_ref``, ``double_buffer``, ``prefetch``): per tile-op
      ``[load A, load B, fetch, gemm]``, then ``dma out``. Load i waits for the fetch that
      last read its buffer (tile-op ``i - buffers.a``).
    * ``whole``: block 0 opens with the two staging loads; per tile-op ``[fetch, gemm]``.
    * ``panel``: ``[load A row panel mi]`` (first block of a row), ``[load B column panel]``,
      per tile-op ``[fetch, gemm]``, then ``dma out``.

    The first tile-op of block b waits for the *release* of the DMA out of block
    ``b - buffers.c`` (its C buffer). Program order across engines does not delay
    anything (each engine is in order; ops start when their dependencies allow), so a
    load placed just before its fetch still runs as far ahead as its buffers let it.
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
            self.Kt * self.T + self.retire + self.setup + _busiest_channel_ps(self.topo, p.c_bytes)
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
                + _busiest_channel_ps(topo, p.a_bytes + p.b_bytes)
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
        na = littles_depth(self.setup + _busiest_channel_ps(topo, pa) + self.lat + row, row)
        tile = self.Kt * self.T
        nb = littles_depth(self.setup + _busiest_channel_ps(topo, pb) + self.lat + tile, tile)
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

    # ops ----------------------------------------------------------------------------------
    def _dma(
        self, eng: int, deps: tuple[int, ...], stage: int, addr: int, nbytes: int, tile: int
    ) -> Op:
        key = (addr % self.stripe, nbytes)
        chans = self._chans.get(key)
        if chans is None:
            chans = self._chans[key] = transfer_channels(self.topo.hbm, addr, nbytes)
        return tuple.__new__(
            Op, (DMA, eng, deps, stage, nbytes, 0, tile, self.setup, self.lat, chans)
        )

    def load_deps(self, i: int, freed_by: int) -> tuple[int, ...]:
        """A streamed load of tile-op i waits for its buffer: the fetch ``freed_by`` (of
        tile-op i - buffers) that read it last; -1 for a buffer never used."""
        return (freed_by,) if freed_by >= 0 else ()

    def out_bytes(self, j: int) -> int:
        """Bytes the DMA out of output tile j writes back."""
        return self.plan.c_bytes

    def a_panel_bytes(self, r: int) -> int:
        return self.Kt * self.plan.a_bytes

    # blocks -------------------------------------------------------------------------------
    def block_ops(self, b: int) -> list[Op]:
        ops: list[Op] = []
        self._block(b, ops, None)
        return ops

    def block_access(self, b: int) -> list[Access]:
        """What each op of block b moves, aligned with :meth:`block_ops` (for the checker)."""
        ops: list[Op] = []
        acc: list[Access] = []
        self._block(b, ops, acc)
        return acc

    def build_block(self, b: int, ops: list[Op], acc: list[Access]) -> None:
        """Append block b's ops and their accesses (one pass, aligned by construction)."""
        self._block(b, ops, acc)

    def _copy(self, acc: list[Access] | None, src: int, dst: int, nbytes: int) -> None:
        if acc is not None:
            acc.append(Access(COPY, ((HBM, src, nbytes),), ((SRAM, dst, nbytes),)))

    def _load_tile(self, ops: list[Op], acc: list[Access] | None, i: int, freed_by: int) -> None:
        p, kt = self.plan, self.Kt
        b, ki = divmod(i, kt)
        mi, ni = divmod(b, self.Nt)
        deps = self.load_deps(i, freed_by)
        a_bytes, b_bytes = p.a_bytes, p.b_bytes
        a = self.a_base + (mi * kt + ki) * a_bytes  # a_addr(mi, ki), b_addr(ki, ni) inline
        bb = self.b_base + (ni * kt + ki) * b_bytes
        ops.append(self._dma(A_ENG, deps, DMA_IN, a, a_bytes, i))
        ops.append(self._dma(B_ENG, deps, DMA_IN, bb, b_bytes, i))
        if acc is not None:
            self._copy(acc, a, self.sram_a(i), a_bytes)
            self._copy(acc, bb, self.sram_b(i), b_bytes)

    def _load_a_panel(self, ops: list[Op], acc: list[Access] | None, r: int) -> None:
        q = r - self.buffers.a  # the row that last used this panel buffer
        deps = (self.fetch_id((q + 1) * self.RK - 1),) if q >= 0 else ()
        addr, nbytes = self.a_addr(r, 0), self.a_panel_bytes(r)
        ops.append(self._dma(A_ENG, deps, DMA_IN, addr, nbytes, -1))
        self._copy(acc, addr, self.sram_a(r * self.RK), nbytes)

    def _load_b_panel(self, ops: list[Op], acc: list[Access] | None, q: int) -> None:
        j = q - self.buffers.b  # the output tile that last used this panel buffer
        deps = (self.fetch_id((j + 1) * self.Kt - 1),) if j >= 0 else ()
        addr, nbytes = self.b_addr(0, q % self.Nt), self.Kt * self.plan.b_bytes
        ops.append(self._dma(B_ENG, deps, DMA_IN, addr, nbytes, -1))
        self._copy(acc, addr, self.sram_b(q * self.Kt), nbytes)

    def _dma_out(self, ops: list[Op], acc: list[Access] | None, j: int) -> None:
        gl = self.gemm_id(j * self.Kt + self.Kt - 1)
        nbytes = self.out_bytes(j)
        ops.append(self._dma(C_ENG, (gl,), DMA_OUT, self.c_addr(j), nbytes, -1))
        if acc is not None:
            acc.append(
                Access(COPY, ((SRAM, self.sram_c(j), nbytes),), ((HBM, self.c_addr(j), nbytes),))
            )

    def _block(self, b: int, ops: list[Op], acc: list[Access] | None) -> None:
        p, Kt, mode, bu = self.plan, self.Kt, self.mode, self.buffers
        j_out, i0, i1 = self.span(b)
        mi = j_out // self.Nt
        base = self.first_op(b) - len(ops)  # op id = base + index in ops
        if b == 0:
            if mode == "whole":
                a_total, b_total = p.Mt * Kt * p.a_bytes, Kt * self.Nt * p.b_bytes
                ops.append(self._dma(A_ENG, (), DMA_IN, self.a_base, a_total, -1))
                self._copy(acc, self.a_base, self.sa, a_total)
                ops.append(self._dma(B_ENG, (), DMA_IN, self.b_base, b_total, -1))
                self._copy(acc, self.b_base, self.sb, b_total)
            elif mode == "panel":
                self._load_a_panel(ops, acc, 0)
                for q in range(min(bu.b, self.out_tiles)):
                    self._load_b_panel(ops, acc, q)
                for r in range(1, min(bu.a, self.Mt)):
                    self._load_a_panel(ops, acc, r)
            else:
                for i in range(min(self.nbuf, self.N)):
                    self._load_tile(ops, acc, i, -1)
        if mode == "panel":
            src: tuple[int, ...] = (self.a_panel_id(mi), self.b_panel_id(j_out))
        elif mode == "whole":
            src = (0, 1)
        fetch_bytes = p.a_bytes + p.b_bytes
        c_dep = (~self.cout_id(j_out - bu.c),) if j_out >= bu.c else ()
        c_range = (SRAM, self.sram_c(j_out), p.c_bytes)
        k0 = j_out * Kt
        loads_here: dict[int, int] = {}  # tile-op -> id of its A load, emitted in this block
        gemms_here: list[int] = []
        # the hot loop: attributes read once, ops built as plain tuples of the Op type
        streaming, panel = mode in STREAMING, mode == "panel"
        slots, nbuf, n_ops, delay = self.slots, self.nbuf, self.N, self.cout_delay
        fetch_res, fetch_ps, pe_res = self.fetch_res, self.fetch_ps, self.pe_res
        macs, issue, retire = self.tile_macs, self.T, self.retire
        append, new = ops.append, tuple.__new__
        for t in range(i0, i1):
            ki = t - k0
            if streaming:
                at = loads_here.get(t)
                src = (at, at + 1) if at is not None else self.load_ids(t)
            j = t - slots
            fid = base + len(ops)
            if j >= i0:
                slot: tuple[int, ...] = (gemms_here[j - i0],)
            else:
                slot = (self.gemm_id(j),) if j >= 0 else ()
            append(
                new(Op, (SERVE, fetch_res, src + slot, FETCH, fetch_bytes, 0, t, fetch_ps, 0, ()))
            )
            gdeps = (fid, *c_dep) if ki == 0 else (fid,)
            append(new(Op, (PIPE, pe_res, gdeps, GEMM, 0, macs, t, issue, retire, ())))
            gemms_here.append(fid + 1)
            if acc is not None:
                pe = (PE, (t % slots) * fetch_bytes, fetch_bytes)
                reads = ((SRAM, self.sram_a(t), p.a_bytes), (SRAM, self.sram_b(t), p.b_bytes))
                acc.append(Access(FETCH_COPY, reads, (pe,)))
                acc.append(Access(MAC, (pe, c_range) if ki else (pe,), (c_range,), chain=j_out))
            if streaming:
                if t + nbuf < n_ops:
                    loads_here[t + nbuf] = base + len(ops)
                    self._load_tile(ops, acc, t + nbuf, fid)
            elif panel:
                if self._a_point(t):
                    self._load_a_panel(ops, acc, (t + 1) // self.RK - 1 + bu.a)
                if self._b_point(t):
                    self._load_b_panel(ops, acc, (t + 1) // Kt - 1 + bu.b)
            jc = t - delay + 1
            if jc > 0 and jc % Kt == 0:
                self._dma_out(ops, acc, jc // Kt - 1)
        if b == self.num_blocks - 1:
            for j in range(self._couts_before(self.N), self.out_tiles):
                self._dma_out(ops, acc, j)

    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        """Ops before block b that later blocks depend on, with the consumers' resources."""
        live: dict[int, tuple[int, ...]] = {}
        if b == 0:
            return live
        first = self.first_op(b)
        jcur, i0, _ = self.span(b)
        jn = -(-i0 // self.Kt)  # the first output tile that starts at or after i0
        mi = jcur // self.Nt
        bu = self.buffers
        for i in range(max(0, i0 - self.slots), i0):  # PE operand slots
            live[self.gemm_id(i)] = (self.fetch_res,)
        for j in range(max(0, jn - bu.c), jn):  # C buffers, freed at their DMA out's release
            if self.cout_id(j) < first:
                live[~self.cout_id(j)] = (self.pe_res,)
        back = 2 + -(-self.cout_delay // self.Kt)
        for j in range(max(0, jcur - back), min(self.out_tiles, jn + 1)):  # outs to come
            last = self.gemm_id((j + 1) * self.Kt - 1)
            if last < first <= self.cout_id(j):
                live[last] = (C_ENG,)
        if self.mode == "whole":
            live[0] = live[1] = (self.fetch_res,)
        elif self.mode == "panel":
            for r in range(mi, min(self.Mt, mi + bu.a)):
                if self.a_panel_id(r) < first:
                    live[self.a_panel_id(r)] = (self.fetch_res,)
            for q in range(jcur, min(self.out_tiles, jcur + bu.b)):
                if self.b_panel_id(q) < first:
                    live[self.b_panel_id(q)] = (self.fetch_res,)
        else:
            for i in range(i0, min(self.N, i0 + self.nbuf)):  # loads issued ahead
                for d in self.load_ids(i):
                    if d < first:
                        live[d] = (self.fetch_res,)
        return live

    def resources(self, b: int) -> tuple[int, ...]:
        i0 = self.span(b)[1]
        if self.mode == "whole":
            loads = b == 0
        elif self.mode == "panel":
            last_b = (self.out_tiles - self.buffers.b) * self.Kt - 1
            last_a = (self.Mt - self.buffers.a) * self.RK - 1
            if b == 0 or (i0 <= last_a and i0 <= last_b):
                return (A_ENG, B_ENG, C_ENG, self.fetch_res, self.pe_res)
            if i0 <= last_b:
                return (B_ENG, C_ENG, self.fetch_res, self.pe_res)
            if i0 <= last_a:
                return (A_ENG, C_ENG, self.fetch_res, self.pe_res)
            loads = False
        else:
            loads = b == 0 or i0 < self.N - self.nbuf
        if loads:
            return (A_ENG, B_ENG, C_ENG, self.fetch_res, self.pe_res)
        return (C_ENG, self.fetch_res, self.pe_res)

    def floor_resources(self, b: int) -> tuple[int, ...]:
        """Every DMA depends on a fetch or a tile-op (or a live one it consumes)."""
        return (self.fetch_res, self.pe_res)

    def unique_block(self, b: int) -> bool:
        """No other block has block b's signature: its output tile is among the first
        ``cap_start`` or the last ``cap_end`` (the first two signature components are
        then its own) and its chunk among the first or last two of the tile."""
        j, c = divmod(b, self.chunks)
        return (j < self.cap_start or self.out_tiles - 1 - j < self.cap_end) and (
            c < 2 or self.chunks - 1 - c < 2
        )

    def block_sig_array(self, b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """:meth:`block_sig` of many blocks at once, one row each (the same components, as
        integers), so the fast path can find how far a period repeats without a Python
        call per block."""
        if self.chunks == 1:  # one block per output tile: no chunk components to compute
            j, c, p0 = b, np.zeros_like(b), b * self.Kt
        else:
            j, c = np.divmod(b, self.chunks)
            p0 = j * self.Kt + c * self.chunk
        mi, ni = np.divmod(j, self.Nt)
        s, kt, pl = self.stripe, self.Kt, self.plan
        extra = 5 if self.mode == "panel" else 2 if self.mode in STREAMING else 0
        out = np.empty((len(b), 8 + extra), np.int64)
        np.minimum(j, self.cap_start, out=out[:, 0])
        np.minimum(self.out_tiles - 1 - j, self.cap_end, out=out[:, 1])
        if self.chunks == 1:
            out[:, 2] = 0
            out[:, 3] = 0
            out[:, 4] = kt
            ki0 = c
        else:
            np.minimum(c, 2, out=out[:, 2])
            np.minimum(self.chunks - 1 - c, 2, out=out[:, 3])
            out[:, 4] = np.minimum(p0 + self.chunk, (j + 1) * kt) - p0
            ki0 = p0 - j * kt
        out[:, 5] = (self.a_base + (mi * kt + ki0) * pl.a_bytes) % s
        out[:, 6] = (self.b_base + (ni * kt + ki0) * pl.b_bytes) % s
        out[:, 7] = (self.c_base + j * pl.c_bytes) % s
        if self.mode == "panel":
            ahead = (j + self.buffers.b) % self.Nt
            row = np.minimum(self.Mt - 1, mi + self.buffers.a)
            np.minimum(ni, self.cap_row, out=out[:, 8])
            out[:, 9] = ni == self.Nt - 1
            np.minimum(self.Mt - 1 - mi, self.buffers.a + 1, out=out[:, 10])
            out[:, 11] = (self.b_base + ahead * kt * pl.b_bytes) % s
            out[:, 12] = (self.a_base + row * kt * pl.a_bytes) % s
        elif self.mode in STREAMING:
            ahead = j + -(-self.nbuf // self.Kt)
            ahead_mi, ahead_ni = np.divmod(ahead, self.Nt)
            out[:, 8] = (self.a_base + ahead_mi * kt * pl.a_bytes) % s
            out[:, 9] = (self.b_base + ahead_ni * kt * pl.b_bytes) % s
        return out

    def block_sig(self, b: int) -> Hashable:
        j, p0, p1 = self.span(b)
        c = (p0 - j * self.Kt) // self.chunk
        mi, ni = divmod(j, self.Nt)
        ki0 = p0 - j * self.Kt
        s = self.stripe
        sig: tuple[object, ...] = (
            min(j, self.cap_start),
            min(self.out_tiles - 1 - j, self.cap_end),
            min(c, 2),
            min(self.chunks - 1 - c, 2),
            p1 - p0,
            self.a_addr(mi, ki0) % s,
            self.b_addr(ki0, ni) % s,
            self.c_addr(j) % s,
        )
        if self.mode == "panel":
            ahead = (j + self.buffers.b) % self.Nt
            sig += (
                min(ni, self.cap_row),
                ni == self.Nt - 1,
                min(self.Mt - 1 - mi, self.buffers.a + 1),
                self.b_addr(0, ahead) % s,
                self.a_addr(min(self.Mt - 1, mi + self.buffers.a), 0) % s,
            )
        elif self.mode in STREAMING:
            ahead = j + -(-self.nbuf // self.Kt)
            sig += (self.a_addr(ahead // self.Nt, 0) % s, self.b_addr(0, ahead % self.Nt) % s)
        return sig


# --- running and checking -----------------------------------------------------------------


@dataclass(frozen=True)
class GemmRun:
    program: GemmProgram
    log: OpLog

    @property
    def latency_ps(self) -> int:
        return self.log.makespan_ps


def run_gemm(
    shape: GemmShape | str | tuple[int, int, int],
    variant: str,
    topo: Topology,
    *,
    extrapolate: bool = True,
) -> GemmRun:
    """Simulate one GEMM; the op log is exact and deterministic."""
    if not isinstance(shape, GemmShape):
        shape = GemmShape(*shape_dims(shape, ShapeError))
    check_gemm(shape.M, shape.K, shape.N, topo, extrapolate=extrapolate)  # budgets, sim.limits
    program = GemmProgram(shape, variant, topo)
    if extrapolate:  # one by one, the ops budget of check_gemm applies instead
        check_gemm_blocks(shape.M, shape.K, shape.N, program.num_blocks)
    return GemmRun(program, simulate(program, extrapolate=extrapolate))


def check_coverage(run: GemmRun) -> None:
    """Every (mi, ni, ki) of the padded grid is computed by exactly one GEMM record.

    On a compressed log a period whose GEMM records compute ``tiles_shift`` consecutive
    tile-ops covers a contiguous range with its copies, checked without expanding them.
    """
    log, plan = run.log, run.program.plan
    stored = log.stored
    gemm = stored["stage"] == GEMM
    explicit: list[npt.NDArray[np.int64]] = []
    ranges: list[tuple[int, int]] = []
    pos = 0
    for r in log.repeats:
        explicit.append(stored["tile"][pos : r.hi][gemm[pos : r.hi]])
        src = np.sort(stored["tile"][r.lo : r.hi][gemm[r.lo : r.hi]])
        step = r.tiles_shift
        if len(src) == step and (step == 0 or np.array_equal(src, src[0] + np.arange(step))):
            if step:
                ranges.append((int(src[0]) + step, int(src[0]) + step * (r.n + 1)))
        else:  # not a contiguous run: its copies, written out
            explicit.append(copies("tile", src, r, 1, r.n))
        pos = r.hi
    explicit.append(stored["tile"][pos:][gemm[pos:]])
    tiles = np.sort(np.concatenate(explicit))
    ranges.sort()
    los = np.array([lo for lo, _ in ranges], np.int64)
    his = np.array([hi for _, hi in ranges], np.int64)
    inside = np.searchsorted(los, tiles, side="right") - 1
    in_range = (inside >= 0) & (tiles < his[np.maximum(inside, 0)]) if len(ranges) else False
    count = len(tiles) + int((his - los).sum())
    once = (
        count == plan.tile_ops
        and (not len(tiles) or (tiles[0] >= 0 and tiles[-1] < plan.tile_ops))
        and bool(np.all(np.diff(tiles) > 0))
        and (not ranges or (los[0] >= 0 and his[-1] <= plan.tile_ops))
        and bool(np.all(los[1:] >= his[:-1]))
        and not bool(np.any(in_range))
    )
    if not once:  # N records, distinct, each in [0, N): each tile-op exactly once
        raise AssertionError(
            f"GEMM {plan.shape}: {count} tile-op records for {plan.tile_ops} tile-ops "
            "(some (mi, ni, ki) missing or computed twice)"
        )
    mi, ni, ki = plan.coords(np.arange(plan.tile_ops, dtype=np.int64))
    flat = (mi * plan.Nt + ni) * plan.Kt + ki
    if not np.array_equal(flat, np.arange(plan.tile_ops)):
        raise AssertionError(f"GEMM {plan.shape}: tile coordinates do not cover the grid once")


def functional_check(
    run: GemmRun, rng: np.random.Generator | None = None, batch: int = 4096
) -> tuple[int, int]:
    """Execute the plan's tile-ops, in simulated issue order, on integer-valued data.

    Returns ``(wrong, total)`` elements of C against ``A @ B``; exact equality is
    expected because small integers in float64 sum exactly.
    """
    log, plan = run.log, run.program.plan
    rng = rng or np.random.default_rng(0)
    s = plan.shape
    a = rng.integers(-4, 5, size=(s.M, s.K)).astype(np.float64)
    b = rng.integers(-4, 5, size=(s.K, s.N)).astype(np.float64)
    m, k, n = plan.m, plan.k, plan.n
    ap = np.zeros((plan.Mt * m, plan.Kt * k))
    bp = np.zeros((plan.Kt * k, plan.Nt * n))
    ap[: s.M, : s.K], bp[: s.K, : s.N] = a, b
    at = ap.reshape(plan.Mt, m, plan.Kt, k).transpose(0, 2, 1, 3)  # [mi, ki] -> m x k
    bt = bp.reshape(plan.Kt, k, plan.Nt, n).transpose(0, 2, 1, 3)  # [ki, ni] -> k x n
    ct = np.zeros((plan.Mt, plan.Nt, m, n))
    gemm = log.stage == GEMM
    order = log.tile[gemm][np.argsort(log.start[gemm], kind="stable")]
    for lo in range(0, len(order), batch):
        mi, ni, ki = plan.coords(order[lo : lo + batch])
        np.add.at(ct, (mi, ni), np.matmul(at[mi, ki], bt[ki, ni]))
    c = ct.transpose(0, 2, 1, 3).reshape(plan.Mt * m, plan.Nt * n)[: s.M, : s.N]
    wrong = int(np.count_nonzero(c != a @ b))
    return wrong, c.size
