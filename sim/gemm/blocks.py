"""A GEMM program's blocks: the ops of one block, and the bytes each op moves (for the checker)."""

from __future__ import annotations

from sim.core import COPY, DMA, FETCH_COPY, HBM, MAC, PE, PIPE, SERVE, SRAM, Access, Op
from sim.gemm.layout import (
    A_ENG,
    B_ENG,
    C_ENG,
    DMA_IN,
    DMA_OUT,
    FETCH,
    GEMM,
    STREAMING,
    ProgramLayout,
)
from sim.hbm import transfer_channels

__all__ = ["BlockBuilder"]


class BlockBuilder(ProgramLayout):
    """The ops of one block (one output tile, or a chunk of its tile-ops) and what each
    moves, built from the layout's ids and addresses."""

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
