"""Terms 1 to 4 of the model (:mod:`sim.collectives.model`): the chunk pipeline, and the
busiest link direction, reduce engine and HBM."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sim.collectives.steps import (
    Costs,
    ModelStep,
    step_load,
)
from sim.fabric import (
    Network,
)


def _count(chips: Sequence[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in chips:
        out[c] = out.get(c, 0) + 1
    return out


def chunk_pipeline(net: Network, steps: Sequence[ModelStep], c: Costs) -> float:
    """Term 1 for one part: the longest path through its chunk grid (:mod:`sim.collectives.model`).

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
        links = step_load(net, st)
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


def busiest_resources(
    net: Network, parts: Sequence[Sequence[ModelStep]], c: Costs
) -> tuple[float, float, float]:
    """Terms 2-4: the busiest link direction, reduce engine and HBM over the whole algorithm."""
    link: dict[int, float] = {}
    engine: dict[int, float] = {}
    hbm: dict[int, float] = {}
    for steps in parts:
        for st in steps:
            for x, flows in step_load(net, st).items():
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
