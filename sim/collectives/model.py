"""The analytic model of the collectives, from the same Topology as the simulator.

Notation (all from the topology): ``a`` = link latency per hop (alpha), ``b`` = time per
byte on a link direction (beta = 1 / link_bw), ``g`` = time per byte of reduction (gamma =
1 / reduce_gbs), ``m`` = time per byte of the chip's HBM (1 / hbm_to_router_bw_gbs), ``n``
= message bytes, ``p`` = chips, ``h`` = hops of a route, ``d`` = link directions out of a chip.

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
   on the algorithm's own chunk program, :func:`sim.fabric.simulate_fabric` with
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

What a call costs beyond the wires (``collectives``, ADR 0021 decision 2) enters as it
does in the simulator: the terms are taken on the protocol's network (link bandwidth times
its efficiency, ``a`` plus the per-step latency:
:func:`~sim.collectives.protocols.protocol_network`), a ring runs on its channels
(:mod:`sim.collectives.channels`: one part per channel), and the model time is ``launch``
plus the largest term. ``protocol: auto`` is resolved as a run resolves it
(:func:`~sim.collectives.protocols.choose_protocol`).

Lower bounds and textbook times: :mod:`sim.collectives.bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.collectives.algorithms import build_schedule
from sim.collectives.bounds import textbook_ps
from sim.collectives.channels import resolve_channels, ring_channels
from sim.collectives.critical_path import critical_path
from sim.collectives.nvls import NVLS
from sim.collectives.nvls_model import nvls_model
from sim.collectives.one_port import one_port_ps
from sim.collectives.per_dimension import HIERARCHICAL_ALGORITHMS, model_fields
from sim.collectives.pipeline import busiest_resources, chunk_pipeline
from sim.collectives.protocols import (
    choose_protocol,
    is_choice,
    protocol_network,
    requested_protocol,
)
from sim.collectives.schedule import (
    COLLECTIVES,
    CollectiveError,
)
from sim.collectives.steps import (
    ModelStep,
    model_costs,
    model_parts,
)
from sim.fabric import (
    build_network,
)
from sim.topology import Topology


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
    launch_ps: float = 0.0
    protocol: str = "simple"
    channels: int = 0

    @property
    def time_ns(self) -> float:
        return self.time_ps / 1000


GRID = ("ring", "torus2d")  # the chunk grid (term 1) models these; the others by their program


def model(
    topo: Topology,
    algorithm: str,
    nbytes: int,
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    contention: bool = True,
    protocol: str | None = None,
    channels: int | str | None = None,
) -> CollectiveModel:
    """The model of one collective: launch plus the largest of its terms (module
    docstring); ``protocol`` and ``channels`` override ``topo.collectives`` as in a run."""
    if collective not in COLLECTIVES:
        raise CollectiveError(f"unknown collective {collective!r}; use {', '.join(COLLECTIVES)}")
    if algorithm in HIERARCHICAL_ALGORITHMS:  # per-dimension: sim.collectives.per_dimension
        fields = model_fields(topo, algorithm, nbytes, collective, chunk_bytes, protocol)
        return CollectiveModel(**fields)  # type: ignore[arg-type]
    if collective != "allreduce" and algorithm != "ring":
        raise CollectiveError(f"{collective} is modelled for algorithm='ring' only")
    if algorithm == NVLS:  # a switch that reduces: sim.collectives.nvls_model
        return CollectiveModel(**nvls_model(topo, nbytes, collective, chunk_bytes))  # type: ignore[arg-type]
    if channels is not None and channels != 0 and algorithm != "ring":
        raise CollectiveError(f"channels = {channels!r} apply to algorithm 'ring' only")
    cfg = topo.collectives
    wires = build_network(topo)
    ring = algorithm == "ring" and wires.chips > 1
    count = resolve_channels(topo, wires, channels) if ring else 0
    chosen = requested_protocol(cfg, protocol)
    if is_choice(chosen):
        schedule = build_schedule(
            topo,
            nbytes,
            algorithm,
            collective,
            chunk_bytes=chunk_bytes,
            network=wires,
            channels=count if ring else None,
        )
        chosen = choose_protocol(schedule, wires, cfg, chosen)
    net = protocol_network(wires, cfg, chosen)
    rings = [c.order for c in ring_channels(topo, net, count)]
    parts = model_parts(net, algorithm, collective, float(nbytes), rings)
    costs = model_costs(topo, chunk_bytes, net)
    pipeline = 0.0
    if algorithm in GRID:
        pipeline = max((chunk_pipeline(net, steps, costs) for steps in parts if steps), default=0.0)
    link, engine, hbm = busiest_resources(net, parts, costs)
    critical, path = critical_path(
        topo, net, algorithm, nbytes, collective, chunk_bytes, costs, count
    )
    one_port = one_port_ps(net, algorithm, nbytes, costs) if collective == "allreduce" else 0.0
    terms = (pipeline, critical, path, one_port, link, engine, hbm)
    launch = float(cfg.launch_ps)
    return CollectiveModel(
        algorithm=algorithm,
        collective=collective,
        chips=net.chips,
        nbytes=nbytes,
        time_ps=launch + (max(terms) if contention else max(pipeline, critical)),
        pipeline_ps=pipeline,
        critical_path_ps=critical,
        resource_path_ps=path,
        one_port_ps=one_port,
        busiest_link_ps=link,
        busiest_engine_ps=engine,
        busiest_hbm_ps=hbm,
        textbook_ps=textbook_ps(topo, algorithm, nbytes, collective),
        parts=tuple(tuple(s) for s in parts),
        launch_ps=launch,
        protocol=chosen,
        channels=count,
    )
