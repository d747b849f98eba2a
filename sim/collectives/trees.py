"""NCCL's binary and double binary trees over ranks, and each rank's depth and height."""

from __future__ import annotations

from collections.abc import Sequence


def binary_tree(p: int) -> list[int]:
    """Parent rank of each rank (-1 for the root) in NCCL's binary tree (``ncclGetBtree``).

    Rank ``r`` with lowest set bit ``b`` hangs under ``(r ^ b) | (b << 1)`` (or ``r ^ b`` when
    that is out of range); rank 0 is the root with the single child ``2^floor(lg(p-1))``.
    Odd ranks are leaves, so interior nodes are even ranks.
    """
    parent = [-1] * p
    for r in range(1, p):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parent[r] = up if up < p else r ^ bit
    return parent


def double_binary_tree(p: int) -> tuple[list[int], list[int]]:
    """Parents of each rank in NCCL's two complementary trees (``ncclGetDtree``).

    Tree 1 mirrors tree 0 (rank ``r`` plays ``p-1-r``) when ``p`` is even, so the even ranks
    interior in tree 0 are leaves in tree 1; for odd ``p`` it shifts tree 0 by one rank.
    """
    t0 = binary_tree(p)
    if p % 2 == 0:
        t1 = [-1 if t0[p - 1 - r] < 0 else p - 1 - t0[p - 1 - r] for r in range(p)]
    else:
        t1 = [-1 if t0[(r - 1) % p] < 0 else (t0[(r - 1) % p] + 1) % p for r in range(p)]
    return t0, t1


def tree_levels(parent: Sequence[int]) -> tuple[list[int], list[int]]:
    """Each rank's depth (hops to the root) and height (longest path down to a leaf) in a
    tree given by ``parent`` (-1 at the root): reduce goes up by height, broadcast down by
    depth."""
    p = len(parent)
    depth = [0] * p
    for r in range(p):
        x = r
        while parent[x] >= 0:
            depth[r], x = depth[r] + 1, parent[x]
    height = [0] * p
    for r in sorted(range(p), key=lambda r: -depth[r]):
        if parent[r] >= 0:
            height[parent[r]] = max(height[parent[r]], height[r] + 1)
    return depth, height
