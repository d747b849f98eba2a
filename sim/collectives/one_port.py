"""Term 7 of the model (:mod:`sim.collectives.model`): the one-port phases of the double
binary tree and of halving-doubling on a switch (ADR 0015)."""

from __future__ import annotations

import math

from sim.collectives.steps import (
    Costs,
    ModelStep,
    hd_steps,
    step_load,
    tree_part,
)
from sim.collectives.trees import double_binary_tree
from sim.fabric import (
    Network,
)


def one_port_ps(net: Network, algorithm: str, nbytes: int, c: Costs) -> float:
    """Term 7 (:mod:`sim.collectives.model`): the one-port phase terms of the double binary
    tree and of halving-doubling on a switch; 0 for the other algorithms."""
    p, n = net.chips, float(nbytes)
    if p <= 1 or n == 0:
        return 0.0
    if algorithm == "double_binary_tree":
        return _tree_stages(net, n, c)
    if algorithm == "halving_doubling" and net.kind == "switch":
        return _hd_one_port(net, n, c)
    return 0.0


def _tree_stages(net: Network, n: float, c: Costs) -> float:
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
    trees = [tree_part(t, net.ring_order(), n / 2) for t in double_binary_tree(p)]
    levels = max(len(t) for t in trees)
    depth = max(1, net.staging_buffers // 2)
    k = 1 << (max(math.ceil(n / 2 / c.chunk - 1e-9), depth, 1) - 1).bit_length()
    size = n / 2 / k
    stage = []
    for s in range(levels):
        flows = tuple(f for t in trees if s < len(t) for f in t[s].flows)
        share = max(step_load(net, ModelStep(flows, size, True)).values(), default=1)
        stage.append(share * size * c.beta if share >= 2 else 0.0)
    return sum(stage) + (k - 1) * max(stage) + levels * c.alpha


def _hd_one_port(net: Network, n: float, c: Costs) -> float:
    """Halving-doubling on a switch (one port per chip, the one-port model of Thakur,
    Rabenseifner and Gropp 2005, whose cost is the sum of the phases): the busiest chip's
    port receives the fold and its reduce-scatter data, then sends its all-gather data and
    the result of the fold back: ``max_chip (in-load of the first half of the steps +
    out-load of the second half) b``. For ``p`` a power of two this is the busiest port; for
    other ``p`` a survivor of the fold carries ``n`` more each way."""
    steps = hd_steps(net.chips, n)
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
