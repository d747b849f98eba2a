"""Run a collective: build its schedule, time its fabric program, replay its op log.

The API: :func:`allreduce`, :func:`reduce_scatter`, :func:`all_gather` (and
:func:`run_collective` for any of them by name).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.collectives.budget import check_collective
from sim.collectives.catalog import build_schedule
from sim.collectives.compile import Compiled
from sim.collectives.lockstep import compile_schedule
from sim.collectives.schedule import (
    I64,
    Schedule,
)
from sim.collectives.verify import Replayed, ReplayError, check, replay
from sim.fabric import (
    Network,
    build_network,
    simulate_fabric,
)
from sim.oplog import OpLog
from sim.topology import Topology


@dataclass(frozen=True)
class CollectiveRun:
    """One simulated collective: schedule, network, op log, and the replayed functional check."""

    schedule: Schedule
    network: Network
    compiled: Compiled
    log: OpLog
    wrong: int
    problem: str
    final: Replayed

    @property
    def time_ps(self) -> int:
        return self.log.makespan_ps

    @property
    def nbytes(self) -> int:
        return self.schedule.nbytes

    @property
    def chips(self) -> int:
        return self.schedule.chips

    @property
    def bounds(self) -> list[int]:
        return self.compiled.bounds

    def values(self, chip: int) -> I64:
        """Chip ``chip``'s final vector, materialised element by element (small runs)."""
        e = np.arange(self.schedule.count, dtype=np.int64)
        piece = np.repeat(np.arange(len(self.bounds) - 1), np.diff(np.asarray(self.bounds)))
        out: I64 = self.final.a[chip, piece] + self.final.b[chip, piece] * e
        return out


def run_collective(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    root: int = 0,
) -> CollectiveRun:
    """Simulate one collective of ``nbytes`` on ``topo.chips`` and check its result (every
    collective and algorithm: :mod:`sim.collectives.catalog`)."""
    nbytes, chunk_bytes = check_collective(topo, nbytes, algorithm, chunk_bytes)  # sim.limits
    net = build_network(topo)
    schedule = build_schedule(
        topo, nbytes, algorithm, collective, chunk_bytes=chunk_bytes, network=net, root=root
    )
    return run_schedule(schedule, net)


def run_schedule(schedule: Schedule, net: Network) -> CollectiveRun:
    """Time ``schedule`` on ``net`` and check its result by replaying the op log."""
    compiled = compile_schedule(schedule)
    log = simulate_fabric(net, compiled.program)
    try:
        final = replay(schedule, net, compiled, log)
    except ReplayError as exc:
        total = schedule.chips * schedule.count
        zero = np.zeros((schedule.chips, len(compiled.bounds) - 1), np.int64)
        return CollectiveRun(
            schedule, net, compiled, log, total, str(exc), Replayed(zero, zero, zero)
        )
    wrong, problem = check(schedule, compiled.bounds, final)
    return CollectiveRun(schedule, net, compiled, log, wrong, problem, final)


def allreduce(topo: Topology, nbytes: int, algorithm: str = "ring", **kw: int) -> CollectiveRun:
    """Simulate an allreduce of ``nbytes`` with ``algorithm`` (the algorithms:
    :mod:`sim.collectives.algorithms`)."""
    return run_collective(topo, nbytes, algorithm, "allreduce", **kw)


def reduce_scatter(
    topo: Topology, nbytes: int, algorithm: str = "ring", **kw: int
) -> CollectiveRun:
    """Reduce-scatter of an ``nbytes`` vector: chip ``c`` ends with its shares summed."""
    return run_collective(topo, nbytes, algorithm, "reduce_scatter", **kw)


def all_gather(topo: Topology, nbytes: int, algorithm: str = "ring", **kw: int) -> CollectiveRun:
    """All-gather into an ``nbytes`` vector: every chip ends with every chip's shares."""
    return run_collective(topo, nbytes, algorithm, "all_gather", **kw)
