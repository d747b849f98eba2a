"""The network of a topology: its nodes, its links (one engine per direction of a cable, per
lane), their bandwidth and latency, and the route of every chip pair on every lane; the
timing rules that use it are in :mod:`sim.fabric.simulate`.

Every network is built from ``dimensions_of(topo.chips)`` (:mod:`sim.fabric.dimensions`,
ADR 0021). Today's one-level topologies are its shorthand and give today's network, link for
link: ``ring`` (bidirectional; shortest path, a tie at distance p/2 goes the positive way
from an even chip and the negative way from an odd one, ADR 0022), ``fully_connected``
(a link per ordered pair),
``torus2d`` (``rows x cols``, chip ``r*cols + c``: the dimensions ``[cols, rows]``; dimension
order: along the row first, then along the column, each dimension routed like a ring) and
``switch`` (one link each way between every chip and a non-blocking switch, so every route
is two hops: the switch adds a hop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property

from sim.fabric.dimensions import build_dimensions, gray_order, ring_route
from sim.topology import DimensionConfig, Topology, dimensions_of
from sim.units import ps_for_bytes

__all__ = ["SWITCH", "Network", "build_network", "ring_route", "torus_cycle"]

SWITCH = "sw"
DIMENSIONS = "dimensions"  # Network.kind of a network that is none of the one-level shapes


@dataclass(frozen=True)
class Network:
    """The links of one topology, their values, and the route of every chip pair.

    Nodes are chips ``0..chips-1``, then the switches (one per group of each switch
    dimension). ``routes[src][dst]`` lists the link indices a transfer crosses on lane 0, in
    order; :meth:`route` gives any lane's. ``link_bws[k]`` (bytes per ns = GB/s) and
    ``link_latencies_ps[k]`` are link ``k``'s bandwidth per direction and flight time.
    ``parallel[k]`` is link ``k``'s group of parallel engines (lanes), lane 0 first; ``()``
    means every link is its own only lane.

    ``kind`` is the one-level topology the network is (``ring``, ``fully_connected``,
    ``torus2d``: exactly two ring dimensions, ``switch``) or ``dimensions``; ``dims`` is
    ``(rows, cols)`` of a ``torus2d`` and ``(1, chips)`` otherwise; ``sizes`` the dimensions'
    sizes, innermost first.
    """

    kind: str
    chips: int
    dims: tuple[int, int]
    links: tuple[tuple[int, int], ...]
    routes: tuple[tuple[tuple[int, ...], ...], ...]
    link_bws: tuple[Fraction, ...]
    link_latencies_ps: tuple[int, ...]
    reduce_bw: Fraction
    hbm_bw: Fraction
    staging_buffers: int
    burst_bytes: int
    parallel: tuple[tuple[int, ...], ...] = ()
    sizes: tuple[int, ...] = ()
    # what the one-value properties give on a network without links (one chip): dimension
    # 0's bandwidth and latency, as a one-chip topology states them
    idle: tuple[Fraction, int] = (Fraction(0), 0)
    # per switch node (node - chips), its dimension's switch_reduce_gbs; () when no switch
    # reduces (ADR 0021 decision 3, sim.fabric.switch_ops)
    switch_reduce_bws: tuple[Fraction, ...] = ()
    # per link, a fixed occupancy of every transfer before its bytes (a protocol's per-step
    # handshake, ADR 0023 decision 2); () when none
    link_setup_ps: tuple[int, ...] = ()

    @property
    def digit_sizes(self) -> tuple[int, ...]:
        """The digit sizes peers are counted in (:func:`~sim.fabric.dimensions.digit_shift`,
        ADR 0032): the dimensions', innermost first, or ``(chips,)`` without them."""
        return self.sizes if self.sizes and math.prod(self.sizes) == self.chips else (self.chips,)

    @cached_property  # hashes every link's Fraction: read by the holds and the engine
    def uniform(self) -> bool:
        """Whether every link has the same bandwidth, latency and setup."""
        return (
            len(set(self.link_bws)) <= 1
            and len(set(self.link_latencies_ps)) <= 1
            and len(set(self.link_setup_ps)) <= 1
        )

    def _uniform_value(self, values: tuple[Fraction, ...], what: str) -> Fraction:
        if len(set(values)) > 1:
            shown = ", ".join(str(v) for v in sorted(set(values)))
            raise ValueError(
                f"this network's links differ in {what} ({shown}): read "
                f"{'link_bws' if what == 'bandwidth' else 'link_latencies_ps'}[link] (or "
                "Network.link_ps(nbytes, link)) instead of the one-value property"
            )
        if not values:
            return Fraction(self.idle[0] if what == "bandwidth" else self.idle[1])
        return values[0]

    @cached_property  # read per op by the engines; a network never changes (frozen)
    def latency_ps(self) -> int:
        """The flight time of every link, for a uniform network (:attr:`uniform`); raises
        ``ValueError`` when links differ, so that no caller reads one link's value for all."""
        return int(self._uniform_value(tuple(map(Fraction, self.link_latencies_ps)), "latency"))

    @cached_property
    def link_bw(self) -> Fraction:
        """The bandwidth of every link, for a uniform network; raises ``ValueError`` when
        links differ (as :attr:`latency_ps`)."""
        return self._uniform_value(self.link_bws, "bandwidth")

    @property
    def lanes(self) -> int:
        """Lanes after which every dimension's lane choice repeats: the least common multiple
        of the dimensions' lane counts (1 without parallel engines)."""
        return math.lcm(*{len(g) for g in self.parallel}) if self.parallel else 1

    @property
    def names(self) -> tuple[str, ...]:
        """Engine names of the links: ``link3->4``, ``link3->sw``, ``linksw->4`` (one switch),
        ``link3->sw1`` (several: by node order), and a lane ``l > 0`` adds ``#l``:
        ``link3->4#1``, ``link3->sw0#2``."""
        top = max((max(uv) for uv in self.links), default=-1)
        many = top - self.chips > 0  # more than one switch node
        lane = [0] * len(self.links)
        for g in self.parallel:
            for at, k in enumerate(g):
                lane[k] = at
        return tuple(
            f"link{self._node(u, many)}->{self._node(v, many)}" + (f"#{lane[k]}" if lane[k] else "")
            for k, (u, v) in enumerate(self.links)
        )

    def _node(self, node: int, many: bool) -> str:
        if node < self.chips:
            return str(node)
        return f"{SWITCH}{node - self.chips}" if many else SWITCH

    def link_chip(self, link: int) -> int:
        """The chip a link belongs to: its sending chip, or the chip a switch port feeds."""
        u, v = self.links[link]
        return u if u < self.chips else v

    def route(self, src: int, dst: int, lane: int = 0) -> tuple[int, ...]:
        """The links a transfer ``src -> dst`` crosses on ``lane``: on each hop, lane ``lane
        mod k`` of that hop's ``k`` parallel links (lane 0: ``routes[src][dst]``)."""
        r = self.routes[src][dst]
        if not lane or not self.parallel:
            return r
        par = self.parallel
        return tuple(par[k][lane % len(par[k])] for k in r)

    def hops(self, src: int, dst: int) -> int:
        return len(self.routes[src][dst])

    def link_ps(self, nbytes: int, link: int | None = None) -> int:
        """Time a transfer of ``nbytes`` occupies one link direction: bytes / its bandwidth
        (``link`` None: the uniform bandwidth, :attr:`link_bw`).

        Latency is flight time, not occupancy: it is added to arrival, not to this. A link's
        setup (``link_setup_ps``, a protocol's handshake) is occupancy: it is added to this.
        """
        setup = self.link_setup_ps
        extra = (setup[0] if link is None else setup[link]) if setup else 0
        return extra + ps_for_bytes(nbytes, self.link_bw if link is None else self.link_bws[link])

    def hbm_ps(self, nbytes: int) -> int:
        """Time the chip's HBM (one bandwidth server) takes to read or write ``nbytes``."""
        return ps_for_bytes(nbytes, self.hbm_bw)

    def reduce_ps(self, nbytes: int) -> int:
        """Time one reduce engine takes to reduce ``nbytes`` into a local buffer."""
        return ps_for_bytes(nbytes, self.reduce_bw)

    def out_links(self, chip: int) -> tuple[int, ...]:
        """Links leaving ``chip`` (its injection ports), every lane."""
        return tuple(i for i, (u, _v) in enumerate(self.links) if u == chip)

    def derated(
        self, bw_factor: Fraction, extra_out_latency_ps: int, out_setup_ps: int = 0
    ) -> Network:
        """This network under a protocol (ADR 0021 decision 2): every link's bandwidth times
        ``bw_factor`` (the protocol's efficiency) and ``extra_out_latency_ps`` (a per-step
        cost) added to the latency of every link leaving a chip (chip to chip, and chip to
        switch; a switch's links to the chips are unchanged); ``out_setup_ps`` occupies those
        links before every transfer's bytes (the sender's handshake, ADR 0023). Routes and
        lanes are kept."""
        if bw_factor <= 0 or extra_out_latency_ps < 0 or out_setup_ps < 0:
            raise ValueError(
                f"derated({bw_factor}, {extra_out_latency_ps}): the factor must be > 0 and the "
                "extra latency >= 0"
            )
        return replace(
            self,
            link_bws=tuple(bw * bw_factor for bw in self.link_bws),
            link_latencies_ps=tuple(
                lat + (extra_out_latency_ps if u < self.chips else 0)
                for lat, (u, _v) in zip(self.link_latencies_ps, self.links, strict=True)
            ),
            idle=(self.idle[0] * bw_factor, self.idle[1] + extra_out_latency_ps),
            link_setup_ps=(
                tuple(out_setup_ps if u < self.chips else 0 for u, _v in self.links)
                if out_setup_ps
                else self.link_setup_ps
            ),
        )

    def ring_order(self) -> tuple[int, ...]:
        """A Hamiltonian cycle of one-hop edges: consecutive chips (and last, first) are neighbours.

        Identity for ring, fully_connected and switch. On a ``rows x cols`` torus: a snake
        when a side is even; when both are odd (>= 3), the snake of the first ``rows-1`` rows
        with the last row spliced in through its wrap-around link (:func:`torus_cycle`).
        Any other network of dimensions: a reflected Gray code of the chips' digits
        (:func:`~sim.fabric.dimensions.gray_order`), consecutive chips one step apart in one
        dimension; its last and first chip are neighbours only after an even number of sweeps.
        """
        if self.kind == DIMENSIONS:
            return gray_order(self.sizes)
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
    """The network of ``dimensions_of(topo.chips)`` (module docstring)."""
    dims = dimensions_of(topo.chips)
    net = build_dimensions(dims)
    kind = _kind(dims)
    # switch nodes are numbered dimension by dimension, group by group (dimensions.py)
    rates = [
        d.switch_reduce_bw for d in dims if d.shape == "switch" for _ in range(net.chips // d.size)
    ]
    return Network(
        kind=kind,
        chips=net.chips,
        dims=(dims[1].size, dims[0].size) if kind == "torus2d" else (1, net.chips),
        links=net.links,
        routes=net.routes,
        link_bws=net.link_bws,
        link_latencies_ps=net.link_latencies_ps,
        reduce_bw=topo.chips.reduce_bw,
        hbm_bw=topo.hbm.bw,
        staging_buffers=topo.chips.staging_buffers,
        burst_bytes=topo.hbm.burst_bytes,
        parallel=net.parallel if any(len(g) > 1 for g in net.parallel) else (),
        sizes=tuple(d.size for d in dims),
        idle=(dims[0].link_bw, dims[0].link_latency_ps),
        switch_reduce_bws=tuple(rates) if any(rates) else (),
    )


def _kind(dims: tuple[DimensionConfig, ...]) -> str:
    """The one-level topology ``dims`` are (a torus: exactly two ring dimensions), or
    :data:`DIMENSIONS`."""
    if len(dims) == 1:
        return dims[0].shape
    if len(dims) == 2 and all(d.shape == "ring" for d in dims):
        return "torus2d"
    return DIMENSIONS
