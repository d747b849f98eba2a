"""Analytic alpha-beta-gamma models of the collectives, from the same Topology as the simulator.

Notation (all from ``topo.chips``): ``a`` = link latency per hop (alpha), ``b`` = time per
byte on a link (beta = 1 / link_bw), ``g`` = time per byte of reduction (gamma =
1 / reduce_gbs), ``n`` = message bytes, ``p`` = chips, ``h`` = hops of a route.

:func:`textbook_ps` gives the classic unchunked, contention-free formulas with hop counts,
e.g. ring ``2(p-1) h a + 2((p-1)/p) n b + ((p-1)/p) n g`` and Rabenseifner
``2 sum_s h_s a + 2((p-1)/p) n b + ((p-1)/p) n g``.

:func:`model` is what the simulator's schedules should take: the larger of three terms.

1. **Chunk pipeline** (latency-bound, contention-free). An algorithm is a list of steps;
   in step ``s`` every flow sends ``m_s`` bytes as ``k_s = ceil(m_s / chunk)`` chunks of
   ``c_s`` bytes. A chunk holds a link for ``L_s = a + c_s b`` (alpha is paid per chunk: a
   chunk is a message) and is complete ``(h_s - 1) a + L_s`` after it starts (cut-through
   hops), plus ``r_s c_s g`` when ``r_s`` flows reduce into one chip. A chunk starts when
   its link is free (the previous chunk of the step, or the last chunk of an earlier step
   on the same links) and when the previous step's chunk holding its data is complete.
   The longest path through this chunk grid is the term.
2. **Busiest link** (bandwidth-bound): the most link time any one link must serve,
   ``max_l sum_s flows_s(l) k_s L_s``, with flows routed as the simulator routes them.
3. **Busiest reduce engine**: ``max_chip sum_s flows_into_s(chip) m_s g``.

For ring on a ring topology (one flow per link) term 1 is exact, and with
``D_s = L + [reduce-scatter step] c g`` it reads::

    T = sum over the first 2(p-1)-1 steps of max(D_s, k L)  +  k L

which is the textbook formula when ``k = 1`` and ``2(p-1)(k a + (n/p) b)`` when segments
span several chunks (each reduction then hides behind the next chunk's transfer).

Hop counts and flows per link come from the topology's routes (:func:`sim.link.build_network`).
``contention=False`` drops terms 2 and 3: the contention-free pipeline alone. Data
dependencies between steps are per byte of the message; where chips differ (which half
of its region a chip passes on in halving-doubling, which part of its row's part a column
ring starts with in torus2d) the model takes the slowest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sim.kernels.allreduce import ALGORITHMS, COLLECTIVES, CollectiveError, inorder_tree
from sim.link import Network, build_network
from sim.topology import Topology

__all__ = ["CollectiveModel", "ModelStep", "lower_bounds_ps", "model", "textbook_ps"]

Flow = tuple[int, int]


@dataclass(frozen=True)
class ModelStep:
    """One step of an algorithm as the model sees it.

    ``shifts``: byte ``x`` of this step's message is byte ``x + shift`` of the previous
    step's message, for whichever shift the slowest chip has; outside the previous
    message, the data is the chip's own and ready. ``None``: no dependency.
    """

    flows: tuple[Flow, ...]
    nbytes: float
    reduce: bool
    shifts: tuple[float, ...] | None = (0.0,)


@dataclass(frozen=True)
class CollectiveModel:
    """Model time (the largest term, or the pipeline alone without contention), its terms,
    and the textbook formula's time."""

    algorithm: str
    collective: str
    chips: int
    nbytes: int
    time_ps: float
    pipeline_ps: float
    busiest_link_ps: float
    busiest_engine_ps: float
    textbook_ps: float
    steps: tuple[ModelStep, ...]

    @property
    def time_ns(self) -> float:
        return self.time_ps / 1000


def _hd_steps(p: int, n: float) -> list[ModelStep]:
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    ranks = [2 * i + 1 for i in range(rem)] + list(range(2 * rem, p))
    levels = pof2.bit_length() - 1
    steps: list[ModelStep] = []
    if rem:
        steps.append(ModelStep(tuple((2 * i, 2 * i + 1) for i in range(rem)), n, True, None))
    m = n
    for s in range(levels):
        flows = tuple((ranks[r], ranks[r ^ (1 << s)]) for r in range(pof2))
        shifts: tuple[float, ...] | None = (
            None if s == 0 and not rem else (0.0, m / 2)
        )  # keep low half, or high half
        m /= 2
        steps.append(ModelStep(flows, m, True, shifts))
    for t, s in enumerate(reversed(range(levels))):
        flows = tuple((ranks[r], ranks[r ^ (1 << s)]) for r in range(pof2))
        shifts = (0.0,) if t == 0 else (0.0, -m / 2)  # own region first, or received first
        steps.append(ModelStep(flows, m, False, shifts))
        m *= 2
    if rem:
        flows = tuple((2 * i + 1, 2 * i) for i in range(rem))
        steps.append(ModelStep(flows, n, False, (0.0, -n / 2)))
    return steps


def _ring_steps(
    rings: Sequence[Sequence[int]], m: float, phase: str, first: tuple[float, ...] | None
) -> list[ModelStep]:
    size = len(rings[0])
    flows = tuple((ring[q], ring[(q + 1) % size]) for ring in rings for q in range(size))
    return [
        ModelStep(flows, m, phase == "rs", first if s == 0 else (0.0,)) for s in range(size - 1)
    ]


def _steps(net: Network, algorithm: str, collective: str, n: float) -> list[ModelStep]:
    p = net.chips
    if p <= 1 or n == 0:
        return []
    if algorithm == "ring":
        ring = [net.ring_order()]
        rs = _ring_steps(ring, n / p, "rs", None) if collective != "all_gather" else []
        ag = _ring_steps(ring, n / p, "ag", (0.0,) if rs else None)
        return rs + (ag if collective != "reduce_scatter" else [])
    if algorithm == "direct":
        flows = tuple((s, d) for s in range(p) for d in range(p) if s != d)
        return [ModelStep(flows, n, True, None)]
    if algorithm == "halving_doubling":
        return _hd_steps(p, n)
    if algorithm == "tree":
        order = net.ring_order()
        parent, depth = inorder_tree(p)
        height = max(depth)
        up = [
            ModelStep(
                tuple((order[q], order[parent[q]]) for q in range(p) if depth[q] == d),
                n,
                True,
                None if d == height else (0.0,),
            )
            for d in range(height, 0, -1)
        ]
        down = [
            ModelStep(
                tuple((order[parent[q]], order[q]) for q in range(p) if depth[q] == d), n, False
            )
            for d in range(1, height + 1)
        ]
        return up + down
    if algorithm == "torus2d":
        if net.kind != "torus2d":
            raise CollectiveError(f"algorithm 'torus2d' needs a torus2d topology, not {net.kind!r}")
        rows, cols = net.dims
        row_rings = [[r * cols + c for c in range(cols)] for r in range(rows)]
        col_rings = [[r * cols + c for r in range(rows)] for c in range(cols)]
        part, sub = n / cols, n / p
        into = tuple(i * sub for i in range(rows))  # which sub-segment of its part a chip starts
        steps = _ring_steps(row_rings, part, "rs", None) if cols > 1 else []
        steps += _ring_steps(col_rings, sub, "rs", into if steps else None) if rows > 1 else []
        steps += _ring_steps(col_rings, sub, "ag", (0.0,)) if rows > 1 else []
        back = tuple(-x for x in into) if rows > 1 else (0.0,)
        steps += _ring_steps(row_rings, part, "ag", back) if cols > 1 else []
        return steps
    raise CollectiveError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")


@dataclass(frozen=True)
class _Costs:
    alpha: float  # ps per hop
    beta: float  # ps per byte on a link
    gamma: float  # ps per byte reduced
    chunk: int


def _load(net: Network, step: ModelStep) -> dict[int, int]:
    """Flows of ``step`` crossing each link."""
    load: dict[int, int] = {}
    for src, dst in step.flows:
        for link in net.route(src, dst):
            load[link] = load.get(link, 0) + 1
    return load


def _into(step: ModelStep) -> dict[int, int]:
    """Flows of ``step`` arriving at each chip."""
    into: dict[int, int] = {}
    for _src, dst in step.flows:
        into[dst] = into.get(dst, 0) + 1
    return into


def _chunks(step: ModelStep, c: _Costs) -> tuple[int, float, float]:
    """Chunks per flow, chunk bytes, and the time a chunk holds a link."""
    k = max(1, math.ceil(step.nbytes / c.chunk))
    size = step.nbytes / k
    return k, size, c.alpha + size * c.beta


def _pipeline(net: Network, steps: Sequence[ModelStep], c: _Costs) -> float:
    """Term 1: the longest path through the chunk grid of ``steps`` (module docstring)."""
    link_free: dict[int, float] = {}
    prev: tuple[float, float, list[float]] | None = None  # (message bytes, chunk bytes, done)
    total = 0.0
    for st in steps:
        k, size, hold = _chunks(st, c)
        links = _load(net, st)
        hops = max(net.hops(s, d) for s, d in st.flows)
        reduce_each = max(_into(st).values()) * size * c.gamma if st.reduce else 0.0
        start = max((link_free.get(link, 0.0) for link in links), default=0.0) - hold
        engine = 0.0
        done: list[float] = []
        for j in range(k):
            start = max(start + hold, _ready(prev, st.shifts, j * size, (j + 1) * size))
            complete = start + (hops - 1) * c.alpha + hold
            if st.reduce:
                engine = max(engine, complete) + reduce_each
                complete = engine
            done.append(complete)
        for link in links:
            link_free[link] = start + hold
        total = max(total, done[-1])
        prev = (st.nbytes, size, done)
    return total


def _busiest_link(net: Network, steps: Sequence[ModelStep], c: _Costs) -> float:
    """Term 2: the most time any one link is held."""
    busy: dict[int, float] = {}
    for st in steps:
        k, _size, hold = _chunks(st, c)
        for link, flows in _load(net, st).items():
            busy[link] = busy.get(link, 0.0) + flows * k * hold
    return max(busy.values(), default=0.0)


def _busiest_engine(steps: Sequence[ModelStep], c: _Costs) -> float:
    """Term 3: the most reduction time any one chip has."""
    busy: dict[int, float] = {}
    for st in steps:
        if st.reduce:
            for chip, flows in _into(st).items():
                busy[chip] = busy.get(chip, 0.0) + flows * st.nbytes * c.gamma
    return max(busy.values(), default=0.0)


def _ready(
    prev: tuple[float, float, list[float]] | None,
    shifts: tuple[float, ...] | None,
    lo: float,
    hi: float,
) -> float:
    """When bytes ``[lo, hi)`` of a message are ready, given the previous step's chunks."""
    if prev is None or shifts is None:
        return 0.0
    m, size, done = prev
    ready = 0.0
    for shift in shifts:
        a, b = max(lo + shift, 0.0), min(hi + shift, m)
        if b > a:
            last = min(len(done) - 1, max(0, math.ceil(b / size - 1e-9) - 1))
            ready = max(ready, done[last])
    return ready


def _costs(topo: Topology, chunk_bytes: int | None) -> _Costs:
    cfg = topo.chips
    return _Costs(
        alpha=float(cfg.link_latency_ps),
        beta=1000.0 / float(cfg.link_bw),
        gamma=1000.0 / float(cfg.reduce_bw),
        chunk=cfg.chunk_bytes if chunk_bytes is None else chunk_bytes,
    )


def lower_bounds_ps(
    topo: Topology, nbytes: int, collective: str = "allreduce"
) -> tuple[float, float]:
    """Times no schedule can beat: ``(bandwidth, latency)`` in ps.

    Bandwidth: an allreduce chip must send ``2((p-1)/p) n`` bytes (half that for
    reduce-scatter or all-gather) through its ``d`` links out, ``B_injection = d x link_bw``.
    Latency: data must cross the network's diameter, and with ``d`` links out the chips that
    have a given input can at most grow ``(d+1)``-fold per latency, so at least
    ``max(diameter, ceil(log_{d+1} p)) a``; with one link per chip (a switch) this is the
    textbook ``ceil(lg p) a``. (A fully connected one-shot beats ``ceil(lg p) a``: the
    textbook bound assumes one port per chip.)
    """
    net = build_network(topo)
    p = net.chips
    if p <= 1:
        return 0.0, 0.0
    degree = max(len(net.out_links(c)) for c in range(p))
    share = (2.0 if collective == "allreduce" else 1.0) * (p - 1) / p * nbytes
    bandwidth = share * 1000 / (degree * float(topo.chips.link_bw))
    diameter = max(net.hops(s, d) for s in range(p) for d in range(p))
    rounds, reach = 0, 1
    while reach < p:
        rounds, reach = rounds + 1, reach * (degree + 1)
    return bandwidth, float(max(diameter, rounds) * topo.chips.link_latency_ps)


def textbook_ps(
    topo: Topology, algorithm: str, nbytes: int, collective: str = "allreduce"
) -> float:
    """The classic unchunked, contention-free alpha-beta-gamma time, with hop counts."""
    net = build_network(topo)
    c = _costs(topo, None)
    p, n = net.chips, float(nbytes)
    a, b, g = c.alpha, c.beta, c.gamma
    if p <= 1 or nbytes == 0:
        return 0.0
    if algorithm == "ring":
        order = net.ring_order()
        h = max(net.hops(order[q], order[(q + 1) % p]) for q in range(p))
        half = (p - 1) * (h * a + n / p * b)
        if collective == "allreduce":
            return 2 * half + (p - 1) / p * n * g
        return half + ((p - 1) / p * n * g if collective == "reduce_scatter" else 0.0)
    if algorithm == "direct":
        h = max(net.hops(s, d) for s in range(p) for d in range(p) if s != d)
        return h * a + n * b + (p - 1) * n * g
    if algorithm == "halving_doubling":
        pof2 = 1 << (p.bit_length() - 1)
        rem = p - pof2
        ranks = [2 * i + 1 for i in range(rem)] + list(range(2 * rem, pof2 + rem))
        levels = pof2.bit_length() - 1
        hops = sum(
            max(net.hops(ranks[r], ranks[r ^ (1 << s)]) for r in range(pof2)) for s in range(levels)
        )
        t = 2 * hops * a + 2 * (pof2 - 1) / pof2 * n * b + (pof2 - 1) / pof2 * n * g
        if rem:
            h = max(net.hops(2 * i, 2 * i + 1) for i in range(rem))
            t += 2 * (h * a + n * b) + n * g
        return t
    if algorithm == "tree":
        order = net.ring_order()
        parent, depth = inorder_tree(p)
        t = 0.0
        for d in range(1, max(depth) + 1):
            level = [q for q in range(p) if depth[q] == d]
            h = max(net.hops(order[q], order[parent[q]]) for q in level)
            kids = max(sum(1 for q in level if parent[q] == x) for x in {parent[q] for q in level})
            t += 2 * (h * a + n * b) + kids * n * g
        return t
    if algorithm == "torus2d":
        rows, cols = net.dims
        row = (cols - 1) * (a + n / cols * b)
        col = (rows - 1) * (a + n / p * b)
        return 2 * row + (cols - 1) / cols * n * g + 2 * col + (rows - 1) / p * n * g
    raise CollectiveError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")


def model(
    topo: Topology,
    algorithm: str,
    nbytes: int,
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    contention: bool = True,
) -> CollectiveModel:
    """The alpha-beta-gamma model of one collective: the largest of its three terms."""
    if collective not in COLLECTIVES:
        raise CollectiveError(f"unknown collective {collective!r}; use {', '.join(COLLECTIVES)}")
    if collective != "allreduce" and algorithm != "ring":
        raise CollectiveError(f"{collective} is modelled for algorithm='ring' only")
    net = build_network(topo)
    steps = _steps(net, algorithm, collective, float(nbytes))
    costs = _costs(topo, chunk_bytes)
    pipeline = _pipeline(net, steps, costs)
    link = _busiest_link(net, steps, costs)
    engine = _busiest_engine(steps, costs)
    return CollectiveModel(
        algorithm=algorithm,
        collective=collective,
        chips=net.chips,
        nbytes=nbytes,
        time_ps=max(pipeline, link, engine) if contention else pipeline,
        pipeline_ps=pipeline,
        busiest_link_ps=link,
        busiest_engine_ps=engine,
        textbook_ps=textbook_ps(topo, algorithm, nbytes, collective),
        steps=tuple(steps),
    )
