"""Fast path: a one-shot program that turning the chips maps onto itself, with contention,
from one chip's share of the events."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sim.fabric.events import simulate_events
from sim.fabric.holds import op_holds
from sim.fabric.log import FORWARD, HBM_ENGINE, REDUCE, REDUCE_ENGINE, SEND, STAGES
from sim.fabric.network import Network
from sim.fabric.one_shot import OneShot
from sim.fabric.program import REDUCTION, TRANSFER, FabricProgram
from sim.oplog import OpLog


def rotation_invariant(net: Network, program: FabricProgram, shape: OneShot) -> bool:
    """Whether turning the chips by one (chip ``c`` -> ``c + 1 mod p``) maps ``program`` on
    ``net`` onto itself, ties included (:func:`one_shot_by_rotation`): a fully connected
    or switch network, direct's message order (message ``(k-1) p + s`` goes from ``s`` to
    ``s + k``: offset first, so the ops that share a chip's HBM, reduce engine, port or
    accumulator are in the same order on every chip), and every message of a round alike."""
    p, width = net.chips, shape.width
    if not net.uniform or any(program.lane):  # one_shot refuses these already; said again
        return False
    if net.kind not in ("fully_connected", "switch") or p < 2 or width != p * (p - 1):
        return False
    if program.src[:width] != list(range(p)) * (p - 1):
        return False
    if program.dst[:width] != [(s + k) % p for k in range(1, p) for s in range(p)]:
        return False
    half = shape.rounds * width
    if program.step.count(program.step[0]) != len(program.step):
        return False
    for col in (program.nbytes[:half], program.hbm[:half], program.hbm[half:]):
        for t in range(0, half, width):
            if col[t : t + width].count(col[t]) != width:
                return False
    return True


def one_shot_by_rotation(net: Network, program: FabricProgram, shape: OneShot) -> OpLog:
    """:func:`simulate_fabric` with contention of a one-shot program that turning the chips
    maps onto itself (:func:`rotation_invariant`), from one chip's share of the events.

    Turning the chips by one maps every link, engine, HBM, staging buffer and accumulator
    onto another and keeps the order of any two ops that use the same one (their ids
    compare by round, then offset), so every chip's ops run at the same times as chip
    0's counterparts (the event loop is equivariant). Chip 0 sees its own sends ``0 -> k``
    and the reductions of the messages ``p-k -> 0``, which are its sends turned by ``k``:
    so the reduction of offset ``k`` consumes chip 0's send of offset ``k`` (its data
    arrives at ``k`` when the turned message arrives at 0), that send's staging buffer
    comes back when that reduction ends, and on a switch every send's second hop queues at
    chip 0's own port out of the switch. That program, ``p - 1`` transfers and reductions
    per round, runs through the event loop; the log of all chips follows by turning.
    """
    p, rounds, width = net.chips, shape.rounds, shape.width
    half = rounds * width
    k = p - 1  # messages of chip 0 per round: offsets 1..p-1, kept in offset order
    lo = np.arange(rounds, dtype=np.int64)[:, None] * width + np.arange(k)[None, :] * p
    picked = lo.reshape(-1)  # real op ids of chip 0's sends, round by round, by offset
    sub = FabricProgram(
        kind=[TRANSFER] * (rounds * k) + [REDUCTION] * (rounds * k),
        src=[0] * (2 * rounds * k),
        dst=[d for _t in range(rounds) for d in range(1, p)] + [0] * (rounds * k),
        nbytes=[program.nbytes[i] for i in picked.tolist()] * 2,
        step=[0] * (2 * rounds * k),
        deps=[()] * (rounds * k) + [(i,) for i in range(rounds * k)],
        consumes=[-1] * (rounds * k) + list(range(rounds * k)),
        hbm=[program.hbm[i] for i in picked.tolist()]
        + [program.hbm[half + i] for i in picked.tolist()],
        span=[program.span[i] for i in picked.tolist()] * 2,
        into=[-1] * (rounds * k)
        + (
            [rounds * k + t * k for t in range(rounds) for _d in range(k)]
            if k > 1  # one accumulator per round, named by its first reduction
            else [-1] * (rounds * k)
        ),
    )
    view = net
    if net.kind == "switch":  # a send's second hop: chip 0's port out of the switch
        up = net.routes[0][1][0]
        down = net.routes[1][0][1]
        routes = [list(r) for r in net.routes]
        routes[0] = [r if not r else (up, down) for r in net.routes[0]]
        view = replace(net, routes=tuple(tuple(r) for r in routes))
    log = simulate_events(view, sub, op_holds(view, sub), contention=True)
    hops = 2 if net.kind == "switch" else 1
    t_start = log.start[: rounds * k * hops].reshape(rounds, k, hops)
    t_end = log.end[: rounds * k * hops].reshape(rounds, k, hops)
    r_start = log.start[rounds * k * hops :].reshape(rounds, k)
    r_end = log.end[rounds * k * hops :].reshape(rounds, k)
    # every chip s: its send of offset k is message (k-1) p + s, the same times as chip 0's;
    # the log's columns follow from that order (what op_log derives from the program)
    start = np.concatenate(
        [np.repeat(t_start, p, axis=1).reshape(-1), np.repeat(r_start, p, axis=1).reshape(-1)]
    )
    end = np.concatenate(
        [np.repeat(t_end, p, axis=1).reshape(-1), np.repeat(r_end, p, axis=1).reshape(-1)]
    )
    src = np.tile(np.arange(p, dtype=np.int64), k)
    dst = (src + np.repeat(np.arange(1, p, dtype=np.int64), p)) % p
    route = np.asarray([net.routes[a][b] for a, b in zip(src.tolist(), dst.tolist(), strict=True)])
    link_chip = np.asarray([net.link_chip(i) for i in range(len(net.links))], dtype=np.int64)
    nb = np.asarray(program.nbytes[:half:width], dtype=np.int64)  # per round
    ops = np.arange(half, dtype=np.int64)
    stage_of = np.asarray([SEND, FORWARD][:hops], dtype=np.int64)
    cols = {
        "op": np.concatenate([np.repeat(ops, hops), half + ops]),
        "chip": np.concatenate(
            [np.tile(link_chip[route].reshape(-1), rounds), np.tile(dst, rounds)]
        ),
        "engine": np.concatenate(
            [np.tile(route.reshape(-1), rounds), np.full(half, len(net.links), dtype=np.int64)]
        ),
        "stage": np.concatenate([np.tile(stage_of, half), np.full(half, REDUCE, dtype=np.int64)]),
        "start": start,
        "end": end,
        "nbytes": np.concatenate([np.repeat(nb, width * hops), np.repeat(nb, width)]),
        "tile": np.full(half * (hops + 1), program.step[0], dtype=np.int64),
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)
