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
  alltoall: a group of ``ncclSend`` / ``ncclRecv`` to and from every peer, all in flight).
* ``pairwise``: MPI's pairwise exchange (MPICH's ``MPIR_Alltoall_intra_pairwise``): ``p-1``
  steps; in step ``k`` chip ``i`` sends block ``(i+k) mod p`` to chip ``(i+k) mod p`` and
  receives from chip ``(i-k) mod p``. Each step is a blocking ``MPI_Sendrecv``: a chip's
  step waits until its previous step has sent and received everything
  (``Schedule.blocking``, :mod:`sim.collectives.lockstep`), so a chip has one message in
  flight each way, the incast-free order MPI uses for large messages.
"""

from __future__ import annotations

from sim.collectives.gather import Built
from sim.collectives.schedule import Message


def _block(i: int, d: int, q: int) -> Message:
    return Message(i, d, d * q, (d + 1) * q, False, True, at=i * q)


def direct(count: int, p: int) -> Built:
    q = count // p
    step = [_block(i, (i + k) % p, q) for k in range(1, p) for i in range(p)]
    return Built([step], q * p)


def pairwise(count: int, p: int) -> Built:
    q = count // p
    steps = [[_block(i, (i + k) % p, q) for i in range(p)] for k in range(1, p)]
    return Built(steps, q * p, blocking=True)
