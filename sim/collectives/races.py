"""A collective's races from its dependency graph, before and independent of timing (issue 26).

The replay (:mod:`sim.collectives.verify`) sees a race only when the run's timing makes it
show: a reduction of step ``s`` that does not wait for the reduction of step ``s - 1`` whose
sum it forwards reads the right data whenever the earlier one happens to end first, and on
symmetric chips it always does. This check needs no timing: from what each op of the
program moves (:class:`~sim.collectives.compile.Compiled`'s piece range per op) it lists
every op's reads and writes per chip, and proves with
:func:`sim.collectives.depcheck.first_race` that each reduction, copy and forwarding send
depends, transitively, on every op that last wrote the elements it needs, and that each
reduction or copy depends on the transfer whose data it lands. A failure names both ops.

What each op touches (the replay's rules, :func:`sim.collectives.verify.replay`):

* a transfer reads its piece range on its sender, unless it is ``fresh`` (it reads the
  chip's input, which nothing writes);
* a reduction adds into its piece range on its chip (a read-modify-write: a write), in the
  accumulator ``into`` names when it has one (writes of one accumulator commute); a copy
  overwrites it. A switch node (``nvls``) is a chip numbered past the last one.

The fast paths time a program other than the full one, and this check looks at the program
they timed, never at one rebuilt for it:

* :func:`symmetric_race`: the ring quotient of :mod:`sim.collectives.fast` (chip 0's ops; a
  receive on chip 0 consumes chip 0's own send, the image of chip ``-1``'s turned). Chip 0's
  buffer is the one its sends read and its receives write, so its accesses are chip 0's,
  and by the symmetry the fast path rests on, every chip's pairs are chip 0's turned. A
  path through the quotient's graph follows real dependencies only when it counts its
  turns: each consume edge leads to the neighbour's op, so a pair of chip 0's ops is
  ordered only by a path whose turns add up to 0 modulo ``p`` (``turn`` of
  :func:`sim.collectives.depcheck.unordered`).
* :func:`quotient_race` on ``direct``'s representatives (:mod:`sim.fabric.ring_quotient`):
  every send is fresh, each reduction writes its span in its chip's accumulator.
* a product run (:mod:`sim.collectives.fast_product`) keeps its full program: the general
  check.

Cost: the accesses sorted once per chip and a walk back from each consumer whose producer
is not a direct dependency (:mod:`sim.collectives.depcheck`); a few ms for a gated config.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from sim.collectives.compile import Compiled
from sim.collectives.depcheck import Access, first_race
from sim.fabric import COPY, REDUCTION, TRANSFER, FabricProgram

__all__ = ["compiled_accesses", "compiled_race", "quotient_race", "symmetric_race"]

_KIND = {TRANSFER: "transfer", REDUCTION: "reduction", COPY: "copy"}


def compiled_accesses(
    compiled: Compiled,
) -> tuple[list[Access], list[tuple[int, int, str]]]:
    """Every op's reads and writes (pieces of ``compiled.bounds`` per chip), and the
    (transfer, consumer) pairs."""
    prog = compiled.program
    acc: list[Access] = []
    lands: list[tuple[int, int, str]] = []
    for i, kind in enumerate(prog.kind):
        lo, hi, chip = compiled.lo[i], compiled.hi[i], prog.src[i]
        if kind == TRANSFER:
            if not compiled.fresh[i]:
                acc.append(Access(i, chip, lo, hi, False))
            continue
        group = prog.into[i] if kind == REDUCTION else -1
        acc.append(Access(i, chip, lo, hi, True, group))
        t = prog.consumes[i]
        if t >= 0:
            verb = "reduces" if kind == REDUCTION else "copies"
            lands.append((t, i, f"the data it {verb}"))
    return acc, lands


def _describe(
    prog: FabricProgram, span: Callable[[int], tuple[int, int]], chip0: bool = False
) -> Callable[[int], str]:
    """Names op ``i``: its kind, chip(s), step and elements (``chip0``: the ring quotient's
    nodes 1 and 2 are chip 0's successor and predecessor)."""

    def describe(i: int) -> str:
        kind = _KIND.get(prog.kind[i], "op")
        lo, hi = span(i)
        where = f"elements [{lo}, {hi})" if hi > lo else "its elements"
        if prog.kind[i] == TRANSFER:
            dst = f"chip {prog.dst[i]}"
            if chip0:
                dst = "chip 0's successor" if prog.dst[i] == 1 else "chip 0's predecessor"
            return f"{kind} op {i} (chip {prog.src[i]} -> {dst}, step {prog.step[i]}, {where})"
        return f"{kind} op {i} on chip {prog.src[i]} (step {prog.step[i]}, {where})"

    return describe


def compiled_race(compiled: Compiled) -> str:
    """``""``, or the first op pair the program's dependency graph leaves unordered."""
    prog, bounds = compiled.program, compiled.bounds

    def span(i: int) -> tuple[int, int]:
        return bounds[compiled.lo[i]], bounds[compiled.hi[i]]

    def where_name(where: Hashable, lo: int, hi: int) -> str:
        return f"elements [{bounds[lo]}, {bounds[hi]}) on chip {where}"

    accesses, lands = compiled_accesses(compiled)
    return first_race(prog.deps, accesses, _describe(prog, span), where_name, lands)


def quotient_race(prog: FabricProgram) -> str:
    """:func:`compiled_race` of a representatives' program of fresh sends whose reductions
    write their ``span`` on their chip (``direct`` by ring rotation)."""
    acc: list[Access] = []
    lands: list[tuple[int, int, str]] = []
    for i, kind in enumerate(prog.kind):
        if kind == TRANSFER:
            continue
        lo, hi = prog.span[i]
        acc.append(Access(i, prog.src[i], lo, hi, True, prog.into[i]))
        if prog.consumes[i] >= 0:
            lands.append((prog.consumes[i], i, "the data it reduces"))

    def where_name(where: Hashable, lo: int, hi: int) -> str:
        return f"elements [{lo}, {hi}) on chip {where}"

    return first_race(prog.deps, acc, _describe(prog, prog.span.__getitem__), where_name, lands)


def symmetric_race(
    prog: FabricProgram,
    chips: int,
    sizes: Sequence[int],
    count: int,
    reduce_steps: int,
) -> str:
    """:func:`compiled_race` of the ring quotient (:func:`sim.collectives.fast.
    quotient_program`: per step, chip 0's sends of every chunk on both rings, then its
    receives), from the segment each op touches (as :func:`sim.collectives.fast._replay`):
    in step ``s`` chip 0 sends segment ``-1 - s`` (ring 0) or ``1 + s`` (ring 1) of the
    reduce-scatter, ``-a`` or ``a`` in step ``a`` of the all-gather, and its receive writes
    the segment one further back along its ring."""
    k, p = len(sizes), chips
    per_step = 4 * k
    segment = count // (2 * p)
    offset = [sum(sizes[:t]) for t in range(k)]
    acc: list[Access] = []
    lands: list[tuple[int, int, str]] = []
    span: list[tuple[int, int]] = []
    for i in range(len(prog)):
        s, rest = divmod(i, per_step)
        phase, rest = divmod(rest, 2 * k)
        t, r = divmod(rest, 2)
        lag, at = (1, s) if s < reduce_steps else (0, s - reduce_steps)
        seg = (-lag - at) % p if r == 0 else (lag + at) % p
        if phase:
            seg = (seg + (-1 if r == 0 else 1)) % p
        lo = r * (count // 2) + seg * segment + offset[t]
        hi = lo + sizes[t]
        span.append((lo, hi))
        if prog.kind[i] == TRANSFER:
            acc.append(Access(i, 0, lo, hi, False))
            continue
        acc.append(Access(i, 0, lo, hi, True))
        verb = "reduces" if prog.kind[i] == REDUCTION else "copies"
        lands.append((prog.consumes[i], i, f"the data it {verb}"))

    def where_name(where: Hashable, lo: int, hi: int) -> str:
        return f"elements [{lo}, {hi}) on chip 0 (every chip's, turned)"

    describe = _describe(prog, span.__getitem__, chip0=True)
    return first_race(prog.deps, acc, describe, where_name, lands, _RingTurn(prog, k, p))


class _RingTurn:
    """A receive on chip 0 consumes the send of chip ``-1`` (ring 0) or ``+1`` (ring 1),
    which the quotient names by chip 0's own: that edge turns by one chip; every other
    dependency joins two ops of chip 0."""

    def __init__(self, prog: FabricProgram, k: int, p: int) -> None:
        self.prog, self.k, self.order = prog, k, p

    def __call__(self, consumer: int, dep: int) -> int:
        if self.prog.kind[consumer] == TRANSFER or dep != self.prog.consumes[consumer]:
            return 0
        ring = consumer % (2 * self.k) % 2
        return -1 if ring == 0 else 1
