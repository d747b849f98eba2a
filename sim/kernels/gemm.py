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

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.core import DMA, PIPE, SERVE, Channels, Op, simulate
from sim.errors import InputError
from sim.hbm import align_up, transfer_channels
from sim.limits import check_gemm, shape_dims, whole_number
from sim.oplog import OpLog
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "ENGINE_STREAMS",
    "STAGES",
    "VARIANTS",
    "GemmProgram",
    "GemmRun",
    "GemmShape",
    "ShapeError",
    "SramCapacityError",
    "TilePlan",
    "check_coverage",
    "functional_check",
    "run_gemm",
]

Variant = Literal["load_ref", "double_buffer", "resident"]
VARIANTS: tuple[Variant, ...] = ("load_ref", "double_buffer", "resident")
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

    @property
    def Mt(self) -> int:
        return -(-self.shape.M // self.m)

    @property
    def Kt(self) -> int:
        return -(-self.shape.K // self.k)

    @property
    def Nt(self) -> int:
        return -(-self.shape.N // self.n)

    @property
    def tile_ops(self) -> int:
        return self.Mt * self.Nt * self.Kt

    @property
    def out_tiles(self) -> int:
        return self.Mt * self.Nt

    @property
    def a_bytes(self) -> int:
        return self.m * self.k * self.bpe

    @property
    def b_bytes(self) -> int:
        return self.k * self.n * self.bpe

    @property
    def c_bytes(self) -> int:
        return self.m * self.n * self.bpe

    @property
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


class GemmProgram:
    """One variant's program for one shape, generated block by block (one output tile each)."""

    def __init__(self, shape: GemmShape, variant: str, topo: Topology) -> None:
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
        self.num_blocks = plan.out_tiles
        self.engines = (*(f"dma{e}" for e in range(topo.dma.engines)), "fetch", "pe")
        self.stages: tuple[str, ...] = STAGES
        self.channels = Channels(hbm.num_pcs, hbm.burst_ps)
        self.fetch_res, self.pe_res = topo.dma.engines, topo.dma.engines + 1
        self.stripe = hbm.num_pcs * hbm.burst_bytes
        self.a_base = 0
        self.b_base = align_up(plan.Mt * plan.Kt * plan.a_bytes, self.stripe)
        self.c_base = align_up(self.b_base + plan.Kt * plan.Nt * plan.b_bytes, self.stripe)
        self.setup, self.lat = topo.dma.setup_ps, hbm.latency_ps
        self.fetch_ps = ps_for_bytes(plan.a_bytes + plan.b_bytes, topo.fetch.bw)
        self.T = topo.pe.stage_ps
        self.retire = topo.pe.pipeline_stages * self.T
        self.tile_macs = topo.pe.tile_macs
        self.slots = topo.pe.operand_slots
        self.mode = self._choose_mode()
        self.nbuf = {"load_ref": 1, "double_buffer": 2, "panel": 2, "whole": 0}[self.mode]
        self.RK = self.Nt * self.Kt  # tile-ops per row of output tiles

    # SRAM accounting ------------------------------------------------------------------
    def sram_bytes(self, mode: str) -> int:
        p = self.plan
        c2 = 2 * p.c_bytes
        return {
            "load_ref": p.a_bytes + p.b_bytes + c2,
            "double_buffer": 2 * (p.a_bytes + p.b_bytes) + c2,
            "whole": p.Mt * p.Kt * p.a_bytes + p.Kt * p.Nt * p.b_bytes + c2,
            "panel": 2 * p.Kt * p.a_bytes + 2 * p.b_bytes + c2,
        }[mode]

    def _choose_mode(self) -> str:
        cap = self.topo.sram.capacity_bytes
        mode: str
        if self.variant != "resident":
            mode = self.variant
        else:
            mode = "whole" if self.sram_bytes("whole") <= cap else "panel"
        need = self.sram_bytes(mode)
        if need > cap:
            raise SramCapacityError(
                f"GEMM {self.shape} {self.variant}: needs {need} bytes of SRAM for its buffers "
                f"({mode}), the topology has {cap} ({self.topo.source}: sram.capacity_kib). "
                "Use a smaller K, another variant, or a larger SRAM."
            )
        return mode

    # op ids (arithmetic, so any block can be generated without its predecessors) --------
    def _couts_before(self, i: int) -> int:
        """DMA outs emitted before tile-op i (one after the loads of last(j) + nbuf)."""
        return max(0, (i - self.nbuf) // self.Kt) if self.nbuf else i // self.Kt

    def _has_cout(self, i: int) -> bool:
        if not self.nbuf:
            return i % self.Kt == self.Kt - 1
        return i >= self.nbuf and (i - self.nbuf + 1) % self.Kt == 0

    def _panels_before(self, i: int) -> int:
        if self.mode != "panel" or i == 0:
            return 0
        return 1 + min(self.Mt - 1, -(-i // self.RK))

    def _base(self, i: int) -> int:
        """Id of tile-op i's first operation."""
        if self.mode == "whole":
            return 2 + 2 * i + self._couts_before(i)
        per = 3 if self.mode == "panel" else 4
        return per * i + self._couts_before(i) + self._panels_before(i)

    def _loads(self, i: int) -> int:
        """Number of ops tile-op i emits before its DMA out / fetch."""
        if self.mode == "whole":
            return 0
        if self.mode == "panel":
            starts_row = i % self.RK == 0
            return 1 + (i == 0) + (starts_row and i // self.RK + 1 < self.Mt)
        return 2

    def fetch_id(self, i: int) -> int:
        if self.mode == "whole":
            return self._base(i)
        return self._base(i) + self._loads(i) + (self.nbuf > 0 and self._has_cout(i))

    def gemm_id(self, i: int) -> int:
        return self.fetch_id(i) + 1

    def cout_id(self, j: int) -> int:
        last = j * self.Kt + self.Kt - 1
        if self.mode == "whole":
            return self.gemm_id(last) + 1
        at = last + self.nbuf
        if at < self.N:
            return self._base(at) + self._loads(at)
        return self._base(self.N) + j - self._couts_before(self.N)

    def panel_id(self, r: int) -> int:
        if r == 0:
            return 0
        i = (r - 1) * self.RK
        return self._base(i) + 1 + (i == 0)

    def first_op(self, b: int) -> int:
        return 0 if b == 0 else self._base(b * self.Kt)

    def num_ops(self) -> int:
        tail = self.num_blocks - self._couts_before(self.N) if self.nbuf else 0
        return self._base(self.N) + tail

    def first_tile(self, b: int) -> int:
        return b * self.Kt

    # addresses ----------------------------------------------------------------------
    def a_addr(self, mi: int, ki: int) -> int:
        return self.a_base + (mi * self.Kt + ki) * self.plan.a_bytes

    def b_addr(self, ki: int, ni: int) -> int:
        return self.b_base + (ki * self.Nt + ni) * self.plan.b_bytes

    def c_addr(self, j: int) -> int:
        return self.c_base + j * self.plan.c_bytes

    def _dma(
        self, eng: int, deps: tuple[int, ...], stage: int, addr: int, nbytes: int, tile: int
    ) -> Op:
        chans = transfer_channels(self.topo.hbm, addr, nbytes)
        return Op(DMA, eng, deps, stage, nbytes, 0, tile, self.setup, self.lat, chans)

    def _cout(self, j: int, gl: int = -1) -> Op:
        if gl < 0:
            gl = self.gemm_id(j * self.Kt + self.Kt - 1)
        return self._dma(C_ENG, (gl,), DMA_OUT, self.c_addr(j), self.plan.c_bytes, -1)

    # blocks -------------------------------------------------------------------------
    def block_ops(self, b: int) -> list[Op]:
        ops: list[Op] = []
        p, Kt = self.plan, self.Kt
        mi, ni = divmod(b, self.Nt)
        i0 = b * Kt
        fid: dict[int, int] = {}  # tile-op -> fetch id, for this block (others by formula)
        gid: dict[int, int] = {}
        nid = self.first_op(b)
        if b == 0 and self.mode == "whole":
            a_total, b_total = p.Mt * Kt * p.a_bytes, Kt * self.Nt * p.b_bytes
            ops.append(self._dma(A_ENG, (), DMA_IN, self.a_base, a_total, -1))
            ops.append(self._dma(B_ENG, (), DMA_IN, self.b_base, b_total, -1))
            nid = 2
        panel = self.panel_id(mi) if self.mode == "panel" else -1
        fetch_bytes = p.a_bytes + p.b_bytes
        for ki in range(Kt):
            i = i0 + ki
            loads: tuple[int, ...] = (0, 1)
            if self.mode != "whole":
                j = i - self.nbuf
                buf = () if j < 0 else ((fid[j],) if j >= i0 else (self.fetch_id(j),))
                tile_loads = list(self._tile_loads(i, mi, ni, ki, buf))
                ops.extend(tile_loads)
                if self.mode == "panel":
                    if i == 0:
                        panel = nid
                    loads = (panel, nid + (i == 0))
                else:
                    loads = (nid, nid + 1)
                nid += len(tile_loads)
                if self._has_cout(i):
                    ops.append(self._cout((i - self.nbuf) // Kt))
                    nid += 1
            j = i - self.slots
            slot = () if j < 0 else ((gid[j],) if j >= i0 else (self.gemm_id(j),))
            ops.append(
                Op(SERVE, self.fetch_res, loads + slot, FETCH, fetch_bytes, 0, i, self.fetch_ps, 0)
            )
            fid[i] = nid
            gdeps: tuple[int, ...] = (nid,)
            if ki == 0 and b >= 2:
                gdeps += (self.cout_id(b - 2),)
            ops.append(
                Op(PIPE, self.pe_res, gdeps, GEMM, 0, self.tile_macs, i, self.T, self.retire)
            )
            gid[i] = nid + 1
            nid += 2
            if not self.nbuf and ki == Kt - 1:
                ops.append(self._cout(b, gid[i]))
                nid += 1
        if b == self.num_blocks - 1 and self.nbuf:
            ops.extend(self._cout(j) for j in range(self._couts_before(self.N), self.num_blocks))
        return ops

    def _tile_loads(self, i: int, mi: int, ni: int, ki: int, buf: tuple[int, ...]) -> Iterator[Op]:
        p = self.plan
        if self.mode == "panel":
            if i == 0:
                yield self._panel_load(0)
            yield self._dma(B_ENG, buf, DMA_IN, self.b_addr(ki, ni), p.b_bytes, i)
            if i % self.RK == 0 and mi + 1 < self.Mt:
                yield self._panel_load(mi + 1)
            return
        yield self._dma(A_ENG, buf, DMA_IN, self.a_addr(mi, ki), p.a_bytes, i)
        yield self._dma(B_ENG, buf, DMA_IN, self.b_addr(ki, ni), p.b_bytes, i)

    def _panel_load(self, r: int) -> Op:
        deps = (self.fetch_id((r - 1) * self.RK - 1),) if r >= 2 else ()
        return self._dma(A_ENG, deps, DMA_IN, self.a_addr(r, 0), self.Kt * self.plan.a_bytes, -1)

    def live(self, b: int) -> dict[int, tuple[int, ...]]:
        """Ops before block b that later blocks depend on, with the consumers' resources."""
        i0 = b * self.Kt
        live: dict[int, tuple[int, ...]] = {}
        if b == 0:
            return live
        mi, ni = divmod(b, self.Nt)
        for i in range(max(0, i0 - self.slots), i0):  # PE operand slots
            live[self.gemm_id(i)] = (self.fetch_res,)
        for j in (b - 2, b - 1):  # C buffers: first tile-op of j+2 waits for DMA out of j
            if j >= 0 and self.cout_id(j) < self.first_op(b):
                live[self.cout_id(j)] = (self.pe_res,)
        if self.mode == "whole":
            live[0] = live[1] = (self.fetch_res,)
            return live
        for i in range(max(0, i0 - self.nbuf), i0):  # buffer slots
            live[self.fetch_id(i)] = (A_ENG, B_ENG)
        for j in range(
            max(0, b - 1 - self.nbuf), b
        ):  # DMA outs not yet emitted wait for their GEMM
            if self.cout_id(j) >= self.first_op(b):
                live[self.gemm_id(j * self.Kt + self.Kt - 1)] = (C_ENG,)
        if self.mode == "panel":
            live[self.panel_id(mi)] = (self.fetch_res,)
            if mi + 1 < self.Mt and self.panel_id(mi + 1) < self.first_op(b):
                live[self.panel_id(mi + 1)] = (self.fetch_res,)
            if ni == 0 and mi >= 1 and mi + 1 < self.Mt:  # next panel waits for row mi-1
                live[self.fetch_id(mi * self.RK - 1)] = (A_ENG,)
        return live

    def resources(self, b: int) -> tuple[int, ...]:
        if self.mode == "whole" and b > 0:  # A and B were staged in block 0
            return (C_ENG, self.fetch_res, self.pe_res)
        return (A_ENG, B_ENG, C_ENG, self.fetch_res, self.pe_res)

    def block_sig(self, b: int) -> Hashable:
        mi, ni = divmod(b, self.Nt)
        s = self.stripe
        sig: tuple[object, ...] = (
            min(b, 3),
            min(self.num_blocks - 1 - b, 3),
            self.a_addr(mi, 0) % s,
            self.b_addr(0, ni) % s,
            self.c_addr(b) % s,
        )
        if self.mode == "panel":
            sig += (ni == 0, min(mi, 1), mi == self.Mt - 1, self.a_addr(mi + 1, 0) % s)
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
    return GemmRun(program, simulate(program, extrapolate=extrapolate))


def check_coverage(run: GemmRun) -> None:
    """Every (mi, ni, ki) of the padded grid is computed by exactly one GEMM record."""
    log, plan = run.log, run.program.plan
    tiles = np.sort(log.tile[log.stage == GEMM])
    if len(tiles) != plan.tile_ops or not np.array_equal(tiles, np.arange(plan.tile_ops)):
        raise AssertionError(
            f"GEMM {plan.shape}: {len(tiles)} tile-op records for {plan.tile_ops} tile-ops "
            "(some (mi, ni, ki) missing or computed twice)"
        )
    mi, ni, ki = plan.coords(tiles)
    flat = (mi * plan.Nt + ni) * plan.Kt + ki
    if len(np.unique(flat)) != plan.tile_ops or flat.max() >= plan.tile_ops:
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
