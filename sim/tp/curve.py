"""A shard GEMM alone: its progress curve (time and HBM bytes per token row done)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim.core import simulate
from sim.gemm.program import GemmProgram
from sim.gemm.shape import GemmShape
from sim.oplog import OpLog
from sim.topology import Topology

__all__ = ["FULL_TILE_OPS", "GemmCurve", "gemm_curve"]

#: a shard GEMM up to this many tile-ops is simulated whole for its curve; longer ones by probe
FULL_TILE_OPS = 50_000
PROBE_ROWS = 3  # tile rows a probe runs beyond twice its staging's look-ahead


@dataclass(frozen=True)
class GemmCurve:
    """The GEMM run alone: when its first r tile rows are done (``done[r-1]``, ps) and how
    many HBM bytes its DMAs had landed by then (``moved[r-1]``); ``probed``: rows beyond
    :data:`PROBE_ROWS` extrapolated."""

    shape: GemmShape
    tile_m: int
    done: tuple[int, ...]
    moved: tuple[int, ...]
    probed: bool

    @property
    def hbm_bytes(self) -> int:
        return self.moved[-1]

    @staticmethod
    def _interp(curve: tuple[int, ...], rows: int, tile_m: int) -> int:
        q, rem = divmod(rows, tile_m)
        before = curve[q - 1] if q else 0
        if rem == 0:
            return before
        return before + (curve[q] - before) * rem // tile_m

    def at(self, rows: int) -> int:
        """Time to finish ``rows`` token rows (linear within a tile row)."""
        return self._interp(self.done, rows, self.tile_m)

    def bytes_at(self, rows: int) -> int:
        """HBM bytes moved by the time ``rows`` token rows are finished."""
        return self._interp(self.moved, rows, self.tile_m)


def _rows_done(prog: GemmProgram, log: OpLog) -> tuple[list[int], list[int]]:
    """Per tile row: when its last output tile has landed, and the DMA bytes landed by then
    (the last row takes every remaining byte)."""
    end = dict(zip(log.op.tolist(), log.end.tolist(), strict=True))
    done, best = [], 0
    for mi in range(prog.Mt):
        for ni in range(prog.Nt):
            best = max(best, end[prog.cout_id(mi * prog.Nt + ni)])
        done.append(best)
    dma = log.mask(stage="dma_in") | log.mask(stage="dma_out")
    order = np.argsort(log.end[dma], kind="stable")
    ends = log.end[dma][order]
    cum = np.cumsum(log.nbytes[dma][order])
    moved = [int(cum[np.searchsorted(ends, d, side="right") - 1]) for d in done]
    moved[-1] = int(cum[-1])
    return done, moved


@lru_cache(maxsize=256)
def gemm_curve(shape: GemmShape, variant: str, topo: Topology) -> GemmCurve:
    """The real GEMM simulator run alone (``sim.core.simulate``): when each tile row is done.

    A shard above :data:`FULL_TILE_OPS` tile-ops with more than ``2 x ahead + PROBE_ROWS``
    tile rows (``ahead``: rows its staging prefetches ahead; not staged ``whole``, which is
    not row-periodic) is probed: that many rows are simulated (same mode and buffers as the
    whole shard), the middle rows repeat the increments (time and bytes) of row
    ``ahead + 1``, the last rows add the probe's last increments (its drain).
    """
    whole = GemmProgram(shape, variant, topo)
    # 'whole' staging loads all of A first (not row-periodic); it only fits small shapes
    ahead = _rows_ahead(whole) if whole.mode != "whole" else whole.Mt
    if whole.N <= FULL_TILE_OPS or whole.Mt <= 2 * ahead + PROBE_ROWS:
        done, moved = _rows_done(whole, simulate(whole))
        return GemmCurve(shape, topo.pe.tile_m, tuple(done), tuple(moved), False)
    rows = 2 * ahead + PROBE_ROWS
    probe_shape = GemmShape(rows * topo.pe.tile_m, shape.K, shape.N)
    probe = GemmProgram(probe_shape, variant, topo, mode=whole.mode)
    d, b = _rows_done(probe, simulate(probe))
    m = ahead + 1  # a row whose prefetch runs as in the middle of the whole shard
    return GemmCurve(shape, topo.pe.tile_m, _extend(d, whole.Mt, m), _extend(b, whole.Mt, m), True)


def _rows_ahead(prog: GemmProgram) -> int:
    """Tile rows the program's operand staging reaches ahead (A panels, B panels, tiles)."""
    bu, per_row = prog.buffers, prog.Nt * prog.Kt
    if prog.mode == "panel":
        return max(bu.a, -(-bu.b // prog.Nt))
    return -(-prog.nbuf // per_row)


def _extend(probe: list[int], rows: int, m: int) -> tuple[int, ...]:
    """A probe's cumulative per-row values stretched to ``rows`` rows: its first ``m + 1``
    rows, then row ``m``'s increment repeated, then the probe's last rows' increments (the
    drain, where nothing is left to prefetch)."""
    steady = probe[m] - probe[m - 1]
    tail = [y - x for x, y in itertools.pairwise(probe[m:])]
    out = probe[: m + 1]
    while len(out) < rows - len(tail):
        out.append(out[-1] + steady)
    for inc in tail:
        out.append(out[-1] + inc)
    return tuple(out[:rows])
