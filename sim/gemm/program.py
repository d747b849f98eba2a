"""The GEMM program the engine runs: one variant, one shape, generated block by block.

Programs, one block per output tile (i = tile-op, j = output tile, Kt tile-ops per output
tile):

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

import numpy as np
import numpy.typing as npt

from sim.gemm.blocks import BlockBuilder
from sim.gemm.layout import A_ENG, B_ENG, C_ENG, STREAMING

__all__ = ["GemmProgram"]


class GemmProgram(BlockBuilder):
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


    The program is built in three layers: its layout (``sim.gemm.layout``: ids, addresses),
    its blocks (``sim.gemm.blocks``) and, here, what the engine's fast path needs to find
    and repeat a period: the ops a block depends on, its resources and its signature.
    """

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
