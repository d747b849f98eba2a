"""Chips joined by links: the network of a topology, its routes, and a link-level timing engine.

Semantics (docs/adr/0003-collectives.md):

* A **link** is one direction of a cable between two nodes. It is a server: a transfer of
  ``b`` bytes holds it for ``latency + b / link_bw`` (:meth:`Network.link_ps`), one transfer
  at a time, so flows that share a link contend. A link serves the transfers waiting for
  it first come, first served (equal ready times in program order).
* A transfer crosses its route **cut-through**: hop ``i+1`` is ready ``latency`` after hop
  ``i`` started (the head has crossed the hop) and starts then, or when its link frees. An
  unloaded ``h``-hop transfer therefore takes ``h * latency + b / link_bw``; each hop's
  record ends when the last byte is at the far end of that hop.
* Each chip has one **reduce engine**, also first come, first served: reducing ``b``
  bytes takes ``b / reduce_gbs``. It runs concurrently with the chip's links.

Topologies (``chips.topology``): ``ring`` (bidirectional; shortest path, a tie at distance
p/2 goes up from the lower chip and down from the higher one), ``fully_connected`` (a link
per ordered pair), ``torus2d`` (``rows x cols``, chip ``r*cols + c``; dimension order:
along the row first, then along the column, each dimension routed like a ring) and
``switch`` (one link each way between every chip and a non-blocking switch, so every
route is two hops: the switch adds a hop).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from sim.oplog import OpLog
from sim.topology import Topology, ps_for_bytes

__all__ = [
    "REDUCE_ENGINE",
    "REDUCTION",
    "STAGES",
    "TRANSFER",
    "FabricProgram",
    "Network",
    "build_network",
    "ring_route",
    "simulate_fabric",
]

STAGES = ("send", "forward", "reduce")
SEND, FORWARD, REDUCE = range(3)
REDUCE_ENGINE = "reduce"
SWITCH = "sw"


def ring_route(src: int, dst: int, size: int) -> tuple[int, ...]:
    """Positions visited after ``src`` on the shortest way round a ring of ``size`` to ``dst``.

    A tie (distance exactly size/2) goes up (increasing index) from the lower position and
    down from the higher one, so an exchange between the two halves uses both directions.
    """
    up = (dst - src) % size
    down = (src - dst) % size
    go_up = up < down or (up == down and src < dst)
    step, dist = (1, up) if go_up else (-1, down)
    return tuple((src + step * i) % size for i in range(1, dist + 1))


@dataclass(frozen=True)
class Network:
    """The links of one topology and the route of every chip pair.

    Nodes are chips ``0..chips-1``; a switch, when there is one, is node ``chips``.
    ``routes[src][dst]`` lists the link indices a transfer crosses, in order.
    """

    kind: str
    chips: int
    dims: tuple[int, int]
    links: tuple[tuple[int, int], ...]
    routes: tuple[tuple[tuple[int, ...], ...], ...]
    latency_ps: int
    link_bw: Fraction
    reduce_bw: Fraction

    @property
    def names(self) -> tuple[str, ...]:
        """Engine names of the links: ``link3->4``, ``link3->sw``, ``linksw->4``."""
        return tuple(f"link{self._node(u)}->{self._node(v)}" for u, v in self.links)

    def _node(self, node: int) -> str:
        return SWITCH if node == self.chips else str(node)

    def link_chip(self, link: int) -> int:
        """The chip a link belongs to: its sending chip, or the chip a switch port feeds."""
        u, v = self.links[link]
        return u if u < self.chips else v

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return self.routes[src][dst]

    def hops(self, src: int, dst: int) -> int:
        return len(self.routes[src][dst])

    def link_ps(self, nbytes: int) -> int:
        """Time a transfer of ``nbytes`` holds one link: latency + bytes / link_bw."""
        return self.latency_ps + ps_for_bytes(nbytes, self.link_bw)

    def reduce_ps(self, nbytes: int) -> int:
        """Time one reduce engine takes to reduce ``nbytes`` into a local buffer."""
        return ps_for_bytes(nbytes, self.reduce_bw)

    def out_links(self, chip: int) -> tuple[int, ...]:
        """Links leaving ``chip`` (its injection ports)."""
        return tuple(i for i, (u, _v) in enumerate(self.links) if u == chip)

    def ring_order(self) -> tuple[int, ...]:
        """A cycle through all chips whose consecutive chips are one hop apart where possible.

        Identity for ring, fully_connected and switch; a snake (boustrophedon) Hamiltonian
        cycle on a torus with an even number of rows or columns; row-major otherwise.
        """
        if self.kind != "torus2d":
            return tuple(range(self.chips))
        rows, cols = self.dims
        if rows == 1 or cols == 1:
            return tuple(range(self.chips))
        if rows % 2 == 0:
            return tuple(r * cols + c for r, c in _snake(rows, cols))
        if cols % 2 == 0:
            return tuple(r * cols + c for c, r in _snake(cols, rows))
        return tuple(range(self.chips))


def _snake(rows: int, cols: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of a rows x cols grid (rows even) as (row, col) pairs.

    Row 0 left to right, then rows 1.. alternately right-to-left and left-to-right over
    columns 1..cols-1, ending at (rows-1, 1); column 0 then climbs back to (0, 0).
    """
    cells = [(0, c) for c in range(cols)]
    for r in range(1, rows):
        span = range(cols - 1, 0, -1) if r % 2 else range(1, cols)
        cells += [(r, c) for c in span]
    cells += [(r, 0) for r in range(rows - 1, 0, -1)]
    return cells


def build_network(topo: Topology) -> Network:
    """The network of ``topo.chips``: links and routes, per the module docstring."""
    cfg = topo.chips
    p, kind = cfg.count, cfg.topology
    dims = cfg.torus_dims if kind == "torus2d" else (1, p)
    node_paths = [[_node_path(kind, p, dims, s, d) for d in range(p)] for s in range(p)]
    links: dict[tuple[int, int], int] = {}
    if kind == "switch":
        for c in range(p):
            links.setdefault((c, p), len(links))
            links.setdefault((p, c), len(links))
    for s in range(p):
        for d in range(p):
            path = [s, *node_paths[s][d]]
            for u, v in itertools.pairwise(path):
                links.setdefault((u, v), len(links))
    order = sorted(links, key=lambda uv: (min(uv), uv))
    index = {uv: i for i, uv in enumerate(order)}
    routes = tuple(
        tuple(
            tuple(index[uv] for uv in itertools.pairwise([s, *node_paths[s][d]])) for d in range(p)
        )
        for s in range(p)
    )
    return Network(
        kind=kind,
        chips=p,
        dims=dims,
        links=tuple(order),
        routes=routes,
        latency_ps=cfg.link_latency_ps,
        link_bw=cfg.link_bw,
        reduce_bw=cfg.reduce_bw,
    )


def _node_path(kind: str, p: int, dims: tuple[int, int], src: int, dst: int) -> list[int]:
    """Nodes visited after ``src`` on the way to ``dst`` (empty when src == dst)."""
    if src == dst:
        return []
    if kind == "fully_connected":
        return [dst]
    if kind == "switch":
        return [p, dst]
    if kind == "ring":
        return list(ring_route(src, dst, p))
    if kind == "torus2d":
        rows, cols = dims
        (r0, c0), (r1, c1) = divmod(src, cols), divmod(dst, cols)
        path = [r0 * cols + c for c in ring_route(c0, c1, cols)]
        return path + [r * cols + c1 for r in ring_route(r0, r1, rows)]
    raise ValueError(
        f"chips.topology {kind!r} has no network; use ring, fully_connected, torus2d or switch"
    )


@dataclass
class FabricProgram:
    """Transfers and reductions in program order, as parallel lists (op id = list index).

    ``kind[i]`` is :data:`TRANSFER` (``src -> dst``) or :data:`REDUCTION` (on chip ``src``);
    ``deps[i]`` are ids of earlier ops whose results op ``i`` needs.
    """

    kind: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)

    def add(
        self, kind: int, src: int, dst: int, nbytes: int, step: int, deps: tuple[int, ...]
    ) -> int:
        self.kind.append(kind)
        self.src.append(src)
        self.dst.append(dst)
        self.nbytes.append(nbytes)
        self.step.append(step)
        self.deps.append(deps)
        return len(self.kind) - 1

    def __len__(self) -> int:
        return len(self.kind)


TRANSFER, REDUCTION = 0, 1  # FabricProgram op kinds


def simulate_fabric(net: Network, program: FabricProgram) -> OpLog:
    """Time ``program`` on ``net``: a heap of ``(ready time, op id, hop)`` events.

    Every link and every reduce engine serves whatever is ready first (first come, first
    served; equal ready times in program order), one at a time. An op is ready when its
    dependencies have ended; hop ``i+1`` of a transfer is ready ``latency`` after hop ``i``
    started. Returns one record per hop and per reduction, sorted by op id and hop; the
    record's ``tile`` column holds the op's algorithm step.
    """
    n = len(program)
    kind, src, dst, step = program.kind, program.src, program.dst, program.step
    hold = [
        net.link_ps(b) if k == TRANSFER else net.reduce_ps(b)
        for k, b in zip(kind, program.nbytes, strict=True)
    ]
    waiting = [len(d) for d in program.deps]
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, deps in enumerate(program.deps):
        for d in deps:
            if not 0 <= d < i:
                raise ValueError(f"op {i} depends on op {d}; dependencies must be earlier ops")
            dependents[d].append(i)
    ready = [0] * n
    link_free = [0] * len(net.links)
    reduce_free = [0] * net.chips
    routes, lat = net.routes, net.latency_ps
    heap = [(0, i, 0) for i in range(n) if not waiting[i]]
    heapq.heapify(heap)
    rec: tuple[list[int], ...] = tuple(
        [] for _ in range(8)
    )  # op, hop, engine, stage, chip, start, end
    r_op, r_hop, r_eng, r_stage, r_chip, r_start, r_end, _ = rec
    link_chip = [net.link_chip(i) for i in range(len(net.links))]
    reduce_engine = len(net.links)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        t, i, hop = pop(heap)
        if kind[i] == TRANSFER:
            route = routes[src[i]][dst[i]]
            link = route[hop]
            free = link_free[link]
            start = t if t > free else free
            end = start + hold[i]
            link_free[link] = end
            r_eng.append(link)
            r_stage.append(FORWARD if hop else SEND)
            r_chip.append(link_chip[link])
            if hop + 1 < len(route):
                push(heap, (start + lat, i, hop + 1))
        else:
            chip = src[i]
            free = reduce_free[chip]
            start = t if t > free else free
            end = start + hold[i]
            reduce_free[chip] = end
            r_eng.append(reduce_engine)
            r_stage.append(REDUCE)
            r_chip.append(chip)
        r_op.append(i)
        r_hop.append(hop)
        r_start.append(start)
        r_end.append(end)
        if kind[i] != TRANSFER or hop + 1 == len(routes[src[i]][dst[i]]):
            for j in dependents[i]:
                if end > ready[j]:
                    ready[j] = end
                waiting[j] -= 1
                if not waiting[j]:
                    push(heap, (ready[j], j, 0))
    if len(r_op) < sum(
        len(routes[s][d]) if k == TRANSFER else 1 for k, s, d in zip(kind, src, dst, strict=True)
    ):
        raise RuntimeError("fabric program did not finish: a dependency cycle")
    op = np.asarray(r_op, dtype=np.int64)
    order = np.lexsort((np.asarray(r_hop, dtype=np.int64), op))
    nbytes = np.asarray(program.nbytes, dtype=np.int64)[op]
    steps = np.asarray(step, dtype=np.int64)[op]
    cols = {
        "op": op[order],
        "chip": np.asarray(r_chip, dtype=np.int64)[order],
        "engine": np.asarray(r_eng, dtype=np.int64)[order],
        "stage": np.asarray(r_stage, dtype=np.int64)[order],
        "start": np.asarray(r_start, dtype=np.int64)[order],
        "end": np.asarray(r_end, dtype=np.int64)[order],
        "nbytes": nbytes[order],
        "tile": steps[order],
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE), STAGES, cols)
