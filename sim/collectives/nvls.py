"""``nvls``: allreduce on a switch that reduces (docs/adr/0021 decision 3), as NCCL runs it
on NVSwitch with NVLink SHARP (``src/device/all_reduce.h``, the NVLS algorithm:
``multimem.ld_reduce`` then ``multimem.st``): its schedule.

The vector is split into ``p`` shards; chip ``j`` owns shard ``j``. The schedule has four
steps, each a set of messages with the switch node ``S`` (node id ``p``) at one end:

1. **reduce up**: every chip sends its copy of every shard up to the switch, which reduces
   the ``p`` copies of each chunk on its ports' reduce engines (one accumulator per chunk,
   sums in arrival order: :mod:`sim.fabric.switch_ops`);
2. **down to the owner**: the switch sends the sum of shard ``j`` down to chip ``j``, which
   stores it (HBM);
3. **up once**: chip ``j`` sends its reduced shard up (from on-chip buffers, as it arrives);
4. **multicast**: the switch copies it down to every other chip (one transfer per
   destination port, cut-through); each stores it. The owner already holds the sum (step
   2), so its own port does not carry it again.

So each chip's ports carry ``n + n/p`` up and ``n`` down (``n/p`` of its sum, ``(p-1)/p n``
of the others'), against the ring's ``2(p-1)/p n`` each way: a large message takes
``(1 + 1/p) n / (ports * link_bw)``, busbw ``2(p-1)/(p+1) ports link_bw`` (the brief
``n / (ports link_bw)`` of ADR 0021 is the limit of many chips; the ``n/p`` extra is the
owner's round trip, ``multimem.ld_reduce`` down then ``multimem.st`` up).
:mod:`sim.collectives.nvls_program` turns the steps into a fabric program, chunk by chunk
over the switch's ports. Valid only on chips joined by one switch
dimension with ``switch_reduce_gbs`` > 0.
"""

from __future__ import annotations

from sim.collectives.schedule import CollectiveError, Message
from sim.fabric import Network

NVLS = "nvls"


def check_nvls(net: Network) -> int:
    """The switch node of ``net`` if ``nvls`` can run on it; else a :class:`CollectiveError`
    naming the key to set."""
    if net.kind != "switch":
        raise CollectiveError(
            f"algorithm 'nvls' needs the chips on one switch (chips.dimensions: one dimension "
            f"of shape switch), not a {net.kind!r} network; pick ring, direct, "
            "halving_doubling or double_binary_tree on this topology"
        )
    if not net.switch_reduce_bws:
        raise CollectiveError(
            "algorithm 'nvls' needs a switch that reduces: set "
            "chips.dimensions[0].switch_reduce_gbs > 0 (GB/s per port) on the switch dimension"
        )
    return net.chips


def nvls_shards(count: int, p: int) -> list[tuple[int, int]]:
    """``[0, count)`` in ``p`` near-equal ranges (the first ``count % p`` one longer)."""
    q, r = divmod(count, p)
    out, at = [], 0
    for j in range(p):
        size = q + (j < r)
        out.append((at, at + size))
        at += size
    return out


def nvls_steps(p: int, count: int, net: Network) -> list[list[Message]]:
    """The four steps of ``nvls`` on ``p`` chips and a vector of ``count`` elements (module
    docstring); messages name the switch node."""
    sw = check_nvls(net)
    shards = nvls_shards(count, p)
    return [
        [Message(i, sw, *shards[j], True) for j in range(p) for i in range(p)],
        [Message(sw, j, *shards[j], False) for j in range(p)],
        [Message(j, sw, *shards[j], False) for j in range(p)],
        [Message(sw, i, *shards[j], False) for j in range(p) for i in range(p) if i != j],
    ]
