"""Races proven from a program's dependency graph, independent of any timing (issue 26).

A data replay finds a race only when the timing of the run makes it show: a reduction that
does not wait for the GEMM that wrote its partial reads the right data whenever the GEMM
happens to finish first. This check needs no timing. Every op says which elements it reads
and writes (:class:`Access`, per buffer of a chip); walking the ops in program order (the
ids, which every dependency points backwards along), the **producers** of an element are the
ops that last wrote it. Each op that reads or overwrites an element must depend, through the
dependency graph, transitively, on each of its producers: otherwise nothing in the program
orders the two, and what the op sees depends on which engine is faster.

Writes that share an **accumulator** (``group``, as ``FabricProgram.into``) commute: they
add into the same elements in any order, so they need not depend on each other, only on
what the elements held before the first of them; an op that reads the sum depends on all of
them. Reads of elements no op has written read the initial data (the inputs).

:func:`first_race` returns the first op pair the graph leaves unordered, as a message naming
both ops, or ``""``. Cost: the accesses sorted once per buffer, each against the producers
of the elements it touches; a pair that is not a direct dependency is settled by one walk
back through the graph from the consumer, bounded below by the producer's id.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Access", "Turn", "first_race", "producer_pairs", "unordered"]


@dataclass(frozen=True)
class Access:
    """Op ``op`` reads (``write`` False) or writes elements ``[lo, hi)`` of buffer ``where``.

    A read-modify-write (a reduction) is a write. ``group`` >= 0 names the accumulator a
    write adds into (writes of one group commute).
    """

    op: int
    where: Hashable
    lo: int
    hi: int
    write: bool
    group: int = -1


#: (producer, consumer, buffer, lo, hi): the consumer needs the producer's elements [lo, hi)
Pair = tuple[int, int, Hashable, int, int]


class Turn(Protocol):
    """The chips a quotient program's dependency edge turns by (:func:`unordered`)."""

    order: int

    def __call__(self, consumer: int, dep: int) -> int: ...


class _Segments:
    """Per buffer, the producers of each run of elements: sorted cut points and, per run,
    (writers, group, writers before the group)."""

    def __init__(self) -> None:
        self.cuts: list[int] = []
        self.state: list[tuple[tuple[int, ...], int, tuple[int, ...]]] = []

    def split(self, x: int) -> int:
        """Index of the run that starts at ``x`` (cut there if needed)."""
        i = bisect.bisect_left(self.cuts, x)
        if i < len(self.cuts) and self.cuts[i] == x:
            return i
        prev = self.state[i - 1] if i else ((), -1, ())
        self.cuts.insert(i, x)
        self.state.insert(i, prev)
        return i

    def runs(self, lo: int, hi: int) -> range:
        a = self.split(lo)
        b = self.split(hi)
        return range(a, b)


def producer_pairs(accesses: Iterable[Access]) -> list[Pair]:
    """Every (producer, consumer) pair the accesses need ordered, first occurrence kept."""
    by_where: dict[Hashable, list[Access]] = {}
    for a in accesses:
        if a.hi > a.lo:
            by_where.setdefault(a.where, []).append(a)
    pairs: dict[tuple[int, int], Pair] = {}
    for where, accs in by_where.items():
        accs.sort(key=lambda a: (a.op, a.write))  # an op's reads before its own writes
        seg = _Segments()
        for a in accs:
            for r in seg.runs(a.lo, a.hi):
                writers, group, base = seg.state[r]
                lo, hi = seg.cuts[r], seg.cuts[r + 1]  # the run after ``hi`` is never written
                joining = a.write and a.group >= 0 and group == a.group
                need = base if joining else writers
                for p in need:
                    if p != a.op and (p, a.op) not in pairs:
                        pairs[(p, a.op)] = (p, a.op, where, lo, hi)
                if not a.write:
                    continue
                if joining:
                    seg.state[r] = ((*writers, a.op), group, base)
                else:
                    seg.state[r] = ((a.op,), a.group, writers if a.group >= 0 else ())
    return list(pairs.values())


def unordered(
    deps: Sequence[Sequence[int]],
    pairs: Iterable[tuple[int, int]],
    turn: Turn | None = None,
    needs: Sequence[int] = (),
) -> list[int]:
    """Indices of the (producer, consumer) pairs no dependency path leads along (``~d``, a
    release dependency, counts as ``d``).

    ``turn`` (a quotient program, where one op stands for its images on every chip): the
    edge from op ``c`` to its dependency ``d`` leads to ``d``'s image turned by
    ``turn(c, d)`` chips; a path's turns add up (modulo ``turn.order``) and pair ``k``
    needs a path that ends at the producer turned by ``needs[k]`` (0 when not given)."""
    bad: list[int] = []
    by_consumer: dict[int, list[tuple[int, int, int]]] = {}
    for k, (p, c) in enumerate(pairs):
        need = needs[k] if k < len(needs) else 0
        direct = deps[c]
        if (p in direct or ~p in direct) and (turn is None or turn(c, p) % turn.order == need):
            continue
        if p >= c:
            bad.append(k)
            continue
        by_consumer.setdefault(c, []).append((k, p, need))
    for c, wanted in by_consumer.items():
        floor = min(p for _, p, _ in wanted)
        seen = {(c, 0)}
        stack = [(c, 0)]
        while stack:
            op, at = stack.pop()
            for d in deps[op]:
                d = ~d if d < 0 else d
                nxt = (d, (at + turn(op, d)) % turn.order if turn is not None else 0)
                if d >= floor and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        bad.extend(k for k, p, need in wanted if (p, need) not in seen)
    return sorted(bad)


def first_race(
    deps: Sequence[Sequence[int]],
    accesses: Iterable[Access],
    describe: Callable[[int], str],
    where_name: Callable[[Hashable, int, int], str],
    required: Iterable[tuple[int, int, str]] = (),
    turn: Turn | None = None,
) -> str:
    """The first unordered producer-consumer pair as a message naming both ops, or ``""``.

    ``required`` adds pairs that must be ordered whatever the accesses say (a reduction and
    the transfer whose data it reduces), each with what the producer gives the consumer.
    ``turn``: ``deps`` is a quotient program's (:func:`unordered`); the accesses are one
    chip's (their pairs need the producer unturned), a required pair needs the turn of the
    edge it names.
    """
    pairs = producer_pairs(accesses)
    extra = list(required)
    flat = [(p, c) for p, c, *_ in pairs] + [(p, c) for p, c, _ in extra]
    needs = [0] * len(pairs)
    if turn is not None:
        needs += [turn(c, p) % turn.order for p, c, _ in extra]
    bad = unordered(deps, flat, turn, needs)
    if not bad:
        return ""
    found = []
    for k in bad:
        if k < len(pairs):
            p, c, where, lo, hi = pairs[k]
            what = f"its operand {where_name(where, lo, hi)}"
        else:
            p, c, what = extra[k - len(pairs)]
        found.append((c, p, what))
    c, p, what = min(found)
    more = f" ({len(bad) - 1} more such pairs)" if len(bad) > 1 else ""
    return (
        f"race: {describe(c)} does not depend on {describe(p)}, which produced {what}; "
        f"nothing in the dependency graph orders them{more}"
    )
