"""Broadcast and reduce: from a root chip to every chip, and from every chip to the root.

Sizes follow nccl-tests' ``broadcast_perf`` and ``reduce_perf``: ``n`` is the whole buffer;
the root is chip 0 unless given (``root=``). Broadcast ends with the root's input on every
chip; reduce ends with the sum of every chip's input on the root (the other chips' results
are not defined, as in MPI and NCCL). "Rank ``k``" below is the chip ``k`` places after the
root in :meth:`Network.ring_order` (a Hamiltonian cycle of one-hop edges where one exists).

* ``ring``: NCCL's ring broadcast and reduce (``src/device/broadcast.h``, ``reduce.h``): a
  chain along the ring from the root (broadcast: rank ``k`` copies what it receives and
  forwards it to rank ``k+1``) or towards it (reduce: rank ``k`` adds what it receives to its
  input and forwards the sum, the root adds last); the message pipelines chunk by chunk
  along the chain. As the ring allreduce does (NCCL runs channels both ways on full-duplex
  links), two chains in opposite directions each carry half of the buffer.
* ``binary_tree``: NCCL's binary tree (``ncclGetBtree``, :func:`sim.collectives.trees.binary_tree`)
  over the ranks, rooted at the root: broadcast copies down by depth, reduce adds up by
  height (a node adds its children's sums into its input, then sends up), every chunk
  pipelining through the levels (NCCL's tree collectives, one tree for the whole buffer).
* ``direct``: one shot: the root sends the buffer to every chip at once (broadcast), or every
  chip sends its input to the root, which adds the ``p-1`` vectors as they come (reduce):
  ``(p-1) n`` bytes through the root's links.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.collectives.gather import Built, Steps, ranges
from sim.collectives.schedule import Message, Range
from sim.collectives.trees import binary_tree, tree_levels
from sim.fabric import Network


def _chain(order: Sequence[int], root: int) -> list[int]:
    """``order`` turned so that it starts at ``root``."""
    at = list(order).index(root)
    return [*order[at:], *order[:at]]


def _zip(*parts: Steps) -> Steps:
    return [
        [m for part in parts if i < len(part) for m in part[i]] for i in range(max(map(len, parts)))
    ]


def _chains(net: Network, root: int, count: int) -> list[tuple[list[int], Range]]:
    """The two chains from the root, one each way round the ring, each with its half."""
    order = list(net.ring_order())
    halves = ranges(0, count, 2)
    return [
        (_chain(order, root), halves[0]),
        (_chain(order[::-1], root), halves[1]),
    ]


def ring_broadcast(count: int, net: Network, root: int) -> Built:
    p = net.chips
    parts = [
        [[Message(c[k], c[k + 1], *half, False)] for k in range(p - 1)]
        for c, half in _chains(net, root, count)
    ]
    return Built(_zip(*parts), count)


def ring_reduce(count: int, net: Network, root: int) -> Built:
    p = net.chips
    parts = [
        [[Message(c[k], c[(k + 1) % p], *half, True)] for k in range(1, p)]
        for c, half in _chains(net, root, count)
    ]
    return Built(_zip(*parts), count)


def _tree(net: Network, root: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """The chip of each rank, each rank's parent rank, depth and height."""
    chips = _chain(net.ring_order(), root)
    parent = binary_tree(net.chips)
    depth, height = tree_levels(parent)
    return chips, parent, depth, height


def tree_broadcast(count: int, net: Network, root: int) -> Built:
    chips, parent, depth, _height = _tree(net, root)
    ranks = range(net.chips)
    steps = [
        [Message(chips[parent[r]], chips[r], 0, count, False) for r in ranks if depth[r] == d]
        for d in range(1, max(depth) + 1)
    ]
    return Built(steps, count)


def tree_reduce(count: int, net: Network, root: int) -> Built:
    chips, parent, _depth, height = _tree(net, root)
    ranks = range(net.chips)
    steps = [
        [
            Message(chips[r], chips[parent[r]], 0, count, True)
            for r in ranks
            if parent[r] >= 0 and height[r] == h
        ]
        for h in range(max(height))
    ]
    return Built([s for s in steps if s], count)


def direct_broadcast(count: int, net: Network, root: int) -> Built:
    step = [Message(root, d, 0, count, False, True) for d in range(net.chips) if d != root]
    return Built([step], count)


def direct_reduce(count: int, net: Network, root: int) -> Built:
    step = [Message(s, root, 0, count, True, True) for s in range(net.chips) if s != root]
    return Built([step], count)
