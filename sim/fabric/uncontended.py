"""Fast path: a one-shot program without contention, round by round in numpy."""

from __future__ import annotations

import numpy as np

from sim.fabric.log import FORWARD, HBM_ENGINE, REDUCE, REDUCE_ENGINE, SEND, STAGES
from sim.fabric.network import Network
from sim.fabric.one_shot import OneShot
from sim.fabric.program import FabricProgram
from sim.fabric.scan import one_after_another
from sim.oplog import OpLog


def one_shot_uncontended(
    net: Network, program: FabricProgram, shape: OneShot, holds: tuple[list[int], ...]
) -> OpLog:
    """:func:`simulate_fabric` with ``contention=False`` for a one-shot program, round by round
    in numpy: the same recurrences the event loop follows, so the same log.

    Without contention each pair's hop ``h`` is a FIFO server of that pair's transfers only,
    served in round order; a transfer of round ``t >= B`` (``B`` staging buffers) gets the
    earliest credit its pair has back and not yet used (credits of later rounds come back
    after it leaves); a reduction starts when the first burst of its input is there and adds
    into its accumulator after those of its round that started before it.
    """
    rounds, width, lat = shape.rounds, shape.width, net.latency_ps
    half = rounds * width
    first, _hbm, total, burst = (np.asarray(h, dtype=np.int64) for h in holds)
    t_first = first[:half].reshape(rounds, width)
    t_total = total[:half].reshape(rounds, width)
    t_burst = burst[:half].reshape(rounds, width)
    r_total = total[half:].reshape(rounds, width)
    r_burst = burst[half:].reshape(rounds, width)
    src = np.asarray(program.src[:width], dtype=np.int64)
    dst = np.asarray(program.dst[:width], dtype=np.int64)
    routes = [net.routes[s][d] for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    hops = np.asarray([len(r) for r in routes], dtype=np.int64)
    deepest = int(hops.max())
    last = hops - 1
    cols = np.arange(width)
    group = np.where(shape.first >= 0, shape.first, cols)
    begins = np.zeros((rounds, width, deepest), dtype=np.int64)
    ends = np.zeros((rounds, width, deepest), dtype=np.int64)
    r_begin = np.zeros((rounds, width), dtype=np.int64)
    r_end = np.zeros((rounds, width), dtype=np.int64)
    link_free = np.zeros((deepest, width), dtype=np.int64)
    buffers = net.staging_buffers
    pool = np.zeros((buffers, width), dtype=np.int64)  # credits back, not yet used
    for t in range(rounds):
        if t < buffers:
            grant = np.zeros(width, dtype=np.int64)
        else:
            slot = pool.argmin(axis=0)
            grant = pool[slot, cols]
        begin = np.maximum(grant, link_free[0])
        end = np.maximum(begin + t_total[t], t_burst[t])
        begins[t, :, 0], ends[t, :, 0] = begin, end
        link_free[0] = end
        for h in range(1, deepest):
            on = hops > h
            b = np.maximum(begin + lat, link_free[h])
            e = np.maximum(b + t_first[t], end + lat)
            begin, end = np.where(on, b, begin), np.where(on, e, end)
            link_free[h] = np.where(on, e, link_free[h])
            begins[t, :, h], ends[t, :, h] = begin, end
        b_last, e_last = begins[t, cols, last], ends[t, cols, last]
        head = np.minimum(b_last + lat + t_burst[t], e_last + lat)
        done = np.maximum(head + r_total[t], e_last + lat + r_burst[t])
        r_begin[t] = head
        r_end[t] = one_after_another(group, head, done, r_burst[t])
        credit = r_end[t] + lat
        if t < buffers:
            pool[t] = credit
        else:
            pool[slot, cols] = credit
    route = np.zeros((width, deepest), dtype=np.int64)
    for m, r in enumerate(routes):
        route[m, : len(r)] = r
    hop_at = np.flatnonzero(np.arange(deepest) < hops[:, None])  # (message, hop) of a round
    t_eng = np.tile(route.reshape(-1)[hop_at], rounds)
    link_chip = np.asarray([net.link_chip(i) for i in range(len(net.links))], dtype=np.int64)
    hop_of = np.tile(hop_at % deepest, rounds)
    t_op = (np.arange(rounds, dtype=np.int64)[:, None] * width + hop_at // deepest).reshape(-1)
    op = np.concatenate([t_op, np.arange(half, 2 * half, dtype=np.int64)])
    nlinks = len(net.links)
    cols_out = {
        "op": op,
        "chip": np.concatenate([link_chip[t_eng], np.tile(dst, rounds)]),
        "engine": np.concatenate([t_eng, np.full(half, nlinks, dtype=np.int64)]),
        "stage": np.concatenate(
            [np.where(hop_of == 0, SEND, FORWARD), np.full(half, REDUCE, dtype=np.int64)]
        ),
        "start": np.concatenate([begins.reshape(rounds, -1)[:, hop_at].ravel(), r_begin.ravel()]),
        "end": np.concatenate([ends.reshape(rounds, -1)[:, hop_at].ravel(), r_end.ravel()]),
        "nbytes": np.asarray(program.nbytes, dtype=np.int64)[op],
        "tile": np.asarray(program.step, dtype=np.int64)[op],
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols_out)
