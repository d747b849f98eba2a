"""The schedules of the collectives' algorithms (allreduce, reduce_scatter, all_gather).

Algorithms (p chips, n bytes; "ring order" is :meth:`Network.ring_order`, a Hamiltonian
cycle of one-hop edges wherever one exists):

* ``ring``: two counter-rotating rings (as NCCL runs channels both ways on full-duplex
  links), each reduce-scatters then all-gathers one half of the vector, ``2(p-1)`` steps
  of ``n / 2p`` bytes per chip per ring. ``reduce_scatter`` and ``all_gather`` run either half.
  With ``c >= 1`` channels (:mod:`sim.collectives.channels`), ``c`` directed rings, each
  on one of ``c`` near-equal parts of the vector (two parts are the halves).
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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.collectives.channels import Channel, resolve_channels, ring_channels
from sim.collectives.hierarchical import HIERARCHICAL_ALGORITHMS, hierarchical_schedule
from sim.collectives.nvls import NVLS, nvls_steps
from sim.collectives.schedule import (
    ALGORITHMS,
    COLLECTIVES,
    Collective,
    CollectiveError,
    Message,
    Range,
    Schedule,
    message_chunk,
)
from sim.collectives.trees import double_binary_tree, tree_levels
from sim.fabric import Network, build_network, digit_shift
from sim.topology import Topology


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


split_ranges = _ranges  # public: the ring's segments, as the schedules cut them


Steps = list[list[Message]]


Ring = tuple[Sequence[int], Sequence[Range]]  # chips in ring order, range owned per position


def _ring_pass(rings: Sequence[Ring], lag: int, reduce: bool, lanes: Sequence[int] = ()) -> Steps:
    """n-1 steps around each ring: at step s position q sends range (q-lag-s) to q+1 (on
    the ring's lane, when ``lanes`` gives one per ring)."""
    n = len(rings[0][0]) if rings else 0
    lane = list(lanes) or [0] * len(rings)
    return [
        [
            Message(chips[q], chips[(q + 1) % n], *ranges[(q - lag - s) % n], reduce, lane=w)
            for (chips, ranges), w in zip(rings, lane, strict=True)
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
    channels: tuple[Channel, ...] = ()  # the ring's channels; (): the order and its reverse

    def halves(self) -> list[Range]:
        return _ranges(0, self.count, 2)

    def parts(self) -> list[Range]:
        """What each ring carries: one part per channel, or the halves."""
        return _ranges(0, self.count, len(self.channels)) if self.channels else self.halves()


def _ring_shares(plan: _Plan) -> list[list[Range]]:
    """Per part (half, or channel), the range of each chip: segment c of that part."""
    return [_ranges(lo, hi, plan.chips) for lo, hi in plan.parts()]


def _ring(plan: _Plan, net: Network) -> Steps:
    order = list(net.ring_order())
    ways = [list(c.order) for c in plan.channels] or [order, order[::-1]]
    lanes = [c.lane for c in plan.channels]
    rings = []
    for chips, segs in zip(ways, _ring_shares(plan), strict=True):
        rings.append((chips, [segs[c] for c in chips]))
    steps: Steps = []
    if plan.collective != "all_gather":
        steps += _ring_pass(rings, lag=1, reduce=True, lanes=lanes)
    if plan.collective != "reduce_scatter":
        steps += _ring_pass(rings, lag=0, reduce=False, lanes=lanes)
    return steps


def _direct(plan: _Plan, net: Network) -> Steps:
    """Every chip sends its whole vector to every peer, by offset ``d`` (the peer whose
    digits are the chip's plus ``d``'s: ADR 0032), offset-major as NCCL's and MPI's shifted
    peer loops order them, so no chip is everyone's first target."""
    p, sizes = plan.chips, net.digit_sizes
    return [
        [
            Message(s, digit_shift(sizes, s, d), 0, plan.count, True, True)
            for d in range(1, p)
            for s in range(p)
        ]
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


def _nvls(plan: _Plan, net: Network) -> Steps:
    return nvls_steps(plan.chips, plan.count, net)


_BUILDERS = {
    "ring": _ring,
    "direct": _direct,
    "halving_doubling": _halving_doubling,
    "double_binary_tree": _double_binary_tree,
    "torus2d": _torus2d,
    NVLS: _nvls,  # a switch that reduces: sim.collectives.nvls
}


def build_schedule(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
    channels: int | str | None = None,
) -> Schedule:
    """The schedule of one collective of ``nbytes`` on ``topo.chips``; a ring runs on
    ``channels`` directed rings (None: ``collectives.channels``; :mod:`sim.collectives.channels`).
    """
    if algorithm in HIERARCHICAL_ALGORITHMS:  # on chips.dimensions: sim.collectives.hierarchical
        return hierarchical_schedule(
            topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=network
        )
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
    chunk = message_chunk(topo, nbytes, chunk_bytes)
    chunk -= chunk % bpe
    p = topo.chips.count
    net = network or build_network(topo)
    if channels is not None and algorithm != "ring" and channels != 0:
        raise CollectiveError(
            f"channels = {channels!r} apply to algorithm 'ring' only, not {algorithm!r}; "
            "leave channels unset for this algorithm"
        )
    count = resolve_channels(topo, net, channels) if algorithm == "ring" and p > 1 else 0
    plan = _Plan(collective, p, nbytes // bpe, ring_channels(topo, net, count))
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
        channels=count,
    )
