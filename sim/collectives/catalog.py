"""Every nccl-tests collective and the algorithms it runs here: :data:`COLLECTIVE_ALGORITHMS`,
and :func:`build_schedule` for any of them.

=================  ==========================================  ===========================
collective         algorithms                                  size ``n`` (nccl-tests)
=================  ==========================================  ===========================
allreduce          ring, direct, halving_doubling,             the buffer
                   double_binary_tree, torus2d
all_gather         ring, direct, recursive_doubling            the output (``p`` blocks)
reduce_scatter     ring, direct, recursive_halving             the input (``p`` blocks)
alltoall           direct, pairwise                            one chip's send buffer
broadcast          ring, binary_tree, direct                   the buffer (root: chip 0)
reduce             ring, binary_tree, direct                   the buffer (root: chip 0)
sendrecv           direct                                      what each chip sends
=================  ==========================================  ===========================

Allreduce and the ring reduce_scatter and all_gather are built by
:mod:`sim.collectives.algorithms`; the others by :mod:`sim.collectives.gather`,
:mod:`sim.collectives.alltoall`, :mod:`sim.collectives.rooted` and
:mod:`sim.collectives.sendrecv`, whose docstrings say what each algorithm is and where it
comes from.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.collectives import algorithms, alltoall, gather, rooted, sendrecv
from sim.collectives.gather import Built
from sim.collectives.schedule import (
    ALGORITHMS,
    COLLECTIVES,
    CollectiveError,
    Schedule,
    algorithms_for,
    message_chunk,
)
from sim.fabric import Network, build_network
from sim.topology import Topology

COLLECTIVE_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ALGORITHMS,
    "all_gather": ("ring", "direct", "recursive_doubling"),
    "reduce_scatter": ("ring", "direct", "recursive_halving"),
    "alltoall": ("direct", "pairwise"),
    "broadcast": ("ring", "binary_tree", "direct"),
    "reduce": ("ring", "binary_tree", "direct"),
    "sendrecv": ("direct",),
}
ALL_COLLECTIVES: tuple[str, ...] = tuple(COLLECTIVE_ALGORITHMS)
ROOTED = ("broadcast", "reduce")

Builder = Callable[[int, Network, int], Built]

_BUILDERS: dict[tuple[str, str], Builder] = {
    ("all_gather", "direct"): lambda n, net, _r: gather.direct_all_gather(n, net.digit_sizes),
    ("all_gather", "recursive_doubling"): lambda n, net, _r: gather.recursive_doubling(
        n, net.chips
    ),
    ("reduce_scatter", "direct"): lambda n, net, _r: gather.direct_reduce_scatter(
        n, net.digit_sizes
    ),
    ("reduce_scatter", "recursive_halving"): lambda n, net, _r: gather.recursive_halving(
        n, net.chips
    ),
    ("alltoall", "direct"): lambda n, net, _r: alltoall.direct(n, net.digit_sizes),
    ("alltoall", "pairwise"): lambda n, net, _r: alltoall.pairwise(n, net.digit_sizes),
    ("broadcast", "ring"): rooted.ring_broadcast,
    ("broadcast", "binary_tree"): rooted.tree_broadcast,
    ("broadcast", "direct"): rooted.direct_broadcast,
    ("reduce", "ring"): rooted.ring_reduce,
    ("reduce", "binary_tree"): rooted.tree_reduce,
    ("reduce", "direct"): rooted.direct_reduce,
    ("sendrecv", "direct"): lambda n, net, _r: sendrecv.direct(n, net.chips),
}


def collective_algorithms(collective: str, topology: str) -> tuple[str, ...]:
    """The algorithms of ``collective`` valid on a chip topology (``torus2d``: a torus only)."""
    if collective == "allreduce":
        return algorithms_for(topology)
    if collective not in COLLECTIVE_ALGORITHMS:
        raise CollectiveError(_unknown(collective))
    return COLLECTIVE_ALGORITHMS[collective]


def _unknown(collective: str) -> str:
    return f"unknown collective {collective!r}; use one of {', '.join(ALL_COLLECTIVES)}"


def by_algorithms_module(collective: str, algorithm: str) -> bool:
    """Whether :mod:`sim.collectives.algorithms` builds it (allreduce, the ring halves, and the
    hierarchical algorithms' halves on a network of dimensions)."""
    if collective == "allreduce":
        return True
    return collective in COLLECTIVES and algorithm in ("ring", "hierarchical")


def build_schedule(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    network: Network | None = None,
    channels: int | str | None = None,
    root: int = 0,
) -> Schedule:
    """The schedule of one collective of ``nbytes`` on ``topo.chips`` (module docstring)."""
    p = topo.chips.count
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < max(p, 1):
        raise CollectiveError(f"root = {root!r} is not a chip; use a chip id in 0..{p - 1}")
    if root and collective not in ROOTED:
        raise CollectiveError(
            f"{collective} has no root (root = {root}); only {' and '.join(ROOTED)} take one"
        )
    if by_algorithms_module(collective, algorithm):
        return algorithms.build_schedule(
            topo,
            nbytes,
            algorithm,
            collective,
            chunk_bytes=chunk_bytes,
            network=network,
            channels=channels,
        )
    if collective not in COLLECTIVE_ALGORITHMS:
        raise CollectiveError(_unknown(collective))
    if (collective, algorithm) not in _BUILDERS:
        names = ", ".join(COLLECTIVE_ALGORITHMS[collective])
        raise CollectiveError(f"{collective} has no algorithm {algorithm!r}; use one of {names}")
    bpe = topo.bpe
    chunk = message_chunk(topo, nbytes, chunk_bytes)
    net = network or build_network(topo)
    count = nbytes // bpe
    one = Built([], count, (((0, count),),))  # one chip: nothing moves, it owns everything
    built = _BUILDERS[collective, algorithm](count, net, root) if p > 1 else one
    steps = (tuple(m for m in s if m.hi > m.lo) for s in built.steps)
    return Schedule(
        collective=collective,  # type: ignore[arg-type]
        algorithm=algorithm,  # type: ignore[arg-type]
        chips=p,
        count=built.count,
        bytes_per_element=bpe,
        chunk_bytes=chunk - chunk % bpe,
        steps=tuple(s for s in steps if s),
        shares=built.shares,
        depth=max(1, topo.chips.staging_buffers // 2),
        root=root,
        blocking=built.blocking,
    )
