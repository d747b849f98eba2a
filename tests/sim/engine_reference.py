"""The engine as it was before the speed work of the ``events`` branch, kept verbatim as the
reference the fast one must equal record for record (``tests/sim/test_engine_reference.py``)
and the "old" column of ``benchmarks/engine_speed.py``: the event loop
(:func:`simulate_events`), the holds (:func:`op_holds`), the op log (:func:`op_log`) and the
replay (:func:`replay`). Not used by ``sim``; do not change it to follow the engine: it is
the fixed point that the engine is compared with."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from sim.collectives.compile import Compiled
from sim.collectives.schedule import I64, Schedule
from sim.collectives.verify import Replayed, ReplayError, input_coefficients
from sim.fabric.holds import op_ps
from sim.fabric.log import COPY_STAGE, FORWARD, HBM_ENGINE, REDUCE, REDUCE_ENGINE, SEND, STAGES
from sim.fabric.network import Network
from sim.fabric.program import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    accumulators,
    dependents_of,
    hbm_default,
    lanes_of,
    op_routes,
)
from sim.fabric.switch_ops import SWITCH_REDUCE, at_switch, switch_holds, switch_log, switch_plan
from sim.oplog import OpLog


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
    dependents = dependents_of(program)
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
    queue: list[deque[tuple[int, int]]] = [deque() for _ in range(servers)]
    hbm_free = [0] * p
    nrec = [len(r) if k == TRANSFER else 1 for k, r in zip(kind, route_of, strict=True)]
    slot = list(itertools.accumulate(nrec, initial=0))
    r_start = [0] * slot[-1]
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
    pop, push = heapq.heappop, heapq.heappush
    spans = program.span

    def produced(i: int, begin: int, end: int, grain: int, now: int) -> None:
        """Op ``i`` delivers its span linearly from ``begin`` to ``end`` at the consumer's side:
        a dependent may start as soon as the part it needs first is coming, and cannot end
        before one burst after ``end``. ``i`` is decided at ``now`` (it starts, a transfer its
        last hop): no dependent starts before that (ADR 0031), so nothing is due in the past."""
        lo, hi = spans[i]
        width = hi - lo
        for j in dependents[i]:
            x, y = spans[j]
            if width > 0 and x < hi and lo < y and (x > lo or y < hi):  # part of i (ADR 0034)
                a = max(x, lo) - lo
                if a >= min(y, hi) - lo:
                    a = 0
                first_burst = begin + (end - begin) * a // width + grain
                last = end  # i's data is complete (and checkable) only when i ends
                # j reaches that part only after streaming its own bytes before it
                first_burst -= total[j] * (max(x, lo) - x) // (y - x)
            else:
                first_burst, last = begin + grain, end
            if first_burst > last:
                first_burst = last
            if first_burst < now:  # streaming ahead of a producer not yet under way
                first_burst = now
            if first_burst > head[j]:
                head[j] = first_burst
            if last > tail[j]:
                tail[j] = last
            waiting[j] -= 1
            if not waiting[j]:
                push(heap, (head[j], j, 0))

    while heap:
        now, i, hop = pop(heap)
        if i == rel:  # server `hop` frees: its first queued op starts
            if not queue[hop]:
                busy[hop] = False
                continue
            res = hop
            i, hop = queue[hop].popleft()
            k = kind[i]
        elif hop < 0:  # a staging buffer comes back to the pair of transfer `i`
            c = conn[i]
            if held[c]:
                j = held[c].popleft()
                granted[j] = True
                push(heap, (now, j, 0))
            else:
                credits[c] += 1
            continue
        else:
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


def op_holds(
    net: Network, program: FabricProgram, routes: list[tuple[int, ...]] | None = None
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per op: time on its own engine (a transfer: on the first link of its route, one of
    ``routes``, needed when links differ), on its chip's HBM, until it ends (the longer), and
    for one burst (the streaming granule: ``hbm.burst_bytes``)."""
    if not len(program):
        return [], [], [], []
    columns = [program.kind, program.nbytes, program.hbm]
    links: list[int | None] = [None]  # per bandwidth code: a link of that bandwidth
    if not net.uniform:
        if routes is None:
            raise ValueError("op_holds on a network whose links differ needs the ops' routes")
        code_of: dict[Fraction, int] = {}
        links = []
        for k, bw in enumerate(net.link_bws):
            if bw not in code_of:
                code_of[bw] = len(links)
                links.append(k)
        columns.append([code_of[net.link_bws[r[0]]] if r else 0 for r in routes])
    code = np.zeros(len(program), dtype=np.int64)
    table = np.zeros((0, 1), dtype=np.int64)  # per code: the column values seen so far
    for col in columns:
        vals, inv = np.unique(np.asarray(col, dtype=np.int64), return_inverse=True)
        pairs, code = np.unique(code * len(vals) + inv.reshape(-1), return_inverse=True)
        code = code.reshape(-1)  # renumbered: codes stay below len(program)
        table = np.vstack([table[:, pairs // len(vals)], vals[pairs % len(vals)]])
    per_key = []
    for k, b, m, *bw_code in table.T.tolist():
        link = links[bw_code[0]] if bw_code else None
        mem = hbm_default(k, b) if m < 0 else m
        a, h = op_ps(net, k, b, mem, link)
        g = min(b, net.burst_bytes)
        ga, gh = op_ps(net, k, g, mem * g // b if b else 0, link)
        per_key.append((a, h, max(a, h), max(ga, gh)))
    per_op = np.asarray(per_key, dtype=np.int64)[code]
    first, hbm, total, burst = (per_op[:, c].tolist() for c in range(4))
    if at_switch(net, program):  # ops at a switch: no HBM, the switch's reduce rate
        switch_holds(net, program, (first, hbm, total, burst))
    return first, hbm, total, burst


def hop_holds(
    net: Network,
    program: FabricProgram,
    routes: list[tuple[int, ...]],
    burst: list[int],
) -> tuple[list[tuple[int, ...]], list[int]]:
    """On a network whose links differ: per transfer, its time on each link of its route
    (``bytes / that link's bandwidth``), and the grain its data reaches the receiver at: one
    burst through the slowest of its links (or its HBM grain, ``burst``, when that is longer);
    other ops: ``()`` and their ``burst``."""
    cache: dict[tuple[int, Fraction], int] = {}
    bws, grain_bytes = net.link_bws, net.burst_bytes

    def ps(nbytes: int, link: int) -> int:
        key = (nbytes, bws[link])
        if key not in cache:
            cache[key] = net.link_ps(nbytes, link)
        return cache[key]

    own: list[tuple[int, ...]] = []
    grain: list[int] = []
    for r, b, g in zip(routes, program.nbytes, burst, strict=True):
        own.append(tuple(ps(b, k) for k in r))
        grain.append(max([g, *(ps(min(b, grain_bytes), k) for k in r)]))
    return own, grain


def op_log(
    net: Network,
    program: FabricProgram,
    nrec: npt.NDArray[np.int64],
    start: list[int] | npt.NDArray[np.int64],
    end: list[int] | npt.NDArray[np.int64],
    routes: list[tuple[int, ...]] | None = None,
) -> OpLog:
    """The op log of ``program``: one record per hop of each transfer and per other op, in op
    and hop order, with the given start and end times; chip, engine and stage follow from
    each op (a hop's link on the op's route, one of ``routes``, and the chip it belongs to;
    the reduce engine; HBM for a copy)."""
    n, nlinks = len(program), len(net.links)
    kind = np.asarray(program.kind, dtype=np.int64)
    src = np.asarray(program.src, dtype=np.int64)
    op = np.repeat(np.arange(n, dtype=np.int64), nrec)
    hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    k = kind[op]
    on_link = k == TRANSFER
    route_of = op_routes(net, program) if routes is None else routes
    hops = int(np.count_nonzero(on_link))
    link = np.zeros(len(op), dtype=np.int64)
    link[on_link] = np.fromiter(itertools.chain.from_iterable(route_of), np.int64, hops)
    link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
    cols = {
        "op": op,
        "chip": np.where(on_link, link_chip[link] if nlinks else 0, src[op]),
        "engine": np.where(on_link, link, np.where(k == REDUCTION, nlinks, nlinks + 1)),
        "stage": np.where(
            on_link,
            np.where(hop == 0, SEND, FORWARD),
            np.where(k == REDUCTION, REDUCE, COPY_STAGE),
        ),
        "start": np.asarray(start, dtype=np.int64),
        "end": np.asarray(end, dtype=np.int64),
        "nbytes": np.asarray(program.nbytes, dtype=np.int64)[op],
        "tile": np.asarray(program.step, dtype=np.int64)[op],
    }
    names: tuple[str, ...] = (*net.names, REDUCE_ENGINE, HBM_ENGINE)
    stages: tuple[str, ...] = STAGES
    if at_switch(net, program):  # reductions at a switch: their ports' engines, their stage
        names, stages = switch_log(net, program, route_of, op, cols, names, stages)
    return OpLog.from_columns(names, stages, cols)


def _route_problems(net: Network, compiled: Compiled, log: OpLog) -> str:
    """Check that each transfer's recorded links lead from its sender to its consumer's chip,
    and that each consumer starts after its data arrived; "" if they all do."""
    prog = compiled.program
    link = (log.stage == SEND) | (log.stage == FORWARD)
    ops, eng = log.op[link], log.engine[link].astype(np.int64)
    ends = np.asarray(net.links, dtype=np.int64).reshape(-1, 2)
    u, v = ends[eng, 0], ends[eng, 1]
    first = np.ones(len(ops), dtype=bool)
    first[1:] = ops[1:] != ops[:-1]
    last = np.ones(len(ops), dtype=bool)
    last[:-1] = first[1:]
    src = np.asarray(prog.src, dtype=np.int64)
    dst = np.asarray(prog.dst, dtype=np.int64)
    names = net.names
    broken = np.flatnonzero(~first & (u != np.roll(v, 1)))
    if len(broken):
        i = int(broken[0])
        return f"op {int(ops[i])}: its links {names[eng[i - 1]]} and {names[eng[i]]} do not join"
    bad = np.flatnonzero(first & (u != src[ops]))
    if len(bad):
        i = int(bad[0])
        return f"op {int(ops[i])}: transfer {src[ops[i]]}->{dst[ops[i]]} starts on {names[eng[i]]}"
    lat = np.asarray(net.link_latencies_ps, dtype=np.int64)[eng[last]]  # each last hop's
    n = len(prog)
    arrive = np.zeros(n, dtype=np.int64)
    begins = np.zeros(n, dtype=np.int64)
    at = np.full(n, -1, dtype=np.int64)
    last_link = np.zeros(n, dtype=np.int64)
    tops = ops[last]
    arrive[tops] = log.end[link][last] + lat
    begins[tops] = log.start[link][last] + lat
    at[tops] = v[last]
    last_link[tops] = eng[last]
    consumer = ~link
    c_op = log.op[consumer].astype(np.int64)
    c_chip = log.chip[consumer].astype(np.int64)
    c_start, c_end = log.start[consumer], log.end[consumer]
    t = np.asarray(prog.consumes, dtype=np.int64)[c_op]
    tt = np.maximum(t, 0)
    missing = (t >= 0) & (at[tt] < 0)
    elsewhere = (t >= 0) & ~missing & (at[tt] != c_chip)
    early = (t >= 0) & ~missing & ~elsewhere & ((c_start < begins[tt]) | (c_end <= arrive[tt]))
    failed = np.flatnonzero(missing | elsewhere | early)
    if len(failed):
        i = int(failed[0])
        op, chip, t_i = int(c_op[i]), int(c_chip[i]), int(t[i])
        if missing[i]:
            return f"op {op} on chip {chip} consumes transfer op {t_i}, which never crossed a link"
        if elsewhere[i]:
            return (
                f"op {t_i}: transfer {prog.src[t_i]}->{prog.dst[t_i]} left its data at chip "
                f"{at[t_i]} (its last link is {names[last_link[t_i]]}), not at chip {chip}, "
                f"where op {op} consumes it: the data skipped a link"
            )
        return (
            f"op {op} on chip {chip} runs {int(c_start[i])}..{int(c_end[i])} ps, but the data of "
            f"transfer op {t_i} arrives {begins[t_i]}..{arrive[t_i]} ps: it uses data before it "
            "arrived"
        )
    return ""


def replay(schedule: Schedule, net: Network, compiled: Compiled, log: OpLog) -> Replayed:
    """Move the data as the op log says (module docstring) and return every chip's result.

    Raises :class:`ReplayError` when a transfer's links do not lead to the chip that consumes
    it, or when an op consumes data before it arrived.
    """
    problem = _route_problems(net, compiled, log)
    if problem:
        raise ReplayError(problem)
    p, pieces = schedule.chips, len(compiled.bounds) - 1
    a0, b0 = input_coefficients(p)
    m0 = (
        np.left_shift(np.int64(1), np.arange(p, dtype=np.int64))
        if p < 63
        else np.zeros(p, np.int64)
    )
    a = np.repeat(a0[:, None], pieces, axis=1)
    b = np.repeat(b0[:, None], pieces, axis=1)
    mask = np.repeat(m0[:, None], pieces, axis=1)
    prog = compiled.program
    sends = log.stage == SEND
    consumer = (log.stage == REDUCE) | (log.stage == COPY_STAGE)
    switches = schedule.nodes - p  # a switch sums what arrived there, from zero (nvls)
    if switches:
        consumer |= log.stage == SWITCH_REDUCE
        a, b, mask = (np.vstack([x, np.zeros((switches, pieces), np.int64)]) for x in (a, b, mask))
    summed = _replay_sums(compiled, log, consumer, (a, b, mask), (a0, b0, m0))
    if summed is not None:
        return summed
    times = np.concatenate([log.end[sends], log.end[consumer]])
    ops = np.concatenate([log.op[sends], log.op[consumer]])
    kinds = np.concatenate(
        [np.ones(int(sends.sum()), np.int64), np.zeros(int(consumer.sum()), np.int64)]
    )
    order = np.lexsort((ops, kinds, times))  # at equal times, writes land before reads
    lo, hi, fresh, consumes = compiled.lo, compiled.hi, compiled.fresh, prog.consumes
    bounds = compiled.bounds
    src = prog.src
    stash: dict[int, tuple[I64, I64, I64]] = {}
    for op in ops[order].tolist():
        x, y = lo[op], hi[op]
        if prog.kind[op] == TRANSFER:
            s = src[op]
            if fresh[op]:
                n = y - x
                stash[op] = (np.full(n, a0[s]), np.full(n, b0[s]), np.full(n, m0[s]))
            else:
                stash[op] = (a[s, x:y].copy(), b[s, x:y].copy(), mask[s, x:y].copy())
            continue
        t = consumes[op]
        da, db, dm = stash.pop(t)
        shift = bounds[lo[t]] - bounds[x]  # it landed elsewhere (Message.at): A + B e, e moved
        if shift:
            da = da + db * shift
        c = src[op]
        if prog.kind[op] == REDUCTION:
            a[c, x:y] += da
            b[c, x:y] += db
            mask[c, x:y] |= dm
        else:
            a[c, x:y] = da
            b[c, x:y] = db
            mask[c, x:y] = dm
    return Replayed(a[:p], b[:p], mask[:p])


def _replay_sums(
    compiled: Compiled,
    log: OpLog,
    consumer: npt.NDArray[np.bool_],
    start: tuple[I64, I64, I64],
    inputs: tuple[I64, I64, I64],
) -> Replayed | None:
    """:func:`replay` when every consumer is a reduction of a fresh send (``direct``), each
    transfer consumed once: sums and ORs commute, so the order of the log does not matter and
    each chip's result is its start plus what its reductions received, summed in numpy.
    None when the log has any other shape (the general replay then follows it in order)."""
    prog = compiled.program
    ops = log.op[consumer].astype(np.int64)
    if not len(ops) or (log.stage[consumer] != REDUCE).any():
        return None
    t = np.asarray(prog.consumes, dtype=np.int64)[ops]
    fresh = np.asarray(compiled.fresh, dtype=bool)
    if (t < 0).any() or not fresh[t].all() or np.bincount(t).max() > 1:
        return None
    if not np.array_equal(np.asarray(compiled.lo)[t], np.asarray(compiled.lo)[ops]):
        return None  # a reduction that lands elsewhere: follow the log
    a, b, mask = (x.copy() for x in start)
    a0, b0, m0 = inputs
    chip = np.asarray(prog.src, dtype=np.int64)[ops]
    sender = np.asarray(prog.src, dtype=np.int64)[t]
    lo = np.asarray(compiled.lo, dtype=np.int64)[ops]
    width = np.asarray(compiled.hi, dtype=np.int64)[ops] - lo
    rows = np.repeat(chip, width)
    pieces = np.repeat(lo - np.cumsum(width) + width, width) + np.arange(int(width.sum()))
    who = np.repeat(sender, width)
    np.add.at(a, (rows, pieces), a0[who])
    np.add.at(b, (rows, pieces), b0[who])
    np.bitwise_or.at(mask, (rows, pieces), m0[who])
    return Replayed(a, b, mask)
