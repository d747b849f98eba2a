"""The reference timing: a simple heap-driven event simulator, what the fast path is tested
against."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from sim.core.ops import DMA, SERVE, Channels, Op, SimulationError
from sim.limits import MAX_TIME_PS  # one definition of the int64-ps ceiling
from sim.oplog import OpLog


def simulate_reference(
    ops: Sequence[Op],
    engines: Sequence[str],
    stages: Sequence[str],
    channels: Channels,
    *,
    max_events: int | None = None,
) -> OpLog:
    """Time ``ops`` with a heap of ``(time, seq, event)``; slow, simple, the oracle."""
    n = len(ops)
    limit = max_events if max_events is not None else 64 * n + 1024
    waiting = [len(set(op.deps)) for op in ops]
    dependents: list[list[int]] = [[] for _ in range(n)]
    on_release: list[list[int]] = [[] for _ in range(n)]
    for i, op in enumerate(ops):
        for d in set(op.deps):
            target = ~d if d < 0 else d
            if not 0 <= target < n or (d < 0 and ops[target].kind != DMA):
                raise SimulationError(f"op {i} depends on op {d}, which does not exist")
            (on_release if d < 0 else dependents)[target].append(i)
    queue: list[list[int]] = [[] for _ in engines]
    chan_queue: list[list[tuple[int, int]]] = [[] for _ in range(channels.count)]
    for i, op in enumerate(ops):
        queue[op.res].append(i)
        for c, cnt in op.chans:
            chan_queue[c].append((i, cnt))
    head = [0] * len(engines)
    chan_head = [0] * channels.count
    res_busy = [False] * len(engines)
    chan_busy = [False] * channels.count
    ready = [False] * n
    arrived = [False] * n
    bursts_left = [len(op.chans) for op in ops]
    last_burst = [0] * n
    start = [-1] * n
    end = [-1] * n
    heap: list[tuple[int, int, str, int]] = []
    seq = 0

    def at(t: int, what: str, who: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, what, who))
        seq += 1

    def try_start(r: int, now: int) -> None:
        if res_busy[r] or head[r] >= len(queue[r]):
            return
        i = queue[r][head[r]]
        if not ready[i]:
            return
        head[r] += 1
        res_busy[r] = True
        op = ops[i]
        start[i] = now
        if op.kind == DMA:
            at(now + op.dur, "free", r)
            at(now + op.dur, "arrive", i)
        elif op.kind == SERVE:
            at(now + op.dur, "free", r)
            at(now + op.dur, "done", i)
        else:
            at(now + op.dur, "free", r)
            at(now + op.lat, "done", i)

    def try_channel(c: int, now: int) -> None:
        if chan_busy[c] or chan_head[c] >= len(chan_queue[c]):
            return
        i, cnt = chan_queue[c][chan_head[c]]
        if not arrived[i]:
            return
        chan_head[c] += 1
        chan_busy[c] = True
        at(now + cnt * channels.burst_ps, "burst_done", c)

    for i in range(n):
        if waiting[i] == 0:
            at(0, "ready", i)
    events = 0
    while heap:
        now, _, what, who = heapq.heappop(heap)
        events += 1
        if events > limit or now >= MAX_TIME_PS:
            raise SimulationError(
                f"runaway simulation: {events} events, time {now} ps; pending: "
                f"{_pending(ops, end, stages)}"
            )
        if what == "ready":
            ready[who] = True
            try_start(ops[who].res, now)
        elif what == "free":
            res_busy[who] = False
            try_start(who, now)
        elif what == "arrive":
            arrived[who] = True
            for c, _cnt in ops[who].chans:
                try_channel(c, now)
        elif what == "burst_done":
            i, _cnt = chan_queue[who][chan_head[who] - 1]
            chan_busy[who] = False
            last_burst[i] = max(last_burst[i], now)
            bursts_left[i] -= 1
            if bursts_left[i] == 0:
                at(last_burst[i] + ops[i].lat, "done", i)
                at(last_burst[i], "release", i)
            try_channel(who, now)
        else:  # done, or released (the bytes have left the source)
            if what == "done":
                end[who] = now
            for j in dependents[who] if what == "done" else on_release[who]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    at(now, "ready", j)
    if any(e < 0 for e in end):
        raise SimulationError(f"deadlock: operations never finished: {_pending(ops, end, stages)}")
    cols = {
        "engine": [op.res for op in ops],
        "stage": [op.stage for op in ops],
        "op": list(range(n)),
        "start": start,
        "end": end,
        "nbytes": [op.nbytes for op in ops],
        "macs": [op.macs for op in ops],
        "tile": [op.tile for op in ops],
    }
    return OpLog.from_columns(engines, stages, cols)


def _pending(ops: Sequence[Op], end: list[int], stages: Sequence[str], most: int = 5) -> str:
    left = [i for i, e in enumerate(end) if e < 0]
    shown = ", ".join(
        f"op {i} ({stages[ops[i].stage]}, waits on {list(ops[i].deps)})" for i in left[:most]
    )
    more = f" and {len(left) - most} more" if len(left) > most else ""
    return f"{len(left)} pending: {shown}{more}"
