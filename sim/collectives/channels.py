"""Channels: the directed rings a ring collective splits over (ADR 0021 decision 2).

``collectives.channels`` (or ``run_collective(..., channels=)``) counts **directed rings**:

* ``0`` (the neutral default): today's schedule exactly, the ring order and its reverse,
  each on one half of the vector (:mod:`sim.collectives.algorithms`);
* ``c >= 1``: the vector splits into ``c`` near-equal parts (``_ranges``, so two parts are
  today's halves) and part ``i`` reduce-scatters and all-gathers around channel ``i``'s
  directed ring, on its lane (the parallel link or switch port it owns);
* ``-1`` (``auto``): as many channels as there are link-disjoint directed rings
  (:func:`max_channels`).

Which ring channel ``i`` takes (:func:`ring_channels`), with ``L`` lanes per chip pair
(``links`` of the dimension; ``ports`` on a switch):

* **fully connected** (``p`` chips): the complete symmetric digraph ``K*_p`` splits into
  ``p - 1`` arc-disjoint directed Hamiltonian cycles for every ``p`` but 4 and 6 (Tillson
  1980, "A Hamiltonian decomposition of K*_2m, 2m >= 8"); for 4 and 6 the largest set is
  ``p - 2`` (a decomposition into ``p - 1`` would be one Tillson proves impossible).
  :func:`disjoint_cycles` finds them deterministically: cycle 0 is the ring order
  ``0, 1, ..., p-1`` and cycle 1 its reverse; for odd ``p`` Walecki's ``(p-1)/2``
  Hamiltonian cycles of ``K_p``, each both ways; for even ``p`` a bounded depth-first
  search (Warnsdorff's order) for the other ``p - 3``, and where it fails within its budget
  (4, 6, or more than :data:`SEARCH_MAX_CHIPS` chips) Walecki's ``p/2 - 1`` cycles of
  ``K_p`` minus a perfect matching, both ways (``p - 2``). Channel ``i`` takes cycle
  ``i mod R`` on lane ``(i div R) mod L``: ``auto`` is ``R L``.
* **ring** and **torus2d**: channels alternate direction round the ring order (even:
  forward, odd: reverse) and take lane ``(i div 2) mod L``: ``auto`` is ``2 L``.
* **switch**: channel ``i`` runs round the ring order (alternating direction) through port
  ``i mod ports`` (a directed ring uses each port both ways once): ``auto`` is ``ports``.

More channels than disjoint rings is allowed: the extra ones wrap round the list and share
links with the first (NCCL likewise lets ``NCCL_MIN_NCHANNELS`` exceed what its topology
search found). At most :data:`MAX_CHANNELS`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sim.collectives.schedule import CollectiveError
from sim.fabric import FabricProgram, Network
from sim.topology import Topology, dimensions_of

__all__ = [
    "AUTO",
    "MAX_CHANNELS",
    "Channel",
    "disjoint_cycles",
    "max_channels",
    "resolve_channels",
    "ring_channels",
    "set_lanes",
]

AUTO = -1  # collectives.channels: auto
MAX_CHANNELS = 64  # NCCL's MAXCHANNELS
SEARCH_MAX_CHIPS = 24  # the search of disjoint_cycles runs up to this many chips
SEARCH_BUDGET = 200_000  # path extensions it may try (p = 24 needs ~76,000)

Cycle = tuple[int, ...]


@dataclass(frozen=True)
class Channel:
    """One channel: the chips of its directed ring in order, and its lane (parallel link or
    switch port of every pair it joins)."""

    order: Cycle
    lane: int = 0


def _reverse(cycle: Cycle) -> Cycle:
    """The same ring the other way round, listed back to front (the ring order's reverse
    as the neutral schedule lists it)."""
    return cycle[::-1]


def _arcs(cycle: Cycle) -> list[tuple[int, int]]:
    return list(zip(cycle, cycle[1:] + cycle[:1], strict=True))


def _walecki(p: int) -> list[Cycle]:
    """Edge-disjoint Hamiltonian cycles of the complete graph ``K_p`` (``p >= 3``): Walecki's
    zig-zags on ``Z_{2m}`` (``p`` odd: ``m = (p-1)/2`` of them, all of ``K_p``) or on
    ``Z_{2m+1}`` (``p`` even: ``m = p/2 - 1`` of them, ``K_p`` minus a perfect matching),
    each closed through the extra vertex ``p - 1``."""
    z = p - 1  # the zig-zag's group Z_z; vertex p-1 is the point at infinity
    m = z // 2
    cycles = []
    for i in range(m):
        path, lo, hi = [i], i, i
        while len(path) < z:
            hi += 1
            path.append(hi % z)
            if len(path) < z:
                lo -= 1
                path.append(lo % z)
        cycles.append((p - 1, *path))
    return cycles


def _search(p: int, fixed: list[Cycle], target: int) -> list[Cycle] | None:
    """``target`` arc-disjoint directed Hamiltonian cycles of ``K*_p`` that begin with
    ``fixed``, by depth-first search (each cycle a path from chip 0, next chips by
    Warnsdorff's rule: fewest onward arcs first, then lowest id), or None when
    :data:`SEARCH_BUDGET` extensions do not find them."""
    out = [set(range(p)) - {u} for u in range(p)]
    cycles = list(fixed)
    for c in cycles:
        for a, b in _arcs(c):
            out[a].discard(b)
    tries = 0

    def cycle(t: int) -> bool:
        if t == target:
            return True
        path, seen = [0], [False] * p
        seen[0] = True

        def extend() -> bool:
            nonlocal tries
            tries += 1
            if tries > SEARCH_BUDGET:
                raise TimeoutError
            u = path[-1]
            if len(path) == p:
                if 0 not in out[u]:
                    return False
                arcs = _arcs(tuple(path))
                for a, b in arcs:
                    out[a].discard(b)
                cycles.append(tuple(path))
                if cycle(t + 1):
                    return True
                cycles.pop()
                for a, b in arcs:
                    out[a].add(b)
                return False
            for v in sorted(out[u], key=lambda v: (sum(not seen[w] for w in out[v]), v)):
                if not seen[v]:
                    seen[v] = True
                    path.append(v)
                    if extend():
                        return True
                    path.pop()
                    seen[v] = False
            return False

        return extend()

    try:
        return cycles if cycle(len(cycles)) else None
    except TimeoutError:
        return None


@functools.cache
def disjoint_cycles(p: int) -> tuple[Cycle, ...]:
    """Arc-disjoint directed Hamiltonian cycles of ``K*_p`` (module docstring): ``p - 1`` of
    them for every ``p`` but 4 and 6 (``p - 2``) when found, cycle 0 the ring order and
    cycle 1 its reverse. Deterministic; cached."""
    if p <= 1:
        return ()
    if p == 2:
        return ((0, 1),)
    ident = tuple(range(p))
    found = None
    if p % 2 == 0 and p not in (4, 6) and p <= SEARCH_MAX_CHIPS:
        found = _search(p, [ident, _reverse(ident)], p - 1)
    if found is None:
        undirected = _walecki(p)
        relabel = {chip: at for at, chip in enumerate(undirected[0])}  # cycle 0 -> ring order
        found = []
        for c in undirected:
            named = tuple(relabel[x] for x in c)
            start = named.index(0)
            forward = named[start:] + named[:start]
            found += [forward, _reverse(forward)]
    used = [a for c in found for a in _arcs(c)]
    if len(set(used)) != len(used) or any(sorted(c) != list(ident) for c in found):
        raise AssertionError(f"disjoint_cycles({p}) is not a set of arc-disjoint rings")
    return tuple(found)


def _lanes(topo: Topology) -> int:
    """Parallel engines a channel can own per chip pair: the dimension's ``links`` (its
    ``ports`` on a switch); the fewest of any dimension."""
    return min((d.lanes for d in dimensions_of(topo.chips)), default=1)


def _rings(net: Network) -> list[Cycle]:
    """The link-disjoint directed rings of the network (lane 0)."""
    p = net.chips
    if net.kind == "fully_connected":
        return list(disjoint_cycles(p))
    order = tuple(net.ring_order())
    return [order] if p <= 2 else [order, _reverse(order)]


def max_channels(topo: Topology, net: Network) -> int:
    """``auto``: link-disjoint directed rings times lanes (module docstring); ports on a
    switch. At least 1 (a single chip has the empty ring); at most :data:`MAX_CHANNELS`."""
    lanes = _lanes(topo)
    count = lanes if net.kind == "switch" else len(_rings(net)) * lanes
    return max(1, min(count, MAX_CHANNELS))


def resolve_channels(topo: Topology, net: Network, channels: object = None) -> int:
    """The channel count of a call: ``channels`` (an int >= -1 or ``"auto"``), or the
    topology's ``collectives.channels`` when None; ``auto`` resolved by :func:`max_channels`."""
    given = topo.collectives.channels if channels is None else channels
    if given == "auto":
        given = AUTO
    if isinstance(given, bool) or not isinstance(given, int) or not -1 <= given <= MAX_CHANNELS:
        raise CollectiveError(
            f"channels = {given!r}: use 0 (the ring order and its reverse), 1..{MAX_CHANNELS} "
            "directed rings, or 'auto' (-1: one per link-disjoint ring)"
        )
    return max_channels(topo, net) if given == AUTO else given


def ring_channels(topo: Topology, net: Network, channels: int) -> tuple[Channel, ...]:
    """The ring and lane of each of ``channels`` channels (module docstring); () for 0."""
    if channels <= 0:
        return ()
    lanes = _lanes(topo)
    if net.kind == "switch":
        order = tuple(net.ring_order())
        return tuple(
            Channel(order if i % 2 == 0 else _reverse(order), i % lanes) for i in range(channels)
        )
    rings = _rings(net)
    r = len(rings)
    return tuple(Channel(rings[i % r], (i // r) % lanes) for i in range(channels))


def set_lanes(program: FabricProgram, lanes: Sequence[int]) -> None:
    """Give every op of ``program`` its lane (a transfer: its message's; others 0). All 0
    (one link per pair, today's networks) leaves the program as it is."""
    if not any(lanes):
        return
    program.lane = list(lanes)
