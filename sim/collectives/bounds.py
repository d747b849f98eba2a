"""Lower bounds of the collectives and their textbook times, from the same Topology as the
simulator (notation of :mod:`sim.collectives.model`).

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

:func:`lower_bounds_ps` gives what no allreduce on this machine can beat.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.collectives.nvls_model import machine_sent_bytes
from sim.collectives.per_dimension import dimension_bounds_ps
from sim.collectives.protocols import candidates, requested_protocol
from sim.collectives.schedule import (
    ALGORITHMS,
    CollectiveError,
)
from sim.collectives.steps import model_costs
from sim.collectives.trees import binary_tree
from sim.fabric import (
    build_network,
)
from sim.topology import Topology


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


def bounds_ps(
    topo: Topology, nbytes: int, collective: str = "allreduce", *, protocol: str | None = None
) -> Bounds:
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
      allreduce, ``n + n/p`` for reduce-scatter, ``n`` for all-gather (its block is read, the
      rest written: its own block is in place).

    A call's runtime costs (``collectives``, ADR 0021) only add: nothing starts before the
    launch (added to every term), a protocol's link rate is its efficiency's share (the
    bandwidth term divides by it), and data leaving a chip waits at least one step's
    synchronisation (added to the latency term). ``protocol`` (else the topology's): for
    ``auto``, whichever protocol gives the smaller term, so the bounds hold for any choice.
    """
    net = build_network(topo)
    p = net.chips
    cfg = topo.collectives
    launch = float(cfg.launch_ps)
    if p <= 1 or nbytes == 0:
        return Bounds(launch, launch, launch, launch)
    if not net.uniform:  # links differ by dimension: sim.collectives.per_dimension
        d = dimension_bounds_ps(topo, nbytes, collective)
        return Bounds(d.bandwidth + launch, d.latency + launch, d.reduce + launch, d.hbm + launch)
    chosen = requested_protocol(cfg, protocol)
    names = candidates(chosen)
    efficiency = max(float(cfg.protocols(x).efficiency_exact) for x in names)
    step = min(cfg.step_ps(x) for x in names)
    c = model_costs(topo, None)
    degree = max(len(net.out_links(x)) for x in range(p))
    share = (p - 1) / p * nbytes
    sent = (2.0 if collective == "allreduce" else 1.0) * share
    reduced = 0.0 if collective == "all_gather" else share
    if net.switch_reduce_bws:  # a switch that reduces and multicasts (sim.collectives.nvls_model)
        sent, reduced = machine_sent_bytes(collective, p, float(nbytes), share)
    memory = 2.0 * nbytes if collective == "allreduce" else nbytes * (1 + 1 / p)
    if collective == "all_gather":  # a chip's own block is in place: read once, the rest written
        memory = float(nbytes)
    diameter = max(net.hops(s, d) for s in range(p) for d in range(p))
    return Bounds(
        bandwidth=launch + sent * c.beta / efficiency / degree,
        latency=launch + float(diameter) * c.alpha + step,
        reduce=launch + reduced * c.gamma,
        hbm=launch + memory * c.mem,
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
    c = model_costs(topo, None)
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
