"""All-gather and reduce-scatter beside the ring (:mod:`sim.collectives.algorithms`): direct,
and recursive doubling / halving.

Sizes follow nccl-tests: ``n`` is the whole vector, the **output** of all_gather and the
**input** of reduce_scatter; chip ``c`` owns block ``c`` of it (:func:`ranges` of the vector
in ``p`` near-equal parts, by recursive halving for a power of two). all_gather starts with
every chip's block at its own place and ends with every block everywhere; reduce_scatter
starts with a whole vector per chip and ends with block ``c`` of the sum on chip ``c``.

* ``direct`` (one shot to or from every peer, as NCCL's p2p-based collectives and MPI's
  "basic linear" algorithms run): all_gather sends every chip's block to every other chip
  at once, ``(p-1) n / p`` bytes out of each chip; reduce_scatter sends block ``d`` of every
  chip's input to chip ``d``, which reduces the ``p-1`` blocks it gets into its own.
* ``recursive_doubling`` (all_gather) and ``recursive_halving`` (reduce_scatter), MPICH's
  ``MPIR_Allgather_intra_recursive_doubling`` and
  ``MPIR_Reduce_scatter_intra_recursive_halving`` (Thakur, Rabenseifner and Gropp 2005,
  "Optimization of collective communication operations in MPICH"): ``lg p`` steps;
  all_gather exchanges what a chip has gathered with the partner at distance 1, 2, 4, ...
  (the gathered region doubles), reduce_scatter sends half of its region to the partner at
  distance ``p/2``, ``p/4``, ... and keeps the half holding its own block (the region
  halves). For ``p`` not a power of two, MPICH's fold, as halving-doubling allreduce does
  it: with ``r = p - 2^floor(lg p)``, the first ``2r`` chips pair up and each even one hands
  its data to its odd neighbour (reduce_scatter: its whole vector, reduced in; all_gather:
  its block), the ``2^floor(lg p)`` survivors run the power-of-two algorithm on regions
  that hold both blocks of a pair, and each odd chip hands the result back (reduce_scatter:
  the even chip's block; all_gather: everything but the even chip's own block). (MPICH
  runs its recursive-doubling allgather for powers of two only, and Bruck's algorithm or a
  ring otherwise; the fold gives the algorithm every ``p`` here, as for the allreduce.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.collectives.schedule import Message, Range
from sim.fabric import digit_shift

Steps = list[list[Message]]


@dataclass(frozen=True)
class Built:
    """A schedule's steps, what each chip owns, and the element count it moves."""

    steps: Steps
    count: int
    shares: tuple[tuple[Range, ...], ...] = ()
    blocking: bool = False


def ranges(lo: int, hi: int, parts: int) -> list[Range]:
    """``[lo, hi)`` in ``parts`` near-equal contiguous ranges: for a power of two by recursive
    halving (first half ``floor``), so that the regions of the recursive algorithms fall on
    the chunks' cuts; otherwise the first ``(hi - lo) % parts`` get one element more."""
    if parts & (parts - 1) == 0:
        if parts == 1:
            return [(lo, hi)]
        mid = (lo + hi) // 2
        return ranges(lo, mid, parts // 2) + ranges(mid, hi, parts // 2)
    q, r = divmod(hi - lo, parts)
    out, at = [], lo
    for i in range(parts):
        out.append((at, at + q + (i < r)))
        at += q + (i < r)
    return out


def fold(p: int) -> tuple[int, list[int]]:
    """MPICH's fold for ``p`` not a power of two: ``r`` (the pairs) and the survivors by new
    rank (the odd chip of each of the first ``r`` pairs, then chips ``2r..p-1``)."""
    rem = p - (1 << (p.bit_length() - 1))
    return rem, [2 * i + 1 for i in range(rem)] + list(range(2 * rem, p))


def _regions(blocks: list[Range], rem: int, pof2: int) -> list[Range]:
    """Per new rank: the blocks of the chips it stands for (both chips of a pair)."""
    return [
        (blocks[2 * j][0], blocks[2 * j + 1][1]) if j < rem else blocks[j + rem]
        for j in range(pof2)
    ]


def _shares(blocks: list[Range]) -> tuple[tuple[Range, ...], ...]:
    return tuple((b,) for b in blocks)


def direct_all_gather(count: int, sizes: tuple[int, ...]) -> Built:
    """Every chip sends its block to peer ``k`` for every offset ``k``, offset-major (peers
    by digit-wise offset over the dimensions' ``sizes``: ADR 0032)."""
    p = math.prod(sizes)
    blocks = ranges(0, count, p)
    step = [
        Message(c, digit_shift(sizes, c, k), *blocks[c], False, True)
        for k in range(1, p)
        for c in range(p)
    ]
    return Built([step], count, _shares(blocks))


def direct_reduce_scatter(count: int, sizes: tuple[int, ...]) -> Built:
    """Every chip sends peer ``k``'s block to it for every offset ``k`` (as
    :func:`direct_all_gather` orders them)."""
    p = math.prod(sizes)
    blocks = ranges(0, count, p)
    step = []
    for k in range(1, p):
        for c in range(p):
            d = digit_shift(sizes, c, k)
            step.append(Message(c, d, *blocks[d], True, True))
    return Built([step], count, _shares(blocks))


def recursive_doubling(count: int, p: int) -> Built:
    """all_gather by recursive doubling (module docstring)."""
    blocks = ranges(0, count, p)
    rem, ranks = fold(p)
    pof2 = len(ranks)
    steps: Steps = []
    if rem:
        steps.append([Message(2 * i, 2 * i + 1, *blocks[2 * i], False) for i in range(rem)])
    region = _regions(blocks, rem, pof2)
    d = 1
    while d < pof2:
        steps.append([Message(ranks[j], ranks[j ^ d], *region[j], False) for j in range(pof2)])
        region = [
            (min(region[j][0], region[j ^ d][0]), max(region[j][1], region[j ^ d][1]))
            for j in range(pof2)
        ]
        d *= 2
    if rem:
        back = []
        for i in range(rem):
            lo, hi = blocks[2 * i]
            back += [
                Message(2 * i + 1, 2 * i, 0, lo, False),
                Message(2 * i + 1, 2 * i, hi, count, False),
            ]
        steps.append(back)
    return Built(steps, count, _shares(blocks))


def recursive_halving(count: int, p: int) -> Built:
    """reduce_scatter by recursive halving (module docstring)."""
    blocks = ranges(0, count, p)
    rem, ranks = fold(p)
    pof2 = len(ranks)
    own = _regions(blocks, rem, pof2)
    steps: Steps = []
    if rem:
        steps.append([Message(2 * i, 2 * i + 1, 0, count, True) for i in range(rem)])
    d = pof2 // 2
    while d >= 1:
        step = []
        for j in range(pof2):
            g = j & ~(2 * d - 1)
            low = (own[g][0], own[g + d - 1][1])
            high = (own[g + d][0], own[g + 2 * d - 1][1])
            step.append(Message(ranks[j], ranks[j ^ d], *(low if j & d else high), True))
        steps.append(step)
        d //= 2
    if rem:
        steps.append([Message(2 * i + 1, 2 * i, *blocks[2 * i], False) for i in range(rem)])
    return Built(steps, count, _shares(blocks))
