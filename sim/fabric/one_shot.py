"""The one-shot shape (``direct``'s program) that the fast paths of the fabric timing take."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sim.fabric.network import Network
from sim.fabric.program import REDUCTION, TRANSFER, FabricProgram


@dataclass(frozen=True)
class OneShot:
    """A program of ``rounds`` rounds of the same ``M`` transfers (one per (sender, receiver)
    pair, none with dependencies, each consumed by one reduction), then the reductions in the
    same order: reduction ``K + i`` consumes transfer ``i``, depends on it alone and, when
    its receiver gets more than one message, adds into the accumulator of its round's chunk
    on that chip (named by the reduction of the first message to it, ``first``, the same
    for every round). This is the program of ``direct``; :func:`one_shot` recognises it."""

    rounds: int
    width: int  # M: transfers per round
    first: npt.NDArray[np.int64]  # per message: the first message to its receiver, or -1


def one_shot(net: Network, program: FabricProgram) -> OneShot | None:
    """The one-shot structure of ``program`` (:class:`OneShot`), or None if it has another.

    Compares the program's lists with the structure's directly (list comparisons run at C
    speed; a direct program at 32 chips has half a million ops). The fast paths assume what
    today's networks give: every link alike (:attr:`Network.uniform`) and every op on lane 0;
    a program or network without that is not one-shot here (the event loop times it)."""
    n = len(program)
    half = n // 2
    if n == 0 or n % 2 or net.staging_buffers < 1:
        return None
    if not net.uniform or any(program.lane):
        return None
    kind, src, dst = program.kind, program.src, program.dst
    if kind[:half].count(TRANSFER) != half or kind[half:].count(REDUCTION) != half:
        return None
    s0, d0 = src[0], dst[0]
    width = next((i for i in range(1, half) if src[i] == s0 and dst[i] == d0), half)
    if half % width:
        return None
    rounds = half // width
    pairs = list(zip(src[:width], dst[:width], strict=True))
    if len(set(pairs)) != width:
        return None
    if src[:half] != src[:width] * rounds or dst[:half] != dst[:width] * rounds:
        return None
    if src[half:] != dst[:half] or dst[half:] != dst[:half]:
        return None
    if program.consumes[:half] != [-1] * half or program.consumes[half:] != list(range(half)):
        return None
    deps = program.deps
    if any(deps[:half]):
        return None
    if (np.fromiter(map(len, deps[half:]), np.int64, half) != 1).any():
        return None
    ids = np.arange(half, dtype=np.int64)
    if (np.fromiter(itertools.chain.from_iterable(deps[half:]), np.int64, half) != ids).any():
        return None
    receiver = np.asarray(dst[:width], dtype=np.int64)
    _, at, count = np.unique(receiver, return_index=True, return_inverse=False, return_counts=True)
    first_of = dict(zip(receiver[at].tolist(), at.tolist(), strict=True))
    many = dict(zip(receiver[at].tolist(), (count > 1).tolist(), strict=True))
    first = np.asarray([first_of[d] if many[d] else -1 for d in receiver.tolist()], dtype=np.int64)
    base = (ids // width) * width
    want = np.where(np.tile(first, rounds) >= 0, half + base + np.tile(first, rounds), -1)
    into = program.into or [-1] * n
    if into[:half] != [-1] * half or into[half:] != want.tolist():
        return None
    spans = program.span  # the same chunk for every message of a round, and for its reduction
    if spans[half:] != spans[:half]:
        return None
    for t in range(rounds):
        if spans[t * width : (t + 1) * width].count(spans[t * width]) != width:
            return None
    return OneShot(rounds, width, first)
