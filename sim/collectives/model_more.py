"""The analytic model of every collective: :func:`collective_model` (allreduce and the ring
reduce_scatter and all_gather: :func:`sim.collectives.model.model`; notation there).

For the other collectives and algorithms (:mod:`sim.collectives.catalog`) the model is the
largest of the terms that :mod:`sim.collectives.model` uses for allreduce, on the
algorithm's own chunk program (:func:`sim.collectives.lockstep.compile_schedule`):

1. **Congestion-unaware critical path** (term 5 there; ASTRA-sim's analytical network
   without congestion): the program timed with ``contention=False``, every (sender,
   receiver) pair on links of its own, every op with its own reduce engine and HBM; for the
   pipelined rooted algorithms (ring chains, binary tree), whose flows all run at once,
   each transfer holds its pair's links for its fair share (its bytes times the pairs of
   the program on its busiest link).
2. **Busiest resource on that path** (term 6 there, Carlier 1982): per link direction,
   reduce engine and HBM, the release time of its ops on that path plus their work and the
   shortest tail among them, with each sender's first transfers taking turns on its links.
3. **Busiest link direction, reduce engine and HBM** (terms 2-4 there), counted on the
   program itself: the bytes of every transfer on each link of its route, of every
   reduction on its chip, and every op's HBM bytes on its chip.
4. **Blocking steps** (pairwise alltoall): the steps one after another, each for its
   busiest link direction's bytes (:func:`blocking_steps`).

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

SHARED: tuple[str, ...] = ()  # fair shares per step (none: the recursive ones do better without)
PIPELINED = ("ring", "binary_tree")  # every flow runs at once: fair shares over the program


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
    critical = path = link = engine = hbm = steps = 0.0
    if schedule.steps:
        try:
            check_collective(topo, nbytes, algorithm, chunk_bytes)
            prog = compile_schedule(schedule).program
            timed = prog
            if algorithm in SHARED or algorithm in PIPELINED:
                timed = fair_shares(net, prog, by_step=algorithm in SHARED)
            critical, path = program_path(net, prog, False, costs, timed)
        except BudgetError:
            prog = compile_schedule(schedule).program
        link, engine, hbm = program_loads(net, prog, costs)
        if schedule.blocking:
            steps = blocking_steps(net, prog, costs)
    terms = (critical, path, link, engine, hbm, steps)
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


def fair_shares(net: Network, prog: FabricProgram, by_step: bool) -> FabricProgram:
    """``prog`` with each transfer as long on its links as the fair share it gets: its bytes
    times the (sender, receiver) pairs that cross its busiest link, in its step
    (``by_step``: steps that follow one another) or anywhere in the program (pipelined
    algorithms, whose flows all run at once). HBM bytes stay the transfer's own."""
    p = net.chips
    pairs: dict[tuple[int, int], set[int]] = {}
    kinds, srcs, dsts, steps = prog.kind, prog.src, prog.dst, prog.step
    for k, s, d, st in zip(kinds, srcs, dsts, steps, strict=True):
        if k == TRANSFER:
            for x in net.routes[s][d]:
                pairs.setdefault((st if by_step else 0, x), set()).add(s * p + d)
    out = prog.copy()
    for i, (k, s, d, st) in enumerate(zip(kinds, srcs, dsts, steps, strict=True)):
        if k == TRANSFER:
            share = max(len(pairs[st if by_step else 0, x]) for x in net.routes[s][d])
            out.hbm[i] = out.nbytes[i] if prog.hbm[i] < 0 else prog.hbm[i]
            out.nbytes[i] *= share
    return out


def blocking_steps(net: Network, prog: FabricProgram, c: Costs) -> float:
    """Steps one after another (``Schedule.blocking``, :mod:`sim.collectives.lockstep`): a
    chip's step may start once the last chunk of its step before is under way, so each step
    holds its busiest link direction for its bytes but one chunk; the last step adds its
    last chunk and its longest route's latency. (The latencies of the other steps overlap
    the traffic of chips still in the step before: the critical path, term 1, has them.)"""
    load: dict[tuple[int, int], int] = {}
    far: dict[int, int] = {}
    chunk: dict[int, int] = {}
    for k, s, d, st, nb in zip(prog.kind, prog.src, prog.dst, prog.step, prog.nbytes, strict=True):
        if k == TRANSFER:
            route = net.routes[s][d]
            far[st] = max(far.get(st, 0), len(route))
            chunk[st] = max(chunk.get(st, 0), nb)
            for x in route:
                load[st, x] = load.get((st, x), 0) + nb
    busiest: dict[int, int] = {}
    for (st, _x), nb in load.items():
        busiest[st] = max(busiest.get(st, 0), nb)
    last = max(busiest, default=0)
    total = sum((busiest[st] - chunk[st]) * c.beta for st in busiest)
    return total + chunk.get(last, 0) * c.beta + far.get(last, 0) * c.alpha


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
