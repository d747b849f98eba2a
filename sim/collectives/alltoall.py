"""Alltoall: chip ``i`` sends block ``d`` of its send buffer to chip ``d``, which keeps it as
block ``i`` of its receive buffer.

Sizes follow nccl-tests' ``alltoall_perf``: ``n`` is one chip's send buffer (and its receive
buffer), ``p`` blocks of ``n / p``; as nccl-tests does, the element count is rounded down to
a multiple of ``p`` (``count = (count / p) * p``), and the run's size is that count. Block
``d`` of chip ``i`` lands at another offset (block ``i``) on chip ``d``: a message says where
with ``Message.at``, and the functional check follows the shift (each piece stays
``A + B e``: moving it by ``s`` elements makes it ``(A + B s) + B e``). Every send reads the
chip's input (``fresh``), so the blocks that land never disturb the ones still to leave.

* ``direct``: every chip sends all its ``p-1`` blocks at once, one message per peer (NCCL's
  alltoall: a group of ``ncclSend`` / ``ncclRecv`` to and from every peer, all in flight),
  offset by offset.
* ``pairwise``: MPI's pairwise exchange (MPICH's ``MPIR_Alltoall_intra_pairwise``): ``p-1``
  steps; in step ``k`` chip ``i`` sends block ``i + k`` to chip ``i + k`` and receives from
  chip ``i - k``. Each step is a blocking ``MPI_Sendrecv``: a chip's
  step waits until its previous step has sent and received everything
  (``Schedule.blocking``, :mod:`sim.collectives.lockstep`), so a chip has one message in
  flight each way, the incast-free order MPI uses for large messages.

``i + k`` is the digit-wise offset over the topology's dimensions
(:func:`sim.fabric.dimensions.digit_shift`, ADR 0032): ``(i + k) mod p`` on one dimension;
on several, the chip whose digits are ``i``'s plus ``k``'s, each modulo its size, so that
every translation of the digits maps the schedule onto itself.
"""

from __future__ import annotations

import math

from sim.collectives.gather import Built
from sim.collectives.schedule import Message
from sim.fabric import digit_shift


def _block(i: int, d: int, q: int) -> Message:
    return Message(i, d, d * q, (d + 1) * q, False, True, at=i * q)


def direct(count: int, sizes: tuple[int, ...]) -> Built:
    """Peer ``k`` of chip ``i`` is its digit-wise offset over the dimensions' ``sizes``
    (ADR 0032; ``(i + k) mod p`` on one dimension), offset-major."""
    p = math.prod(sizes)
    q = count // p
    step = [_block(i, digit_shift(sizes, i, k), q) for k in range(1, p) for i in range(p)]
    return Built([step], q * p)


def pairwise(count: int, sizes: tuple[int, ...]) -> Built:
    """Step ``k``: every chip to its peer ``k`` (as :func:`direct`); each step a permutation,
    so every chip receives from exactly one."""
    p = math.prod(sizes)
    q = count // p
    steps = [[_block(i, digit_shift(sizes, i, k), q) for i in range(p)] for k in range(1, p)]
    return Built(steps, q * p, blocking=True)
