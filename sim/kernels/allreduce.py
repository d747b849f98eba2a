"""Collectives on a multi-chip network: allreduce schedules, their timing, their functional check.

A collective of ``nbytes`` (``count = nbytes / bytes_per_element`` elements) is cut into
``p`` segments (sizes differ by at most one element), each into ``k`` pieces, where ``k``
is the fewest that keeps a piece within the chunk size (``chips.chunk_kib``). A
**schedule** is a list of steps; a step is a list of messages ``src -> dst`` of a
contiguous range of pieces, either reduced into the destination or copied over it.

Timing (:func:`run_collective`) follows the data, piece by piece: a message is sent as
transfers of whole pieces of at most one chunk (consecutive small pieces share one
transfer); a transfer leaves when the pieces it carries are ready on the sender and its
links are free (:class:`sim.link.Fabric`); a reduction waits for its transfer and for the
destination's pieces, on the destination's reduce engine. So consecutive steps pipeline
chunk by chunk. Within a step, transfers are issued round-robin over the step's messages,
one chunk each, and every send of a step reads the data as it was before the step (its
receives land in staging buffers, which are unbounded).

Algorithms:

* ``ring``: reduce-scatter then all-gather round :meth:`Network.ring_order`, ``2(p-1)``
  steps of one segment per chip. ``reduce_scatter`` and ``all_gather`` run either half.
* ``direct``: one-shot; every chip sends its whole vector to every other chip and
  reduces the ``p-1`` vectors it receives.
* ``halving_doubling``: Rabenseifner; reduce-scatter by recursive halving (partner at
  distance 1, 2, 4, ...), then all-gather by recursive doubling (distance p/2, ..., 1).
  When ``p`` is not a power of two it uses MPICH's fallback: the first ``2r`` chips
  (``r = p - 2^floor(lg p)``) pair up, each even one hands its vector to its odd
  neighbour, the ``2^floor(lg p)`` survivors run halving-doubling, and each odd chip of a
  pair sends the result back.
* ``tree``: an in-order binary tree over the ring order (the root is the middle chip, each
  subtree a contiguous range, so tree edges are short); reduce up the tree level by
  level, then broadcast down, every chunk pipelining through the levels.
* ``torus2d``: on a ``rows x cols`` torus, reduce-scatter along every row ring, allreduce
  (reduce-scatter + all-gather) along every column ring on the part each chip holds,
  then all-gather along the rows.

Functional check (nccl-tests' ``#wrong``): chip ``c`` starts with the integers
``x_c[e] = a_c + b_c * e`` (``a_c``, ``b_c`` fixed pseudo-random). Every message moves a
whole range of pieces and every operation is the same for every element of a piece, so a
piece's values stay of the form ``A + B * e`` and are kept as the exact integer pair
``(A, B)``: element ``e`` of a piece is right iff ``A + B e`` equals the expected sum there.
The check is therefore exact for every element, at any size, without materialising
``p x count`` numbers (:meth:`CollectiveRun.values` materialises them for small runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.limits import check_collective
from sim.link import (
    REDUCE,
    REDUCTION,
    SEND,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    simulate_fabric,
)
from sim.oplog import OpLog
from sim.topology import Topology

__all__ = [
    "ALGORITHMS",
    "COLLECTIVES",
    "CollectiveError",
    "CollectiveRun",
    "Message",
    "Schedule",
    "algorithms_for",
    "all_gather",
    "allreduce",
    "build_schedule",
    "collective_metrics",
    "fabric_program",
    "reduce_scatter",
    "run_collective",
    "run_schedule",
]

Algorithm = Literal["ring", "direct", "halving_doubling", "tree", "torus2d"]
Collective = Literal["allreduce", "reduce_scatter", "all_gather"]
ALGORITHMS: tuple[Algorithm, ...] = ("ring", "direct", "halving_doubling", "tree", "torus2d")
COLLECTIVES: tuple[Collective, ...] = ("allreduce", "reduce_scatter", "all_gather")
I64 = npt.NDArray[np.int64]


class CollectiveError(InputError):
    """A collective cannot be built as asked; the message says what to change."""


@dataclass(frozen=True)
class Message:
    """``src`` sends pieces ``[lo, hi)`` to ``dst``, which reduces them in or copies them over."""

    src: int
    dst: int
    lo: int
    hi: int
    reduce: bool


@dataclass(frozen=True)
class Schedule:
    """What every chip sends in every step, over a fixed partition of the vector into pieces."""

    collective: Collective
    algorithm: Algorithm
    chips: int
    count: int
    bytes_per_element: int
    chunk_bytes: int
    pieces_per_segment: int
    bounds: tuple[int, ...]  # element offsets of the pieces, len = pieces + 1
    steps: tuple[tuple[Message, ...], ...]

    @property
    def nbytes(self) -> int:
        return self.count * self.bytes_per_element

    @property
    def pieces(self) -> int:
        return len(self.bounds) - 1

    def segment(self, s: int) -> tuple[int, int]:
        """The piece range of segment ``s`` (chip ``s``'s share in reduce-scatter/all-gather)."""
        k = self.pieces_per_segment
        return s * k, (s + 1) * k

    def piece_bytes(self) -> list[int]:
        b, bpe = self.bounds, self.bytes_per_element
        return [(b[i + 1] - b[i]) * bpe for i in range(self.pieces)]


def algorithms_for(topology: str) -> tuple[Algorithm, ...]:
    """Allreduce algorithms valid on a chip topology (``torus2d`` needs a torus)."""
    return tuple(a for a in ALGORITHMS if a != "torus2d" or topology == "torus2d")


# --- partition ---------------------------------------------------------------------------------


def _split(total: int, parts: int) -> list[int]:
    """Near-equal sizes of ``parts`` parts of ``total`` (the first ``total % parts`` get +1)."""
    q, r = divmod(total, parts)
    return [q + (i < r) for i in range(parts)]


def _bounds(count: int, chips: int, k: int) -> tuple[int, ...]:
    out = [0]
    for seg in _split(count, chips):
        for size in _split(seg, k):
            out.append(out[-1] + size)
    return tuple(out)


# --- algorithms ----------------------------------------------------------------------------------

Steps = list[list[Message]]
Ring = tuple[Sequence[int], Sequence[tuple[int, int]]]  # chips in ring order, range per position


def _ring_pass(rings: Sequence[Ring], lag: int, reduce: bool) -> Steps:
    """n-1 steps around each ring: at step s position q sends range (q-lag-s) to q+1."""
    n = len(rings[0][0]) if rings else 0
    return [
        [
            Message(chips[q], chips[(q + 1) % n], *ranges[(q - lag - s) % n], reduce)
            for chips, ranges in rings
            for q in range(n)
        ]
        for s in range(n - 1)
    ]


def _ring_reduce_scatter(rings: Sequence[Ring]) -> Steps:
    """Position q ends with the sum of range q: at step s it sends range (q-1-s) to q+1."""
    return _ring_pass(rings, lag=1, reduce=True)


def _ring_all_gather(rings: Sequence[Ring]) -> Steps:
    """Position q starts with range q: at step s it forwards range (q-s) to q+1."""
    return _ring_pass(rings, lag=0, reduce=False)


def _ring(sched: _Plan, net: Network) -> Steps:
    order = net.ring_order()
    rings = [(order, [sched.segment(c) for c in order])]
    steps: Steps = []
    if sched.collective != "all_gather":
        steps += _ring_reduce_scatter(rings)
    if sched.collective != "reduce_scatter":
        steps += _ring_all_gather(rings)
    return steps


def _direct(sched: _Plan, net: Network) -> Steps:
    p = sched.chips
    whole = (0, sched.pieces)
    return [[Message(s, (s + d) % p, *whole, True) for d in range(1, p) for s in range(p)]]


def _halving_doubling(sched: _Plan, net: Network) -> Steps:
    p = sched.chips
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    whole = (0, sched.pieces)
    # survivors by new rank: the odd chip of each of the first `rem` pairs, then the rest
    ranks = [2 * i + 1 for i in range(rem)] + list(range(2 * rem, p))
    steps: Steps = []
    if rem:
        steps.append([Message(2 * i, 2 * i + 1, *whole, True) for i in range(rem)])
    region = [whole] * pof2
    levels = pof2.bit_length() - 1
    for s in range(levels):  # reduce-scatter, recursive halving
        d = 1 << s
        step = []
        for r in range(pof2):
            lo, hi = region[r]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if r & d == 0 else ((mid, hi), (lo, mid))
            step.append(Message(ranks[r], ranks[r ^ d], *give, True))
            region[r] = keep
        steps.append(step)
    for s in reversed(range(levels)):  # all-gather, recursive doubling
        d = 1 << s
        steps.append([Message(ranks[r], ranks[r ^ d], *region[r], False) for r in range(pof2)])
        region = [
            (min(region[r][0], region[r ^ d][0]), max(region[r][1], region[r ^ d][1]))
            for r in range(pof2)
        ]
    if rem:
        steps.append([Message(2 * i + 1, 2 * i, *whole, False) for i in range(rem)])
    return steps


def inorder_tree(p: int) -> tuple[list[int], list[int]]:
    """Parent (-1 for the root) and depth of each position of an in-order binary tree.

    The root of positions ``[lo, hi)`` is the middle one; its subtrees are the two halves.
    """
    parent, depth = [-1] * p, [0] * p
    todo = [(0, p, -1, 0)]
    while todo:
        lo, hi, par, d = todo.pop()
        if lo >= hi:
            continue
        mid = (lo + hi) // 2
        parent[mid], depth[mid] = par, d
        todo += [(lo, mid, mid, d + 1), (mid + 1, hi, mid, d + 1)]
    return parent, depth


def _tree(sched: _Plan, net: Network) -> Steps:
    order = net.ring_order()
    parent, depth = inorder_tree(sched.chips)
    whole = (0, sched.pieces)
    height = max(depth, default=0)
    up = [
        [
            Message(order[q], order[parent[q]], *whole, True)
            for q in range(sched.chips)
            if depth[q] == d
        ]
        for d in range(height, 0, -1)
    ]
    down = [
        [
            Message(order[parent[q]], order[q], *whole, False)
            for q in range(sched.chips)
            if depth[q] == d
        ]
        for d in range(1, height + 1)
    ]
    return up + down


def _torus2d(sched: _Plan, net: Network) -> Steps:
    if net.kind != "torus2d":
        raise CollectiveError(
            f"algorithm 'torus2d' needs chips.topology torus2d, not {net.kind!r}; "
            "pick ring, direct, halving_doubling or tree on this topology"
        )
    rows, cols = net.dims
    k = sched.pieces_per_segment
    # part j (held by column j after the row reduce-scatter) = segments j*rows .. j*rows+rows-1
    parts = [(j * rows * k, (j + 1) * rows * k) for j in range(cols)]
    row_rings = [([r * cols + c for c in range(cols)], parts) for r in range(rows)]
    col_rings = [
        ([r * cols + c for r in range(rows)], [sched.segment(c * rows + r) for r in range(rows)])
        for c in range(cols)
    ]
    return (
        _ring_reduce_scatter(row_rings)
        + _ring_reduce_scatter(col_rings)
        + _ring_all_gather(col_rings)
        + _ring_all_gather(row_rings)
    )


@dataclass(frozen=True)
class _Plan:
    """What an algorithm builder needs: the collective and the piece partition."""

    collective: Collective
    chips: int
    pieces: int
    pieces_per_segment: int

    def segment(self, s: int) -> tuple[int, int]:
        return s * self.pieces_per_segment, (s + 1) * self.pieces_per_segment


_BUILDERS = {
    "ring": _ring,
    "direct": _direct,
    "halving_doubling": _halving_doubling,
    "tree": _tree,
    "torus2d": _torus2d,
}


def build_schedule(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
) -> Schedule:
    """The schedule of one collective of ``nbytes`` on ``topo.chips``."""
    if algorithm not in _BUILDERS:
        raise CollectiveError(
            f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}"
        )
    if collective not in COLLECTIVES:
        raise CollectiveError(
            f"unknown collective {collective!r}; use one of {', '.join(COLLECTIVES)}"
        )
    if collective != "allreduce" and algorithm != "ring":
        raise CollectiveError(
            f"{collective} runs the ring schedule only, not {algorithm!r}; use algorithm='ring'"
        )
    bpe = topo.bpe
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0 or nbytes % bpe:
        raise CollectiveError(
            f"message size {nbytes!r} bytes is not a whole number of {bpe}-byte elements; "
            f"use a non-negative multiple of dtype.bytes_per_element ({bpe})"
        )
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    if chunk < bpe:
        raise CollectiveError(f"chunk size {chunk} bytes is smaller than one element ({bpe} B)")
    chunk -= chunk % bpe  # whole elements, so a piece never exceeds a chunk
    p = topo.chips.count
    count = nbytes // bpe
    k = max(1, math.ceil(-(-count // p) * bpe / chunk))
    bounds = _bounds(count, p, k)
    plan = _Plan(collective, p, p * k, k)
    steps = _BUILDERS[algorithm](plan, network or build_network(topo)) if p > 1 else []
    return Schedule(
        collective=collective,
        algorithm=algorithm,  # type: ignore[arg-type]
        chips=p,
        count=count,
        bytes_per_element=bpe,
        chunk_bytes=chunk,
        pieces_per_segment=k,
        bounds=bounds,
        steps=tuple(tuple(s) for s in steps if s),
    )


# --- data ---------------------------------------------------------------------------------


def input_coefficients(chips: int) -> tuple[I64, I64]:
    """``(a, b)``: chip ``c`` starts with ``x_c[e] = a[c] + b[c] * e``, fixed pseudo-random ints."""
    rng = np.random.default_rng(20240601 + chips)
    return rng.integers(1, 1 << 20, chips, dtype=np.int64), rng.integers(
        1, 1 << 10, chips, dtype=np.int64
    )


class _Data:
    """Every chip's values per piece as exact integer pairs ``(A, B)``: value ``A + B * e``."""

    def __init__(self, chips: int, pieces: int) -> None:
        a, b = input_coefficients(chips)
        self.a = np.repeat(a[:, None], pieces, axis=1)
        self.b = np.repeat(b[:, None], pieces, axis=1)

    def apply(self, step: Sequence[Message]) -> None:
        """All sends read the data as before the step; then every receive lands."""
        snaps = [
            (self.a[m.src, m.lo : m.hi].copy(), self.b[m.src, m.lo : m.hi].copy()) for m in step
        ]
        for m, (a, b) in zip(step, snaps, strict=True):
            if m.reduce:
                self.a[m.dst, m.lo : m.hi] += a
                self.b[m.dst, m.lo : m.hi] += b
            else:
                self.a[m.dst, m.lo : m.hi] = a
                self.b[m.dst, m.lo : m.hi] = b


def expected(schedule: Schedule) -> tuple[I64, I64, npt.NDArray[np.bool_]]:
    """Expected ``(A, B)`` per chip and piece, and which (chip, piece) the collective defines."""
    p, n = schedule.chips, schedule.pieces
    a, b = input_coefficients(p)
    mask = np.ones((p, n), dtype=bool)
    if schedule.collective == "all_gather":
        owner = np.repeat(np.arange(p), schedule.pieces_per_segment)
        return np.tile(a[owner], (p, 1)), np.tile(b[owner], (p, 1)), mask
    if schedule.collective == "reduce_scatter":
        mask[:] = False
        for c in range(p):
            mask[c, slice(*schedule.segment(c))] = True
    return np.full((p, n), a.sum()), np.full((p, n), b.sum()), mask


def count_wrong(schedule: Schedule, a: I64, b: I64) -> int:
    """Elements whose final value differs from the expected one (nccl-tests' ``#wrong``)."""
    ea, eb, mask = expected(schedule)
    bounds = np.asarray(schedule.bounds, dtype=np.int64)
    first = np.broadcast_to(bounds[:-1], a.shape)[mask]
    size = np.broadcast_to(np.diff(bounds), a.shape)[mask]
    da, db = (a - ea)[mask], (b - eb)[mask]
    # A + B e == EA + EB e  <=>  da + db e == 0: all of the piece, none, or one element e
    safe_db = np.where(db == 0, 1, db)
    e = -da // safe_db
    one_right = (db != 0) & (da % safe_db == 0) & (e >= first) & (e < first + size)
    wrong = np.where((da == 0) & (db == 0), 0, size - one_right.astype(np.int64))
    return int(wrong.sum())


# --- run -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectiveRun:
    """One simulated collective: schedule, network, op log, and the functional check."""

    schedule: Schedule
    network: Network
    log: OpLog
    wrong: int
    final_a: I64
    final_b: I64

    @property
    def time_ps(self) -> int:
        return self.log.makespan_ps

    @property
    def nbytes(self) -> int:
        return self.schedule.nbytes

    @property
    def chips(self) -> int:
        return self.schedule.chips

    def values(self, chip: int) -> I64:
        """Chip ``chip``'s final vector, materialised element by element (small runs)."""
        s = self.schedule
        e = np.arange(s.count, dtype=np.int64)
        piece = np.repeat(np.arange(s.pieces), np.diff(np.asarray(s.bounds)))
        out: I64 = self.final_a[chip, piece] + self.final_b[chip, piece] * e
        return out


def _transfers(
    lo: int, hi: int, piece_bytes: Sequence[int], chunk: int
) -> list[tuple[int, int, int]]:
    """Cut pieces ``[lo, hi)`` into transfers of whole pieces of at most ``chunk`` bytes."""
    out: list[tuple[int, int, int]] = []
    start, acc = lo, 0
    for i in range(lo, hi):
        nb = piece_bytes[i]
        if acc and acc + nb > chunk:
            out.append((start, i, acc))
            start, acc = i, 0
        acc += nb
    if acc:
        out.append((start, hi, acc))
    return out


def run_collective(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
) -> CollectiveRun:
    """Simulate one collective of ``nbytes`` on ``topo.chips`` and check its result."""
    nbytes, chunk_bytes = check_collective(topo, nbytes, algorithm, chunk_bytes)  # sim.limits
    net = build_network(topo)
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=net
    )
    return run_schedule(schedule, net)


def run_schedule(schedule: Schedule, net: Network) -> CollectiveRun:
    """Time ``schedule`` on ``net`` and check its result (any schedule, e.g. a modified one)."""
    program = fabric_program(schedule)
    data = _Data(schedule.chips, schedule.pieces)
    for step in schedule.steps:
        data.apply(step)
    return CollectiveRun(
        schedule=schedule,
        network=net,
        log=simulate_fabric(net, program),
        wrong=count_wrong(schedule, data.a, data.b),
        final_a=data.a,
        final_b=data.b,
    )


def fabric_program(schedule: Schedule) -> FabricProgram:
    """The transfers and reductions of ``schedule``, each depending on the data it needs.

    A transfer depends on the ops that last wrote its pieces on the sender; a reduction on
    its transfer and on the ops that last wrote those pieces on the receiver. Every send of
    a step is placed before the step's receives land, so it reads the data as before the
    step. Within a step, transfers go round-robin over the messages, one chunk each.
    """
    program = FabricProgram()
    add = program.add
    piece_bytes = schedule.piece_bytes()
    writer = [[-1] * schedule.pieces for _ in range(schedule.chips)]
    cache: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for index, step in enumerate(schedule.steps):
        plans = []
        for m in step:
            key = (m.lo, m.hi)
            if key not in cache:
                cache[key] = _transfers(m.lo, m.hi, piece_bytes, schedule.chunk_bytes)
            plans.append(cache[key])
        landed = []
        for t in range(max(map(len, plans), default=0)):
            for m, plan in zip(step, plans, strict=True):
                if t < len(plan):
                    lo, hi, nb = plan[t]
                    deps = _deps(writer[m.src], lo, hi)
                    op = add(TRANSFER, m.src, m.dst, nb, index, deps)
                    landed.append((m.dst, lo, hi, nb, op, m.reduce))
        for dst, lo, hi, nb, op, is_reduce in landed:
            if is_reduce:
                deps = tuple(sorted({op, *_deps(writer[dst], lo, hi)}))
                op = add(REDUCTION, dst, dst, nb, index, deps)
            writer[dst][lo:hi] = [op] * (hi - lo)
    return program


def _deps(writers: list[int], lo: int, hi: int) -> tuple[int, ...]:
    return tuple(sorted({w for w in writers[lo:hi] if w >= 0}))


def allreduce(topo: Topology, nbytes: int, algorithm: str = "ring", **kw: int) -> CollectiveRun:
    """Simulate an allreduce of ``nbytes`` with ``algorithm`` (see the module docstring)."""
    return run_collective(topo, nbytes, algorithm, "allreduce", **kw)


def reduce_scatter(topo: Topology, nbytes: int, **kw: int) -> CollectiveRun:
    """Ring reduce-scatter of an ``nbytes`` vector: chip ``c`` ends with segment ``c`` summed."""
    return run_collective(topo, nbytes, "ring", "reduce_scatter", **kw)


def all_gather(topo: Topology, nbytes: int, **kw: int) -> CollectiveRun:
    """Ring all-gather into an ``nbytes`` vector: every chip ends with every chip's segment."""
    return run_collective(topo, nbytes, "ring", "all_gather", **kw)


# --- metrics -------------------------------------------------------------------------------------


def bus_factor(collective: str, chips: int) -> float:
    """nccl-tests' busbw / algbw: ``2(p-1)/p`` for allreduce, ``(p-1)/p`` for the halves."""
    if chips <= 1:
        return 0.0
    return (2.0 if collective == "allreduce" else 1.0) * (chips - 1) / chips


def collective_metrics(run: CollectiveRun) -> dict[str, float]:
    """Flat metrics of one run (GB = 1e9 bytes, as nccl-tests): time, bandwidths, link load."""
    log, net, p = run.log, run.network, run.chips
    t_ps = run.time_ps
    links = len(net.links)
    is_link = log.stage != REDUCE
    eng = log.engine.astype(np.int64)
    dur = (log.end - log.start).astype(np.float64)
    nbytes = log.nbytes.astype(np.float64)
    link_bytes = np.bincount(eng[is_link], weights=nbytes[is_link], minlength=links)[:links]
    link_busy = np.bincount(eng[is_link], weights=dur[is_link], minlength=links)[:links]
    sends = log.stage == SEND
    injected = np.bincount(log.chip[sends].astype(np.int64), weights=nbytes[sends], minlength=p)
    reduce_busy = np.bincount(
        log.chip[~is_link].astype(np.int64), weights=dur[~is_link], minlength=p
    )
    time_ns = t_ps / 1000
    algbw = run.nbytes / time_ns if t_ps else 0.0
    used = link_bytes[link_bytes > 0]
    return {
        "time_ns": time_ns,
        "algbw_gbs": algbw,
        "busbw_gbs": algbw * bus_factor(run.schedule.collective, p),
        "wrong": float(run.wrong),
        "count": float(run.schedule.count),
        "transfers": float(np.count_nonzero(sends)),
        "link_bytes_max": float(link_bytes.max(initial=0.0)),
        "link_bytes_mean": float(used.mean()) if len(used) else 0.0,
        "link_util_peak": float(link_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
        "injected_bytes_max": float(injected.max(initial=0.0)),
        "reduce_util_peak": float(reduce_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
    }
