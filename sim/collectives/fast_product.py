"""Collectives on a product of switch and fully connected dimensions, timed from the ops of
representative chips (:func:`sim.fabric.quotient.time_by_quotient`), and counted exactly
before the budget refuses them.

**Which symmetry.** On a ``switch`` or ``fully_connected`` dimension any relabelling of a
group's chips is a network automorphism, so every translation of the chips' digits is one
of the whole network (a ring dimension is not tried here: its half-ring tie is ADR 0022's
and another change's). Whether a collective's *program* maps onto itself, ties included,
depends on the algorithm's message order; :mod:`sim.fabric.quotient` checks it op by op
for each group below, in turn, and the first that passes times the program from its
representatives. When none passes, the full program runs through the event engine as
before. ``pairwise`` passes with every translation (one chip stands for all): its lockstep
dependencies join disjoint blocks and carry no data, so the streaming rule reads no offset
of them (ADR 0034). ``hierarchical`` and ``tree_ring`` pass with the translations of
dimension 0 (one rail); ``run_collective``
takes them (and ``direct``, and the flat ring) through :mod:`sim.collectives.fast_orbit`
first, which never builds the full program.

Groups tried: the translations of every dimension (one representative chip), the xor of
chip ids (sizes powers of two: recursive halving and doubling pair chips by xor), the
translations of the outer dimensions (``s_0`` representatives), of dimension 0 alone; for
the flat ``ring`` (its order a reflected Gray code of the digits, node ``j`` swept the
other way from node ``j - 1``, so no translation keeps it), the turns of that order by one
node's sweep (``s_0 ... s_{n-2}`` representatives: one node's chips).

**Budget.** :func:`sim.collectives.budget.estimate_collective` does not know the
collective: it counts every algorithm as an allreduce (``direct``: the whole vector to
every chip), so it refuses an all-gather, a broadcast or a sendrecv of a few thousand ops
at 256 chips. Here the schedule is built (it is small beside its program) and its chunks
counted exactly, as :func:`sim.collectives.run.check_channels` counts; that count, not
the estimate, meets the ops and memory budgets.

Exactness: the log is the event engine's, record for record (the quotient's checks are
the proof obligation; ``tests/sim/test_fast_product.py`` compares SHA-256 of every column
with the event engine up to 64 chips). ``#wrong`` is the replay of the full log
(:func:`sim.collectives.verify.replay`), as for every run.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.collectives.budget import collective_arguments
from sim.collectives.catalog import build_schedule
from sim.collectives.compile import Compiled, chunk_count
from sim.collectives.lockstep import compile_schedule
from sim.collectives.nvls import NVLS
from sim.collectives.orbit import groups_for
from sim.collectives.protocols import protocol_network
from sim.collectives.run import FAST_PATHS, CollectiveRun, checked_run
from sim.collectives.schedule import Schedule
from sim.errors import NpuSimError
from sim.fabric import (
    Network,
    Quotient,
    build_network,
    simulate_fabric,
    time_by_quotient,
)
from sim.limits import FABRIC_OP_BYTES, OPLOG_RECORD_BYTES, check_memory, ops_budget
from sim.oplog import OpLog
from sim.topology import Topology, dimensions_of

__all__ = ["QuotientRun", "exact_count", "groups_for", "product_run"]

SHAPES = ("switch", "fully_connected")


@dataclass(frozen=True)
class QuotientRun(CollectiveRun):
    """A :class:`CollectiveRun` whose log was timed from representative chips
    (``quotient``), or by the event engine when no group passed (``quotient`` None)."""

    quotient: Quotient | None = None


def exact_count(schedule: Schedule, net: Network) -> tuple[int, int]:
    """The program's ops and records, from the schedule's own chunk counts: each message is
    ``k`` transfers of ``hops`` records and ``k`` consumers (``k`` once per message length,
    the hops once per pair)."""
    bpe, chunk, depth = schedule.bytes_per_element, schedule.chunk_bytes, schedule.depth
    k_of: dict[int, int] = {}
    routes = net.routes
    transfers = records = 0
    for step in schedule.steps:
        for m in step:
            n = m.hi - m.lo
            k = k_of.get(n)
            if k is None:
                k = k_of[n] = chunk_count(n, bpe, chunk, depth)
            transfers += k
            records += k * (len(routes[m.src][m.dst]) + 1)
    return 2 * transfers, records


def product_run(
    topo: Topology, nbytes: object, algorithm: object, collective: object, chunk_bytes: object
) -> QuotientRun | None:
    """The run of a collective on two or more switch / fully connected dimensions (module
    docstring), or None for any other (the general path runs and gives its errors)."""
    dims = dimensions_of(topo.chips)
    if len(dims) < 2 or any(d.shape not in SHAPES for d in dims) or algorithm == NVLS:
        return None
    if not isinstance(collective, str) or not isinstance(algorithm, str):
        return None
    try:
        topo, size, chunk, name = collective_arguments(topo, nbytes, algorithm, chunk_bytes)
        net = build_network(topo)
        schedule = build_schedule(topo, size, name, collective, chunk_bytes=chunk, network=net)
    except NpuSimError:
        return None  # the general path says why
    ops, records = exact_count(schedule, net)
    what = f"{name} {collective} of {size} bytes on {net.chips} chips"
    parts = f"{records} transfer hops and consumers"
    check_memory(what, ops * FABRIC_OP_BYTES + (records - ops) * OPLOG_RECORD_BYTES, parts)
    if records > ops_budget():
        return None  # the general path refuses it, naming the budget
    return _run(schedule, protocol_network(net, topo.collectives, "simple"), dims)


def _run(schedule: Schedule, net: Network, dims: tuple[object, ...]) -> QuotientRun:
    compiled = compile_schedule(schedule)
    sizes = tuple(d.size for d in dims)  # type: ignore[attr-defined]
    groups = groups_for(sizes, net.ring_order() if schedule.algorithm == "ring" else ())
    got = time_by_quotient(net, compiled.program, groups)
    if got is None:
        log, quotient = simulate_fabric(net, compiled.program), None
    else:
        log, quotient = got
    return _checked(schedule, net, compiled, log, quotient)


def _checked(
    schedule: Schedule, net: Network, compiled: Compiled, log: OpLog, quotient: Quotient | None
) -> QuotientRun:
    """:func:`sim.collectives.run.run_schedule`'s replay and check of ``log``."""
    return checked_run(
        schedule,
        net,
        compiled,
        log,
        lambda wrong, problem, final: QuotientRun(
            schedule, net, compiled, log, wrong, problem, final, quotient=quotient
        ),
    )


FAST_PATHS.append(product_run)
