"""What the collective tests share (not a test module): every chip's input vector as the
replay defines it, and the documented split of a range into parts."""

from __future__ import annotations

import numpy as np

from sim.collectives.verify import input_coefficients


def inputs(p: int, count: int) -> np.ndarray:
    """Every chip's input vector, materialised: x_c[e] = a_c + b_c * e."""
    a, b = input_coefficients(p)
    return a[:, None] + b[:, None] * np.arange(count, dtype=np.int64)[None, :]


def parts(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """The documented split: for a power of two, halve recursively (first half floor);
    otherwise the first (len % n) ranges get one element more."""
    if n & (n - 1) == 0:
        out = [(lo, hi)]
        while len(out) < n:
            out = [r for a, b in out for r in ((a, (a + b) // 2), ((a + b) // 2, b))]
        return out
    q, r = divmod(hi - lo, n)
    sizes = [q + (i < r) for i in range(n)]
    starts = [lo + sum(sizes[:i]) for i in range(n)]
    return [(a, a + k) for a, k in zip(starts, sizes, strict=True)]
