"""An independent oracle of the fabric timing (:func:`sim.fabric.simulate_fabric`).

It is written from the rules (docs/adr/0005-interconnect-physics.md decisions 1-4,
docs/adr/0010-interconnect-completion.md, docs/adr/0016-hbm-before-the-link-and-reductions-
in-arrival-order.md) and shares nothing with the engine but its inputs and output types
(:class:`~sim.fabric.Network` with its byte-to-picosecond conversions, the
:class:`~sim.fabric.FabricProgram`, the :class:`~sim.oplog.OpLog`): no hold table, no
dependents list, no slots, no fast path. It is brute force, for small cases: everything
that is due sits in one plain list kept sorted, and the earliest is taken and handled by
the rule it falls under, one at a time, until nothing is due.

The rules, as this oracle applies them:

1. **Costs.** An op's own work is ``bytes / bw`` of the link a transfer's hop crosses (each
   hop its own link's bandwidth), ``bytes / reduce_bw`` (a reduction) or nothing (a copy).
   Its HBM bytes are ``hbm[i]``, or by default a send's or copy's bytes and twice a
   reduction's (read the local operand, write the sum); their time is ``bytes / hbm_bw``.
   It cannot end before the longer of the two after it starts (its *whole*; a transfer: its
   first hop's work), and it streams at the granule of one burst (``min(bytes,
   burst_bytes)``): one burst's work on either takes the *grain* (a transfer's first hop:
   on its first link). A transfer's data reaches its receiver at the grain of the slowest
   of its links (or its HBM grain if longer).
   A transfer crosses the links of its pair's route on its lane (``program.lane``, 0 when
   absent: ``Network.route(src, dst, lane)``).
2. **Data.** An op waits for every op it depends on. A producer delivers its span linearly
   from ``begin`` to ``end`` at the consumer's side (a transfer: its last hop's start and end,
   plus the latency); a consumer may start once the first burst of the part of the span it
   needs is there, less the time it spends streaming its own bytes before that part, and
   never later than the end of its producer's delivery, and never before the producer
   itself starts (a transfer: its last hop), when its delivery is known (ADR 0031: nothing
   is due in the past, so no link or engine is taken after it has served someone later);
   it cannot end before one burst after the last byte of every input (``last + grain``).
   A consumer whose span shares no element with its producer's (a blocking step's order,
   ADR 0034) needs no part of it: it may start once the first burst is there.
   The latency added is the last hop's link's.
3. **Staging buffers.** A transfer that a later op consumes takes one of its (sender,
   receiver, lane) connection's ``staging_buffers`` before it starts, first come, first
   served, and gives it back after its consumer ends, as late as the largest latency of the
   links the transfer crossed.
4. **HBM** (with contention). Each chip's HBM serves the ops that need it in the order they
   are ready (a transfer once it has its buffer), one after another for each op's HBM time;
   an op goes on to its link or engine only when the HBM starts on its bytes.
5. **Servers.** Every link direction is a first come, first served server, held by a
   transfer's hop until that hop ends; every chip's reduce engine one held for a
   reduction's own work. Without contention every (sender, receiver) pair has a link of its
   own at every hop (per route: lanes that cross other links are other links), and every
   reduction an engine of its own. Copies take no server.
6. **Hops.** A transfer's first hop ends no earlier than its whole after it starts; hop
   ``h + 1`` asks for its link one latency of hop ``h``'s link after hop ``h`` started and
   ends no earlier than its own work on its link after it starts or that latency after hop
   ``h`` ended.
7. **Accumulators.** Reductions into one accumulator end in the order they start, each at
   least one grain after the one before.
8. **Ties** (the engine's order, which this oracle states instead of inheriting; ADR 0026):
   what is due at the same time is taken servers' releases first; then hops past the first
   (a transfer already on its way), more hops travelled first, then by op id; then by op id,
   for one op a staging buffer coming back before its first hop. So a link serves
   simultaneous requests by hops travelled, then in program order.
9. **The start** (the engine's, stated here too): when no link's latency is 0, no buffer can
   come back at time 0, so the transfers ready from the start take their pairs' buffers in
   id order before anything runs. This differs from rule 8 in one corner only: an op that
   takes no time at all at time 0 (no bytes to move) makes a transfer ready whose id is
   lower than one ready from the start, on the same pair, with no buffer left for both;
   the later id then gets the buffer.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from sim.fabric import (
    COPY,
    HBM_ENGINE,
    REDUCE_ENGINE,
    REDUCTION,
    STAGES,
    TRANSFER,
    FabricProgram,
    Network,
)
from sim.oplog import OpLog

RELEASE, STEP = 0, 1  # what is due: a server frees, or an op (or a buffer) takes a step


def reference(net: Network, program: FabricProgram, *, contention: bool = True) -> OpLog:
    """The op log of ``program`` on ``net`` by the rules of the module docstring."""
    n = len(program)
    lanes = program.lane or [0] * n
    route = [program_route(net, program, i, lanes[i]) for i in range(n)]
    lat = net.link_latencies_ps

    def costs(i: int, nbytes: int, mem: int) -> tuple[int, int]:  # rule 1: own work, HBM
        k = program.kind[i]
        if k == TRANSFER:
            return net.link_ps(nbytes, route[i][0]), net.hbm_ps(mem)
        return (net.reduce_ps(nbytes) if k == REDUCTION else 0), net.hbm_ps(mem)

    own, whole, grain, hbm_time = [], [], [], []
    hop_work: list[list[int]] = []  # a transfer's work on each link of its route
    arrive_grain = []  # rule 1: the grain a transfer's data reaches its receiver at
    for i in range(n):
        b, k = program.nbytes[i], program.kind[i]
        mem = program.hbm[i] if program.hbm[i] >= 0 else (2 * b if k == REDUCTION else b)
        a, h = costs(i, b, mem)
        g = min(b, net.burst_bytes)
        ga, gh = costs(i, g, mem * g // b if b else 0)  # one burst's share of the HBM bytes
        own.append(a)
        hbm_time.append(h)
        whole.append(max(a, h))
        grain.append(max(ga, gh))
        hop_work.append([net.link_ps(b, link) for link in route[i]])
        arrive_grain.append(max([grain[i], *(net.link_ps(g, link) for link in route[i])]))

    users: list[list[int]] = [[] for _ in range(n)]  # who needs op i, in id order
    for j, deps in enumerate(program.deps):
        for i in sorted(set(deps)):
            users[i].append(j)
    missing = [len(set(d)) for d in program.deps]
    first_in = [0] * n  # rule 2: when the first burst of every input is there
    last_in = [0] * n  # ... and the last byte
    consumed = {t for t in program.consumes if t >= 0}
    into = program.into or [-1] * n
    last_add: dict[int, int] = {}

    lanes = program.lane or [0] * n
    buffers = {
        (s, d, g): net.staging_buffers
        for s in range(net.chips)
        for d in range(net.chips)
        for g in set(lanes)
    }
    waiting_for_buffer: dict[tuple[int, int, int], list[int]] = {pair: [] for pair in buffers}
    has_buffer = [False] * n
    hbm_free = [0] * net.chips
    hbm_done = [False] * n
    server_busy: dict[tuple[Any, ...], bool] = {}
    server_queue: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    prev_hop_end = [0] * n
    records: list[tuple[int, int, int, int]] = []  # (op, hop, start, end)
    due: list[tuple[int, int, int, int, int, tuple[Any, ...]]] = []

    def put(t: int, kind: int, a: int, b: int, server: tuple[Any, ...] = ()) -> None:
        travelled = b if kind == STEP and b > 0 else 0  # rule 8: more hops travelled first
        bisect.insort(due, (t, kind, -travelled, a, b, server))

    def server_of(i: int, hop: int) -> tuple[Any, ...] | None:  # rule 5
        k = program.kind[i]
        if k == COPY or (k == REDUCTION and not contention):
            return None
        if k == REDUCTION:
            return ("reduce", program.src[i])
        if contention:
            return ("link", route[i][hop])
        return ("pair", program.src[i], program.dst[i], route[i], hop)

    def deliver(i: int, begin: int, end: int, g: int, started: int) -> None:  # rule 2
        lo, hi = program.span[i]
        for j in users[i]:
            x, y = program.span[j]
            if hi > lo and x < hi and lo < y and (x > lo or y < hi):  # j needs a part of i's
                at = max(x, lo) - lo
                if at >= min(y, hi) - lo:
                    at = 0
                first = begin + (end - begin) * at // (hi - lo) + g
                first -= whole[j] * (max(x, lo) - x) // (y - x)
            else:
                first = begin + g
            first_in[j] = max(first_in[j], min(first, end), started)
            last_in[j] = max(last_in[j], end)
            missing[j] -= 1
            if missing[j] == 0:
                put(first_in[j], STEP, j, 0)

    def run(t: int, i: int, hop: int, server: tuple[Any, ...] | None) -> None:
        if program.kind[i] == TRANSFER:  # rule 6
            if hop == 0:
                end = max(t + whole[i], last_in[i] + grain[i])
            else:
                end = max(t + hop_work[i][hop], prev_hop_end[i] + lat[route[i][hop - 1]])
            prev_hop_end[i] = end
            put(end, RELEASE, 0, 0, server or ())
            flight = lat[route[i][hop]]
            if hop + 1 < len(route[i]):
                put(t + flight, STEP, i, hop + 1)
            else:
                deliver(i, t + flight, end + flight, arrive_grain[i], t)
        else:
            end = max(t + whole[i], last_in[i] + grain[i])
            g = into[i]
            if g >= 0:  # rule 7
                end = max(end, last_add.get(g, 0) + grain[i])
                last_add[g] = end
            if server is not None:
                put(t + own[i], RELEASE, 0, 0, server)
            t_back = program.consumes[i]
            if t_back >= 0:  # rule 3: the buffer flies back
                put(end + max(lat[link] for link in route[t_back]), STEP, t_back, -1)
            deliver(i, t, end, grain[i], t)
        records.append((i, hop, t, end))

    def got_buffer(i: int) -> bool:  # rule 3: take one of the pair's buffers, or queue for one
        pair = (program.src[i], program.dst[i], lanes[i])
        if not buffers[pair]:
            waiting_for_buffer[pair].append(i)
            return False
        buffers[pair] -= 1
        has_buffer[i] = True
        return True

    for i in range(n):  # rule 9: what is ready at the start takes its buffers first
        if not missing[i] and (min(lat, default=0) == 0 or i not in consumed or got_buffer(i)):
            put(0, STEP, i, 0)
    now = 0
    while due:
        t, kind, _travelled, i, hop, server = due.pop(0)
        if t < now:  # every rule above looks forward only
            raise AssertionError(f"the oracle went back in time: {t} ps after {now} ps")
        now = t
        if kind == RELEASE:
            queue = server_queue.get(server, [])
            if queue:
                j, h = queue.pop(0)
                run(t, j, h, server)
            else:
                server_busy[server] = False
            continue
        if hop < 0:  # a staging buffer comes back to the pair of transfer i
            pair = (program.src[i], program.dst[i], lanes[i])
            if waiting_for_buffer[pair]:
                j = waiting_for_buffer[pair].pop(0)
                has_buffer[j] = True
                put(t, STEP, j, 0)
            else:
                buffers[pair] += 1
            continue
        if hop == 0 and i in consumed and not has_buffer[i] and not got_buffer(i):  # rule 3
            continue
        if contention and hop == 0 and hbm_time[i] and not hbm_done[i]:  # rule 4
            hbm_done[i] = True
            chip = program.src[i]
            served = max(t, hbm_free[chip])
            hbm_free[chip] = served + hbm_time[i]
            if served > t:
                put(served, STEP, i, 0)
                continue
        srv = server_of(i, hop)
        if srv is None:
            run(t, i, hop, None)
        elif server_busy.get(srv):
            server_queue.setdefault(srv, []).append((i, hop))
        else:
            server_busy[srv] = True
            run(t, i, hop, srv)

    want = sum(len(route[i]) if program.kind[i] == TRANSFER else 1 for i in range(n))
    if len(records) != want:
        raise RuntimeError(f"fabric program did not finish: {len(records)} of {want} records")
    return _as_log(net, program, route, sorted(records))


def program_route(net: Network, program: FabricProgram, i: int, lane: int) -> tuple[int, ...]:
    """The links op ``i`` crosses (a transfer, on ``lane``), or none."""
    if program.kind[i] != TRANSFER:
        return ()
    return net.route(program.src[i], program.dst[i], lane)


def _as_log(
    net: Network,
    program: FabricProgram,
    route: list[tuple[int, ...]],
    records: list[tuple[int, int, int, int]],
) -> OpLog:
    """One record per hop of a transfer (on its link, at the chip that link belongs to: its
    sender, or the chip a switch port feeds) and per reduction (the chip's reduce engine) or
    copy (the chip's HBM)."""
    nlinks = len(net.links)
    cols: dict[str, list[int]] = {c: [] for c in ("op", "chip", "engine", "stage", "start")}
    cols.update(end=[], nbytes=[], tile=[])
    for i, hop, start, end in records:
        k = program.kind[i]
        if k == TRANSFER:
            link = route[i][hop]
            u, v = net.links[link]
            chip, engine, stage = (u if u < net.chips else v), link, "forward" if hop else "send"
        elif k == REDUCTION:
            chip, engine, stage = program.src[i], nlinks, "reduce"
        else:
            chip, engine, stage = program.src[i], nlinks + 1, "copy"
        for c, x in (("op", i), ("chip", chip), ("engine", engine), ("stage", STAGES.index(stage))):
            cols[c].append(x)
        cols["start"].append(start)
        cols["end"].append(end)
        cols["nbytes"].append(program.nbytes[i])
        cols["tile"].append(program.step[i])
    arrays = {c: np.asarray(v, dtype=np.int64) for c, v in cols.items()}
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, arrays)


def random_program(rng: np.random.Generator, p: int, size: int, lanes: int = 1) -> FabricProgram:
    """A valid program of ``size`` ops on ``p`` chips: transfers between random pairs, and
    reductions and copies that consume one of the transfers landed on their chip (or none),
    with random dependencies on earlier ops, spans, HBM bytes and accumulators; transfers
    on random lanes below ``lanes`` (``lanes`` 1: no lane list)."""
    prog = FabricProgram()
    landed: dict[int, list[int]] = {c: [] for c in range(p)}  # unconsumed transfers per chip
    firsts: dict[int, list[int]] = {c: [] for c in range(p)}  # accumulators per chip
    for i in range(size):
        kind = int(rng.choice([TRANSFER, TRANSFER, TRANSFER, REDUCTION, COPY]))
        nbytes = int(rng.choice([0, 2, 64, 300, 1000, 4096, 65_536, 200_000]))
        lo = int(rng.integers(0, 8))
        span = (0, 0) if rng.random() < 0.3 else (lo, lo + int(rng.integers(1, 8)))
        hbm = -1 if rng.random() < 0.6 else int(rng.choice([0, nbytes, 3 * nbytes + 5]))
        deps = {int(d) for d in rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False)}
        if kind == TRANSFER:
            src, dst = (int(x) for x in rng.choice(p, size=2, replace=False))
            lane = int(rng.integers(0, lanes)) if lanes > 1 else 0
            deps_t = tuple(sorted(deps))
            prog.add(TRANSFER, src, dst, nbytes, i % 3, deps_t, hbm=hbm, span=span, lane=lane)
            landed[dst].append(i)
            continue
        chip = int(rng.integers(0, p))
        consumes = -1
        if landed[chip] and rng.random() < 0.85:
            consumes = landed[chip].pop(int(rng.integers(0, len(landed[chip]))))
            deps.add(consumes)
        into = -1
        if kind == REDUCTION and rng.random() < 0.5:
            if firsts[chip] and rng.random() < 0.7:
                into = int(rng.choice(firsts[chip]))
            else:
                into = i
                firsts[chip].append(i)
        prog.add(kind, chip, chip, nbytes, i % 3, tuple(sorted(deps)), consumes, hbm, span, into)
    return prog
