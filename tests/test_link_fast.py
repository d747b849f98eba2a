"""The fast paths of the fabric timing and the direct collective against the engine they replace.

``_reference`` below is ``simulate_fabric`` as it was before the fast paths (event by
event, one heap entry per link release, records sorted at the end), with ADR 0016's two
rules written into it the plain way (an op is served by its chip's HBM before it takes its
link or engine; adds into one accumulator end one burst apart, in the order they start):
the oracle. Every fast
path must give a bit-identical op log (every start, end, engine, chip, byte count), program
or replayed result, with and without contention, on every topology and algorithm.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import deque

import numpy as np
import pytest

import sim.collectives as ar
import sim.collectives.compile as ar_compile
import sim.collectives.verify as ar_replay
from sim import load_topology
from sim.fabric import (
    COPY,
    COPY_STAGE,
    FORWARD,
    HBM_ENGINE,
    REDUCE,
    REDUCE_ENGINE,
    REDUCTION,
    SEND,
    STAGES,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    hbm_default,
    simulate_fabric,
)
from sim.fabric.holds import op_ps as _op_ps
from sim.fabric.one_shot import one_shot as _one_shot
from sim.fabric.program import dependents_of as _dependents
from sim.fabric.rotation import rotation_invariant as _rotation_invariant
from sim.oplog import OpLog
from sim.topology import Topology

BASE = load_topology()
DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3)}
TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")
# sizes: one element, uneven chunks (not a power of two of elements), several full chunks
SIZES = (2, 65_536 + 6, 3 * 1024 * 1024 + 2)


def _topo(kind: str, p: int, **chips: int) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=DIMS.get(p, (1, p)), **chips)


def _configs(kind: str) -> list[tuple[int, str, int, int | None]]:
    chips = (4, 6, 9) if kind == "torus2d" else (2, 3, 5, 8)
    return [
        (p, algorithm, n, chunk)
        for p in chips
        for algorithm in ar.algorithms_for(kind)
        for n in SIZES
        for chunk in ((None, 64 * 1024) if n > 2 else (None,))
    ]


def _program(topo: Topology, algorithm: str, n: int, chunk: int | None) -> FabricProgram:
    net = build_network(topo)
    schedule = ar.build_schedule(topo, n, algorithm, chunk_bytes=chunk, network=net)
    return ar.fabric_program(schedule).program


@pytest.mark.parametrize("contention", [True, False])
@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_timing_is_the_reference_engines(kind: str, contention: bool) -> None:
    """Every algorithm, chip count, size and chunk size: the same log as the oracle."""
    checked = 0
    for p, algorithm, n, chunk in _configs(kind):
        topo = _topo(kind, p)
        net = build_network(topo)
        prog = _program(topo, algorithm, n, chunk)
        got = simulate_fabric(net, prog, contention=contention)
        assert got.equals(_reference(net, prog, contention=contention)), (p, algorithm, n, chunk)
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("buffers", [1, 2, 3])
@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_with_few_staging_buffers_is_the_reference(kind: str, buffers: int) -> None:
    """Few staging buffers: transfers wait for credits, the credit pool of the contention-free
    path decides (its rounds must take the earliest credit back, whichever round returned it)."""
    p = 4 if kind == "torus2d" else 5
    topo = _topo(kind, p, staging_buffers=buffers)
    net = build_network(topo)
    for n, chunk in ((3 * 1024 * 1024 + 2, None), (200_002, 16 * 1024)):
        prog = _program(topo, "direct", n, chunk)
        assert _one_shot(net, prog) is not None  # the fast path is the one under test
        for contention in (True, False):
            got = simulate_fabric(net, prog, contention=contention)
            assert got.equals(_reference(net, prog, contention=contention)), (n, contention)


def test_the_one_shot_path_takes_direct_only() -> None:
    """The contention-free fast path recognises direct's programs and nothing else; a direct
    program that no longer has its shape (one dependency more) falls back and still agrees."""
    topo = _topo("ring", 4)
    net = build_network(topo)
    for algorithm in ar.ALGORITHMS[:4]:
        prog = _program(topo, algorithm, 65_536 + 6, None)
        assert (_one_shot(net, prog) is not None) == (algorithm == "direct"), algorithm
    prog = _program(topo, "direct", 65_536 + 6, None)
    half = len(prog) // 2
    prog.deps[half + 5] = (*prog.deps[half + 5], half + 1)  # reduction 5 also waits for 1
    assert _one_shot(net, prog) is None
    got = simulate_fabric(net, prog, contention=False)
    assert got.equals(_reference(net, prog, contention=False))


def test_the_rotation_path_takes_direct_on_fully_connected_and_switch_only() -> None:
    """With contention, direct on fully connected and switch networks is timed from one
    chip's share of its events (turning the chips maps the program onto itself); on rings
    and tori (a tie at half the ring goes one way from one chip, the other way from
    another) it is not. The same messages in sender order (not offset order) fall back to
    the event loop and still agree with the oracle."""
    for kind in TOPOLOGIES:
        for p in (4, 6) if kind == "torus2d" else (2, 3, 5, 8):
            topo = _topo(kind, p)
            net = build_network(topo)
            prog = _program(topo, "direct", 3 * 1024 * 1024 + 2, None)
            shape = _one_shot(net, prog)
            assert shape is not None
            want = kind in ("fully_connected", "switch")
            assert _rotation_invariant(net, prog, shape) == want, (kind, p)
    for kind in ("fully_connected", "switch"):
        topo = _topo(kind, 5)
        net = build_network(topo)
        schedule = ar.build_schedule(topo, 200_002, "direct", chunk_bytes=16 * 1024)
        by_sender = (tuple(sorted(schedule.steps[0], key=lambda m: (m.src, m.dst))),)
        prog = ar.fabric_program(dataclasses.replace(schedule, steps=by_sender)).program
        shape = _one_shot(net, prog)
        assert shape is not None and not _rotation_invariant(net, prog, shape)
        assert simulate_fabric(net, prog).equals(_reference(net, prog)), kind


@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_program_is_the_general_builders(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The column-built program of direct equals the one the general loop builds."""
    configs = [(p, n, None) for p in (2, 4, 6) for n in (2, 6, 65_536 + 6, 3 << 20)]
    configs += [(p, n, c) for p in (2, 4) for n in (6, 1000) for c in (2, 64)]  # many chunks
    for p, n, chunk in configs:
        topo = _topo(kind, p)
        schedule = ar.build_schedule(topo, n, "direct", chunk_bytes=chunk)
        fast = ar.fabric_program(schedule)
        with monkeypatch.context() as m:
            m.setattr(ar_compile, "_one_shot_program", lambda s: None)
            slow = ar.fabric_program(schedule)
        assert dataclasses.asdict(fast) == dataclasses.asdict(slow), (p, n, chunk)
    assert ar_compile._one_shot_program(ar.build_schedule(_topo(kind, 4), 1000, "ring")) is None


@pytest.mark.parametrize("kind", TOPOLOGIES)
def test_direct_replay_is_the_ordered_replay(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Summing direct's reductions in numpy gives what replaying the log in time order gives,
    and a log with a reduction left out is caught (#wrong > 0) as it was."""
    for p, n in itertools.product((2, 4, 6), (2, 65_536 + 6, 3 << 20)):
        run = ar.allreduce(_topo(kind, p), n, "direct")
        with monkeypatch.context() as m:
            m.setattr(ar_replay, "_replay_sums", lambda *a: None)
            slow = ar.replay(run.schedule, run.network, run.compiled, run.log)
        assert run.wrong == 0
        for got, want in zip(
            (run.final.a, run.final.b, run.final.mask), (slow.a, slow.b, slow.mask), strict=True
        ):
            assert np.array_equal(got, want), (p, n)
    keep = np.ones(len(run.log), dtype=bool)
    keep[np.flatnonzero(run.log.stage == REDUCE)[3]] = False
    cols = {
        c: run.log.column(c)[keep]
        for c in ("chip", "engine", "stage", "op", "start", "end", "nbytes", "tile")
    }
    short = OpLog.from_columns(run.log.engines, run.log.stages, cols)
    final = ar.replay(run.schedule, run.network, run.compiled, short)
    assert ar.check(run.schedule, run.compiled.bounds, final)[0] > 0


# --- the oracle: simulate_fabric before the fast paths -------------------------------------------


def _reference_holds(
    net: Network, program: FabricProgram
) -> tuple[list[int], list[int], list[int], list[int]]:
    first, hbm, total, burst = [], [], [], []
    seen: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    for key in zip(program.kind, program.nbytes, program.hbm, strict=True):
        got = seen.get(key)
        if got is None:
            k, b, m = key
            mem = hbm_default(k, b) if m < 0 else m
            a, h = _op_ps(net, k, b, mem)
            g = min(b, net.burst_bytes)
            ga, gh = _op_ps(net, k, g, mem * g // b if b else 0)
            got = seen[key] = (a, h, max(a, h), max(ga, gh))
        first.append(got[0])
        hbm.append(got[1])
        total.append(got[2])
        burst.append(got[3])
    return first, hbm, total, burst


def _reference(net: Network, program: FabricProgram, *, contention: bool = True) -> OpLog:
    """Time ``program`` on ``net`` (module docstring): a heap of ``(time, op id, hop)`` events.

    Every link direction and reduce engine is a FIFO server: an op that is ready while it is
    busy queues and starts when it frees (first come, first served; equal times in program
    order). A transfer occupies each link of its route for ``bytes / link_bw``; its first hop
    also reads the sender's HBM. Hop ``i+1`` starts ``latency`` after hop ``i`` started (or
    later, when its link frees) and cannot end before hop ``i`` ended plus ``latency``; the
    data has arrived ``latency`` after the last hop ends. Each chip's HBM is one bandwidth
    server of requests in the order ops are ready; an op takes its link or engine once its
    HBM bytes start being served (ADR 0016).

    Ops **stream** their inputs, at the granule of one HBM burst: an op may start once the
    first burst of each input is there (a transfer's first burst has arrived, a reduction
    or copy has produced its first burst) and cannot end before one burst after its last
    input byte. A link direction is held until its transfer ends; the reduce engine and HBM
    are bandwidth servers, busy for an op's work only. A transfer whose data a later op
    consumes first takes one of the receiver's ``staging_buffers`` for its (sender,
    receiver) pair and gets it back ``latency`` after the consumer ends (the credit flies
    back). Returns one record per hop and per reduction or copy, sorted by op id and hop;
    ``tile`` holds the op's step.

    ``contention=False`` times the same program as if flows did not contend: each (sender,
    receiver) pair has a link of its own at every hop (its chunks still queue behind each
    other), every op has a reduce engine and HBM to itself; staging buffers are as in the
    machine. That is the congestion-unaware critical path of
    :func:`sim.collectives.model.model`.
    """
    n = len(program)
    kind, src, dst, step = program.kind, program.src, program.dst, program.step
    first, hbm_hold, total, burst = _reference_holds(net, program)
    dependents = _dependents(program)
    waiting = [len(d) for d in program.deps]
    p, lat, routes = net.chips, net.latency_ps, net.routes
    nlinks = len(net.links)
    staged = [False] * n
    for t in program.consumes:
        if t >= 0:
            staged[t] = True
    credits = [net.staging_buffers] * (p * p)
    held: list[deque[int]] = [deque() for _ in range(p * p)]
    granted = [False] * n
    head = [0] * n  # when the first burst of every input is there
    tail = [0] * n  # when the last byte of every input is there
    hop_end = [0] * n
    hops = max((len(r) for row in routes for r in row), default=1)
    servers = nlinks + p if contention else nlinks + p + p * p * hops
    busy = [False] * servers  # links, reduce engines, then (contention=False) pair links
    queue: list[deque[tuple[int, int]]] = [deque() for _ in range(servers)]
    hbm_free = [0] * p
    asked = [False] * n
    into = program.into or [-1] * n
    acc_end: dict[int, int] = {}
    heap = [(0, i, 0) for i in range(n) if not waiting[i]]
    heapq.heapify(heap)
    r_op: list[int] = []
    r_hop: list[int] = []
    r_eng: list[int] = []
    r_stage: list[int] = []
    r_chip: list[int] = []
    r_start: list[int] = []
    r_end: list[int] = []
    link_chip = [net.link_chip(i) for i in range(nlinks)]
    reduce_engine, hbm_engine = nlinks, nlinks + 1
    pop, push = heapq.heappop, heapq.heappush

    spans = program.span

    def produced(i: int, begin: int, end: int, grain: int) -> None:
        """Op ``i`` delivers its span linearly from ``begin`` to ``end`` at the consumer's side:
        a dependent may start as soon as the part it needs first is coming, and cannot end
        before one burst after ``end``."""
        lo, hi = spans[i]
        width = hi - lo
        for j in dependents[i]:
            x, y = spans[j]
            if width > 0 and y > x and (x > lo or y < hi):  # j needs part of i's span
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
            if first_burst > head[j]:
                head[j] = first_burst
            if last > tail[j]:
                tail[j] = last
            waiting[j] -= 1
            if not waiting[j]:
                push(heap, (head[j], j, 0))

    def start(now: int, i: int, hop: int, res: int = -1) -> None:
        k = kind[i]
        if k == TRANSFER:
            route = routes[src[i]][dst[i]]
            link = route[hop]
            begin = now
            if hop == 0:
                end = max(begin + total[i], tail[i] + burst[i])
            else:
                end = max(begin + first[i], hop_end[i] + lat)
            hop_end[i] = end
            push(heap, (end, -1, res))
            r_eng.append(link)
            r_stage.append(FORWARD if hop else SEND)
            r_chip.append(link_chip[link])
            if hop + 1 < len(route):
                push(heap, (begin + lat, i, hop + 1))
            else:
                produced(i, begin + lat, end + lat, burst[i])
        else:
            chip = src[i]
            begin = now
            end = max(begin + total[i], tail[i] + burst[i])
            if into[i] >= 0:
                end = max(end, acc_end.get(into[i], 0) + burst[i])
                acc_end[into[i]] = end
            if k == REDUCTION and contention:  # busy for its work, not while data trickles in
                push(heap, (begin + first[i], -1, nlinks + chip))
            r_eng.append(reduce_engine if k == REDUCTION else hbm_engine)
            r_stage.append(REDUCE if k == REDUCTION else COPY_STAGE)
            r_chip.append(chip)
            if program.consumes[i] >= 0:
                push(heap, (end + lat, program.consumes[i], -1))
            produced(i, begin, end, burst[i])
        r_op.append(i)
        r_hop.append(hop)
        r_start.append(begin)
        r_end.append(end)

    while heap:
        t, i, hop = pop(heap)
        if i < 0:  # server `hop` frees: its first queued op starts
            if queue[hop]:
                j, h = queue[hop].popleft()
                start(t, j, h, hop)
            else:
                busy[hop] = False
            continue
        if hop < 0:  # a staging buffer comes back to the pair of transfer `i`
            conn = src[i] * p + dst[i]
            if held[conn]:
                j = held[conn].popleft()
                granted[j] = True
                push(heap, (t, j, 0))
            else:
                credits[conn] += 1
            continue
        k = kind[i]
        if k == TRANSFER and hop == 0 and staged[i] and not granted[i]:
            conn = src[i] * p + dst[i]
            if not credits[conn]:
                held[conn].append(i)
                continue
            credits[conn] -= 1
            granted[i] = True
        if contention and hop == 0 and hbm_hold[i] and not asked[i]:
            asked[i] = True  # a forwarded chunk streams from on-chip buffers (no HBM)
            served = max(t, hbm_free[src[i]])
            hbm_free[src[i]] = served + hbm_hold[i]
            if served > t:
                push(heap, (served, i, 0))
                continue
        if k == COPY:
            start(t, i, hop)
            continue
        if k != TRANSFER:
            res = nlinks + src[i]
        elif contention:
            res = routes[src[i]][dst[i]][hop]
        else:
            res = nlinks + p + (src[i] * p + dst[i]) * hops + hop
        if busy[res]:
            queue[res].append((i, hop))
        else:
            busy[res] = contention or k == TRANSFER
            start(t, i, hop, res)
    expected = sum(
        len(routes[s][d]) if k == TRANSFER else 1 for k, s, d in zip(kind, src, dst, strict=True)
    )
    if len(r_op) < expected:
        stuck = [i for i in range(n) if waiting[i]][:3]
        raise RuntimeError(
            f"fabric program did not finish ({len(r_op)} of {expected} records): a dependency "
            f"cycle or every staging buffer held by data that waits (e.g. ops {stuck}); "
            "raise chips.staging_buffers"
        )
    op = np.asarray(r_op, dtype=np.int64)
    order = np.lexsort((np.asarray(r_hop, dtype=np.int64), op))
    nbytes = np.asarray(program.nbytes, dtype=np.int64)[op]
    steps = np.asarray(step, dtype=np.int64)[op]
    cols = {
        "op": op[order],
        "chip": np.asarray(r_chip, dtype=np.int64)[order],
        "engine": np.asarray(r_eng, dtype=np.int64)[order],
        "stage": np.asarray(r_stage, dtype=np.int64)[order],
        "start": np.asarray(r_start, dtype=np.int64)[order],
        "end": np.asarray(r_end, dtype=np.int64)[order],
        "nbytes": nbytes[order],
        "tile": steps[order],
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)
