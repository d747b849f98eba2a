"""The event loop of the fabric timing: a heap of ``(time, key, hop)`` events (the rules are
in :mod:`sim.fabric.simulate`).

What is due at the same time is taken in key order: servers freeing first (key ``REL``),
then hops past the first, more hops travelled first, then by op id (key ``i - hop * n``),
then first hops, reductions and copies by op id, a staging buffer coming back to transfer
``i`` before ``i``'s own first hop (key ``i``): so a link serves simultaneous requests by
hops travelled, then program order (ADR 0026)."""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict, deque

import numpy as np

from sim.fabric.holds import hop_holds
from sim.fabric.log import op_log
from sim.fabric.network import Network
from sim.fabric.periodic import Periodic
from sim.fabric.program import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    accumulators,
    lanes_of,
    op_routes,
)
from sim.fabric.switch_ops import at_switch, switch_plan
from sim.oplog import OpLog


def simulate_events(
    net: Network,
    program: FabricProgram,
    holds: tuple[list[int], ...],
    *,
    contention: bool,
    routes: list[tuple[int, ...]] | None = None,
    period: int = 0,
) -> OpLog:
    """The event-driven engine of :func:`simulate_fabric`.

    Only start and end times are dynamic: each record has a slot (op by op, hop by hop, the
    log's order), and its chip, engine and stage follow from the op afterwards. ``routes``
    (per op, :func:`~sim.fabric.program.op_routes`) are computed when not given.
    ``period`` (> 0): the program repeats every ``period`` ops from op 0 on where it is
    periodic, and the loop skips the periods that repeat the one before, shifted
    (:mod:`sim.fabric.periodic`); the log is the same.
    """
    n = len(program)
    kind, src, dst = program.kind, program.src, program.dst
    first, hbm_hold, total, burst = holds
    first_edge, first_part, edge_j, edge_a, edge_w, edge_sub = _streams(program, total)
    into = accumulators(program)
    acc_end = [0] * n  # per accumulator (by its first reduction): when its last add ended
    waiting = [len(d) for d in program.deps]
    p = net.chips
    lats = net.link_latencies_ps
    nlinks = len(net.links)
    route_of = op_routes(net, program) if routes is None else routes
    # a staging buffer flies back with the largest latency of its transfer's links (simulate.py)
    if net.uniform:  # every hop as long as the first, data at the first hop's grain
        hop_own: list[tuple[int, ...]] | None = None
        grain = burst
        back = [lats[0] if lats else 0] * n
    else:
        hop_own, grain = hop_holds(net, program, route_of, burst)
        back_of: dict[tuple[int, ...], int] = {}  # per distinct route
        back = []
        for r in route_of:
            b = back_of.get(r)
            if b is None:
                b = back_of[r] = max((lats[k] for k in r), default=0)
            back.append(b)
    consumes = program.consumes
    staged = [False] * n
    for t in consumes:
        if t >= 0:
            staged[t] = True
    plan = switch_plan(net, program, route_of) if at_switch(net, program) else None
    for t in plan.unstaged if plan else ():  # a switch forwards what it copies (switch_ops)
        staged[t] = False
    # staging buffers per (sender, receiver, lane): a channel on its own link or port has
    # buffers of its own, as each NCCL channel has its own connection buffers per peer (a
    # program through a switch's own ops: per port link, switch_ops)
    lane = lanes_of(program)
    nlanes = 1 if plan else max(lane, default=0) + 1
    pools = plan.pools if plan else p * p * nlanes
    credits = [net.staging_buffers] * pools
    # transfers waiting for a buffer, per pool that has had one wait: a list of p * p * lanes
    # deques cost seconds to build at p = 256 with 18 lanes, for the few pools a program uses
    held: defaultdict[int, deque[int]] = defaultdict(deque)
    granted = [False] * n
    hbm_got = [False] * n
    head = [0] * n  # when the first burst of every input is there
    tail = [0] * n  # when the last byte of every input is there
    hop_end = [0] * n
    conn = (
        plan.conn
        if plan
        else [(s * p + d) * nlanes + g for s, d, g in zip(src, dst, lane, strict=True)]
    )
    # per op: the servers of its hops (a transfer) or its reduce engine (one entry)
    if contention:
        servers = nlinks + p
        res_of = [
            r if k == TRANSFER else (nlinks + s,)
            for k, s, r in zip(kind, src, route_of, strict=True)
        ]
    else:  # every (sender, receiver) pair and route has a link of its own at every hop
        own_links: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
        servers = nlinks + p
        res_of = []
        for k, s, c, r in zip(kind, src, conn, route_of, strict=True):
            if k != TRANSFER:
                res_of.append((nlinks + s,))
                continue
            pair = c // nlanes  # a (sender, receiver) pair's own links, per route
            if (pair, r) not in own_links:
                own_links[pair, r] = tuple(range(servers, servers + len(r)))
                servers += len(r)
            res_of.append(own_links[pair, r])
    if plan:  # reductions at a switch: on their ports' reduce engines
        servers = plan.place(res_of, servers)
    busy = [False] * servers  # links, reduce engines, then (contention=False) pair links
    # ops waiting for a busy server, per server that has had one wait (a deque per server
    # for the 10 k links of h100 at p = 256 took longer than the few a quotient's ops use)
    queue: defaultdict[int, deque[tuple[int, int]]] = defaultdict(deque)
    hbm_free = [0] * p
    nrec = [len(r) if k == TRANSFER else 1 for k, r in zip(kind, route_of, strict=True)]
    slot = list(itertools.accumulate(nrec, initial=0))
    periodic = period > 0 and contention and plan is None and not any(g >= 0 for g in into)
    r_start = [-1 if periodic else 0] * slot[-1]  # -1: not started yet (Periodic's test)
    r_end = [0] * slot[-1]
    done = 0
    ready = [i for i in range(n) if not waiting[i]]
    if (
        lats and min(lats) > 0
    ):  # nothing comes back at time 0: past the staging buffers, pairs wait in id order
        for idx, i in enumerate(ready):
            if kind[i] == TRANSFER and staged[i]:
                c = conn[i]
                if credits[c]:
                    credits[c] -= 1
                    granted[i] = True
                else:
                    held[c].append(i)
                    ready[idx] = -1
    rel = -(1 << 62)  # the key of a server freeing: before every op due at the same time
    heap = [(0, i, 0) for i in ready if i >= 0]
    heapq.heapify(heap)
    tracker = None
    if periodic:  # the loop's containers, shared with the tracker (ADR 0036)
        route_id = _ids(res_of)
        tracker = Periodic(
            period,
            n,
            rel,
            slot,
            {  # what the loop reads of an op, beside its dependents and consumed transfer
                "kind": kind,
                "src": src,
                "dst": dst,
                "nbytes": program.nbytes,
                "hbm": program.hbm,
                "conn": conn,
                "staged": staged,
                "waiting": list(waiting),
                "route": route_id,
                "hop_own": _ids(hop_own) if hop_own is not None else [],
                # a consumer returns the buffer of the transfer it drains: to that transfer's
                # pool, after its route's flight back
                "drained_pool": [conn[t] if t >= 0 else -1 for t in consumes],
                "drained_route": [route_id[t] if t >= 0 else -1 for t in consumes],
            },
            consumes,
            (first_edge, first_part, edge_j, edge_a, edge_w, edge_sub),
            {
                "heap": heap,
                "queue": queue,
                "held": held,
                "busy": busy,
                "credits": credits,
                "hbm_free": hbm_free,
                "waiting": waiting,
                "granted": granted,
                "hbm_got": hbm_got,
                "head": head,
                "tail": tail,
                "hop_end": hop_end,
                "r_start": r_start,
                "r_end": r_end,
            },
        )
    cut = tracker.next_cut if tracker else -2
    top = -1  # the last op that has started a record (Periodic's window)
    pop, push = heapq.heappop, heapq.heappush

    def produced(i: int, begin: int, end: int, grain: int, now: int) -> None:
        """Op ``i`` delivers its span linearly from ``begin`` to ``end`` at the consumer's side:
        a dependent may start as soon as the part it needs first is coming, and cannot end
        before one burst after ``end``. ``i`` is decided at ``now`` (it starts, a transfer its
        last hop): no dependent starts before that (ADR 0031), so nothing is due in the past.
        What a dependent reads of the spans is fixed before the loop (:func:`_streams`): the
        first ones need ``i``'s first burst; each further one the part at ``a / width`` of
        the span ``i`` moves, after streaming ``sub`` ps of its own bytes before it."""
        base = begin + grain
        first_burst = end if base > end else base  # i's data is complete only when i ends
        if first_burst < now:  # streaming ahead of a producer not yet under way
            first_burst = now
        e, part, stop = first_edge[i], first_part[i], first_edge[i + 1]
        while e < part:
            j = edge_j[e]
            e += 1
            if first_burst > head[j]:
                head[j] = first_burst
            if end > tail[j]:
                tail[j] = end
            waiting[j] -= 1
            if not waiting[j]:
                push(heap, (head[j], j, 0))
        spread = end - begin
        while e < stop:
            j, a = edge_j[e], edge_a[e]
            needed = base - edge_sub[e]
            if a:
                needed += spread * a // edge_w[e]
            e += 1
            if needed > end:
                needed = end
            if needed < now:
                needed = now
            if needed > head[j]:
                head[j] = needed
            if end > tail[j]:
                tail[j] = end
            waiting[j] -= 1
            if not waiting[j]:
                push(heap, (head[j], j, 0))

    while heap:
        now, i, hop = pop(heap)
        if i == rel:  # server `hop` frees: its first queued op starts
            line = queue.get(hop)  # (get: no empty queue made for a server nobody waits on)
            if not line:
                busy[hop] = False
                continue
            res = hop
            i, hop = line.popleft()
            k = kind[i]
        elif hop < 0:  # a staging buffer comes back to the pair of transfer `i`
            c = conn[i]
            waits = held.get(c)  # (get: no empty queue made for a pool nobody waits on)
            if waits:
                j = waits.popleft()
                granted[j] = True
                push(heap, (now, j, 0))
            else:
                credits[c] += 1
            continue
        else:
            if i == cut and not hop and tracker:  # the cut op's first take since the last cut
                jump = tracker.cut(now, i, top)
                cut = tracker.next_cut
                if jump:
                    now, i, done, top = now + jump[0], i + jump[1], done + jump[2], top + jump[1]
            if hop:  # a hop past the first: keyed by hops travelled, then op id (ADR 0026)
                i += hop * n
            k = kind[i]
            if k == TRANSFER and hop == 0 and staged[i] and not granted[i]:
                c = conn[i]
                if not credits[c]:
                    held[c].append(i)
                    continue
                credits[c] -= 1
                granted[i] = True
            if contention and hbm_hold[i] and not hbm_got[i]:
                chip = src[i]
                hs = hbm_free[chip] if hbm_free[chip] > now else now
                hbm_free[chip] = hs + hbm_hold[i]
                hbm_got[i] = True
                if hs > now:
                    push(heap, (hs, i, 0))
                    continue
            if k == COPY:
                res = -1
            else:
                res = res_of[i][hop]
                if busy[res]:
                    queue[res].append((i, hop))
                    continue
                busy[res] = contention or k == TRANSFER
        # op i starts its hop `hop` on server `res` at `now`
        done += 1
        if k == TRANSFER:
            begin = now
            if hop == 0:
                end = begin + total[i]
                if tail[i] + burst[i] > end:
                    end = tail[i] + burst[i]
            else:
                end = begin + (first[i] if hop_own is None else hop_own[i][hop])
                after = hop_end[i] + lats[route_of[i][hop - 1]]
                if after > end:
                    end = after
            hop_end[i] = end
            push(heap, (end, rel, res))
            at = slot[i] + hop
            r_start[at] = begin
            if i > top:  # the last op that has started (Periodic's window)
                top = i
            r_end[at] = end
            lat = lats[route_of[i][hop]]
            if hop + 1 < nrec[i]:
                push(heap, (begin + lat, i - (hop + 1) * n, hop + 1))
            else:
                produced(i, begin + lat, end + lat, grain[i], begin)
        else:
            chip = src[i]
            begin = now
            end = begin + total[i]
            if tail[i] + burst[i] > end:
                end = tail[i] + burst[i]
            g = into[i]
            if g >= 0:  # adds after the accumulator's previous add, one burst behind it
                if acc_end[g] + burst[i] > end:
                    end = acc_end[g] + burst[i]
                acc_end[g] = end
            if k == REDUCTION and contention:  # busy for its work, not while data trickles in
                push(heap, (begin + first[i], rel, res))
            at = slot[i]
            r_start[at] = begin
            if i > top:  # the last op that has started (Periodic's window)
                top = i
            r_end[at] = end
            if consumes[i] >= 0:
                push(heap, (end + back[consumes[i]], consumes[i], -1))
            produced(i, begin, end, burst[i], begin)
    if done < slot[-1]:
        stuck = [i for i in range(n) if waiting[i]][:3]
        raise RuntimeError(
            f"fabric program did not finish ({done} of {slot[-1]} records): a dependency "
            f"cycle or every staging buffer held by data that waits (e.g. ops {stuck}); "
            "raise chips.staging_buffers"
        )
    return op_log(net, program, np.asarray(nrec, dtype=np.int64), r_start, r_end, route_of)


def _ids(rows: list[tuple[int, ...]]) -> list[int]:
    """Each row's number among the distinct rows (first seen, first numbered)."""
    seen: dict[tuple[int, ...], int] = {}
    return [seen.setdefault(r, len(seen)) for r in rows]


def _streams(
    program: FabricProgram, total: list[int]
) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """Per op ``i``, its dependents and what the streaming rule of :func:`simulate_events`
    reads of their spans, fixed before the loop, as edges ``first_edge[i] ..
    first_edge[i + 1]`` of the flat lists (dependent, ``a``, ``width``, ``sub``): those
    before ``first_part[i]`` start at ``i``'s first burst, ``begin + grain``; each further
    one ``j`` at ``begin + (end - begin) * a // width + grain - sub``.

    ``j`` needs part of the span ``[lo, hi)`` it sees ``i`` move (``span[i]``, or a
    quotient's ``seen_span[(i, j)]``) when ``hi > lo``, its own ``[x, y)`` shares an element
    with it (a dependency between disjoint spans is an order, not data: ADR 0034) and
    leaves some of it out: ``a`` is where the part it needs first starts (0 when that is
    past the end), ``width = hi - lo``, and ``sub`` the time ``j`` streams its own bytes
    before that part (``total[j] * (max(x, lo) - x) // (y - x)``). Where ``a`` and ``sub``
    are 0 that is the first burst. Raises the errors of
    :func:`~sim.fabric.program.dependents_of` (a dependency on a later op, a consumer of no
    earlier transfer it depends on)."""
    n = len(program)
    deps = program.deps
    nd = np.fromiter(map(len, deps), np.int64, n)
    d = np.fromiter(itertools.chain.from_iterable(deps), np.int64, int(nd.sum()))
    j = np.repeat(np.arange(n, dtype=np.int64), nd)
    bad = (d < 0) | (d >= j)
    if bad.any():
        e = int(np.argmax(bad))
        raise ValueError(
            f"op {int(j[e])} depends on op {int(d[e])}; dependencies must be earlier ops"
        )
    t = np.asarray(program.consumes, dtype=np.int64)
    kind = np.asarray(program.kind, dtype=np.int64)
    ops = np.arange(n, dtype=np.int64)
    listed = np.bincount(j[d == t[j]], minlength=n) > 0  # each consumer's transfer is a dep
    has = t >= 0
    stray = has & ((t >= ops) | (kind[np.where(has & (t < n), t, 0)] != TRANSFER) | ~listed)
    if stray.any():
        i = int(np.argmax(stray))
        raise ValueError(
            f"op {i} consumes op {int(t[i])}: it must be an earlier transfer it depends on"
        )
    span = np.fromiter(itertools.chain.from_iterable(program.span), np.int64, 2 * n)
    span = span.reshape(-1, 2)
    lo, hi = span[d, 0], span[d, 1]
    if program.seen_span:  # a quotient's stand-ins: what j sees of the op d stands for
        keys = np.fromiter((a * n + b for a, b in program.seen_span), np.int64)
        vals = np.asarray(list(program.seen_span.values()), dtype=np.int64).reshape(-1, 2)
        by = np.argsort(keys)
        keys, vals = keys[by], vals[by]
        code = d * n + j
        pos = np.minimum(np.searchsorted(keys, code), len(keys) - 1)
        hit = keys[pos] == code
        lo, hi = np.where(hit, vals[pos, 0], lo), np.where(hit, vals[pos, 1], hi)
    x, y = span[j, 0], span[j, 1]
    part = (hi > lo) & (x < hi) & (lo < y) & ((x > lo) | (y < hi))  # shares: ADR 0034
    a = np.maximum(x, lo) - lo
    a = np.where(part & (a < np.minimum(y, hi) - lo), a, 0)
    into = np.where(part, np.maximum(x, lo) - x, 0)  # j's own elements before that part
    tot = np.asarray(total, dtype=np.int64)[j] if n else np.zeros(0, dtype=np.int64)
    big = len(j) and int(tot.max()) * int(into.max()) >= 1 << 62
    if big:  # the products pass int64: Python's integers
        sub = [
            p_ * q_ // r_ if q_ else 0
            for p_, q_, r_ in zip(tot.tolist(), into.tolist(), (y - x).tolist(), strict=True)
        ]
        further = (a != 0) | np.asarray([v != 0 for v in sub], dtype=bool)
    else:
        sub_a = tot * into // np.maximum(y - x, 1)
        further = (a != 0) | (sub_a != 0)
    by = np.argsort((d * 2 + further) * n + j, kind="stable")  # producer, first burst first
    count = np.bincount(d, minlength=n)
    first_edge = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=first_edge[1:])
    plain = np.bincount(d[~further], minlength=n)
    sub_l = [sub[k] for k in by.tolist()] if big else sub_a[by].tolist()
    return (
        first_edge.tolist(),
        (first_edge[:-1] + plain).tolist(),
        j[by].tolist(),
        a[by].tolist(),
        np.where(a != 0, hi - lo, 1)[by].tolist(),
        sub_l,
    )
