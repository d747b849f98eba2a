"""Analytic models and lower bounds of the collectives, from the same Topology as the simulator.

Notation (all from the topology): ``a`` = link latency per hop (alpha), ``b`` = time per
byte on a link direction (beta = 1 / link_bw), ``g`` = time per byte of reduction (gamma =
1 / reduce_gbs), ``m`` = time per byte of the chip's HBM (1 / hbm_to_router_bw_gbs), ``n``
= message bytes, ``p`` = chips, ``h`` = hops of a route, ``d`` = link directions out of a chip.

:func:`textbook_ps`: the classic unchunked, contention-free formulas, each with its source:

* ring (Patarasuk and Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations"; NCCL's two counter-rotating rings halve ``b``):
  ``2(p-1) h a + 2((p-1)/p) n b / w + ((p-1)/p) n g`` with ``w = min(2, d)`` rings of links;
* direct (one-shot): ``h a + (p-1) n b / d + (p-1) n g``;
* halving-doubling (Thakur, Rabenseifner and Gropp 2005, "Optimization of collective
  communication operations in MPICH", Rabenseifner's algorithm; their fallback for
  ``p`` not a power of two adds ``2(h a + n b) + n g``):
  ``2 sum_s h_s a + 2((p'-1)/p') n b + ((p'-1)/p') n g``, ``p' = 2^floor(lg p)``;
* double binary tree (Sanders, Speck and Traeff 2009, "Two-tree algorithms for full
  bandwidth broadcast, reduction and scan"): each tree moves ``n/2`` up and down its depth
  ``D``, pipelined: ``2 D h a + n b + n g``;
* torus2d (rows, then columns; two directions): ``2(c-1)(a + n/(2c) b) + 2(r-1)(a + n/(2p) b)``
  ``+ ((c-1)/c + (r-1)/p) n g``.

:func:`model` is what the simulator's schedules should take: the largest of

1. **Chunk pipeline** (ring and torus2d only; latency-bound), per independent part of the
   algorithm (each ring, tree or torus half): in step ``s`` every flow sends ``m_s`` bytes
   as ``k_s = ceil(m_s / chunk)`` equal chunks of ``c_s``; a chunk occupies a link for
   ``c_s b``, arrives ``h_s a`` after the end of its first hop's occupancy minus nothing
   (cut-through: ``h_s a + c_s b`` after it starts) and is consumed in ``c_s max(g, 2m)``
   (reduce) or ``c_s m`` (copy) per flow into the chip. A chunk starts when its link is free
   and when the previous step's chunk holding its data is consumed. The term is the longest
   path through this grid.
2. **Busiest link direction**: ``max_l bytes(l) b``, flows routed as the simulator routes them.
3. **Busiest reduce engine**: ``max_chip bytes_reduced g``.
4. **Busiest HBM**: ``max_chip (bytes sent + bytes copied + 2 bytes reduced) m``.
5. **Congestion-unaware critical path** (ASTRA-sim's analytical network without congestion,
   on the algorithm's own chunk program, :func:`sim.link.simulate_fabric` with
   ``contention=False``): every (sender, receiver) pair has links of its own, every op its
   own reduce engine and HBM; staging buffers bound it as in the machine. For
   halving-doubling and the double binary tree, whose steps form one dependency chain, a
   transfer holds its pair's link for its fair share: its bytes times the pairs of its
   step that cross its busiest link.
6. **Busiest resource on that path** (Carlier 1982, "The one-machine sequencing problem":
   a machine's ops with release times ``r_j`` (heads), work ``w_j`` and tails ``q_j`` take
   at least ``min r + sum w + min q`` over any subset of them): for each link direction,
   reduce engine and HBM, and each op ``j`` on it in order of its start on that path,
   ``start_j + work of j and every later op there + the shortest tail among them``. A tail
   is the least time an op's dependents still need after it, whatever the contention
   (one burst per dependent and the hops' latencies, ADR 0005 decision 4). ADR 0010 took
   instead "what the path does after the resource's last op", which is not a tail of the
   ops on it (an op whose dependents have slack was charged another chain's length): the
   double binary tree on a 6-chip switch at 40 MB was modelled 1.48x too slow (ADR 0015).
   A transfer's head is its start on that path, later by the turns it waits on its
   sender's link direction when the first ``staging_buffers`` transfers of every pair take
   that link first come, first served, in the path's order, each for ``bytes b``
   (:func:`_sender_queues`, ADR 0017): what a congestion-unaware path cannot see, a chip
   whose one port sends its own leaf data and then the data it reduced.
7. **One-port phases** (ADR 0015). Double binary tree (Sanders, Speck and Traeff 2009, a
   binary tree pipelined in ``k`` pieces takes ``2 d + k - 1`` stages of ``2 beta n / k`` in
   the one-port model): :func:`_tree_stages`. Halving-doubling on a switch, whose chips
   have one port (the one-port model of Thakur, Rabenseifner and Gropp 2005, phases one
   after another): :func:`_hd_one_port`.

:func:`lower_bounds_ps` gives what no allreduce on this machine can beat.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from sim.errors import BudgetError
from sim.kernels.allreduce import (
    ALGORITHMS,
    COLLECTIVES,
    CollectiveError,
    binary_tree,
    build_schedule,
    double_binary_tree,
    fabric_program,
    tree_levels,
)
from sim.limits import check_collective
from sim.link import (
    FORWARD,
    REDUCE,
    REDUCTION,
    SEND,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    one_after_another,
    simulate_fabric,
)
from sim.oplog import OpLog
from sim.topology import Topology

__all__ = [
    "Bounds",
    "CollectiveModel",
    "ModelStep",
    "bounds_ps",
    "lower_bounds_ps",
    "model",
    "textbook_ps",
]

Flow = tuple[int, int]


@dataclass(frozen=True)
class ModelStep:
    """One step of one part of an algorithm as the model sees it.

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
    """Model time (the largest term), its terms, and the textbook formula's time."""

    algorithm: str
    collective: str
    chips: int
    nbytes: int
    time_ps: float
    pipeline_ps: float
    critical_path_ps: float
    resource_path_ps: float
    one_port_ps: float
    busiest_link_ps: float
    busiest_engine_ps: float
    busiest_hbm_ps: float
    textbook_ps: float
    parts: tuple[tuple[ModelStep, ...], ...]

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
        shifts: tuple[float, ...] | None = None if s == 0 and not rem else (0.0, m / 2)
        m /= 2
        steps.append(ModelStep(flows, m, True, shifts))
    for t, s in enumerate(reversed(range(levels))):
        flows = tuple((ranks[r], ranks[r ^ (1 << s)]) for r in range(pof2))
        shifts = (0.0,) if t == 0 else (0.0, -m / 2)
        steps.append(ModelStep(flows, m, False, shifts))
        m *= 2
    if rem:
        flows = tuple((2 * i + 1, 2 * i) for i in range(rem))
        steps.append(ModelStep(flows, n, False, (0.0, -n / 2)))
    return steps


def _ring_steps(
    rings: Sequence[Sequence[int]], m: float, reduce: bool, first: tuple[float, ...] | None
) -> list[ModelStep]:
    size = len(rings[0])
    flows = tuple((ring[q], ring[(q + 1) % size]) for ring in rings for q in range(size))
    return [ModelStep(flows, m, reduce, first if s == 0 else (0.0,)) for s in range(size - 1)]


def _ring_part(rings: Sequence[Sequence[int]], m: float, collective: str) -> list[ModelStep]:
    rs = _ring_steps(rings, m, True, None) if collective != "all_gather" else []
    ag = _ring_steps(rings, m, False, (0.0,) if rs else None)
    return rs + (ag if collective != "reduce_scatter" else [])


def _tree_part(parent: Sequence[int], order: Sequence[int], m: float) -> list[ModelStep]:
    p = len(parent)
    depth, height = tree_levels(parent)
    up = [
        ModelStep(
            tuple((order[r], order[parent[r]]) for r in range(p) if height[r] == h),
            m,
            True,
            None if h == 0 else (0.0,),
        )
        for h in range(max(height))
    ]
    down = [
        ModelStep(tuple((order[parent[r]], order[r]) for r in range(p) if depth[r] == d), m, False)
        for d in range(1, max(depth) + 1)
    ]
    return [s for s in up if s.flows] + down


def _parts(net: Network, algorithm: str, collective: str, n: float) -> list[list[ModelStep]]:
    """Independent pipelines of an algorithm (each ring, tree, torus half), as ModelSteps."""
    p = net.chips
    if p <= 1 or n == 0:
        return []
    if algorithm == "ring":
        order = list(net.ring_order())
        return [_ring_part([ring], n / (2 * p), collective) for ring in (order, order[::-1])]
    if algorithm == "direct":
        flows = tuple((s, (s + d) % p) for d in range(1, p) for s in range(p))
        return [[ModelStep(flows, n, True, None)]]
    if algorithm == "halving_doubling":
        return [_hd_steps(p, n)]
    if algorithm == "double_binary_tree":
        chips = net.ring_order()
        return [_tree_part(t, chips, n / 2) for t in double_binary_tree(p)]
    if algorithm == "torus2d":
        if net.kind != "torus2d":
            raise CollectiveError(f"algorithm 'torus2d' needs a torus2d topology, not {net.kind!r}")
        rows, cols = net.dims
        parts = []
        for h in range(2):

            def way(chips: list[int], h: int = h) -> list[int]:
                return chips if h == 0 else chips[::-1]

            row_rings = [way([r * cols + c for c in range(cols)]) for r in range(rows)]
            col_rings = [way([r * cols + c for r in range(rows)]) for c in range(cols)]
            half, part, sub = n / 2, n / (2 * cols), n / (2 * p)
            into = tuple(i * sub for i in range(rows))
            steps = _ring_steps(row_rings, part, True, None) if cols > 1 else []
            steps += _ring_steps(col_rings, sub, True, into if steps else None) if rows > 1 else []
            steps += _ring_steps(col_rings, sub, False, (0.0,)) if rows > 1 else []
            back = tuple(-x for x in into) if rows > 1 else (0.0,)
            steps += _ring_steps(row_rings, part, False, back) if cols > 1 else []
            del half
            parts.append(steps)
        return parts
    raise CollectiveError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")


@dataclass(frozen=True)
class _Costs:
    alpha: float  # ps per hop
    beta: float  # ps per byte on a link direction
    gamma: float  # ps per byte reduced
    mem: float  # ps per byte through one chip's HBM
    chunk: int
    burst: int  # the streaming granule, bytes


def _load(net: Network, step: ModelStep) -> dict[int, int]:
    """Flows of ``step`` crossing each link."""
    load: dict[int, int] = {}
    for src, dst in step.flows:
        for link in net.route(src, dst):
            load[link] = load.get(link, 0) + 1
    return load


def _count(chips: Sequence[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in chips:
        out[c] = out.get(c, 0) + 1
    return out


def _pipeline(net: Network, steps: Sequence[ModelStep], c: _Costs) -> float:
    """Term 1 for one part: the longest path through its chunk grid (module docstring).

    As in the simulator, ops stream at the granule of one burst: a chunk may leave once the
    first burst of its data is there (``head``) and cannot finish before one burst after
    its last byte is there (``tail``).
    """
    link_free: dict[int, float] = {}
    prev: tuple[float, float, list[tuple[float, float]]] | None = None
    total = 0.0
    for st in steps:
        k = max(1, math.ceil(st.nbytes / c.chunk - 1e-9))
        size = st.nbytes / k
        links = _load(net, st)
        share = max(links.values(), default=1)
        hold = share * size * c.beta
        grain = min(size, c.burst)
        hops = max(net.hops(s, d) for s, d in st.flows)
        into = max(_count([d for _s, d in st.flows]).values())
        rate = max(c.gamma, 2 * c.mem) if st.reduce else c.mem
        consume, consume_grain = into * size * rate, grain * rate
        free = max((link_free.get(link, 0.0) for link in links), default=0.0)
        engine = 0.0
        done: list[tuple[float, float]] = []
        for j in range(k):
            head, tail = _ready(prev, st.shifts, j * size, (j + 1) * size)
            start = max(free, head)
            free = max(start + hold, tail + grain * c.beta)
            first = start + hops * c.alpha + grain * c.beta
            last = free + hops * c.alpha
            begin = max(first, engine)
            engine = max(begin + consume, last + consume_grain)
            done.append((begin + consume_grain, engine))
        for link in links:
            link_free[link] = free
        total = max(total, done[-1][1])
        prev = (st.nbytes, size, done)
    return total


def _ready(
    prev: tuple[float, float, list[tuple[float, float]]] | None,
    shifts: tuple[float, ...] | None,
    lo: float,
    hi: float,
) -> tuple[float, float]:
    """When the first and the last burst of bytes ``[lo, hi)`` of a message are ready."""
    if prev is None or shifts is None:
        return 0.0, 0.0
    m, size, done = prev
    head = tail = 0.0
    for shift in shifts:
        a, b = max(lo + shift, 0.0), min(hi + shift, m)
        if b > a:
            first = min(len(done) - 1, max(0, math.floor(a / size + 1e-9)))
            last = min(len(done) - 1, max(0, math.ceil(b / size - 1e-9) - 1))
            head = max(head, *(done[i][0] for i in range(first, last + 1)))
            tail = max(tail, done[last][1])
    return head, tail


def _resources(
    net: Network, parts: Sequence[Sequence[ModelStep]], c: _Costs
) -> tuple[float, float, float]:
    """Terms 2-4: the busiest link direction, reduce engine and HBM over the whole algorithm."""
    link: dict[int, float] = {}
    engine: dict[int, float] = {}
    hbm: dict[int, float] = {}
    for steps in parts:
        for st in steps:
            for x, flows in _load(net, st).items():
                link[x] = link.get(x, 0.0) + flows * st.nbytes * c.beta
            for s, d in st.flows:
                if st.shifts is None:  # the chip's own input: read from HBM (else it streams)
                    hbm[s] = hbm.get(s, 0.0) + st.nbytes * c.mem
                if st.reduce:
                    engine[d] = engine.get(d, 0.0) + st.nbytes * c.gamma
                    hbm[d] = hbm.get(d, 0.0) + 2 * st.nbytes * c.mem
                else:
                    hbm[d] = hbm.get(d, 0.0) + st.nbytes * c.mem
    return (
        max(link.values(), default=0.0),
        max(engine.values(), default=0.0),
        max(hbm.values(), default=0.0),
    )


def _costs(topo: Topology, chunk_bytes: int | None) -> _Costs:
    cfg = topo.chips
    return _Costs(
        alpha=float(cfg.link_latency_ps),
        beta=1000.0 / float(cfg.link_bw),
        gamma=1000.0 / float(cfg.reduce_bw),
        mem=1000.0 / float(topo.hbm.bw),
        chunk=cfg.chunk_bytes if chunk_bytes is None else chunk_bytes,
        burst=topo.hbm.burst_bytes,
    )


@dataclass(frozen=True)
class Bounds:
    """Times no allreduce on this machine can beat, in ps, and the largest of them."""

    bandwidth: float
    latency: float
    reduce: float
    hbm: float

    @property
    def time_ps(self) -> float:
        return max(self.bandwidth, self.latency, self.reduce, self.hbm)


def bounds_ps(topo: Topology, nbytes: int, collective: str = "allreduce") -> Bounds:
    """Lower bounds of one collective (Patarasuk and Yuan 2009 for the bandwidth term).

    * bandwidth: each chip must send ``2((p-1)/p) n`` bytes (half that for reduce-scatter or
      all-gather) through its ``d`` link directions out: ``/ (d link_bw)``;
    * latency: every input must reach every chip, so data crosses the network's diameter:
      ``diameter x a``. (The one-port ``ceil(lg p) a`` of the textbooks assumed a link held
      for its latency; with latency as flight time a port sends to many chips at once.)
    * reduce: ``(p-1) n`` bytes of additions shared by ``p`` engines: ``((p-1)/p) n / reduce_bw``;
    * HBM: every element of a chip's input must be read from its HBM once and every element
      of its result written once (sends and reductions read, copies and reductions write;
      a forwarded chunk may stream on chip): ``(input + output bytes) / hbm_bw``, ``2n`` for
      allreduce, ``n + n/p`` for reduce-scatter and all-gather.
    """
    net = build_network(topo)
    p = net.chips
    if p <= 1 or nbytes == 0:
        return Bounds(0.0, 0.0, 0.0, 0.0)
    c = _costs(topo, None)
    degree = max(len(net.out_links(x)) for x in range(p))
    share = (p - 1) / p * nbytes
    sent = (2.0 if collective == "allreduce" else 1.0) * share
    reduced = 0.0 if collective == "all_gather" else share
    memory = 2.0 * nbytes if collective == "allreduce" else nbytes * (1 + 1 / p)
    diameter = max(net.hops(s, d) for s in range(p) for d in range(p))
    return Bounds(
        bandwidth=sent * c.beta / degree,
        latency=float(diameter) * c.alpha,
        reduce=reduced * c.gamma,
        hbm=memory * c.mem,
    )


def lower_bounds_ps(
    topo: Topology, nbytes: int, collective: str = "allreduce"
) -> tuple[float, float]:
    """``(bandwidth, latency)`` lower bounds in ps (:func:`bounds_ps` has all four)."""
    b = bounds_ps(topo, nbytes, collective)
    return b.bandwidth, b.latency


def textbook_ps(
    topo: Topology, algorithm: str, nbytes: int, collective: str = "allreduce"
) -> float:
    """The classic unchunked, contention-free alpha-beta-gamma time (module docstring)."""
    net = build_network(topo)
    c = _costs(topo, None)
    p, n = net.chips, float(nbytes)
    a, b, g = c.alpha, c.beta, c.gamma
    if p <= 1 or nbytes == 0:
        return 0.0
    degree = max(len(net.out_links(x)) for x in range(p))
    if algorithm == "ring":
        order = net.ring_order()
        h = max(net.hops(order[q], order[(q + 1) % p]) for q in range(p))
        w = min(2, degree)
        half = (p - 1) * (h * a + n / p * b / w)
        if collective == "allreduce":
            return 2 * half + (p - 1) / p * n * g
        return half + ((p - 1) / p * n * g if collective == "reduce_scatter" else 0.0)
    if algorithm == "direct":
        h = max(net.hops(s, d) for s in range(p) for d in range(p) if s != d)
        return h * a + (p - 1) * n * b / degree + (p - 1) * n * g
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
    if algorithm == "double_binary_tree":
        order = net.ring_order()
        parent = binary_tree(p)
        depth = 0
        for r in range(p):
            x, d = r, 0
            while parent[x] >= 0:
                x, d = parent[x], d + 1
            depth = max(depth, d)
        h = max(net.hops(order[r], order[parent[r]]) for r in range(1, p))
        return 2 * depth * h * a + n * b + n * g
    if algorithm == "torus2d":
        rows, cols = net.dims
        row = (cols - 1) * (a + n / (2 * cols) * b)
        col = (rows - 1) * (a + n / (2 * p) * b)
        return 2 * row + 2 * col + ((cols - 1) / cols + (rows - 1) / p) * n * g
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
    """The model of one collective: the largest of its terms (module docstring)."""
    if collective not in COLLECTIVES:
        raise CollectiveError(f"unknown collective {collective!r}; use {', '.join(COLLECTIVES)}")
    if collective != "allreduce" and algorithm != "ring":
        raise CollectiveError(f"{collective} is modelled for algorithm='ring' only")
    net = build_network(topo)
    parts = _parts(net, algorithm, collective, float(nbytes))
    costs = _costs(topo, chunk_bytes)
    pipeline = 0.0
    if algorithm in GRID:
        pipeline = max((_pipeline(net, steps, costs) for steps in parts if steps), default=0.0)
    link, engine, hbm = _resources(net, parts, costs)
    critical, path = _critical(topo, net, algorithm, nbytes, collective, chunk_bytes, costs)
    one_port = _one_port(net, algorithm, nbytes, costs) if collective == "allreduce" else 0.0
    terms = (pipeline, critical, path, one_port, link, engine, hbm)
    return CollectiveModel(
        algorithm=algorithm,
        collective=collective,
        chips=net.chips,
        nbytes=nbytes,
        time_ps=max(terms) if contention else max(pipeline, critical),
        pipeline_ps=pipeline,
        critical_path_ps=critical,
        resource_path_ps=path,
        one_port_ps=one_port,
        busiest_link_ps=link,
        busiest_engine_ps=engine,
        busiest_hbm_ps=hbm,
        textbook_ps=textbook_ps(topo, algorithm, nbytes, collective),
        parts=tuple(tuple(s) for s in parts),
    )


def _one_port(net: Network, algorithm: str, nbytes: int, c: _Costs) -> float:
    """Term 7 (module docstring): the one-port phase terms of the double binary tree and of
    halving-doubling on a switch; 0 for the other algorithms."""
    p, n = net.chips, float(nbytes)
    if p <= 1 or n == 0:
        return 0.0
    if algorithm == "double_binary_tree":
        return _tree_stages(net, n, c)
    if algorithm == "halving_doubling" and net.kind == "switch":
        return _hd_one_port(net, n, c)
    return 0.0


def _tree_stages(net: Network, n: float, c: _Costs) -> float:
    """The pipelined double binary tree of Sanders, Speck and Traeff 2009 (their section 2,
    a binary tree pipelined in ``k`` pieces takes ``(2 d + k - 1)`` stages of ``2 beta n / k``
    under the one-port model: a node's two children share its one receive port):
    ``sum_s t_s + (k - 1) max_s t_s + S a``, over the ``S`` steps of both trees together (up
    by height, then down by depth), ``k`` chunks of ``c`` bytes per half message.
    ``t_s = f_s c b`` when ``f_s >= 2`` chunk streams of step ``s`` cross one link direction
    (the link serves whole chunks first come, first served, so a chunk is complete there
    only after all ``f_s`` have crossed: store-and-forward per level), and 0 when every
    stream has a link to itself (it streams through at the granule of one burst, ADR 0005
    decision 4, and the critical path, term 5, times it). Each level adds one link latency
    ``a`` to the fill."""
    p = net.chips
    trees = [_tree_part(t, net.ring_order(), n / 2) for t in double_binary_tree(p)]
    levels = max(len(t) for t in trees)
    depth = max(1, net.staging_buffers // 2)
    k = 1 << (max(math.ceil(n / 2 / c.chunk - 1e-9), depth, 1) - 1).bit_length()
    size = n / 2 / k
    stage = []
    for s in range(levels):
        flows = tuple(f for t in trees if s < len(t) for f in t[s].flows)
        share = max(_load(net, ModelStep(flows, size, True)).values(), default=1)
        stage.append(share * size * c.beta if share >= 2 else 0.0)
    return sum(stage) + (k - 1) * max(stage) + levels * c.alpha


def _hd_one_port(net: Network, n: float, c: _Costs) -> float:
    """Halving-doubling on a switch (one port per chip, the one-port model of Thakur,
    Rabenseifner and Gropp 2005, whose cost is the sum of the phases): the busiest chip's
    port receives the fold and its reduce-scatter data, then sends its all-gather data and
    the result of the fold back: ``max_chip (in-load of the first half of the steps +
    out-load of the second half) b``. For ``p`` a power of two this is the busiest port; for
    other ``p`` a survivor of the fold carries ``n`` more each way."""
    steps = _hd_steps(net.chips, n)
    half = len(steps) // 2
    into: dict[int, float] = {}
    out: dict[int, float] = {}
    for i, st in enumerate(steps):
        for src, dst in st.flows:
            if i < half:
                into[dst] = into.get(dst, 0.0) + st.nbytes
            else:
                out[src] = out.get(src, 0.0) + st.nbytes
    return max(into.get(x, 0.0) + out.get(x, 0.0) for x in range(net.chips)) * c.beta


GRID = ("ring", "torus2d")  # the chunk grid (term 1) models these; the others by their program
SHARED = ("halving_doubling", "double_binary_tree")


def _critical(
    topo: Topology,
    net: Network,
    algorithm: str,
    nbytes: int,
    collective: str,
    chunk_bytes: int | None,
    c: _Costs,
) -> tuple[float, float]:
    """Terms 5 and 6 (module docstring), from the algorithm's own chunk program
    (:func:`fabric_program`) timed with ``contention=False`` (ASTRA-sim's congestion-unaware
    analytical network; fair link shares for :data:`SHARED`): its critical path, and the
    release-time bound of the busiest resource on it. Over the simulator's budgets
    (:func:`sim.limits.check_collective`) both are 0: the model is the analytic terms."""
    if net.chips <= 1 or nbytes == 0:
        return 0.0, 0.0
    try:
        check_collective(topo, nbytes, algorithm, chunk_bytes)
    except BudgetError:
        return 0.0, 0.0
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=net
    )
    prog = fabric_program(schedule).program
    kinds = np.asarray(prog.kind, dtype=np.int64)
    sizes = np.asarray(prog.nbytes, dtype=np.int64)
    given = np.asarray(prog.hbm, dtype=np.int64)
    # hbm_default op by op: a reduction reads and writes its bytes, a send or copy moves them once
    mem_op = np.where(given < 0, np.where(kinds == REDUCTION, 2 * sizes, sizes), given)
    timed = _shared(net, prog, mem_op.tolist()) if algorithm in SHARED else prog
    log = simulate_fabric(net, timed, contention=False)
    total = float(log.makespan_ps)
    nlinks, p = len(net.links), net.chips
    op = log.op.astype(np.int64)
    stage = log.stage
    on_link = (stage == SEND) | (stage == FORWARD)
    mem = np.asarray(mem_op, dtype=np.float64)[op]
    nb = np.asarray(prog.nbytes, dtype=np.float64)[op]
    chip = log.chip.astype(np.int64)
    reduce = stage == REDUCE
    reads = (stage == SEND) | (~on_link)  # an op's HBM bytes: at its first hop or on chip
    res = np.concatenate(
        [log.engine[on_link].astype(np.int64), nlinks + chip[reduce], nlinks + p + chip[reads]]
    )
    work = np.concatenate([nb[on_link] * c.beta, nb[reduce] * c.gamma, mem[reads] * c.mem])
    hop = _hop_index(op)
    late = _sender_queues(net, prog, log, op, hop, on_link, nb * c.beta)
    moved = log.start + np.where(on_link, late[op], 0)
    start = np.concatenate([moved[on_link], log.start[reduce], moved[reads]])
    if not len(res):
        return total, 0.0
    # the tail of each record: the least time its op's dependents still need after it ends
    ops = np.concatenate([op[on_link], op[reduce], op[reads]])
    hops_left = _hops(net, prog)
    left = np.where(kinds[op] == TRANSFER, hops_left[op] - 1 - hop, 0)
    rec_tail = left * c.alpha
    tail = np.concatenate([rec_tail[on_link], rec_tail[reduce], rec_tail[reads]])
    tail = tail + _tails(prog, hops_left, mem_op, c)[ops]
    # per resource, ops by start: from op j on, the work of j and every later op, then the
    # shortest tail among them (Carlier 1982's one-machine bound with heads and tails)
    order = np.lexsort((start, res))
    r, w, t0, q = res[order], work[order], start[order].astype(np.float64), tail[order]
    suffix = np.cumsum(w[::-1])[::-1]
    group_end = np.searchsorted(r, r, side="right")  # one past each op's resource group
    after = suffix - np.append(suffix, 0.0)[group_end]
    path = t0 + after + _suffix_min(r, q)
    return total, float(path.max(initial=0.0))


def _sender_queues(
    net: Network,
    prog: FabricProgram,
    log: OpLog,
    op: np.ndarray,
    hop: np.ndarray,
    on_link: np.ndarray,
    hold: np.ndarray,
) -> np.ndarray:
    """Per op: how much later a transfer leaves when the transfers that leave its sender on
    the same link direction take turns there, first come, first served, in the order (and
    for the time) the congestion-unaware path gives them. Only each pair's first
    ``staging_buffers`` transfers: later ones wait for credits that come back as the
    receiver consumes, which this pass does not follow."""
    late = np.zeros(len(prog), dtype=np.int64)
    p = net.chips
    conn = np.asarray(prog.src, dtype=np.int64) * p + np.asarray(prog.dst, dtype=np.int64)
    kinds = np.asarray(prog.kind, dtype=np.int64)
    ids = np.flatnonzero(kinds == TRANSFER)
    by_pair = ids[np.argsort(conn[ids], kind="stable")]
    rank = np.empty(len(prog), dtype=np.int64)
    rank[by_pair] = _hop_index(conn[by_pair])  # each transfer's place among its pair's
    early = np.zeros(len(prog), dtype=bool)
    early[ids] = rank[ids] < net.staging_buffers
    first = np.flatnonzero(on_link & (hop == 0) & early[op])
    if not len(first):
        return late
    s0 = log.start[first].astype(np.int64)
    w = np.ceil(hold[first]).astype(np.int64)
    end = one_after_another(log.engine[first].astype(np.int64), s0, s0 + w, w)
    late[op[first]] = end - w - s0
    return late


def _hop_index(op: np.ndarray) -> np.ndarray:
    """Each record's hop within its op (records sorted by op, then hop): each element's
    place within its run of equal values."""
    idx = np.arange(len(op))
    first = np.r_[True, op[1:] != op[:-1]]
    return idx - np.maximum.accumulate(np.where(first, idx, 0))


def _hops(net: Network, prog: FabricProgram) -> np.ndarray:
    """Per op: the hops of its route (a reduction or copy: 0, its src is its dst)."""
    p = net.chips
    table = np.asarray([[len(r) for r in row] for row in net.routes], dtype=np.int64).reshape(-1)
    return table[np.asarray(prog.src, dtype=np.int64) * p + np.asarray(prog.dst, dtype=np.int64)]


RELAX_ROUNDS = 64  # _tails relaxes this many times at most, then makes one backward pass


def _tails(prog: FabricProgram, hops: np.ndarray, mem: np.ndarray, c: _Costs) -> np.ndarray:
    """Per op: the least time the ops that depend on it (directly or not) still need after
    it is done (a transfer: when its last hop ends), whatever the contention. Along each
    chain of dependents: a transfer's data arrives ``a`` after its last hop ends; a
    dependent ends no earlier than one burst after its input (ADR 0005 decision 4: ops
    stream at the granule of one burst), and a transfer's last hop ends ``(h-1) a`` after
    its first.

    The longest such chain, relaxed along every dependency edge at once until nothing
    changes (as many rounds as the deepest chain; the same sums in the same order as one
    backward pass, so the same values)."""
    n = len(prog)
    kind = np.asarray(prog.kind, dtype=np.int64)
    nb = np.asarray(prog.nbytes, dtype=np.float64)
    g = np.minimum(nb, float(c.burst))
    rate = np.where(kind == TRANSFER, c.beta, np.where(kind == REDUCTION, c.gamma, 0.0))
    grain = g * rate
    share = np.divide(mem * g, nb, out=np.zeros(n), where=nb != 0)
    grain = np.maximum(grain, share * c.mem)
    transfer = kind == TRANSFER
    grain = np.where(transfer, grain + (hops - 1) * c.alpha, grain)
    count = np.fromiter(map(len, prog.deps), np.int64, n)
    user = np.repeat(np.arange(n, dtype=np.int64), count)  # edge: op `user` needs op `dep`
    dep = np.fromiter(itertools.chain.from_iterable(prog.deps), np.int64, int(count.sum()))
    lag = np.where(transfer[dep], c.alpha, 0.0)
    lag_by_op = np.where(transfer, c.alpha, 0.0)
    out = np.zeros(n)
    for _ in range(RELAX_ROUNDS):  # chains of a collective are a few steps deep
        new = np.zeros(n)
        np.maximum.at(new, dep, (out[user] + grain[user]) + lag)
        if np.array_equal(new, out):
            return out
        out = new
    tails = [0.0] * n  # deeper: one backward pass (ops depend on earlier ops only)
    grains, lags = grain.tolist(), lag_by_op.tolist()
    for i in range(n - 1, -1, -1):
        here = tails[i] + grains[i]
        for d in prog.deps[i]:
            if here + lags[d] > tails[d]:
                tails[d] = here + lags[d]
    return np.asarray(tails)


def _suffix_min(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``value[j:]``'s minimum within ``j``'s group (``group`` sorted, groups contiguous)."""
    if not len(value):
        return value
    ids = np.cumsum(np.r_[True, group[1:] != group[:-1]])  # 1, 2, ... per group
    span = float(value.max() - value.min()) + 1.0
    shifted = value[::-1] + span * ids[::-1]  # a later group (first when reversed) is larger
    return np.minimum.accumulate(shifted)[::-1] - span * ids


def _shared(net: Network, prog: FabricProgram, mem: list[int]) -> FabricProgram:
    """``prog`` with each transfer as long on its links as the fair share it gets: its bytes
    times the number of (sender, receiver) pairs of its step that cross its busiest link."""
    pairs: dict[tuple[int, int], set[int]] = {}
    routes = net.routes
    p = net.chips
    for k, s, d, st in zip(prog.kind, prog.src, prog.dst, prog.step, strict=True):
        if k == TRANSFER:
            for link in routes[s][d]:
                pairs.setdefault((st, link), set()).add(s * p + d)
    out = FabricProgram(**{f.name: list(getattr(prog, f.name)) for f in fields(prog)})
    for i, (k, s, d, st) in enumerate(zip(prog.kind, prog.src, prog.dst, prog.step, strict=True)):
        if k == TRANSFER:
            share = max(len(pairs[st, link]) for link in routes[s][d])
            out.nbytes[i] *= share
            out.hbm[i] = mem[i]
    return out
