"""Sendrecv: nccl-tests' ``sendrecv_perf``: every chip sends ``n`` bytes to chip ``c+1``
and receives ``n`` bytes from chip ``c-1`` (mod ``p``), all at once (``ncclSend`` and
``ncclRecv`` in one group), so chip ``c`` ends with chip ``c-1``'s input.

Its one algorithm is ``direct``: one message per chip, read from the sender's input
(``fresh``), copied over the receiver's buffer. Ranks are chip ids, as nccl-tests numbers
its ranks: on a torus chip ``c+1`` may be two hops away.
"""

from __future__ import annotations

from sim.collectives.gather import Built
from sim.collectives.schedule import Message


def direct(count: int, p: int) -> Built:
    return Built([[Message(c, (c + 1) % p, 0, count, False, True) for c in range(p)]], count)
