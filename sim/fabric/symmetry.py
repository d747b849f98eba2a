"""Symmetric networks and logs: a ring's links and routes without its ``p x p`` route table,
and an op log stored as a representative's records plus the chip rotations that map them
onto every other chip's (:class:`SymmetricLog`).

When a program and its network are invariant under turning the chips (chip ``c`` ->
``c + g``) and the event loop's tie rules are too, every chip's events are a representative's
events turned (same times): the representative's records are the log, the group says how to
write out the rest. :mod:`sim.fabric.quotient` times such programs; what turns them is the
caller's (``sim.collectives.fast`` knows the op ids of its programs).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from sim.fabric.network import Network, build_network, ring_route
from sim.oplog import COLUMNS, OpLog
from sim.topology import Topology

I64 = npt.NDArray[np.int64]


def ring_links(p: int) -> tuple[tuple[tuple[int, int], ...], I64, I64]:
    """The links of a ``p``-ring (p >= 3) in :func:`build_network`'s order (by the lower end,
    then the pair), and per chip the index of its link up (``c -> c+1``) and down (``c -> c-1``)."""
    pairs = [(c, (c + 1) % p) for c in range(p)] + [((c + 1) % p, c) for c in range(p)]
    order = sorted(pairs, key=lambda uv: (min(uv), uv))
    index = {uv: i for i, uv in enumerate(order)}
    up = np.asarray([index[c, (c + 1) % p] for c in range(p)], dtype=np.int64)
    down = np.asarray([index[c, (c - 1) % p] for c in range(p)], dtype=np.int64)
    return tuple(order), up, down


class _RingRow(Sequence[tuple[int, ...]]):
    def __init__(self, src: int, p: int, up: I64, down: I64) -> None:
        self.src, self.p, self.up, self.down = src, p, up, down

    def __len__(self) -> int:
        return self.p

    def __getitem__(self, dst: Any) -> Any:
        if isinstance(dst, slice):
            return [self[d] for d in range(self.p)[dst]]
        nodes = [self.src, *ring_route(self.src, int(dst), self.p)]
        return tuple(
            int(self.up[u]) if (v - u) % self.p == 1 else int(self.down[u])
            for u, v in itertools.pairwise(nodes)
        )

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return (self[d] for d in range(self.p))


class RingRoutes(Sequence[Sequence[tuple[int, ...]]]):
    """``routes[src][dst]`` of a ``p``-ring, each computed when asked (a ring of 4096 chips
    has 16.7 million routes of up to 2048 hops: the table is never built)."""

    def __init__(self, p: int) -> None:
        self.p = p
        _links, self.up, self.down = ring_links(p)

    def __len__(self) -> int:
        return self.p

    def __getitem__(self, src: Any) -> Any:
        if isinstance(src, slice):
            return [self[s] for s in range(self.p)[src]]
        return _RingRow(int(src), self.p, self.up, self.down)

    def __iter__(self) -> Iterator[Sequence[tuple[int, ...]]]:
        return (self[s] for s in range(self.p))


def ring_network(topo: Topology, *, exact_up_to: int = 4, three: Network | None = None) -> Network:
    """The network of a ``ring`` topology: :func:`build_network` itself up to ``exact_up_to``
    chips; above, the same links with routes computed when asked (:class:`RingRoutes`, equal
    route for route: the symmetric paths read a few, and a 64-chip ring's 4,096 routes were
    a fifth of its allreduce's time). ``three``: the topology's three-chip network, where the
    caller has built it already (its values are the ring's)."""
    p = topo.chips.count
    if p <= exact_up_to or p < 3:
        return build_network(topo)
    small = build_network(topo.replace_chips(count=3)) if three is None else three
    links, _up, _down = ring_links(p)
    routes = cast(Any, RingRoutes(p))
    n = len(links)
    return replace(
        small,
        chips=p,
        dims=(1, p),
        links=links,
        routes=routes,
        link_bws=(small.link_bws[0],) * n,
        link_latencies_ps=(small.link_latencies_ps[0],) * n,
        sizes=(p,),
    )


class SymmetricLog(OpLog):
    """An op log stored as a representative's records (``rep``) and ``turns`` chip rotations
    that map them onto all the others: ``len`` is ``turns * len(rep)``, the makespan is the
    representative's, and the full columns are written out (``expand``) only when a column
    is read. ``orbit_of_engine`` names, per engine of ``rep``, the orbit it stands for (the
    closed-form metrics of the caller use it)."""

    rep: OpLog
    turns: int

    def __init__(
        self, rep: OpLog, turns: int, expand: Callable[[], Mapping[str, npt.NDArray[Any]]]
    ) -> None:
        c = rep.stored
        super().__init__(
            rep.engines,
            rep.stages,
            c["chip"],
            c["engine"],
            c["stage"],
            c["op"],
            c["start"],
            c["end"],
            c["nbytes"],
            c["macs"],
            c["tile"],
            meta=rep.meta,
        )
        setattr_ = object.__setattr__
        setattr_(self, "rep", rep)
        setattr_(self, "turns", turns)
        setattr_(self, "_expand", expand)
        setattr_(self, "_len", turns * len(rep))
        setattr_(self, "_full", {})

    @property
    def compressed(self) -> bool:
        return self.turns > 1

    def column(self, name: str) -> npt.NDArray[Any]:
        full: dict[str, npt.NDArray[Any]] = self._full  # type: ignore[attr-defined]
        if not full:
            cols = self._expand()  # type: ignore[attr-defined]
            full.update({c: np.asarray(cols[c], dtype=self.stored[c].dtype) for c in COLUMNS})
        return full[name]

    def expanded(self) -> OpLog:
        """The full log as a plain :class:`OpLog`."""
        return OpLog.from_columns(
            self.engines, self.stages, {c: self.column(c) for c in COLUMNS}, self.meta
        )

    def __repr__(self) -> str:
        return f"SymmetricLog({len(self.rep)} records x {self.turns} turns)"
