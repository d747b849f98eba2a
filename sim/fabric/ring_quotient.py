"""`direct` on a ring by symmetry: the quotient program of its representative chips, timed by
the unchanged event loop, and the full log written out from it (ADR 0026).

Turning a ring of ``p`` chips by ``g`` (``g = 1`` on an odd ring, ``2`` on an even one: a
tie at half the ring goes by the sender's parity, ADR 0022) maps direct's messages
``(round t, offset k, sender s)`` onto ``(t, k, s + g)``, every route, HBM, reduce engine,
staging pool and accumulator onto another, and, with ADR 0026's tie rule (same hops at one
link means same sender), the order of any two ops that meet at one of them. So every
chip's events are those of its representative ``s mod g``, turned, at the same times.

The quotient: per round and offset, the sends of chips ``0..g-1`` and the reductions on
them. A send's hop ``h`` runs on the representative of the link it really crosses
(``up[(s + h) mod g]`` or ``down[(s - h) mod g]``): the queue of that representative link
holds exactly the (turned) ops of one real link. The reduction of offset ``k`` on chip
``r`` consumes the representative send ``((r - k) mod g, k)`` (its turned image lands on
``r``), so its staging buffer comes back when that reduction ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from sim.fabric.events import simulate_events
from sim.fabric.holds import op_holds
from sim.fabric.log import FORWARD, REDUCE, SEND
from sim.fabric.network import Network
from sim.fabric.program import REDUCTION, TRANSFER, FabricProgram
from sim.fabric.symmetry import ring_links
from sim.oplog import OpLog

I64 = npt.NDArray[np.int64]


def turn(p: int) -> int:
    """The smallest rotation of a ``p``-ring that maps direct onto itself (ADR 0022)."""
    return 1 if p % 2 else 2


def goes_up(p: int, s: int, k: int) -> bool:
    """Whether ``s -> s + k`` goes the positive way (shortest; a tie by the sender's parity)."""
    return k < p - k or (k == p - k and s % 2 == 0)


class _Row(Sequence[tuple[int, ...]]):
    def __init__(self, s: int, p: int, up: I64, down: I64) -> None:
        self.s, self.p, self.up, self.down = s, p, up, down

    def __len__(self) -> int:
        return self.p

    def __getitem__(self, d: Any) -> Any:
        p, s, g = self.p, self.s, turn(self.p)
        k = (int(d) - s) % p
        if k == 0:
            return ()
        if goes_up(p, s, k):
            return tuple(int(self.up[(s + h) % g]) for h in range(k))
        return tuple(int(self.down[(s - h) % g]) for h in range(p - k))

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return (self[d] for d in range(self.p))


class _Routes(Sequence[Sequence[tuple[int, ...]]]):
    """Routes of the representatives (rows ``0..g-1``) on their representative links."""

    def __init__(self, p: int) -> None:
        self.p = p
        _links, self.up, self.down = ring_links(p)

    def __len__(self) -> int:
        return self.p

    def __getitem__(self, s: Any) -> Any:
        return _Row(int(s), self.p, self.up, self.down)

    def __iter__(self) -> Iterator[Sequence[tuple[int, ...]]]:
        return (self[s] for s in range(self.p))


def quotient_program(
    p: int, sizes: Sequence[int], spans: Sequence[tuple[int, int]]
) -> FabricProgram:
    """The representatives' program: per round ``t`` (chunk of ``sizes[t]`` bytes) and
    offset ``k``, the sends of chips ``0..g-1``; then per round, offset and chip ``r`` the
    reduction consuming send ``((r - k) mod g, k)`` of that round (module docstring)."""
    g, rounds = turn(p), len(sizes)
    w = (p - 1) * g  # sends per round
    half = rounds * w
    prog = FabricProgram()
    for t in range(rounds):
        for k in range(1, p):
            for s in range(g):
                prog.add(TRANSFER, s, (s + k) % p, sizes[t], 0, (), hbm=sizes[t], span=spans[t])
    prog.into = [-1] * half
    for t in range(rounds):
        for k in range(1, p):
            for r in range(g):
                send = t * w + (k - 1) * g + (r - k) % g
                at = prog.add(REDUCTION, r, r, sizes[t], 0, (send,), send, span=spans[t])
                first = half + t * w + r  # offset 1's reduction on chip r this round
                prog.into[at] = first if p > 2 else -1
    return prog


def direct_by_ring_rotation(
    net: Network, sizes: Sequence[int], spans: Sequence[tuple[int, int]]
) -> tuple[FabricProgram, OpLog]:
    """The quotient program and its log (engines of the representative links) on ``net``, a
    uniform ``p``-ring (``p >= 3``) whose links are :func:`ring_links`' order."""
    prog = quotient_program(net.chips, sizes, spans)
    view = replace(net, routes=cast(Any, _Routes(net.chips)))
    log = simulate_events(view, prog, op_holds(view, prog), contention=True)
    return prog, log


def expand_direct(net: Network, rounds: int, rep: OpLog) -> dict[str, I64]:
    """The full log's columns of direct on the ``p``-ring ``net`` from the quotient's log
    ``rep`` (records in op then hop order), in the real program's op order: transfer
    ``t p (p-1) + (k-1) p + s`` and its reduction ``half + ...``."""
    p = net.chips
    g = turn(p)
    _links, up, down = ring_links(p)
    nlinks = len(net.links)
    st = rep.stored
    # per quotient op: where its records start
    op = st["op"].astype(np.int64)
    first_rec = np.searchsorted(op, np.arange(int(op.max()) + 1))
    w = (p - 1) * g
    half_q = rounds * w
    t = np.arange(rounds)[:, None, None]
    k = np.arange(1, p)[None, :, None]
    s = np.arange(p)[None, None, :]
    shape = (rounds, p - 1, p)
    t, k, s = (np.broadcast_to(x, shape).reshape(-1) for x in (t, k, s))
    q_send = t * w + (k - 1) * g + s % g
    dist = np.minimum(k, p - k)
    upw = (k < p - k) | ((k == p - k) & (s % 2 == 0))
    nrec = dist
    rec_op = np.repeat(np.arange(len(s)), nrec)
    hop = np.arange(len(rec_op)) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    src_of = s[rec_op]
    chip = np.where(upw[rec_op], (src_of + hop) % p, (src_of - hop) % p)
    engine = np.where(upw[rec_op], up[chip], down[chip])
    at = first_rec[q_send[rec_op]] + hop
    # reductions: real (t, k, s) on chip s + k <- quotient reduction (t, k, r = (s + k) mod g)
    recv = (s + k) % p
    q_red = half_q + t * w + (k - 1) * g + recv % g
    r_at = first_rec[q_red]
    half = len(s)
    cols = {
        "op": np.concatenate([rec_op, half + np.arange(half)]),
        "chip": np.concatenate([chip, recv]),
        "engine": np.concatenate([engine, np.full(half, nlinks)]),
        "stage": np.concatenate([np.where(hop == 0, SEND, FORWARD), np.full(half, REDUCE)]),
        "start": np.concatenate([st["start"][at], st["start"][r_at]]),
        "end": np.concatenate([st["end"][at], st["end"][r_at]]),
        "nbytes": np.concatenate([st["nbytes"][at], st["nbytes"][r_at]]),
        "macs": np.zeros(len(rec_op) + half, dtype=np.int64),
        "tile": np.zeros(len(rec_op) + half, dtype=np.int64),
    }
    return {c: np.asarray(v, dtype=np.int64) for c, v in cols.items()}
