"""The analytic model of every collective: :func:`collective_model` (allreduce and the ring
reduce_scatter and all_gather: :func:`sim.collectives.model.model`; notation there).

For the other collectives and algorithms (:mod:`sim.collectives.catalog`) the model is the
largest of the terms that :mod:`sim.collectives.model` uses for allreduce, on the
algorithm's own chunk program (:func:`sim.collectives.lockstep.compile_schedule`):

1. **Congestion-unaware critical path** (term 5 there; ASTRA-sim's analytical network
   without congestion): the program timed with ``contention=False``, every (sender,
   receiver) pair on links of its own, every op with its own reduce engine and HBM;
   for the recursive algorithms, whose steps form one dependency chain, each transfer holds
   its pair's links for its fair share (its bytes times the pairs of its step on its busiest
   link), as for halving-doubling.
2. **Busiest resource on that path** (term 6 there, Carlier 1982): per link direction,
   reduce engine and HBM, the release time of its ops on that path plus their work and the
   shortest tail among them, with each sender's first transfers taking turns on its links.
3. **Busiest link direction, reduce engine and HBM** (terms 2-4 there), counted on the
   program itself: the bytes of every transfer on each link of its route, of every
   reduction on its chip, and every op's HBM bytes on its chip.

Over the simulator's budgets (:func:`~sim.collectives.budget.check_collective`) terms 1 and 2
are 0 and the model is term 3. :func:`textbook` gives each algorithm's classic
alpha-beta-gamma time (the textbook column; the sources are the algorithms' modules).
"""

from __future__ import annotations

import numpy as np

from sim.collectives.budget import check_collective
from sim.collectives.catalog import build_schedule, by_algorithms_module
from sim.collectives.critical_path import program_path
from sim.collectives.lockstep import compile_schedule
from sim.collectives.model import CollectiveModel, model
from sim.collectives.steps import Costs, model_costs
from sim.collectives.trees import binary_tree, tree_levels
from sim.errors import BudgetError
from sim.fabric import REDUCTION, TRANSFER, FabricProgram, Network, build_network, hbm_default
from sim.topology import Topology

SHARED = ("recursive_doubling", "recursive_halving")


def collective_model(
    topo: Topology,
    algorithm: str,
    nbytes: int,
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    contention: bool = True,
    root: int = 0,
) -> CollectiveModel:
    """The model of one collective of ``nbytes`` with ``algorithm`` (module docstring)."""
    if by_algorithms_module(collective, algorithm) and not root:
        return model(
            topo, algorithm, nbytes, collective, chunk_bytes=chunk_bytes, contention=contention
        )
    net = build_network(topo)
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=net, root=root
    )
    costs = model_costs(topo, chunk_bytes)
    critical = path = link = engine = hbm = 0.0
    if schedule.steps:
        try:
            check_collective(topo, nbytes, algorithm, chunk_bytes)
            prog = compile_schedule(schedule).program
            critical, path = program_path(net, prog, algorithm in SHARED, costs)
        except BudgetError:
            prog = compile_schedule(schedule).program
        link, engine, hbm = program_loads(net, prog, costs)
    terms = (critical, path, link, engine, hbm)
    return CollectiveModel(
        algorithm=algorithm,
        collective=collective,
        chips=net.chips,
        nbytes=schedule.nbytes,
        time_ps=max(terms) if contention else critical,
        pipeline_ps=0.0,
        critical_path_ps=critical,
        resource_path_ps=path,
        one_port_ps=0.0,
        busiest_link_ps=link,
        busiest_engine_ps=engine,
        busiest_hbm_ps=hbm,
        textbook_ps=textbook(net, costs, collective, algorithm, schedule.nbytes, root),
        parts=(),
    )


def program_loads(net: Network, prog: FabricProgram, c: Costs) -> tuple[float, float, float]:
    """Term 3: the busiest link direction, reduce engine and HBM of a program, in ps."""
    kind = np.asarray(prog.kind, dtype=np.int64)
    nb = np.asarray(prog.nbytes, dtype=np.float64)
    src = np.asarray(prog.src, dtype=np.int64)
    dst = np.asarray(prog.dst, dtype=np.int64)
    p, nlinks = net.chips, len(net.links)
    per_pair = np.zeros(p * p)
    sends = kind == TRANSFER
    np.add.at(per_pair, src[sends] * p + dst[sends], nb[sends])
    link = np.zeros(nlinks)
    for pair in np.flatnonzero(per_pair):
        for x in net.routes[pair // p][pair % p]:
            link[x] += per_pair[pair]
    reduces = kind == REDUCTION
    engine = np.bincount(src[reduces], weights=nb[reduces], minlength=p)
    mem = [
        hbm_default(k, b) if m < 0 else m
        for k, b, m in zip(prog.kind, prog.nbytes, prog.hbm, strict=True)
    ]
    hbm = np.bincount(src, weights=np.asarray(mem, dtype=np.float64), minlength=p)
    return (
        float(link.max(initial=0.0)) * c.beta,
        float(engine.max(initial=0.0)) * c.gamma,
        float(hbm.max(initial=0.0)) * c.mem,
    )


def textbook(
    net: Network, c: Costs, collective: str, algorithm: str, nbytes: int, root: int = 0
) -> float:
    """The classic unchunked, contention-free alpha-beta-gamma time of an algorithm (``h``
    the longest route it uses, ``d`` a chip's links out):

    * all_gather / reduce_scatter ``direct``: ``h a + (p-1) n/p b / d`` (+ ``(p-1) n/p g``);
      recursive doubling / halving (Thakur, Rabenseifner and Gropp 2005):
      ``lg p' h a + (p'-1)/p' n b`` (+ the same ``g`` term), the fold adding ``2 (h a +
      n b)`` for reduce_scatter and ``2 (h a + n/p b)``-ish for all_gather;
    * alltoall ``direct``: ``h a + (p-1) n/p b / d``; ``pairwise``: ``(p-1) (h a + n/p b)``;
    * broadcast / reduce ``ring`` (a pipelined chain of ``p-1`` hops, two halves):
      ``(p-1) h a + n b / min(2, d)`` (+ ``n g``); ``binary_tree`` (depth ``D``, pipelined,
      two children per node): ``D h a + 2 n b / min(2, d)`` (+ ``n g``); ``direct``:
      ``h a + (p-1) n b / d`` (+ ``(p-1) n g``);
    * sendrecv: ``h a + n b``.
    """
    p, n = net.chips, float(nbytes)
    if p <= 1 or n == 0:
        return 0.0
    a, b, g = c.alpha, c.beta, c.gamma
    d = min(len(net.out_links(x)) for x in range(p))
    far = max(net.hops(s, t) for s in range(p) for t in range(p))
    share = (p - 1) / p * n
    summed = collective in ("reduce_scatter", "reduce")
    if algorithm == "direct":
        if collective in ("broadcast", "reduce"):
            return far * a + (p - 1) * n * b / d + ((p - 1) * n * g if summed else 0.0)
        if collective == "sendrecv":
            return max(net.hops(x, (x + 1) % p) for x in range(p)) * a + n * b
        return far * a + share * b / d + (share * g if summed else 0.0)
    if algorithm in SHARED:
        pof2 = 1 << (p.bit_length() - 1)
        t = (pof2.bit_length() - 1) * far * a + (pof2 - 1) / pof2 * n * b
        t += (pof2 - 1) / pof2 * n * g if summed else 0.0
        if p != pof2:
            t += 2 * far * a + (2 * n * b + n * g if summed else 2 * n / p * b)
        return t
    if algorithm == "pairwise":
        return (p - 1) * (far * a + n / p * b)
    order = net.ring_order()
    if algorithm == "ring":
        h = max(net.hops(order[q], order[(q + 1) % p]) for q in range(p))
        return (p - 1) * h * a + n * b / min(2, d) + (n * g if summed else 0.0)
    depth, _height = tree_levels(binary_tree(p))
    return max(depth) * far * a + 2 * n * b / min(2, d) + (n * g if summed else 0.0)
