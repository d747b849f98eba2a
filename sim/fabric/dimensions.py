"""The network of a list of dimensions (docs/adr/0021 decision 1): its nodes, links, lanes,
per-link bandwidth and latency, and the dimension-ordered route of every chip pair.

* **Chips.** Chip ``c = i0 + s0 * (i1 + s1 * (i2 ...))``: dimension 0 varies fastest. A
  *group* of dimension ``d`` is the ``s_d`` chips that differ only in digit ``d``.
* **Shapes.** A ``ring`` dimension links each chip to its two neighbours in its group (one
  neighbour when the group has 2 chips, none when 1); a ``fully_connected`` dimension links
  every ordered pair of its group; a ``switch`` dimension has one switch node per group (node
  ids after the chips, dimension by dimension, group by group) and a port link each way
  between every chip of the group and it (a group of one chip still has its switch).
* **Lanes.** ``links`` (ring, fully_connected) or ``ports`` (switch) > 1 adds that many
  parallel engines per directed pair or per chip port. Lane 0's links are numbered first
  exactly as a one-level network numbers them (sorted by their lower node, then by the pair);
  lane ``l >= 1``'s links follow, lane by lane, in lane 0's order. A link's *group*
  (:attr:`Dimensions.parallel`) lists its lanes, lane 0 first.
* **Routes** are dimension-ordered, lowest dimension first; within a ring dimension the
  shortest way round (:func:`ring_route`, today's tie rule); within a fully connected one a
  direct link; within a switch dimension two hops, through the group's switch. The route of
  lane ``l`` takes, on each hop, lane ``l mod lanes`` of that hop's dimension.
* **Bandwidth and latency** are per link, from its dimension: ``link_bw_gbs`` and
  ``link_latency_ns``; a switch port link (either way) adds the dimension's
  ``nic_latency_ns``, so a traversal of a scale-out switch pays the NIC twice, once leaving
  the sender and once entering the receiver (ADR 0021: "added once per traversal at each
  end").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

from sim.errors import TopologyError
from sim.limits import MAX_CODE
from sim.topology import DimensionConfig

RING, FULLY_CONNECTED, SWITCH_SHAPE = "ring", "fully_connected", "switch"


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


def link_count(dims: tuple[DimensionConfig, ...]) -> int:
    """How many links (engines, every lane and direction) the network of ``dims`` has."""
    chips = math.prod(d.size for d in dims)
    total = 0
    for d in dims:
        groups = chips // d.size if d.size else 0
        if d.shape == RING:
            per_group = 2 * d.size if d.size >= 3 else (2 if d.size == 2 else 0)
        elif d.shape == FULLY_CONNECTED:
            per_group = d.size * (d.size - 1)
        else:
            per_group = 2 * d.size
        total += groups * per_group * d.lanes
    return total


def check_link_count(dims: tuple[DimensionConfig, ...]) -> None:
    """Refuse a network whose link engines do not fit the op log's int16 engine codes."""
    links = link_count(dims)
    if links + 1 > MAX_CODE:
        shapes = " x ".join(f"{d.shape}({d.size}, lanes {d.lanes})" for d in dims)
        raise TopologyError(
            f"chips.dimensions: a network of {shapes} has {links} link engines; links are int16 "
            f"engine codes of the op log (sim.limits.MAX_CODE), so at most {MAX_CODE - 1}: use "
            "fewer chips, fewer links/ports per dimension, or another shape"
        )


@dataclass(frozen=True)
class Dimensions:
    """The links of a network of dimensions (module docstring), ready for ``Network``."""

    chips: int
    links: tuple[tuple[int, int], ...]
    routes: tuple[tuple[tuple[int, ...], ...], ...]  # lane 0: routes[src][dst]
    parallel: tuple[tuple[int, ...], ...]  # per link: its group of lanes, lane 0 first
    link_bws: tuple[Fraction, ...]
    link_latencies_ps: tuple[int, ...]


def build_dimensions(dims: tuple[DimensionConfig, ...]) -> Dimensions:
    """Links, lanes, per-link values and lane-0 routes of the network of ``dims``."""
    check_link_count(dims)
    sizes = [d.size for d in dims]
    p = math.prod(sizes)
    strides = [math.prod(sizes[:k]) for k in range(len(dims))]
    switch_of: dict[tuple[int, int], int] = {}  # (dimension, group base chip) -> node
    value: dict[tuple[int, int], tuple[int, Fraction, int]] = {}  # link -> (dim, bw, latency)
    for k, d in enumerate(dims):
        stride, s = strides[k], d.size
        for base in range(p):
            if (base // stride) % s:
                continue  # not the first chip of its group
            group = [base + i * stride for i in range(s)]
            lat, bw = d.link_latency_ps, d.link_bw
            if d.shape == SWITCH_SHAPE:
                node = switch_of[k, base] = p + len(switch_of)
                for c in group:
                    for uv in ((c, node), (node, c)):
                        value[uv] = (k, bw, lat + d.nic_latency_ps)
            elif d.shape == FULLY_CONNECTED:
                for a, b in itertools.permutations(group, 2):
                    value[a, b] = (k, bw, lat)
            elif d.shape == RING:
                for i in range(s):
                    for j in {(i + 1) % s, (i - 1) % s} - {i}:
                        value[group[i], group[j]] = (k, bw, lat)
            else:
                raise TopologyError(
                    f"chips.dimensions[{k}].shape {d.shape!r} has no network; use ring, "
                    "fully_connected or switch"
                )
    lane0 = sorted(value, key=lambda uv: (min(uv), uv))
    index = {uv: i for i, uv in enumerate(lane0)}
    links = list(lane0)
    groups: list[list[int]] = [[i] for i in range(len(lane0))]
    for lane in range(1, max((d.lanes for d in dims), default=1)):
        for i, uv in enumerate(lane0):
            if dims[value[uv][0]].lanes > lane:
                groups[i].append(len(links))
                links.append(uv)
    parallel: list[tuple[int, ...]] = [()] * len(links)
    for g in groups:
        for i in g:
            parallel[i] = tuple(g)

    # a route is its dimensions' segments in order; each (dimension, from, to digit) once
    segments: dict[tuple[int, int, int], tuple[int, ...]] = {}
    rings: dict[tuple[int, int], tuple[list[int], list[int]]] = {}  # links up, down, twice

    def ring_segment(k: int, base: int, a: int, b: int) -> tuple[int, ...]:
        """:func:`ring_route`'s links from position ``a`` to ``b`` of a ring dimension's
        group: a slice of its links going up (or down) twice round."""
        s, stride = sizes[k], strides[k]
        got = rings.get((k, base))
        if got is None:
            pos = [base + i * stride for i in range(s)]
            up = [index[pos[i], pos[(i + 1) % s]] for i in range(s)]
            down = [index[pos[i], pos[(i - 1) % s]] for i in range(s)]
            got = rings[k, base] = (up + up, down + down)
        fwd, back = (b - a) % s, (a - b) % s
        if fwd < back or (fwd == back and a % 2 == 0):
            return tuple(got[0][a : a + fwd])
        return tuple(got[1][a + s - back + 1 : a + s + 1][::-1])

    def path(src: int, dst: int) -> tuple[int, ...]:
        route: tuple[int, ...] = ()
        at = src
        for k, stride in enumerate(strides):
            s = sizes[k]
            a, b = (at // stride) % s, (dst // stride) % s
            if a == b:
                continue
            if dims[k].shape == RING:
                route += ring_segment(k, at - a * stride, a, b)
                at += (b - a) * stride
                continue
            to = at + (b - a) * stride  # only digit k differs: its dimension's segment
            got = segments.get((k, at, b))
            if got is None:
                nodes = [at, *_node_path(dims, strides, switch_of, at, to)]
                got = segments[k, at, b] = tuple(index[uv] for uv in itertools.pairwise(nodes))
            route += got
            at = to
        return route

    if len(dims) == 1 and dims[0].shape == RING:  # one ring: each route one slice
        routes = tuple(
            tuple(ring_segment(0, 0, a, b) if a != b else () for b in range(p)) for a in range(p)
        )
    else:
        routes = tuple(tuple(path(s, d) for d in range(p)) for s in range(p))
    return Dimensions(
        chips=p,
        links=tuple(links),
        routes=routes,
        parallel=tuple(parallel),
        link_bws=tuple(value[uv][1] for uv in links),
        link_latencies_ps=tuple(value[uv][2] for uv in links),
    )


def _node_path(
    dims: tuple[DimensionConfig, ...],
    strides: list[int],
    switch_of: dict[tuple[int, int], int],
    src: int,
    dst: int,
) -> list[int]:
    """Nodes visited after ``src`` on the way to ``dst``, dimension by dimension (empty when
    src == dst)."""
    nodes = []
    at = src
    for k, d in enumerate(dims):
        stride, s = strides[k], d.size
        a, b = (at // stride) % s, (dst // stride) % s
        if a == b:
            continue
        base = at - a * stride
        if d.shape == RING:
            nodes += [base + i * stride for i in ring_route(a, b, s)]
        elif d.shape == FULLY_CONNECTED:
            nodes.append(base + b * stride)
        else:
            nodes += [switch_of[k, base], base + b * stride]
        at = base + b * stride
    return nodes


def gray_order(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Every chip once, consecutive chips differing by one in one digit (a reflected
    mixed-radix Gray code, dimension 0 fastest): each step is one hop within a ring or fully
    connected dimension, or one switch traversal. The last chip and the first are neighbours
    only when every digit but the outermost is back at 0 (an even number of sweeps)."""
    order = [0]
    stride = 1
    for s in sizes:
        if s > 1:
            sweep = order
            order = []
            for i in range(s):
                part = sweep if i % 2 == 0 else sweep[::-1]
                order += [c + i * stride for c in part]
        stride *= s
    return tuple(order)


def digit_shift(sizes: tuple[int, ...], chip: int, offset: int) -> int:
    """The chip whose digits are ``chip``'s plus ``offset``'s, digit by digit modulo the
    sizes (ADR 0032): peer ``offset`` of ``chip`` for the direct and pairwise algorithms.
    On one dimension it is ``(chip + offset) mod p``; on several, a translation of any
    digits maps peer ``offset`` of a chip onto peer ``offset`` of its image."""
    out = 0
    stride = 1
    for s in sizes:
        out += (chip % s + offset % s) % s * stride
        chip //= s
        offset //= s
        stride *= s
    return out
