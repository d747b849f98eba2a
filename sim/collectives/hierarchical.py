"""Hierarchical collectives on a network of dimensions (docs/adr/0021 decision 5; the
cluster-scale issue): the schedules ASTRA-sim and NCCL run on multi-dimensional systems.

Chip ``c = i0 + s0 * (i1 + s1 * ...)`` (dimension 0 fastest); a *group* of dimension ``d``
is the ``s_d`` chips that differ only in digit ``d`` (:mod:`sim.fabric.dimensions`).

* ``hierarchical`` (ASTRA-sim's multi-dimensional allreduce): reduce-scatter along dimension
  0 inside every group, so the chip with digit ``i0`` holds part ``i0`` of the vector summed
  over its group; then along dimension 1 on that part (sub-part ``i1``), and so on up to the
  last dimension; then all-gather back down, last dimension first. Each dimension runs a
  ring inside every group on a ``ring`` dimension and a one-step direct exchange on a
  ``fully_connected`` or ``switch`` one (:func:`dimension_algorithms`): every chip to the
  chip ``k`` places on in its group, offset ``k`` major, so no chip is everyone's first
  target (ADR 0032). One half of the
  vector goes the positive way round every ring, the other half the negative way, so on
  two ring dimensions this is the ``torus2d`` schedule, message for message.
  ``reduce_scatter`` runs the way up (chip ``c`` ends with the nested part its digits name,
  one per half: :func:`hierarchical_shares`), ``all_gather`` the way down.
* ``tree_ring`` (NCCL's inter-node tree, ``src/graph/tuning.cc``: a double binary tree
  across nodes, rings inside a node): the way up on every dimension but the last, then an
  allreduce of each chip's part along the last dimension by NCCL's double binary tree
  (:func:`sim.collectives.trees.double_binary_tree` over the group's digit order; one tree
  per rail, i.e. per group of the last dimension: chip ``i`` of every node), half 0 on tree
  0 and half 1 on tree 1, reduce up by height and broadcast down by depth; then the way
  down on the inner dimensions. Allreduce only.

The schedules are plain :class:`~sim.collectives.schedule.Schedule` steps, so the compile,
the timing and the functional check (``#wrong`` from the data that travelled) are the ones
of every other algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from sim.collectives.schedule import (
    I64,
    CollectiveError,
    HierarchicalAlgorithm,
    Message,
    Range,
    Schedule,
    message_chunk,
    message_rows,
    message_steps,
)
from sim.collectives.trees import double_binary_tree, tree_levels
from sim.fabric import Network, build_network, distinct
from sim.topology import DimensionConfig, Topology, dimensions_of

__all__ = [
    "HIERARCHICAL_ALGORITHMS",
    "dimension_algorithms",
    "dimension_groups",
    "hierarchical_messages",
    "hierarchical_schedule",
    "hierarchical_shares",
    "spread_rows",
]

HIERARCHICAL_ALGORITHMS: tuple[HierarchicalAlgorithm, ...] = ("hierarchical", "tree_ring")

Steps = list[list[Message]]
Ring = tuple[Sequence[int], Sequence[Range]]  # chips in ring order, range owned per position


def _ranges(lo: int, hi: int, parts: int) -> list[Range]:
    """``[lo, hi)`` in ``parts`` near-equal ranges, cut as :mod:`sim.collectives.algorithms`
    cuts them (recursive halving for a power of two), so torus2d's parts are these."""
    if parts & (parts - 1) == 0:
        if parts == 1:
            return [(lo, hi)]
        mid = (lo + hi) // 2
        return _ranges(lo, mid, parts // 2) + _ranges(mid, hi, parts // 2)
    q, r = divmod(hi - lo, parts)
    out, at = [], lo
    for i in range(parts):
        size = q + (i < r)
        out.append((at, at + size))
        at += size
    return out


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


def dimension_groups(sizes: Sequence[int], d: int) -> list[list[int]]:
    """The groups of dimension ``d``, by their first chip, each in digit order."""
    p, stride, s = math.prod(sizes), math.prod(sizes[:d]), sizes[d]
    return [[base + i * stride for i in range(s)] for base in range(p) if (base // stride) % s == 0]


def _digit(chip: int, sizes: Sequence[int], d: int) -> int:
    return (chip // math.prod(sizes[:d])) % sizes[d]


def dimension_algorithms(dims: Sequence[DimensionConfig]) -> tuple[str, ...]:
    """What each dimension runs inside its groups: ``ring`` on a ring dimension, ``direct``
    (one step, every chip to every other) on a fully connected or switch one."""
    return tuple("ring" if d.shape == "ring" else "direct" for d in dims)


class _Half:
    """One half of the vector on its way through the dimensions: the range each chip holds,
    and for each dimension passed on the way up, its groups' parts (to come back down)."""

    def __init__(self, sizes: Sequence[int], rng: Range, positive: bool) -> None:
        self.sizes = sizes
        self.held = [rng] * math.prod(sizes)
        self.positive = positive

    def way(self, chips: list[int]) -> list[int]:
        return chips if self.positive else chips[::-1]

    def split(self, d: int) -> list[tuple[list[int], list[Range]]]:
        """Each group of dimension ``d`` with the parts of the range its chips hold (part
        ``i`` for digit ``i``); afterwards each chip holds its part."""
        out = []
        for group in dimension_groups(self.sizes, d):
            parts = _ranges(*self.held[group[0]], len(group))
            out.append((group, parts))
            for i, c in enumerate(group):
                self.held[c] = parts[i]
        return out

    def merge(self, d: int) -> list[tuple[list[int], list[Range]]]:
        """The inverse of :meth:`split`: each group of ``d`` with its chips' parts, after
        which each chip holds the union (the range its group held before the split)."""
        out = []
        for group in dimension_groups(self.sizes, d):
            parts = [self.held[c] for c in group]
            out.append((group, parts))
            for c in group:
                self.held[c] = (parts[0][0], parts[-1][1])
        return out

    def reduce_scatter(self, d: int, algo: str) -> Steps:
        split = self.split(d)
        if algo == "ring":
            rings = [(self.way(g), [parts[g.index(x)] for x in self.way(g)]) for g, parts in split]
            return _ring_pass(rings, 1, True)
        step = [
            Message(x, g[(i + k) % len(g)], *parts[(i + k) % len(g)], True)
            for k in range(1, len(split[0][0]) if split else 1)
            for g, parts in split
            for i, x in enumerate(g)
        ]
        return [step] if step else []

    def all_gather(self, d: int, algo: str) -> Steps:
        merged = self.merge(d)
        if algo == "ring":
            rings = [(self.way(g), [parts[g.index(x)] for x in self.way(g)]) for g, parts in merged]
            return _ring_pass(rings, 0, False)
        step = [
            Message(x, g[(i + k) % len(g)], *parts[i], False)
            for k in range(1, len(merged[0][0]) if merged else 1)
            for g, parts in merged
            for i, x in enumerate(g)
        ]
        return [step] if step else []

    def tree(self, d: int, which: int) -> Steps:
        """Allreduce of each chip's range along dimension ``d`` by tree ``which`` of NCCL's
        double binary tree over each group's digit order: reduce up by height (leaves
        first), then broadcast down by depth."""
        groups = dimension_groups(self.sizes, d)
        s = self.sizes[d]
        parent = double_binary_tree(s)[which]
        depth, height = tree_levels(parent)
        up = [
            [
                Message(g[r], g[parent[r]], *self.held[g[r]], True)
                for g in groups
                for r in range(s)
                if height[r] == h and parent[r] >= 0
            ]
            for h in range(max(height, default=0))
        ]
        down = [
            [
                Message(g[parent[r]], g[r], *self.held[g[r]], False)
                for g in groups
                for r in range(s)
                if depth[r] == k
            ]
            for k in range(1, max(depth, default=0) + 1)
        ]
        return [st for st in up if st] + down


def _halves(count: int) -> list[Range]:
    return _ranges(0, count, 2)


def hierarchical_shares(sizes: Sequence[int], count: int) -> tuple[tuple[Range, ...], ...]:
    """Per chip, per half: the nested part its digits name (what ``hierarchical``
    reduce-scatter leaves on it and all-gather starts from)."""
    halves = []
    for h, rng in enumerate(_halves(count)):
        half = _Half(sizes, rng, h == 0)
        for d in range(len(sizes)):
            half.split(d)
        halves.append(half.held)
    return tuple(tuple(held[c] for held in halves) for c in range(math.prod(sizes)))


def _steps(
    algorithm: str,
    collective: str,
    sizes: Sequence[int],
    algos: Sequence[str],
    count: int,
) -> Steps:
    inner = len(sizes) - 1 if algorithm == "tree_ring" else len(sizes)
    per_half = []
    for h, rng in enumerate(_halves(count)):
        half = _Half(sizes, rng, h == 0)
        steps: Steps = []
        if collective == "all_gather":
            for d in range(len(sizes)):
                half.split(d)  # start from the shares, no messages
        else:
            for d in range(inner):
                steps += half.reduce_scatter(d, algos[d])
        if algorithm == "tree_ring":
            steps += half.tree(len(sizes) - 1, h)
        if collective != "reduce_scatter":
            for d in reversed(range(inner)):
                steps += half.all_gather(d, algos[d])
        per_half.append(steps)
    return _zip(*per_half)


def hierarchical_schedule(
    topo: Topology,
    nbytes: int,
    algorithm: str = "hierarchical",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
    per_dimension: Sequence[str] | None = None,
) -> Schedule:
    """The schedule of a ``hierarchical`` or ``tree_ring`` collective of ``nbytes`` on
    ``topo``'s dimensions (module docstring). ``per_dimension``: ``ring`` or ``direct`` for
    each dimension (default :func:`dimension_algorithms`)."""
    empty, rows = hierarchical_messages(
        topo,
        nbytes,
        algorithm,
        collective,
        chunk_bytes=chunk_bytes,
        network=network,
        per_dimension=per_dimension,
    )
    return replace(empty, steps=message_steps(rows))


def hierarchical_messages(
    topo: Topology,
    nbytes: int,
    algorithm: str = "hierarchical",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
    per_dimension: Sequence[str] | None = None,
) -> tuple[Schedule, I64]:
    """:func:`hierarchical_schedule` as its schedule without steps and its messages as
    :func:`~sim.collectives.schedule.message_rows`, the lanes spread as arrays
    (:func:`spread_rows`), empty messages and then empty steps left out (the steps
    renumbered): the fast paths read the messages as arrays, and building 129 k lane
    messages as objects was a tenth of the h100 ``hierarchical`` allreduce at p = 256."""
    steps, net, empty = _prepared(
        topo, nbytes, algorithm, collective, chunk_bytes, network, per_dimension
    )
    rows = spread_rows(message_rows(steps), net)
    keep = rows[:, rows[4] > rows[3]]
    used = distinct(keep[0])  # the steps left with a message, renumbered
    keep[0] = np.searchsorted(used, keep[0])
    return empty, keep


def spread_rows(rows: I64, net: Network) -> I64:
    """Every message of :func:`~sim.collectives.schedule.message_rows` split evenly over the
    lanes (parallel links or switch ports) of its first hop, as NCCL spreads a node's
    traffic over its channels: one of at least as many elements as lanes cut by
    :func:`_ranges` into one message per lane, part ``i`` on lane ``i``, in its place; on
    networks without lanes the rows as they are."""
    if not net.parallel or not rows.shape[1]:
        return rows
    p = net.chips
    pair = rows[1] * p + rows[2]
    pairs = distinct(pair)
    per_pair = np.asarray(
        [
            len(net.parallel[r[0]]) if (r := net.routes[a][b]) else 1
            for a, b in zip((pairs // p).tolist(), (pairs % p).tolist(), strict=True)
        ],
        dtype=np.int64,
    )
    lanes = per_pair[np.searchsorted(pairs, pair)]
    size = rows[4] - rows[3]
    split = (lanes > 1) & (size >= lanes)
    parts = np.where(split, lanes, 1)
    wide = int(lanes.max()) + 1
    code = size * wide + lanes
    keys = distinct(code[split])
    cuts = [_ranges(0, z, w) for z, w in zip(*divmod(keys, wide), strict=True)]
    rel = np.asarray([r for c in cuts for r in c], dtype=np.int64).reshape(-1, 2)
    n_cut = np.asarray([len(c) for c in cuts], dtype=np.int64)
    start = np.cumsum(n_cut) - n_cut  # per distinct (size, lanes): its first part in rel
    idx = np.repeat(np.arange(rows.shape[1]), parts)
    j = np.arange(len(idx), dtype=np.int64) - np.repeat(np.cumsum(parts) - parts, parts)
    out = rows[:, idx]
    cut = split[idx]
    at = start[np.searchsorted(keys, code[idx][cut])] + j[cut]
    lo = out[3, cut]
    out[3, cut] = lo + rel[at, 0]
    out[4, cut] = lo + rel[at, 1]
    out[7, cut] = j[cut]
    return out


def _prepared(
    topo: Topology,
    nbytes: int,
    algorithm: str,
    collective: str,
    chunk_bytes: int | None,
    network: Network | None,
    per_dimension: Sequence[str] | None,
) -> tuple[Steps, Network, Schedule]:
    """The request checked: the steps before their lanes are spread, the network, and the
    schedule without its steps."""
    if algorithm not in HIERARCHICAL_ALGORITHMS:
        raise CollectiveError(
            f"algorithm {algorithm!r} is not hierarchical; use one of "
            f"{', '.join(HIERARCHICAL_ALGORITHMS)}"
        )
    if collective not in ("allreduce", "reduce_scatter", "all_gather"):
        raise CollectiveError(
            f"unknown collective {collective!r}; use allreduce, reduce_scatter or all_gather"
        )
    dims = dimensions_of(topo.chips)
    if algorithm == "tree_ring" and collective != "allreduce":
        raise CollectiveError(
            f"tree_ring is an allreduce; run {collective} with algorithm='hierarchical'"
        )
    if algorithm == "tree_ring" and len(dims) < 2:
        raise CollectiveError(
            "tree_ring needs chips.dimensions with at least two dimensions (rings inside a "
            f"node, a tree across nodes), not {len(dims)}; use 'double_binary_tree' or 'ring'"
        )
    algos = tuple(per_dimension) if per_dimension is not None else dimension_algorithms(dims)
    if len(algos) != len(dims) or any(a not in ("ring", "direct") for a in algos):
        raise CollectiveError(
            f"per_dimension = {algos!r}: give 'ring' or 'direct' for each of the "
            f"{len(dims)} dimensions"
        )
    bpe = topo.bpe
    chunk = message_chunk(topo, nbytes, chunk_bytes)
    chunk -= chunk % bpe
    net = network or build_network(topo)
    sizes = tuple(d.size for d in dims)
    p, count = net.chips, nbytes // bpe
    steps = _steps(algorithm, collective, sizes, algos, count) if p > 1 else []
    shares = hierarchical_shares(sizes, count) if collective != "allreduce" else ()
    empty = Schedule(
        collective=collective,  # type: ignore[arg-type]
        algorithm=algorithm,  # type: ignore[arg-type]
        chips=p,
        count=count,
        bytes_per_element=bpe,
        chunk_bytes=chunk,
        steps=(),
        shares=shares,
        depth=max(1, topo.chips.staging_buffers // 2),
    )
    return steps, net, empty
