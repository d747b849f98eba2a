"""One call per collective beside :func:`~sim.collectives.run.allreduce`: :func:`alltoall`,
:func:`broadcast`, :func:`reduce`, :func:`sendrecv` (each :func:`run_collective` by name;
what the collectives and their algorithms are: :mod:`sim.collectives.catalog`)."""

from __future__ import annotations

from typing import Any

from sim.collectives.run import CollectiveRun, run_collective
from sim.topology import Topology


def alltoall(topo: Topology, nbytes: int, algorithm: str = "direct", **kw: Any) -> CollectiveRun:
    """Alltoall of ``nbytes`` per chip (``direct`` or ``pairwise``): block ``d`` of chip ``i``
    becomes block ``i`` of chip ``d``."""
    return run_collective(topo, nbytes, algorithm, "alltoall", **kw)


def broadcast(
    topo: Topology, nbytes: int, algorithm: str = "ring", root: int = 0, **kw: Any
) -> CollectiveRun:
    """Broadcast of ``nbytes`` from chip ``root`` (``ring``, ``binary_tree`` or ``direct``)."""
    return run_collective(topo, nbytes, algorithm, "broadcast", root=root, **kw)


def reduce(
    topo: Topology, nbytes: int, algorithm: str = "ring", root: int = 0, **kw: Any
) -> CollectiveRun:
    """Reduce of ``nbytes`` to chip ``root`` (``ring``, ``binary_tree`` or ``direct``)."""
    return run_collective(topo, nbytes, algorithm, "reduce", root=root, **kw)


def sendrecv(topo: Topology, nbytes: int, algorithm: str = "direct", **kw: Any) -> CollectiveRun:
    """nccl-tests' sendrecv: every chip sends ``nbytes`` to chip ``c+1``, receives from ``c-1``."""
    return run_collective(topo, nbytes, algorithm, "sendrecv", **kw)
