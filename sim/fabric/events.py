"""The event loop of the fabric timing: a heap of ``(time, key, hop)`` events (the rules are
in :mod:`sim.fabric.simulate`).

What is due at the same time is taken in key order: servers freeing first (key ``REL``),
then hops past the first, more hops travelled first, then by op id (key ``i - hop * n``),
then first hops, reductions and copies by op id, a staging buffer coming back to transfer
``i`` before ``i``'s own first hop (key ``i``): so a link serves simultaneous requests by
hops travelled, then program order (ADR 0026).

How the loop is kept short (the same log as one event per release, bit for bit:
``tests/sim/test_engine_reference.py`` compares it with the loop as it was):

* A server is free when its holder's release time is not in the future (``free_at``); its
  release is an event only while an op waits for it (pushed when the first one queues, at
  the same time and key as ever). A release that finds nobody waiting changes nothing, and
  releases are taken before every op due at their time, so an op that asks at that time
  finds the server free either way.
* Each op walks a phase: its staging buffer, then its HBM, then its server; ops that need no
  buffer or no HBM start past them.
* What a producer tells its dependents (``produced``, ADR 0005 decision 4 and ADR 0031) is
  split once, before the loop: a dependent that needs the producer's whole span (almost all)
  gets one first-burst time per producer; the few that need part of it keep their span
  arithmetic, its time-free part precomputed.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

import numpy as np

from sim.fabric.holds import hop_holds
from sim.fabric.log import op_log
from sim.fabric.network import Network
from sim.fabric.program import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    accumulators,
    dependents_of,
    lanes_of,
    op_routes,
)
from sim.fabric.switch_ops import at_switch, switch_plan
from sim.oplog import OpLog

#: a partial dependent of a producer: (dependent, bytes it streams before the part it needs,
#: offset of that part in the producer's span, the producer's span width)
Partial = tuple[int, int, int, int]


def dependents(
    program: FabricProgram, total: list[int]
) -> tuple[list[list[int]], list[list[Partial]], list[int]]:
    """Per op: the dependents that need all of its span (``produced``'s plain case), those
    that need part of it (with the time-free part of the streaming rule: what the dependent
    streams before that part, ``total[j] * (max(x, lo) - x) // (y - x)``, and the offset
    ``a`` of that part in the producer's span ``[lo, hi)``), and how many producers each op
    waits for. The checks (and errors) are :func:`~sim.fabric.program.dependents_of`'s."""
    n = len(program)
    deps = program.deps
    counts = [len(d) for d in deps]
    nedges = sum(counts)
    prod = np.fromiter(itertools.chain.from_iterable(deps), np.int64, nedges)
    dep = np.repeat(np.arange(n, dtype=np.int64), counts)
    cons = np.asarray(program.consumes, dtype=np.int64).reshape(-1)
    bad = bool(((prod < 0) | (prod >= dep)).any())
    if not bad and len(cons):
        users = np.flatnonzero(cons >= 0)
        t = cons[users]
        kind = np.asarray(program.kind, dtype=np.int64)
        bad = bool(((t >= users) | (kind[np.minimum(t, users)] != TRANSFER)).any())
        if not bad and len(users):
            has = np.zeros(n, dtype=bool)
            has[dep[prod == cons[dep]]] = True
            bad = not has[users].all()
    if bad:
        dependents_of(program)  # raises its error
        raise AssertionError("dependents_of accepted a program the engine's checks refused")
    order = np.argsort(prod, kind="stable")
    p_of, j_of = prod[order], dep[order]
    span = np.fromiter(itertools.chain.from_iterable(program.span), np.int64, 2 * n).reshape(n, 2)
    lo, hi = span[p_of, 0], span[p_of, 1]
    x, y = span[j_of, 0], span[j_of, 1]
    part = (hi > lo) & (y > x) & ((x > lo) | (y < hi))
    js = j_of.tolist()
    offsets = np.searchsorted(p_of, np.arange(n + 1, dtype=np.int64)).tolist()
    partial: list[list[Partial]] = [[] for _ in range(n)]
    if part.any():
        keep = np.ones(nedges, dtype=bool)
        for e in np.flatnonzero(part).tolist():
            i, j = int(p_of[e]), js[e]
            (plo, phi), (jx, jy) = program.span[i], program.span[j]
            a = max(jx, plo) - plo
            if a >= min(jy, phi) - plo:
                a = 0
            partial[i].append((j, total[j] * (max(jx, plo) - jx) // (jy - jx), a, phi - plo))
            keep[e] = False
        plain_js = j_of[keep].tolist()
        offsets = np.searchsorted(p_of[keep], np.arange(n + 1, dtype=np.int64)).tolist()
        js = plain_js
    plain = [js[a:b] for a, b in itertools.pairwise(offsets)]
    return plain, partial, counts


def simulate_events(
    net: Network,
    program: FabricProgram,
    holds: tuple[list[int], ...],
    *,
    contention: bool,
    routes: list[tuple[int, ...]] | None = None,
) -> OpLog:
    """The event-driven engine of :func:`simulate_fabric`.

    Only start and end times are dynamic: each record has a slot (op by op, hop by hop, the
    log's order), and its chip, engine and stage follow from the op afterwards. ``routes``
    (per op, :func:`~sim.fabric.program.op_routes`) are computed when not given.
    """
    n = len(program)
    kind, src, dst = program.kind, program.src, program.dst
    first, hbm_hold, total, burst = holds
    plain, partial, waiting = dependents(program, total)
    into = accumulators(program)
    acc_end = [0] * n  # per accumulator (by its first reduction): when its last add ended
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
        back = [max((lats[k] for k in r), default=0) for r in route_of]
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
    held: list[deque[int]] = [deque() for _ in range(pools)]
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
    # when each server frees (links, reduce engines, then (contention=False) pair links); a
    # reduction without contention holds no engine, a copy none at all
    free_at = [0] * servers
    queue: list[deque[tuple[int, int]]] = [deque() for _ in range(servers)]
    hbm_free = [0] * p
    nrec = [len(r) if k == TRANSFER else 1 for k, r in zip(kind, route_of, strict=True)]
    slot = list(itertools.accumulate(nrec, initial=0))
    r_start = [0] * slot[-1]
    r_end = [0] * slot[-1]
    # per op: its first server (-1: a copy, or a transfer without links, which never starts)
    # and the flight time of its first hop
    res0 = [-1 if k == COPY or not r else r[0] for k, r in zip(kind, res_of, strict=True)]
    lat0 = [lats[r[0]] if r else 0 for r in route_of]
    # per op, what it waits for next: 0 its staging buffer, 1 its HBM, 2 its server
    hbm_next = [1 if contention and h else 2 for h in hbm_hold]
    phase = [
        0 if k == TRANSFER and s else h for k, s, h in zip(kind, staged, hbm_next, strict=True)
    ]
    done = 0
    ready = [i for i in range(n) if not waiting[i]]
    if (
        lats and min(lats) > 0
    ):  # nothing comes back at time 0: past the staging buffers, pairs wait in id order
        for idx, i in enumerate(ready):
            if not phase[i]:
                c = conn[i]
                if credits[c]:
                    credits[c] -= 1
                    phase[i] = hbm_next[i]
                else:
                    held[c].append(i)
                    ready[idx] = -1
    rel = -(1 << 62)  # the key of a server freeing: before every op due at the same time
    heap = [(0, i, 0) for i in ready if i >= 0]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush

    while heap:
        now, i, hop = pop(heap)
        waited = False  # whether op i starts on a server that someone else may wait for
        if i == rel:  # server `hop` frees: its first queued op starts (one always waits)
            res = hop
            i, hop = queue[res].popleft()
            k = kind[i]
            waited = True
        elif hop < 0:  # a staging buffer comes back to the pair of transfer `i`
            c = conn[i]
            if held[c]:
                j = held[c].popleft()
                phase[j] = hbm_next[j]
                push(heap, (now, j, 0))
            else:
                credits[c] += 1
            continue
        elif hop:  # a hop past the first: keyed by hops travelled, then op id (ADR 0026)
            i += hop * n
            k = TRANSFER
            res = res_of[i][hop]
            if free_at[res] > now:
                q = queue[res]
                if not q:
                    push(heap, (free_at[res], rel, res))
                q.append((i, hop))
                continue
        else:
            ph = phase[i]
            if not ph:  # a transfer whose data a later op drains: one staging buffer
                c = conn[i]
                if not credits[c]:
                    held[c].append(i)
                    continue
                credits[c] -= 1
                ph = phase[i] = hbm_next[i]
            if ph == 1:  # the chip's HBM serves it in the order ops are ready (ADR 0016)
                chip = src[i]
                hs = hbm_free[chip]
                if hs < now:
                    hs = now
                hbm_free[chip] = hs + hbm_hold[i]
                phase[i] = 2
                if hs > now:
                    push(heap, (hs, i, 0))
                    continue
            k = kind[i]
            res = res0[i]
            if k != COPY:
                if res < 0:  # a transfer without links: IndexError, as its route has no hop 0
                    res = res_of[i][0]
                if free_at[res] > now:
                    q = queue[res]
                    if not q:
                        push(heap, (free_at[res], rel, res))
                    q.append((i, 0))
                    continue
        # op i starts its hop `hop` on server `res` at `now`
        done += 1
        if k == TRANSFER:
            if hop == 0:
                end = now + total[i]
                late = tail[i] + burst[i]
                lat = lat0[i]
            else:
                end = now + (first[i] if hop_own is None else hop_own[i][hop])
                route = route_of[i]
                late = hop_end[i] + lats[route[hop - 1]]
                lat = lats[route[hop]]
            if late > end:
                end = late
            hop_end[i] = end
            free_at[res] = end
            if waited and queue[res]:
                push(heap, (end, rel, res))
            at = slot[i] + hop
            r_start[at] = now
            r_end[at] = end
            if hop + 1 < nrec[i]:
                push(heap, (now + lat, i - (hop + 1) * n, hop + 1))
                continue
            begin = now + lat  # its delivery at the receiver: produced below
            end += lat
            g = grain[i]
        else:
            begin = now
            end = now + total[i]
            late = tail[i] + burst[i]
            if late > end:
                end = late
            acc = into[i]
            if acc >= 0:  # adds after the accumulator's previous add, one burst behind it
                late = acc_end[acc] + burst[i]
                if late > end:
                    end = late
                acc_end[acc] = end
            if k == REDUCTION and contention:  # busy for its work, not while data trickles in
                free = now + first[i]
                free_at[res] = free
                if waited and queue[res]:
                    push(heap, (free, rel, res))
            at = slot[i]
            r_start[at] = now
            r_end[at] = end
            t = consumes[i]
            if t >= 0:
                push(heap, (end + back[t], t, -1))
            g = burst[i]
        # produced: op i delivers its span linearly from `begin` to `end` at the consumer's
        # side; a dependent may start as soon as the part it needs first is coming, and
        # cannot end before one burst after `end`. i is decided at `now` (it starts, a
        # transfer its last hop): no dependent starts before that (ADR 0031)
        some = plain[i]
        if some:
            first_burst = begin + g  # a dependent that needs all of i's span
            if first_burst > end:
                first_burst = end
            if first_burst < now:
                first_burst = now
            for j in some:
                if first_burst > head[j]:
                    head[j] = first_burst
                if end > tail[j]:
                    tail[j] = end
                w = waiting[j] - 1
                waiting[j] = w
                if not w:
                    push(heap, (head[j], j, 0))
        for j, before, a, width in partial[i]:  # j needs part of i's span
            # j reaches that part only after streaming its own bytes before it
            first_burst = begin + (end - begin) * a // width + g - before
            if first_burst > end:  # i's data is complete (and checkable) only when i ends
                first_burst = end
            if first_burst < now:  # streaming ahead of a producer not yet under way
                first_burst = now
            if first_burst > head[j]:
                head[j] = first_burst
            if end > tail[j]:
                tail[j] = end
            w = waiting[j] - 1
            waiting[j] = w
            if not w:
                push(heap, (head[j], j, 0))
    if done < slot[-1]:
        stuck = [i for i in range(n) if waiting[i]][:3]
        raise RuntimeError(
            f"fabric program did not finish ({done} of {slot[-1]} records): a dependency "
            f"cycle or every staging buffer held by data that waits (e.g. ops {stuck}); "
            "raise chips.staging_buffers"
        )
    return op_log(net, program, np.asarray(nrec, dtype=np.int64), r_start, r_end, route_of)
