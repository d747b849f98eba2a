"""Run a collective: build its schedule, time its fabric program, replay its op log.

The API: :func:`allreduce`, :func:`reduce_scatter`, :func:`all_gather` (and
:func:`run_collective` for any of them by name).

What a call costs beyond the wires (``collectives``, ADR 0021 decision 2): it runs on its
channels (:mod:`sim.collectives.channels`) under its protocol's network
(:mod:`sim.collectives.protocols`), and it **starts** ``collectives.launch_ns`` after time
0: every record of its op log is shifted by the launch, so a trace shows the call from its
enqueue, and ``time_ps`` (the last end; the launch alone when nothing moves), ``algbw`` and
``busbw`` include it. The ``protocol=`` and ``channels=`` arguments override the topology's
(as ``NCCL_PROTO`` and ``NCCL_MIN_NCHANNELS`` do).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from sim.collectives.budget import check_collective, collective_arguments
from sim.collectives.catalog import build_schedule
from sim.collectives.compile import Compiled, chunk_count
from sim.collectives.lockstep import compile_schedule
from sim.collectives.nvls import NVLS
from sim.collectives.nvls_program import nvls_program
from sim.collectives.protocols import choose_protocol, protocol_network
from sim.collectives.races import compiled_race
from sim.collectives.schedule import (
    I64,
    CollectiveError,
    Schedule,
)
from sim.collectives.verify import Replayed, ReplayError, check, replay
from sim.errors import BudgetError
from sim.fabric import (
    Network,
    build_network,
    simulate_fabric,
)
from sim.limits import (
    FABRIC_OP_BYTES,
    OPLOG_RECORD_BYTES,
    OPS_BUDGET_ENV,
    check_memory,
    ops_budget,
)
from sim.oplog import OpLog
from sim.topology import CollectivesConfig, Topology


@dataclass(frozen=True)
class CollectiveRun:
    """One simulated collective: schedule, network, op log, and the replayed functional check.

    ``network`` is the one the program was timed on (its protocol's, see
    :func:`~sim.collectives.protocols.protocol_network`); ``protocol`` the protocol it ran,
    ``launch_ps`` when it started (its log is shifted by it); the schedule's ``channels``
    the channels it used."""

    schedule: Schedule
    network: Network
    compiled: Compiled
    log: OpLog
    wrong: int
    problem: str
    final: Replayed
    protocol: str = "simple"
    launch_ps: int = 0

    @property
    def time_ps(self) -> int:
        return max(self.launch_ps, self.log.makespan_ps)

    @property
    def channels(self) -> int:
        return self.schedule.channels

    @property
    def nbytes(self) -> int:
        return self.schedule.nbytes

    @property
    def chips(self) -> int:
        return self.schedule.chips

    @property
    def bounds(self) -> list[int]:
        return self.compiled.bounds

    def dependency_race(self) -> str:
        """``""``, or the first producer-consumer pair of the timed program that its
        dependency graph leaves unordered, naming both ops (:mod:`sim.collectives.races`)."""
        return compiled_race(self.compiled)

    def values(self, chip: int) -> I64:
        """Chip ``chip``'s final vector, materialised element by element (small runs)."""
        e = np.arange(self.schedule.count, dtype=np.int64)
        piece = np.repeat(np.arange(len(self.bounds) - 1), np.diff(np.asarray(self.bounds)))
        out: I64 = self.final.a[chip, piece] + self.final.b[chip, piece] * e
        return out


#: Fast paths tried before the full program is built: each returns a run or None (then the
#: next, and finally the full program). :mod:`sim.collectives.fast` adds the symmetric one.
FAST_PATHS: list[Callable[[Topology, object, object, object, object], CollectiveRun | None]] = []


def run_collective(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    collective: str = "allreduce",
    *,
    chunk_bytes: int | None = None,
    protocol: str | None = None,
    channels: int | str | None = None,
    root: int = 0,
) -> CollectiveRun:
    """Simulate one collective of ``nbytes`` on ``topo.chips`` and check its result (every
    collective and algorithm: :mod:`sim.collectives.catalog`); ``protocol`` and ``channels``
    override ``topo.collectives`` (module docstring)."""
    topo, nbytes, chunk_bytes, algorithm = collective_arguments(
        topo, nbytes, algorithm, chunk_bytes
    )
    if protocol is None and channels is None and topo.collectives.neutral and not root:
        for fast in FAST_PATHS:  # today's runtime only: no launch, channels or protocol
            got = fast(topo, nbytes, algorithm, collective, chunk_bytes)
            if got is not None:
                return got
    nbytes, chunk_bytes = check_collective(topo, nbytes, algorithm, chunk_bytes)  # sim.limits
    net = build_network(topo)
    schedule = build_schedule(
        topo,
        nbytes,
        algorithm,
        collective,
        chunk_bytes=chunk_bytes,
        network=net,
        channels=channels,
        root=root,
    )
    if schedule.channels:
        check_channels(schedule, net)
    cfg = topo.collectives
    if schedule.algorithm == NVLS:  # NCCL runs NVLS with Simple only (tuning.cc)
        if protocol not in (None, "simple"):
            raise CollectiveError(
                f"protocol = {protocol!r}: nvls runs the Simple protocol only, as NCCL's does"
            )
        chosen = "simple"
    else:
        chosen = choose_protocol(schedule, net, cfg, protocol)
    return run_schedule(schedule, net, collectives=cfg, protocol=chosen)


def check_channels(schedule: Schedule, net: Network) -> None:
    """The budgets of :func:`check_collective` on the schedule's own chunk counts (its
    estimate counts two rings; ``c`` channels cut ``c`` smaller messages, each rounded up
    to a power of two of chunks)."""
    bpe, chunk, depth = schedule.bytes_per_element, schedule.chunk_bytes, schedule.depth
    transfers = records = 0
    for step in schedule.steps:
        for m in step:
            k = chunk_count(m.hi - m.lo, bpe, chunk, depth)
            transfers += k
            records += k * (net.hops(m.src, m.dst) + 1)
    ops = 2 * transfers
    what = f"ring collective of {schedule.nbytes} bytes on {schedule.chips} chips"
    parts = f"{schedule.channels} channels: {records} transfers/reductions"
    check_memory(what, ops * FABRIC_OP_BYTES + (records - ops) * OPLOG_RECORD_BYTES, parts)
    if records > ops_budget():
        raise BudgetError(
            f"{what}: about {records} operations to simulate ({parts}), over the budget of "
            f"{ops_budget()}; use fewer channels, a smaller message or a larger "
            f"chips.chunk_kib, or raise the budget: {OPS_BUDGET_ENV}={records}"
        )


def run_schedule(
    schedule: Schedule,
    net: Network,
    *,
    collectives: CollectivesConfig | None = None,
    protocol: str = "simple",
) -> CollectiveRun:
    """Time ``schedule`` on ``net`` under ``protocol`` (its network:
    :func:`~sim.collectives.protocols.protocol_network`), start it ``collectives.launch_ns``
    late, and check its result by replaying the op log."""
    cfg = collectives or CollectivesConfig()
    net = protocol_network(net, cfg, protocol)
    launch = cfg.launch_ps
    nvls = schedule.algorithm == NVLS  # a switch that reduces (sim.collectives.nvls_program)
    compiled = nvls_program(schedule, net) if nvls else compile_schedule(schedule)
    log = simulate_fabric(net, compiled.program)
    if launch:
        log = dataclasses.replace(log, start=log.start + launch, end=log.end + launch)
    return checked_run(
        schedule,
        net,
        compiled,
        log,
        lambda wrong, problem, final: CollectiveRun(
            schedule, net, compiled, log, wrong, problem, final, protocol, launch
        ),
    )


R = TypeVar("R", bound="CollectiveRun")


def checked_run(
    schedule: Schedule,
    net: Network,
    compiled: Compiled,
    log: OpLog,
    make: Callable[[int, str, Replayed], R],
) -> R:
    """``log``'s data replayed and checked; ``make(wrong, problem, final)`` builds the run (a
    replay that cannot finish counts every element wrong and says why)."""
    try:
        final = replay(schedule, net, compiled, log)
    except ReplayError as exc:
        total = schedule.chips * schedule.count
        zero = np.zeros((schedule.chips, len(compiled.bounds) - 1), np.int64)
        return make(total, str(exc), Replayed(zero, zero, zero))
    wrong, problem = check(schedule, compiled.bounds, final)
    return make(wrong, problem, final)


def allreduce(
    topo: Topology,
    nbytes: int,
    algorithm: str = "ring",
    *,
    chunk_bytes: int | None = None,
    protocol: str | None = None,
    channels: int | str | None = None,
) -> CollectiveRun:
    """Simulate an allreduce of ``nbytes`` with ``algorithm`` (the algorithms:
    :mod:`sim.collectives.algorithms`)."""
    return run_collective(
        topo,
        nbytes,
        algorithm,
        "allreduce",
        chunk_bytes=chunk_bytes,
        protocol=protocol,
        channels=channels,
    )


def reduce_scatter(
    topo: Topology, nbytes: int, algorithm: str = "ring", **kw: Any
) -> CollectiveRun:
    """Reduce-scatter of an ``nbytes`` vector: chip ``c`` ends with its shares summed
    (``kw``: :func:`run_collective`'s keywords)."""
    return run_collective(topo, nbytes, algorithm, "reduce_scatter", **kw)


def all_gather(topo: Topology, nbytes: int, algorithm: str = "ring", **kw: Any) -> CollectiveRun:
    """All-gather into an ``nbytes`` vector: every chip ends with every chip's shares."""
    return run_collective(topo, nbytes, algorithm, "all_gather", **kw)
