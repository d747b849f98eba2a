"""Check a GEMM run: every tile-op computed once, and the issue order computes ``A @ B``."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sim.gemm.layout import GEMM
from sim.gemm.run import GemmRun
from sim.oplog import copies

__all__ = ["check_coverage", "functional_check"]


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
