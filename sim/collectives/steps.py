"""The model's view of a collective: its independent parts (each ring, tree or torus half)
as steps of flows, and the alpha-beta-gamma costs of a topology (notation of
:mod:`sim.collectives.model`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from sim.collectives.schedule import (
    ALGORITHMS,
    CollectiveError,
)
from sim.collectives.trees import double_binary_tree, tree_levels
from sim.fabric import (
    Network,
)
from sim.topology import Topology, dimensions_of

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


def hd_steps(p: int, n: float) -> list[ModelStep]:
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


def tree_part(parent: Sequence[int], order: Sequence[int], m: float) -> list[ModelStep]:
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


def model_parts(
    net: Network,
    algorithm: str,
    collective: str,
    n: float,
    rings: Sequence[Sequence[int]] = (),
) -> list[list[ModelStep]]:
    """Independent pipelines of an algorithm (each ring, tree, torus half), as ModelSteps;
    a ring on its channels' ``rings`` when given (:mod:`sim.collectives.channels`), else
    on the ring order and its reverse."""
    p = net.chips
    if p <= 1 or n == 0:
        return []
    if algorithm == "ring":
        order = list(net.ring_order())
        ways = [list(r) for r in rings] or [order, order[::-1]]
        return [_ring_part([ring], n / (len(ways) * p), collective) for ring in ways]
    if algorithm == "direct":
        flows = tuple((s, (s + d) % p) for d in range(1, p) for s in range(p))
        return [[ModelStep(flows, n, True, None)]]
    if algorithm == "halving_doubling":
        return [hd_steps(p, n)]
    if algorithm == "double_binary_tree":
        chips = net.ring_order()
        return [tree_part(t, chips, n / 2) for t in double_binary_tree(p)]
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
class Costs:
    alpha: float  # ps per hop
    beta: float  # ps per byte on a link direction
    gamma: float  # ps per byte reduced
    mem: float  # ps per byte through one chip's HBM
    chunk: int
    burst: int  # the streaming granule, bytes


def step_load(net: Network, step: ModelStep) -> dict[int, int]:
    """Flows of ``step`` crossing each link."""
    load: dict[int, int] = {}
    for src, dst in step.flows:
        for link in net.route(src, dst):
            load[link] = load.get(link, 0) + 1
    return load


def model_costs(topo: Topology, chunk_bytes: int | None, net: Network | None = None) -> Costs:
    """The model's per-hop and per-byte costs; link latency and bandwidth those of ``net`` when
    given (a protocol's network, :func:`sim.collectives.protocols.protocol_network`). It reads
    one link bandwidth and latency, so a network whose dimensions differ in them (or add NIC
    latency) is refused, not averaged."""
    cfg = topo.chips
    links = {
        (d.link_bw, d.link_latency_ps + (d.nic_latency_ps if d.shape == "switch" else 0))
        for d in dimensions_of(cfg)
    }
    if len(links) != 1:
        raise CollectiveError(
            "the alpha-beta model reads one link bandwidth and latency, but chips.dimensions "
            f"gives {len(links)} different (bandwidth, latency) pairs; time this network with "
            "the fabric engine (simulate_fabric), not the model"
        )
    ((bw, lat),) = links
    return Costs(
        alpha=float(lat) if net is None else _mean_hop_latency(net),
        beta=1000.0 / float(bw if net is None else _one_bandwidth(net)),
        gamma=1000.0 / float(cfg.reduce_bw),
        mem=1000.0 / float(topo.hbm.bw),
        chunk=cfg.chunk_bytes if chunk_bytes is None else chunk_bytes,
        burst=topo.hbm.burst_bytes,
    )


def _mean_hop_latency(net: Network) -> float:
    """A protocol's network adds its per-step cost to the links chips send on, not to a
    switch's links down, so its hops differ; every route of a one-level network has as many
    links up as down (or only chip links), so the mean per link is exact per route."""
    lats = net.link_latencies_ps
    return sum(lats) / len(lats) if lats else float(net.latency_ps)


def _one_bandwidth(net: Network) -> Fraction:
    bws = set(net.link_bws)
    if len(bws) > 1:
        raise CollectiveError(
            "the alpha-beta model reads one link bandwidth; this network's links differ "
            "(chips.dimensions); time it with the fabric engine"
        )
    return bws.pop() if bws else net.link_bw
