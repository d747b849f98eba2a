"""What a collective will cost, estimated from its sizes before anything is built, against
the budgets of :mod:`sim.limits` (ADR 0009): ops, op-log records, route hops, memory."""

from __future__ import annotations

from typing import NamedTuple

from sim.errors import BudgetError, InputError, short_number, short_repr
from sim.limits import (
    FABRIC_OP_BYTES,
    OPLOG_RECORD_BYTES,
    OPS_BUDGET_ENV,
    ROUTE_HOP_BYTES,
    ceil_div,
    check_memory,
    check_time,
    ops_budget,
    whole_number,
    whole_text,
)
from sim.topology import Topology, as_topology, dimensions_of
from sim.units import ps_for_bytes

__all__ = ["CollectiveEstimate", "check_collective", "estimate_collective"]


def _collective_transfers(p: int, pieces_per_segment: int, algorithm: str) -> int:
    """Transfers a collective will issue: ring-like algorithms move every segment ``2(p-1)``
    times; ``direct`` sends the whole vector to every other chip. Every transfer has one
    consumer on its receiver (a reduction or a copy), so a program holds twice as many ops."""
    k = pieces_per_segment
    if algorithm == "direct":
        return p * (p - 1) * p * k
    return 2 * (p - 1) * p * k


class CollectiveEstimate(NamedTuple):
    """A collective's cost, estimated before anything is built (:func:`estimate_collective`)."""

    ops: int  #: transfers and the reductions or copies that consume them
    records: int  #: op-log records: a transfer has one per hop it takes, a consumer one
    hops: int  #: link indices of the network's route table
    memory_bytes: int
    staging_bound: bool  #: the staging buffers, not the chunk size, set the number of chunks


def _diameter(t: Topology) -> int:
    p, kind = t.chips.count, t.chips.topology
    if kind == "ring":
        return p // 2
    if kind == "torus2d":
        rows, cols = t.chips.torus_dims
        return rows // 2 + cols // 2
    return 2 if kind == "switch" else 1


def estimate_collective(
    topo: object, nbytes: int, algorithm: str, chunk_bytes: int | None
) -> CollectiveEstimate:
    """The ops, records, route hops and memory of a collective, from its sizes alone.

    A message is cut into chunks of at most ``chunk`` bytes, and into at least
    ``chips.staging_buffers / 2`` of them (rounded up to a power of two) while it has
    elements (``sim.collectives.compile.chunks``): a ring-like segment is two messages (one per
    ring direction), a ``direct`` message is the whole vector (``p`` segments).
    """
    t = as_topology(topo)
    p, kind = t.chips.count, t.chips.topology
    diameter = _diameter(t)
    hops = p * p * max(1, (diameter + 1) // 2)
    bpe = t.bpe
    per_chunk = max(bpe, (t.chips.chunk_bytes if chunk_bytes is None else chunk_bytes) // bpe * bpe)
    count = nbytes // bpe
    segment = ceil_div(count, p)
    k = max(1, ceil_div(segment * bpe, per_chunk))
    depth = 1 << (max(1, t.chips.staging_buffers // 2) - 1).bit_length()
    staged = ceil_div(min(depth, count), p) if algorithm == "direct" else min(2 * depth, segment)
    transfers = _collective_transfers(p, max(k, staged), algorithm)
    near = algorithm in ("ring", "torus2d")
    records = transfers * ((2 if kind == "switch" else 1) if near else diameter) + transfers
    ops = 2 * transfers
    memory = ops * FABRIC_OP_BYTES + (records - ops) * OPLOG_RECORD_BYTES + hops * ROUTE_HOP_BYTES
    return CollectiveEstimate(ops, records, hops, memory, staged > k)


def collective_arguments(
    topo: object, nbytes: object, algorithm: object, chunk_bytes: object
) -> tuple[Topology, int, int | None, str]:
    """A collective's arguments checked (one clear error each), before any work: the
    topology, the size, the chunk (None: the topology's) and the algorithm's name."""
    t = as_topology(topo)
    size = whole_number(nbytes, "message size nbytes")
    chunk = None if chunk_bytes is None else whole_number(chunk_bytes, "chunk_bytes", minimum=1)
    if not isinstance(algorithm, str):
        raise InputError(f"algorithm = {short_repr(algorithm)} must be a string, e.g. 'ring'")
    return t, size, chunk, algorithm


def check_collective(
    topo: object, nbytes: object, algorithm: object, chunk_bytes: object
) -> tuple[int, int | None]:
    """Validate a collective's arguments and refuse it over budget; returns (nbytes, chunk).

    ``nbytes`` and ``chunk_bytes`` may be numpy integers (returned as ints). The estimate
    (:func:`estimate_collective`) covers the network's route table (built first) and the
    schedule's transfers, their consumers and the chunks the staging buffers add.
    """
    t, size, chunk, name = collective_arguments(topo, nbytes, algorithm, chunk_bytes)
    p, kind = t.chips.count, t.chips.topology
    est = estimate_collective(t, size, name, chunk)
    records, hops = est.records, est.hops
    what = f"{short_repr(algorithm)} collective of {whole_text(size)} bytes on {p} chips ({kind})"
    parts = f"{short_number(records)} transfers/reductions, {short_number(hops)} route hops"
    fix = "use fewer chips, a smaller message or a larger chips.chunk_kib"
    if est.staging_bound:
        buffers = t.chips.staging_buffers
        parts += (
            f"; chips.staging_buffers = {buffers} cuts every message into >= {buffers // 2} chunks"
        )
        fix = "use fewer chips.staging_buffers (NCCL uses 8) or fewer chips"
    check_memory(what, est.memory_bytes, parts)
    if records + hops > ops_budget():
        raise BudgetError(
            f"{what}: about {short_number(records + hops)} operations to simulate ({parts}), "
            f"over the budget of {ops_budget()}; {fix}, or raise the budget: "
            f"{OPS_BUDGET_ENV}={records + hops}"
        )
    bpe = t.bpe
    per_chunk = max(bpe, (t.chips.chunk_bytes if chunk is None else chunk) // bpe * bpe)
    net = t.chips
    per_transfer = max(bpe, min(per_chunk, size))  # a transfer carries at most one chunk
    dims = dimensions_of(net)  # worst case: the slowest link, the longest latency (NIC too)
    slowest = min(d.link_bw for d in dims)
    longest = max(
        d.link_latency_ps + (d.nic_latency_ps if d.shape == "switch" else 0) for d in dims
    )
    link = ps_for_bytes(per_transfer, slowest) + longest
    worst = records * max(link, ps_for_bytes(per_transfer, net.reduce_bw))
    check_time(what, worst, parts)
    return size, chunk
