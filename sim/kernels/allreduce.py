"""Collectives on a multi-chip network: allreduce schedules, their timing, their functional check.

A **schedule** is a list of steps; a step is a list of messages ``src -> dst`` of an element
range ``[lo, hi)`` of the vector, either reduced into the destination or copied over it.
Every message is cut into **equal chunks** (sizes within one element; :func:`chunks`): ``k``
the next power of two of ``max(ceil(bytes / chunk), staging_buffers / 2)`` (``chips.chunk_kib``)
by recursive halving, one transfer each, so a message just above a chunk becomes two half
chunks, never a chunk and a sliver.

Timing (:func:`run_collective`) follows the data, chunk by chunk: a transfer leaves when
the elements it carries are ready on the sender (the ops that last wrote them have ended)
and it has a staging buffer at the receiver; the receiver reduces it (reduce engine and
HBM) or copies it (HBM) as soon as it has arrived and the local elements are ready
(:func:`sim.link.simulate_fabric`). So consecutive steps pipeline chunk by chunk. Within a
step, transfers are issued round-robin over the step's messages, one chunk each; every send
of a step reads the data as it was before the step. Sends marked ``fresh`` read the
chip's input buffer (one-shot ``direct`` reduces into a separate output). The reductions a
step makes into the same chunk of one chip (direct: one per peer; a tree node: one per
child) form one **accumulator**: sums commute, so each adds when its data has come, in
arrival order, not in message order (ADR 0016; MPI lets an implementation reorder a
commutative reduction, MPI-3.1 section 5.9.1).

Algorithms (p chips, n bytes; "ring order" is :meth:`Network.ring_order`, a Hamiltonian
cycle of one-hop edges wherever one exists):

* ``ring``: two counter-rotating rings (as NCCL runs channels both ways on full-duplex
  links), each reduce-scatters then all-gathers one half of the vector, ``2(p-1)`` steps
  of ``n / 2p`` bytes per chip per ring. ``reduce_scatter`` and ``all_gather`` run either half.
* ``direct``: one-shot; every chip sends its whole input to every other chip and reduces
  the ``p-1`` vectors it receives into its output.
* ``halving_doubling``: Rabenseifner; reduce-scatter by recursive halving (partner at
  distance 1, 2, 4, ...), then all-gather by recursive doubling. When ``p`` is not a power
  of two, MPICH's fallback: the first ``2r`` chips (``r = p - 2^floor(lg p)``) pair up, each
  even one hands its vector to its odd neighbour, the survivors run halving-doubling, and
  each odd chip of a pair sends the result back.
* ``double_binary_tree``: NCCL's double binary tree (Sanders, Speck and Traeff 2009): tree
  0 is NCCL's binary tree over the ring-order ranks (odd ranks are leaves), tree 1 its
  mirror image (``p`` even) or its shift by one rank (``p`` odd), so every chip is interior
  in at most one tree (for odd ``p`` one chip is interior in both). Each tree carries half
  the vector: reduce up, broadcast down, every chunk pipelining through the levels.
* ``torus2d``: on a ``rows x cols`` torus, reduce-scatter along every row ring, allreduce
  along every column ring on the part each chip holds, all-gather along the rows; one half
  of the vector goes one way round both dimensions, the other half the other way.

Functional check (nccl-tests' ``#wrong``), by **replaying the op log**
(:func:`replay`): chip ``c`` starts with the integers ``x_c[e] = a_c + b_c * e``. Each
transfer copies what its sender holds when its first hop has sent its last byte (ops
stream, so that is when all of it has been read), its data lands where its recorded links
end, and its consumer (the reduction or copy recorded on the receiving chip) applies it
when it ends. Every operation treats the elements of a piece alike, so a piece's
values stay ``A + B e`` and are kept as the exact integer pair ``(A, B)`` plus a bit mask of
the inputs summed into it: exact at any size without materialising ``p x count`` numbers.
A transfer whose recorded links do not lead from its sender to its consumer's chip, or a
consumer that starts before its data arrived, is an error naming the ops. When every
consumer reduces a fresh send (``direct``), sums and ORs commute, so the replay adds the
log's reductions up in numpy instead of in time order (same result, :func:`_replay_sums`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.limits import check_collective
from sim.link import (
    COPY,
    COPY_STAGE,
    FORWARD,
    REDUCE,
    REDUCTION,
    SEND,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    hbm_default,
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
    "ReplayError",
    "Schedule",
    "algorithms_for",
    "all_gather",
    "allreduce",
    "binary_tree",
    "build_schedule",
    "collective_metrics",
    "double_binary_tree",
    "fabric_program",
    "reduce_scatter",
    "replay",
    "run_collective",
    "run_schedule",
]

Algorithm = Literal["ring", "direct", "halving_doubling", "double_binary_tree", "torus2d"]
Collective = Literal["allreduce", "reduce_scatter", "all_gather"]
ALGORITHMS: tuple[Algorithm, ...] = (
    "ring",
    "direct",
    "halving_doubling",
    "double_binary_tree",
    "torus2d",
)
COLLECTIVES: tuple[Collective, ...] = ("allreduce", "reduce_scatter", "all_gather")
I64 = npt.NDArray[np.int64]
Range = tuple[int, int]


class CollectiveError(InputError):
    """A collective cannot be built as asked; the message says what to change."""


class ReplayError(RuntimeError):
    """The op log moves data in a way no network could (names the ops involved)."""


@dataclass(frozen=True)
class Message:
    """``src`` sends elements ``[lo, hi)`` to ``dst``, which reduces them in or copies them
    over; ``fresh`` sends read the sender's input buffer instead of its current values."""

    src: int
    dst: int
    lo: int
    hi: int
    reduce: bool
    fresh: bool = False


@dataclass(frozen=True)
class Schedule:
    """What every chip sends in every step (element ranges), and what each chip must own."""

    collective: Collective
    algorithm: Algorithm
    chips: int
    count: int
    bytes_per_element: int
    chunk_bytes: int
    steps: tuple[tuple[Message, ...], ...]
    shares: tuple[tuple[Range, ...], ...] = ()  # per chip: its ranges (reduce_scatter, all_gather)
    depth: int = 1  # at least this many chunks per message (chips.staging_buffers)

    @property
    def nbytes(self) -> int:
        return self.count * self.bytes_per_element


def algorithms_for(topology: str) -> tuple[Algorithm, ...]:
    """Allreduce algorithms valid on a chip topology (``torus2d`` needs a torus)."""
    return tuple(a for a in ALGORITHMS if a != "torus2d" or topology == "torus2d")


def _split(total: int, parts: int) -> list[int]:
    """Near-equal sizes of ``parts`` parts of ``total`` (the first ``total % parts`` get +1)."""
    q, r = divmod(total, parts)
    return [q + (i < r) for i in range(parts)]


def _ranges(lo: int, hi: int, parts: int) -> list[Range]:
    """``[lo, hi)`` in ``parts`` near-equal ranges (some may be empty); for a power of two,
    by recursive halving, so that chunks, segments and halving-doubling's regions share
    their boundaries."""
    if parts & (parts - 1) == 0:
        if parts == 1:
            return [(lo, hi)]
        mid = (lo + hi) // 2
        return _ranges(lo, mid, parts // 2) + _ranges(mid, hi, parts // 2)
    out, at = [], lo
    for size in _split(hi - lo, parts):
        out.append((at, at + size))
        at += size
    return out


# --- algorithms ----------------------------------------------------------------------------------

Steps = list[list[Message]]
Ring = tuple[Sequence[int], Sequence[Range]]  # chips in ring order, range owned per position


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


def _zip(*parts: Steps) -> Steps:
    """Steps of independent schedules run side by side (step i = every part's step i)."""
    return [[m for p in parts if i < len(p) for m in p[i]] for i in range(max(map(len, parts)))]


@dataclass(frozen=True)
class _Plan:
    collective: Collective
    chips: int
    count: int

    def halves(self) -> list[Range]:
        return _ranges(0, self.count, 2)


def _ring_shares(plan: _Plan) -> list[list[Range]]:
    """Per half, the range of each chip: segment c of that half."""
    return [_ranges(lo, hi, plan.chips) for lo, hi in plan.halves()]


def _ring(plan: _Plan, net: Network) -> Steps:
    order = list(net.ring_order())
    rings = []
    for h, segs in enumerate(_ring_shares(plan)):
        chips = order if h == 0 else order[::-1]
        rings.append((chips, [segs[c] for c in chips]))
    steps: Steps = []
    if plan.collective != "all_gather":
        steps += _ring_pass(rings, lag=1, reduce=True)
    if plan.collective != "reduce_scatter":
        steps += _ring_pass(rings, lag=0, reduce=False)
    return steps


def _direct(plan: _Plan, net: Network) -> Steps:
    p = plan.chips
    return [
        [Message(s, (s + d) % p, 0, plan.count, True, True) for d in range(1, p) for s in range(p)]
    ]


def _halving_doubling(plan: _Plan, net: Network) -> Steps:
    p = plan.chips
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    whole = (0, plan.count)
    ranks = [2 * i + 1 for i in range(rem)] + list(range(2 * rem, p))  # survivors by new rank
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


def _tree_steps(parent: Sequence[int], chips: Sequence[int], rng: Range) -> Steps:
    """Reduce up by height (leaves first), then broadcast down by depth, on range ``rng``."""
    p = len(parent)
    depth, height = tree_levels(parent)
    top = max(height, default=0)
    up = [
        [Message(chips[r], chips[parent[r]], *rng, True) for r in range(p) if height[r] == h]
        for h in range(top)
    ]
    down = [
        [Message(chips[parent[r]], chips[r], *rng, False) for r in range(p) if depth[r] == d]
        for d in range(1, max(depth, default=0) + 1)
    ]
    return [s for s in up if s] + down


def _double_binary_tree(plan: _Plan, net: Network) -> Steps:
    order = net.ring_order()
    trees = double_binary_tree(plan.chips)
    return _zip(*(_tree_steps(t, order, rng) for t, rng in zip(trees, plan.halves(), strict=True)))


def _torus2d(plan: _Plan, net: Network) -> Steps:
    if net.kind != "torus2d":
        raise CollectiveError(
            f"algorithm 'torus2d' needs chips.topology torus2d, not {net.kind!r}; "
            "pick ring, direct, halving_doubling or double_binary_tree on this topology"
        )
    rows, cols = net.dims
    halves = []
    for h, (lo, hi) in enumerate(plan.halves()):
        parts = _ranges(lo, hi, cols)  # part c: held by column c after the row reduce-scatter
        subs = [_ranges(*parts[c], rows) for c in range(cols)]  # sub r of part c: chip (r, c)

        def way(chips: list[int], h: int = h) -> list[int]:
            return chips if h == 0 else chips[::-1]

        row_rings: list[Ring] = []
        for r in range(rows):
            chips = way([r * cols + c for c in range(cols)])
            row_rings.append((chips, [parts[x % cols] for x in chips]))
        col_rings: list[Ring] = []
        for c in range(cols):
            chips = way([r * cols + c for r in range(rows)])
            col_rings.append((chips, [subs[c][x // cols] for x in chips]))
        halves.append(
            _ring_pass(row_rings, 1, True)
            + _ring_pass(col_rings, 1, True)
            + _ring_pass(col_rings, 0, False)
            + _ring_pass(row_rings, 0, False)
        )
    return _zip(*halves)


_BUILDERS = {
    "ring": _ring,
    "direct": _direct,
    "halving_doubling": _halving_doubling,
    "double_binary_tree": _double_binary_tree,
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
    chunk -= chunk % bpe
    p = topo.chips.count
    plan = _Plan(collective, p, nbytes // bpe)
    net = network or build_network(topo)
    steps = _BUILDERS[algorithm](plan, net) if p > 1 else []
    shares: tuple[tuple[Range, ...], ...] = ()
    if collective != "allreduce":
        per_half = _ring_shares(plan)
        shares = tuple(tuple(h[c] for h in per_half) for c in range(p))
    return Schedule(
        collective=collective,
        algorithm=algorithm,  # type: ignore[arg-type]
        chips=p,
        count=plan.count,
        bytes_per_element=bpe,
        chunk_bytes=chunk,
        steps=tuple(t for t in (tuple(m for m in s if m.hi > m.lo) for s in steps) if t),
        shares=shares,
        depth=max(1, topo.chips.staging_buffers // 2),
    )


# --- program -------------------------------------------------------------------------------------


def chunks(lo: int, hi: int, bpe: int, chunk: int, depth: int = 1) -> list[Range]:
    """Elements ``[lo, hi)`` cut into equal chunks (within one element) of at most ``chunk``
    bytes and at least ``depth`` of them (while there are elements), their number rounded
    up to a power of two: ``chunk / 2 < size <= chunk`` for large messages."""
    nbytes = (hi - lo) * bpe
    k = 1 << (max(-(-nbytes // chunk), depth, 1) - 1).bit_length()
    return _bisect(lo, hi, k)


def _bisect(lo: int, hi: int, k: int) -> list[Range]:
    """``[lo, hi)`` halved recursively (first half ``floor``) into ``k`` parts, ``k`` a power of
    two; parts stay within one element of each other, and the halves of a range are cut as
    its own parts are (so halving-doubling's regions fall on chunk boundaries). Parts that
    would be empty are left out."""
    if k == 1 or hi - lo <= 1:
        return [(lo, hi)]
    mid = (lo + hi) // 2
    return _bisect(lo, mid, k // 2) + _bisect(mid, hi, k // 2)


@dataclass
class Compiled:
    """A schedule as a fabric program, with what each op moves (for the replay).

    ``bounds`` are the element offsets of the pieces (every chunk is a range of pieces);
    per op: its piece range, whether a consumer reduces, whether a send reads the input.
    """

    program: FabricProgram
    bounds: list[int]
    lo: list[int] = field(default_factory=list)
    hi: list[int] = field(default_factory=list)
    reduce: list[bool] = field(default_factory=list)
    fresh: list[bool] = field(default_factory=list)


def fabric_program(schedule: Schedule) -> Compiled:
    """The transfers, reductions and copies of ``schedule``, each depending on the data it needs.

    A transfer depends on the ops that last wrote its elements on the sender (none for a
    ``fresh`` send). When those are reductions or copies of received data, the chunk is
    forwarded as it is produced (NCCL's recvReduceSend / recvCopySend) and streams from the
    chip's on-chip buffers; otherwise (the chip's own input) the send reads HBM. Its
    consumer depends on the transfer and on the ops that last wrote those elements on the
    receiver. Every send of a
    step is placed before the step's receives land, so it reads the data as before the
    step. Within a step, transfers go round-robin over the messages, one chunk each.
    Reductions of one step into the same pieces of one chip share an accumulator
    (``FabricProgram.into``): they depend on what the pieces held before the step, not on
    each other, and an op that later reads the pieces depends on all of them.
    """
    one_shot = _one_shot_program(schedule)
    if one_shot is not None:
        return one_shot
    bpe, chunk = schedule.bytes_per_element, schedule.chunk_bytes
    depth = schedule.depth
    cache: dict[Range, list[Range]] = {}
    cuts = {0, schedule.count}
    for step in schedule.steps:
        for m in step:
            if (m.lo, m.hi) not in cache:
                cache[m.lo, m.hi] = chunks(m.lo, m.hi, bpe, chunk, depth)
                cuts.update(x for r in cache[m.lo, m.hi] for x in r)
    bounds = sorted(cuts)
    index = {b: i for i, b in enumerate(bounds)}
    out = Compiled(FabricProgram(), bounds)
    add = out.program.add
    writer = [[-1] * (len(bounds) - 1) for _ in range(schedule.chips)]
    summed: dict[int, list[int]] = {}  # an accumulator's first reduction -> all that add into it
    produced: dict[int, Range] = {}  # consumer op -> the pieces it wrote

    def note(lo: int, hi: int, reduce: bool, fresh: bool) -> None:
        out.lo.append(lo)
        out.hi.append(hi)
        out.reduce.append(reduce)
        out.fresh.append(fresh)

    for at, step in enumerate(schedule.steps):
        plans = [cache[m.lo, m.hi] for m in step]
        landed = []
        for t in range(max(map(len, plans), default=0)):
            for m, plan in zip(step, plans, strict=True):
                if t < len(plan):
                    lo, hi = index[plan[t][0]], index[plan[t][1]]
                    deps = () if m.fresh else _deps(writer[m.src], lo, hi, summed)
                    nb = (plan[t][1] - plan[t][0]) * bpe
                    streams = bool(deps) and all(d in produced for d in deps)
                    span = (plan[t][0], plan[t][1])
                    op = add(
                        TRANSFER, m.src, m.dst, nb, at, deps, hbm=0 if streams else nb, span=span
                    )
                    note(lo, hi, m.reduce, m.fresh)
                    landed.append((m.dst, lo, hi, nb, op, m.reduce, span))
        adding: dict[tuple[int, int, int], tuple[int, tuple[int, ...]]] = {}
        for dst, lo, hi, nb, op, is_reduce, span in landed:
            key = (dst, lo, hi)
            if is_reduce and key in adding:  # adds into what another reduction of the step does
                first, before = adding[key]
                into = out.program.into
                into[first] = first
                got = add(REDUCTION, dst, dst, nb, at, tuple(sorted({op, *before})), op, span=span)
                into[got] = first
                summed[first].append(got)
            else:
                before = _deps(writer[dst], lo, hi, summed)
                kind = REDUCTION if is_reduce else COPY
                got = add(kind, dst, dst, nb, at, tuple(sorted({op, *before})), op, span=span)
                if is_reduce:
                    adding[key] = (got, before)
                    summed[got] = [got]
            produced[got] = (lo, hi)
            note(lo, hi, is_reduce, False)
            writer[dst][lo:hi] = [adding[key][0] if is_reduce else got] * (hi - lo)
    return out


def _one_shot_program(schedule: Schedule) -> Compiled | None:
    """:func:`fabric_program` of a one-step schedule whose messages all reduce fresh data over
    one range (``direct``), built column by column; None for any other schedule.

    The same program the general loop builds: transfer ``t * M + m`` is chunk ``t`` of
    message ``m`` (round-robin), reading HBM and depending on nothing; reduction
    ``K + t * M + m`` consumes it, depends on it alone and adds into the accumulator of
    chunk ``t`` on its chip, named by the reduction of the first message of the step to
    that chip (when the chip gets more than one).
    """
    if len(schedule.steps) != 1:
        return None
    step = schedule.steps[0]
    lo, hi = step[0].lo, step[0].hi
    if not all(m.fresh and m.reduce and m.lo == lo and m.hi == hi for m in step):
        return None
    bpe = schedule.bytes_per_element
    plan = chunks(lo, hi, bpe, schedule.chunk_bytes, schedule.depth)
    bounds = sorted({0, schedule.count, *(x for r in plan for x in r)})
    index = {b: i for i, b in enumerate(bounds)}
    rounds, width = len(plan), len(step)
    half = rounds * width
    src = np.asarray([m.src for m in step], dtype=np.int64)
    dst = np.asarray([m.dst for m in step], dtype=np.int64)
    first_to: dict[int, int] = {}
    count: dict[int, int] = {}
    for m, d in enumerate(dst.tolist()):
        first_to.setdefault(d, m)
        count[d] = count.get(d, 0) + 1
    first = np.asarray(
        [first_to[d] if count[d] > 1 else -1 for d in dst.tolist()], dtype=np.int64
    )  # the first message of the step to dst[m], when dst[m] gets more than one
    nb = np.asarray([(b - a) * bpe for a, b in plan], dtype=np.int64)
    per_op = np.repeat(nb, width)
    t_ids = np.arange(half, dtype=np.int64)
    into = np.where(
        np.tile(first, rounds) >= 0, half + t_ids - np.tile(np.arange(width) - first, rounds), -1
    )
    r_deps: list[tuple[int, ...]] = [(t,) for t in t_ids.tolist()]
    spans = [r for r in plan for _ in range(width)]
    piece_lo = [index[a] for a, _b in plan for _ in range(width)]
    piece_hi = [index[b] for _a, b in plan for _ in range(width)]
    program = FabricProgram(
        kind=[TRANSFER] * half + [REDUCTION] * half,
        src=np.tile(src, rounds).tolist() + np.tile(dst, rounds).tolist(),
        dst=np.tile(dst, rounds).tolist() * 2,
        nbytes=per_op.tolist() * 2,
        step=[0] * (2 * half),
        deps=[()] * half + r_deps,
        consumes=[-1] * half + t_ids.tolist(),
        hbm=per_op.tolist() + [-1] * half,
        span=spans * 2,
        into=[-1] * half + into.tolist(),
    )
    return Compiled(
        program,
        bounds,
        lo=piece_lo * 2,
        hi=piece_hi * 2,
        reduce=[True] * (2 * half),
        fresh=[True] * half + [False] * half,
    )


def _deps(writers: list[int], lo: int, hi: int, summed: dict[int, list[int]]) -> tuple[int, ...]:
    """The ops whose results pieces ``lo..hi`` hold: their last writers, and for an
    accumulator (a writer that is the first of several reductions) all that added into it."""
    if hi - lo == 1:
        w = writers[lo]
        if w < 0:
            return ()
        return tuple(summed[w]) if w in summed else (w,)
    ops: set[int] = set()
    for w in set(writers[lo:hi]):
        if w >= 0:
            ops.update(summed.get(w, (w,)))
    return tuple(sorted(ops))


# --- data and the replay check -------------------------------------------------------------------


def input_coefficients(chips: int) -> tuple[I64, I64]:
    """``(a, b)``: chip ``c`` starts with ``x_c[e] = a[c] + b[c] * e``, fixed pseudo-random ints."""
    rng = np.random.default_rng(20240601 + chips)
    return rng.integers(1, 1 << 20, chips, dtype=np.int64), rng.integers(
        1, 1 << 10, chips, dtype=np.int64
    )


@dataclass(frozen=True)
class Replayed:
    """Every chip's final values per piece (``A + B e``), the inputs summed in (bit masks)."""

    a: I64
    b: I64
    mask: I64


def _route_problems(net: Network, compiled: Compiled, log: OpLog) -> str:
    """Check that each transfer's recorded links lead from its sender to its consumer's chip,
    and that each consumer starts after its data arrived; "" if they all do."""
    prog = compiled.program
    link = (log.stage == SEND) | (log.stage == FORWARD)
    ops, eng = log.op[link], log.engine[link].astype(np.int64)
    ends = np.asarray(net.links, dtype=np.int64).reshape(-1, 2)
    u, v = ends[eng, 0], ends[eng, 1]
    first = np.ones(len(ops), dtype=bool)
    first[1:] = ops[1:] != ops[:-1]
    last = np.ones(len(ops), dtype=bool)
    last[:-1] = first[1:]
    src = np.asarray(prog.src, dtype=np.int64)
    dst = np.asarray(prog.dst, dtype=np.int64)
    names = net.names
    broken = np.flatnonzero(~first & (u != np.roll(v, 1)))
    if len(broken):
        i = int(broken[0])
        return f"op {int(ops[i])}: its links {names[eng[i - 1]]} and {names[eng[i]]} do not join"
    bad = np.flatnonzero(first & (u != src[ops]))
    if len(bad):
        i = int(bad[0])
        return f"op {int(ops[i])}: transfer {src[ops[i]]}->{dst[ops[i]]} starts on {names[eng[i]]}"
    lat = net.latency_ps
    n = len(prog)
    arrive = np.zeros(n, dtype=np.int64)
    begins = np.zeros(n, dtype=np.int64)
    at = np.full(n, -1, dtype=np.int64)
    last_link = np.zeros(n, dtype=np.int64)
    tops = ops[last]
    arrive[tops] = log.end[link][last] + lat
    begins[tops] = log.start[link][last] + lat
    at[tops] = v[last]
    last_link[tops] = eng[last]
    consumer = ~link
    c_op = log.op[consumer].astype(np.int64)
    c_chip = log.chip[consumer].astype(np.int64)
    c_start, c_end = log.start[consumer], log.end[consumer]
    t = np.asarray(prog.consumes, dtype=np.int64)[c_op]
    tt = np.maximum(t, 0)
    missing = (t >= 0) & (at[tt] < 0)
    elsewhere = (t >= 0) & ~missing & (at[tt] != c_chip)
    early = (t >= 0) & ~missing & ~elsewhere & ((c_start < begins[tt]) | (c_end <= arrive[tt]))
    failed = np.flatnonzero(missing | elsewhere | early)
    if len(failed):
        i = int(failed[0])
        op, chip, t_i = int(c_op[i]), int(c_chip[i]), int(t[i])
        if missing[i]:
            return f"op {op} on chip {chip} consumes transfer op {t_i}, which never crossed a link"
        if elsewhere[i]:
            return (
                f"op {t_i}: transfer {prog.src[t_i]}->{prog.dst[t_i]} left its data at chip "
                f"{at[t_i]} (its last link is {names[last_link[t_i]]}), not at chip {chip}, "
                f"where op {op} consumes it: the data skipped a link"
            )
        return (
            f"op {op} on chip {chip} runs {int(c_start[i])}..{int(c_end[i])} ps, but the data of "
            f"transfer op {t_i} arrives {begins[t_i]}..{arrive[t_i]} ps: it uses data before it "
            "arrived"
        )
    return ""


def replay(schedule: Schedule, net: Network, compiled: Compiled, log: OpLog) -> Replayed:
    """Move the data as the op log says (module docstring) and return every chip's result.

    Raises :class:`ReplayError` when a transfer's links do not lead to the chip that consumes
    it, or when an op consumes data before it arrived.
    """
    problem = _route_problems(net, compiled, log)
    if problem:
        raise ReplayError(problem)
    p, pieces = schedule.chips, len(compiled.bounds) - 1
    a0, b0 = input_coefficients(p)
    m0 = (
        np.left_shift(np.int64(1), np.arange(p, dtype=np.int64))
        if p < 63
        else np.zeros(p, np.int64)
    )
    a = np.repeat(a0[:, None], pieces, axis=1)
    b = np.repeat(b0[:, None], pieces, axis=1)
    mask = np.repeat(m0[:, None], pieces, axis=1)
    prog = compiled.program
    sends = log.stage == SEND
    consumer = (log.stage == REDUCE) | (log.stage == COPY_STAGE)
    summed = _replay_sums(compiled, log, consumer, (a, b, mask), (a0, b0, m0))
    if summed is not None:
        return summed
    times = np.concatenate([log.end[sends], log.end[consumer]])
    ops = np.concatenate([log.op[sends], log.op[consumer]])
    kinds = np.concatenate(
        [np.ones(int(sends.sum()), np.int64), np.zeros(int(consumer.sum()), np.int64)]
    )
    order = np.lexsort((ops, kinds, times))  # at equal times, writes land before reads
    lo, hi, fresh, consumes = compiled.lo, compiled.hi, compiled.fresh, prog.consumes
    src = prog.src
    stash: dict[int, tuple[I64, I64, I64]] = {}
    for op in ops[order].tolist():
        x, y = lo[op], hi[op]
        if prog.kind[op] == TRANSFER:
            s = src[op]
            if fresh[op]:
                n = y - x
                stash[op] = (np.full(n, a0[s]), np.full(n, b0[s]), np.full(n, m0[s]))
            else:
                stash[op] = (a[s, x:y].copy(), b[s, x:y].copy(), mask[s, x:y].copy())
            continue
        da, db, dm = stash.pop(consumes[op])
        c = src[op]
        if prog.kind[op] == REDUCTION:
            a[c, x:y] += da
            b[c, x:y] += db
            mask[c, x:y] |= dm
        else:
            a[c, x:y] = da
            b[c, x:y] = db
            mask[c, x:y] = dm
    return Replayed(a, b, mask)


def _replay_sums(
    compiled: Compiled,
    log: OpLog,
    consumer: npt.NDArray[np.bool_],
    start: tuple[I64, I64, I64],
    inputs: tuple[I64, I64, I64],
) -> Replayed | None:
    """:func:`replay` when every consumer is a reduction of a fresh send (``direct``), each
    transfer consumed once: sums and ORs commute, so the order of the log does not matter and
    each chip's result is its start plus what its reductions received, summed in numpy.
    None when the log has any other shape (the general replay then follows it in order)."""
    prog = compiled.program
    ops = log.op[consumer].astype(np.int64)
    if not len(ops) or (log.stage[consumer] != REDUCE).any():
        return None
    t = np.asarray(prog.consumes, dtype=np.int64)[ops]
    fresh = np.asarray(compiled.fresh, dtype=bool)
    if (t < 0).any() or not fresh[t].all() or np.bincount(t).max() > 1:
        return None
    a, b, mask = (x.copy() for x in start)
    a0, b0, m0 = inputs
    chip = np.asarray(prog.src, dtype=np.int64)[ops]
    sender = np.asarray(prog.src, dtype=np.int64)[t]
    lo = np.asarray(compiled.lo, dtype=np.int64)[ops]
    width = np.asarray(compiled.hi, dtype=np.int64)[ops] - lo
    rows = np.repeat(chip, width)
    pieces = np.repeat(lo - np.cumsum(width) + width, width) + np.arange(int(width.sum()))
    who = np.repeat(sender, width)
    np.add.at(a, (rows, pieces), a0[who])
    np.add.at(b, (rows, pieces), b0[who])
    np.bitwise_or.at(mask, (rows, pieces), m0[who])
    return Replayed(a, b, mask)


def expected(
    schedule: Schedule, bounds: Sequence[int]
) -> tuple[I64, I64, I64, npt.NDArray[np.bool_]]:
    """Expected ``(A, B, inputs)`` per chip and piece, and which (chip, piece) are defined."""
    p, n = schedule.chips, len(bounds) - 1
    a, b = input_coefficients(p)
    m = (
        np.left_shift(np.int64(1), np.arange(p, dtype=np.int64))
        if p < 63
        else np.zeros(p, np.int64)
    )
    defined = np.ones((p, n), dtype=bool)
    if schedule.collective == "allreduce":
        return np.full((p, n), a.sum()), np.full((p, n), b.sum()), np.full((p, n), m.sum()), defined
    starts = np.asarray(bounds[:-1])
    owner = np.full(n, -1, dtype=np.int64)
    for c, ranges in enumerate(schedule.shares):
        for lo, hi in ranges:
            owner[(starts >= lo) & (starts < hi)] = c
    if schedule.collective == "all_gather":
        return (
            np.tile(a[owner], (p, 1)),
            np.tile(b[owner], (p, 1)),
            np.tile(m[owner], (p, 1)),
            defined,
        )
    defined = owner[None, :] == np.arange(p)[:, None]
    return np.full((p, n), a.sum()), np.full((p, n), b.sum()), np.full((p, n), m.sum()), defined


def check(schedule: Schedule, bounds: Sequence[int], got: Replayed) -> tuple[int, str]:
    """nccl-tests' ``#wrong`` (elements whose final value differs from the expected one) and a
    sentence on the first wrong piece ("" when nothing is wrong)."""
    ea, eb, em, defined = expected(schedule, bounds)
    edges = np.asarray(bounds, dtype=np.int64)
    first = np.broadcast_to(edges[:-1], got.a.shape)
    size = np.broadcast_to(np.diff(edges), got.a.shape)
    da, db = got.a - ea, got.b - eb
    # A + B e == EA + EB e  <=>  da + db e == 0: all of the piece, none, or one element e
    safe = np.where(db == 0, 1, db)
    e = -da // safe
    one_right = (db != 0) & (da % safe == 0) & (e >= first) & (e < first + size)
    wrong = np.where((da == 0) & (db == 0), 0, size - one_right.astype(np.int64))
    wrong = np.where(defined, wrong, 0)
    total = int(wrong.sum())
    if not total:
        return 0, ""
    chip, piece = (int(x) for x in np.argwhere(wrong > 0)[0])
    lo, hi = bounds[piece], bounds[piece + 1]
    missing = int(em[chip, piece]) & ~int(got.mask[chip, piece])
    extra = int(got.mask[chip, piece]) & ~int(em[chip, piece])
    why = []
    if missing:
        why.append(f"lacks the inputs of chips {_bits(missing)}")
    if extra:
        why.append(f"holds inputs it should not (chips {_bits(extra)})")
    if not why:
        why.append("counts an input twice")
    return total, f"chip {chip}, elements [{lo}, {hi}) {' and '.join(why)}"


def _bits(mask: int) -> str:
    return ", ".join(str(i) for i in range(mask.bit_length()) if mask >> i & 1)


# --- run -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectiveRun:
    """One simulated collective: schedule, network, op log, and the replayed functional check."""

    schedule: Schedule
    network: Network
    compiled: Compiled
    log: OpLog
    wrong: int
    problem: str
    final: Replayed

    @property
    def time_ps(self) -> int:
        return self.log.makespan_ps

    @property
    def nbytes(self) -> int:
        return self.schedule.nbytes

    @property
    def chips(self) -> int:
        return self.schedule.chips

    @property
    def bounds(self) -> list[int]:
        return self.compiled.bounds

    def values(self, chip: int) -> I64:
        """Chip ``chip``'s final vector, materialised element by element (small runs)."""
        e = np.arange(self.schedule.count, dtype=np.int64)
        piece = np.repeat(np.arange(len(self.bounds) - 1), np.diff(np.asarray(self.bounds)))
        out: I64 = self.final.a[chip, piece] + self.final.b[chip, piece] * e
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
    """Time ``schedule`` on ``net`` and check its result by replaying the op log."""
    compiled = fabric_program(schedule)
    log = simulate_fabric(net, compiled.program)
    try:
        final = replay(schedule, net, compiled, log)
    except ReplayError as exc:
        total = schedule.chips * schedule.count
        zero = np.zeros((schedule.chips, len(compiled.bounds) - 1), np.int64)
        return CollectiveRun(
            schedule, net, compiled, log, total, str(exc), Replayed(zero, zero, zero)
        )
    wrong, problem = check(schedule, compiled.bounds, final)
    return CollectiveRun(schedule, net, compiled, log, wrong, problem, final)


def allreduce(topo: Topology, nbytes: int, algorithm: str = "ring", **kw: int) -> CollectiveRun:
    """Simulate an allreduce of ``nbytes`` with ``algorithm`` (see the module docstring)."""
    return run_collective(topo, nbytes, algorithm, "allreduce", **kw)


def reduce_scatter(topo: Topology, nbytes: int, **kw: int) -> CollectiveRun:
    """Ring reduce-scatter of an ``nbytes`` vector: chip ``c`` ends with its shares summed."""
    return run_collective(topo, nbytes, "ring", "reduce_scatter", **kw)


def all_gather(topo: Topology, nbytes: int, **kw: int) -> CollectiveRun:
    """Ring all-gather into an ``nbytes`` vector: every chip ends with every chip's shares."""
    return run_collective(topo, nbytes, "ring", "all_gather", **kw)


# --- metrics -------------------------------------------------------------------------------------


def bus_factor(collective: str, chips: int) -> float:
    """nccl-tests' busbw / algbw: ``2(p-1)/p`` for allreduce, ``(p-1)/p`` for the halves."""
    if chips <= 1:
        return 0.0
    return (2.0 if collective == "allreduce" else 1.0) * (chips - 1) / chips


def link_bytes(run: CollectiveRun) -> npt.NDArray[np.float64]:
    """Bytes carried by each link direction (indexed as ``run.network.links``)."""
    log = run.log
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    links = len(run.network.links)
    out = np.bincount(
        log.engine[is_link].astype(np.int64),
        weights=log.nbytes[is_link].astype(np.float64),
        minlength=links,
    )[:links]
    return out.astype(np.float64)


def hbm_bytes(run: CollectiveRun) -> npt.NDArray[np.float64]:
    """HBM bytes per chip (sends that read HBM, copies, reductions: see :func:`fabric_program`)."""
    prog = run.compiled.program
    per_op = np.asarray(
        [
            hbm_default(k, b) if m < 0 else m
            for k, b, m in zip(prog.kind, prog.nbytes, prog.hbm, strict=True)
        ],
        dtype=np.float64,
    )
    chip = np.asarray(prog.src, dtype=np.int64)
    return np.bincount(chip, weights=per_op, minlength=run.chips).astype(np.float64)


def collective_metrics(run: CollectiveRun) -> dict[str, float]:
    """Flat metrics of one run (GB = 1e9 bytes, as nccl-tests): time, bandwidths, loads."""
    log, p = run.log, run.chips
    t_ps = run.time_ps
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    dur = (log.end - log.start).astype(np.float64)
    links = len(run.network.links)
    per_link = link_bytes(run)
    link_busy = np.bincount(
        log.engine[is_link].astype(np.int64), weights=dur[is_link], minlength=links
    )
    reduce_busy = np.bincount(
        log.chip[log.stage == REDUCE].astype(np.int64),
        weights=dur[log.stage == REDUCE],
        minlength=p,
    )
    time_ns = t_ps / 1000
    algbw = run.nbytes / time_ns if t_ps else 0.0
    used = per_link[per_link > 0]
    return {
        "time_ns": time_ns,
        "algbw_gbs": algbw,
        "busbw_gbs": algbw * bus_factor(run.schedule.collective, p),
        "wrong": float(run.wrong),
        "count": float(run.schedule.count),
        "transfers": float(np.count_nonzero(log.stage == SEND)),
        "records": float(len(log)),
        "link_bytes_max": float(per_link.max(initial=0.0)),
        "link_bytes_total": float(per_link.sum()),
        "links_used": float(len(used)),
        "link_util_peak": float(link_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
        "hbm_bytes_max": float(hbm_bytes(run).max(initial=0.0)),
        "reduce_util_peak": float(reduce_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
    }
