"""The network of a topology: its nodes, its links (one per direction of a cable) and the
route of every chip pair; the timing rules that use it are in :mod:`sim.fabric.simulate`.

Topologies (``chips.topology``): ``ring`` (bidirectional; shortest path, a tie at distance
p/2 goes the positive way from an even chip and the negative way from an odd one, ADR
0022), ``fully_connected`` (a link per ordered pair), ``torus2d`` (``rows x cols``, chip
``r*cols + c``; dimension order: along the row first, then along the column, each dimension
routed like a ring) and ``switch`` (one link each way between every chip and a non-blocking
switch, so every route is two hops: the switch adds a hop).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

from sim.topology import Topology
from sim.units import ps_for_bytes

SWITCH = "sw"


def ring_route(src: int, dst: int, size: int) -> tuple[int, ...]:
    """Positions visited after ``src`` on the shortest way round a ring of ``size`` to ``dst``.

    A tie (distance exactly size/2) goes by the parity of the sending position: up
    (increasing index) from an even one, down from an odd one (ADR 0022), so that turning
    the ring by two maps every route onto another and the two chips of a pair never share
    a link direction.
    """
    up = (dst - src) % size
    down = (src - dst) % size
    go_up = up < down or (up == down and src % 2 == 0)
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
    hbm_bw: Fraction
    staging_buffers: int
    burst_bytes: int

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
        """Time a transfer of ``nbytes`` occupies one link direction: bytes / link_bw.

        Latency is flight time, not occupancy: it is added to arrival, not to this.
        """
        return ps_for_bytes(nbytes, self.link_bw)

    def hbm_ps(self, nbytes: int) -> int:
        """Time the chip's HBM (one bandwidth server) takes to read or write ``nbytes``."""
        return ps_for_bytes(nbytes, self.hbm_bw)

    def reduce_ps(self, nbytes: int) -> int:
        """Time one reduce engine takes to reduce ``nbytes`` into a local buffer."""
        return ps_for_bytes(nbytes, self.reduce_bw)

    def out_links(self, chip: int) -> tuple[int, ...]:
        """Links leaving ``chip`` (its injection ports)."""
        return tuple(i for i, (u, _v) in enumerate(self.links) if u == chip)

    def ring_order(self) -> tuple[int, ...]:
        """A Hamiltonian cycle of one-hop edges: consecutive chips (and last, first) are neighbours.

        Identity for ring, fully_connected and switch. On a ``rows x cols`` torus: a snake
        when a side is even; when both are odd (>= 3), the snake of the first ``rows-1`` rows
        with the last row spliced in through its wrap-around link (:func:`torus_cycle`).
        """
        if self.kind != "torus2d":
            return tuple(range(self.chips))
        rows, cols = self.dims
        return tuple(r * cols + c for r, c in torus_cycle(rows, cols))


def torus_cycle(rows: int, cols: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of the ``rows x cols`` torus as ``(row, col)`` cells.

    A torus with a side of 1 is a ring (row-major order). With an even side, a snake
    (:func:`_snake`) needs no wrap-around link. With both sides odd a grid has no
    Hamiltonian cycle (it is bipartite with an odd number of cells), so one wrap link is
    used: snake the first ``rows-1`` rows (an even number), then replace the snake's edge
    ``(rows-2, cols-1) -> (rows-2, cols-2)`` by the detour down to ``(rows-1, cols-1)``,
    along the last row through its wrap link (``cols-1, 0, 1, ..., cols-2``) and back up.
    """
    if rows == 1 or cols == 1:
        return [divmod(i, cols) for i in range(rows * cols)]
    if rows % 2 == 0:
        return _snake(rows, cols)
    if cols % 2 == 0:
        return [(r, c) for c, r in _snake(cols, rows)]
    cells = _snake(rows - 1, cols)
    at = cells.index((rows - 2, cols - 1))
    detour = [(rows - 1, (cols - 1 + j) % cols) for j in range(cols)]
    return cells[: at + 1] + detour + cells[at + 1 :]


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
        hbm_bw=topo.hbm.bw,
        staging_buffers=cfg.staging_buffers,
        burst_bytes=topo.hbm.burst_bytes,
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
