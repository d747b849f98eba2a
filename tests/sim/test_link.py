"""The chip network: links and routes of each topology, and the link-level timing engine."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import load_topology
from sim.fabric import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    Network,
    arrival_ps,
    build_network,
    ring_route,
    simulate_fabric,
    torus_cycle,
)
from sim.oplog import OpLog
from sim.topology import Topology

BASE = load_topology()


def _topo(kind: str, p: int, dims: tuple[int, int] | None = None) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=dims or (1, p))


def _net(kind: str, p: int, dims: tuple[int, int] | None = None) -> Network:
    return build_network(_topo(kind, p, dims))


def _ring_distance(a: int, b: int, size: int) -> int:
    return min((a - b) % size, (b - a) % size)


def _endpoints(net: Network, src: int, dst: int) -> list[int]:
    """Nodes visited by the route, checking that consecutive links join up."""
    nodes = [src]
    for link in net.route(src, dst):
        u, v = net.links[link]
        assert u == nodes[-1], f"route {src}->{dst} is not a path: {net.route(src, dst)}"
        nodes.append(v)
    return nodes


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 9])
def test_ring_routes_take_the_shortest_way_round(p: int) -> None:
    """On a ring every route has min(d, p-d) hops and ends at its destination."""
    net = _net("ring", p)
    for s, d in itertools.permutations(range(p), 2):
        assert net.hops(s, d) == _ring_distance(s, d, p)
        assert _endpoints(net, s, d)[-1] == d


def test_ring_tie_goes_by_the_senders_parity() -> None:
    """At distance p/2 an even chip goes up and an odd chip goes down (ADR 0022)."""
    assert ring_route(1, 5, 8) == (0, 7, 6, 5)
    assert ring_route(5, 1, 8) == (4, 3, 2, 1)
    assert ring_route(2, 6, 8) == (3, 4, 5, 6)
    assert ring_route(6, 2, 8) == (7, 0, 1, 2)
    for p in (2, 3, 4, 7, 8):  # and the network's routes are ring_route's, tie included
        net = _net("ring", p)
        for s, d in itertools.permutations(range(p), 2):
            assert tuple(_endpoints(net, s, d)[1:]) == ring_route(s, d, p)


@pytest.mark.parametrize("p", [2, 3, 6])
def test_fully_connected_is_one_hop_per_pair(p: int) -> None:
    """A fully connected network has a link per ordered pair and one-hop routes."""
    net = _net("fully_connected", p)
    assert len(net.links) == p * (p - 1)
    assert all(net.hops(s, d) == 1 for s, d in itertools.permutations(range(p), 2))


@pytest.mark.parametrize("p", [2, 5, 8])
def test_switch_adds_a_hop(p: int) -> None:
    """Every chip has one link each way to the switch; every route is chip -> switch -> chip."""
    net = _net("switch", p)
    assert len(net.links) == 2 * p
    for s, d in itertools.permutations(range(p), 2):
        assert _endpoints(net, s, d) == [s, p, d]
    assert "link1->sw" in net.names and "linksw->1" in net.names


@pytest.mark.parametrize("dims", [(2, 4), (4, 4), (3, 3), (1, 5), (2, 2)])
def test_torus_routes_are_dimension_order(dims: tuple[int, int]) -> None:
    """Torus routes have the wrap-around Manhattan length and move along the row first."""
    rows, cols = dims
    net = _net("torus2d", rows * cols, dims)
    for s, d in itertools.permutations(range(rows * cols), 2):
        (r0, c0), (r1, c1) = divmod(s, cols), divmod(d, cols)
        assert net.hops(s, d) == _ring_distance(c0, c1, cols) + _ring_distance(r0, r1, rows)
        nodes = _endpoints(net, s, d)
        assert nodes[-1] == d
        moved_row = [divmod(a, cols)[0] != divmod(b, cols)[0] for a, b in itertools.pairwise(nodes)]
        assert moved_row == sorted(moved_row), f"route {s}->{d} changes row before column"


def test_link_names_name_both_ends() -> None:
    """Engine names read 'link<src>-><dst>' and every link of a ring is a neighbour link."""
    net = _net("ring", 4)
    assert set(net.names) == {f"link{i}->{(i + s) % 4}" for i in range(4) for s in (1, 3)}


@pytest.mark.parametrize(
    ("kind", "p", "dims"),
    [
        ("torus2d", 8, (2, 4)),
        ("torus2d", 16, (4, 4)),
        ("torus2d", 6, (3, 2)),
        ("torus2d", 9, (3, 3)),
        ("torus2d", 15, (3, 5)),
        ("torus2d", 35, (5, 7)),
        ("ring", 5, None),
    ],
)
def test_ring_order_is_a_cycle_of_neighbours(
    kind: str, p: int, dims: tuple[int, int] | None
) -> None:
    """The ring order visits every chip once, each next chip one hop away, the last one next to
    the first: a Hamiltonian cycle, on odd x odd tori too (those need a wrap-around link)."""
    net = _net(kind, p, dims)
    order = net.ring_order()
    assert sorted(order) == list(range(p))
    assert all(net.hops(a, b) == 1 for a, b in zip(order, order[1:] + order[:1], strict=True))


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["ring", "fully_connected", "switch", "torus2d"]),
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
)
def test_every_route_is_a_path_to_its_destination(kind: str, rows: int, cols: int) -> None:
    """For any topology and size, routes are connected link paths from source to destination."""
    p = rows * cols
    net = _net(kind, p, (rows, cols))
    for s, d in itertools.permutations(range(p), 2):
        assert _endpoints(net, s, d)[-1] == d
        assert len(set(net.route(s, d))) == net.hops(s, d), "a route reuses a link"


@pytest.mark.parametrize("rows", range(1, 8))
@pytest.mark.parametrize("cols", range(1, 8))
def test_torus_cycle_is_hamiltonian_for_every_shape(rows: int, cols: int) -> None:
    """Every cell once; consecutive cells (cyclically) differ by one step along one dimension,
    counting wrap-around (checked on coordinates, independently of the network's routes)."""
    cells = torus_cycle(rows, cols)
    assert sorted(cells) == [(r, c) for r in range(rows) for c in range(cols)]
    if rows * cols <= 2:
        return
    for (r0, c0), (r1, c1) in zip(cells, cells[1:] + cells[:1], strict=True):
        steps = sorted((_ring_distance(r0, r1, rows), _ring_distance(c0, c1, cols)))
        assert steps == [0, 1], f"{(r0, c0)} -> {(r1, c1)} is not one hop"


# --- timing -------------------------------------------------------------------------------


def _ps(nbytes: int, gbs: Fraction) -> int:
    """Picoseconds for nbytes at gbs GB/s, rounded up (1 GB/s = 1 byte/ns)."""
    exact = Fraction(nbytes * 1000) / gbs
    return -(-exact.numerator // exact.denominator)


ALPHA = BASE.chips.link_latency_ps
LINK_BW = BASE.chips.link_bw
REDUCE_BW = BASE.chips.reduce_bw
HBM_BW = BASE.hbm.bw


@pytest.mark.parametrize("hops", [1, 2, 3])
@pytest.mark.parametrize("nbytes", [2, 10_000, 1 << 20])
def test_unloaded_transfer_takes_hops_latencies_plus_bytes(hops: int, nbytes: int) -> None:
    """One transfer over h hops of a ring arrives at h * latency + bytes / bw (cut-through,
    latency is flight time); it holds each link for bytes / bw only."""
    net = _net("ring", 8)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, hops, nbytes, 0, ())
    log = simulate_fabric(net, prog)
    assert len(log) == hops
    assert arrival_ps(net, log)[0] == hops * ALPHA + _ps(nbytes, LINK_BW)
    assert set((log.end - log.start).tolist()) == {_ps(nbytes, LINK_BW)}
    assert list(log.stages[s] for s in log.stage) == ["send"] + ["forward"] * (hops - 1)


def test_switch_hop_adds_latency_only() -> None:
    """Through the switch a transfer arrives 2 latencies + bytes / bw after it leaves."""
    net = _net("switch", 4)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 3, 50_000, 0, ())
    assert arrival_ps(net, simulate_fabric(net, prog))[0] == 2 * ALPHA + _ps(50_000, LINK_BW)


@pytest.mark.parametrize("nbytes", [2, 4096, 1 << 20])
def test_back_to_back_transfers_overlap_their_latencies(nbytes: int) -> None:
    """Two transfers queued on one link: the second arrives latency + 2 bytes / bw after the
    start (not 2 latencies), so a saturated link delivers its bandwidth at any chunk size."""
    net = _net("fully_connected", 2)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, nbytes, 0, ())
    prog.add(TRANSFER, 0, 1, nbytes, 0, ())
    arrive = arrival_ps(net, simulate_fabric(net, prog))
    assert arrive[0] == ALPHA + _ps(nbytes, LINK_BW)
    assert arrive[1] == ALPHA + 2 * _ps(nbytes, LINK_BW)


def test_flows_sharing_a_link_take_turns() -> None:
    """Two transfers over the same link serialise; over different links they overlap."""
    occupy = _ps(4096, LINK_BW)
    net = _net("ring", 4)
    shared = FabricProgram()
    shared.add(TRANSFER, 0, 1, 4096, 0, ())
    shared.add(TRANSFER, 0, 2, 4096, 0, ())  # 0 -> 1 -> 2: its first hop is the same link
    assert arrival_ps(net, simulate_fabric(net, shared))[1] == 2 * occupy + 2 * ALPHA
    apart = FabricProgram()
    apart.add(TRANSFER, 0, 1, 4096, 0, ())
    apart.add(TRANSFER, 2, 3, 4096, 0, ())
    assert set(arrival_ps(net, simulate_fabric(net, apart)).values()) == {occupy + ALPHA}


def test_without_contention_only_a_pairs_own_chunks_queue() -> None:
    """contention=False (the model's critical path): the two flows over link 0->1 no
    longer take turns, but two chunks of one sender-receiver pair still do."""
    occupy = _ps(4096, LINK_BW)
    net = _net("ring", 4)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 4096, 0, (), hbm=0)
    prog.add(TRANSFER, 0, 2, 4096, 0, (), hbm=0)  # shares link 0->1 with the first
    prog.add(TRANSFER, 0, 1, 4096, 0, (), hbm=0)  # the first one's pair: queues behind it
    got = arrival_ps(net, simulate_fabric(net, prog, contention=False))
    assert got == {0: occupy + ALPHA, 1: occupy + 2 * ALPHA, 2: 2 * occupy + ALPHA}
    assert arrival_ps(net, simulate_fabric(net, prog))[1] == 2 * occupy + 2 * ALPHA


def test_one_transfer_at_a_time_per_link_under_load() -> None:
    """With every chip sending to every other on a ring, no link's records overlap in time."""
    net = _net("ring", 6)
    prog = FabricProgram()
    for s, d in itertools.permutations(range(6), 2):
        prog.add(TRANSFER, s, d, 3000, 0, ())
    log = simulate_fabric(net, prog)
    for eng in np.unique(log.engine):
        m = log.engine == eng
        start, end = np.sort(log.start[m]), np.sort(log.end[m])
        assert np.all(start[1:] >= end[:-1]), f"{log.engines[eng]} serves two at once"


def test_first_come_first_served_not_program_order() -> None:
    """A link serves the transfer that is ready first, even if it comes later in the program;
    a dependent transfer streams: it starts when the first burst of its input has arrived
    and ends no earlier than one burst after the input's last byte."""
    net = _net("fully_connected", 3)
    burst = _ps(BASE.hbm.burst_bytes, LINK_BW)
    prog = FabricProgram()
    slow = prog.add(TRANSFER, 1, 0, 100_000, 0, ())  # 1 -> 0 arrives late at chip 0
    late = prog.add(TRANSFER, 0, 2, 1000, 0, (slow,))  # waits for it
    early = prog.add(TRANSFER, 0, 2, 200_000, 0, ())  # ready at 0: goes first on 0 -> 2
    log = simulate_fabric(net, prog)
    rec = {int(o): (int(s), int(e)) for o, s, e in zip(log.op, log.start, log.end, strict=True)}
    assert rec[early][0] == 0
    assert rec[late][0] == max(ALPHA + burst, rec[early][1])
    assert rec[late][1] == max(
        rec[late][0] + _ps(1000, LINK_BW), arrival_ps(net, log)[slow] + burst
    )


def test_reduce_engine_waits_for_data_and_serves_one_at_a_time() -> None:
    """Reductions stream their transfer (start at its first burst, end a burst after its last
    byte) and share the chip's one engine as a bandwidth server: the second starts once the
    first's work (the longer of bytes / reduce_bw and its HBM traffic) is done."""
    net = _net("fully_connected", 3)
    big = 1 << 20
    prog = FabricProgram()
    a = prog.add(TRANSFER, 1, 0, big, 0, (), hbm=0)
    b = prog.add(TRANSFER, 2, 0, big, 0, (), hbm=0)
    prog.add(REDUCTION, 0, 0, big, 0, (a,), a)
    prog.add(REDUCTION, 0, 0, big, 0, (b,), b)
    log = simulate_fabric(net, prog)
    red = np.flatnonzero(log.stage == log.stages.index("reduce"))
    (s1, s2), (e1, e2) = log.start[red].tolist(), log.end[red].tolist()
    burst = BASE.hbm.burst_bytes
    first = ALPHA + _ps(burst, LINK_BW)
    work = max(_ps(big, REDUCE_BW), _ps(2 * big, HBM_BW))
    arrive = ALPHA + _ps(big, LINK_BW)
    assert s1 == first and s2 == max(first, s1 + work)
    tail = max(_ps(burst, REDUCE_BW), _ps(2 * burst, HBM_BW))
    assert e1 == max(s1 + work, arrive + tail) and e2 == max(s2 + work, arrive + tail)
    assert list(log.engines[e] for e in log.engine[red]) == ["reduce", "reduce"]


def test_hbm_is_shared_by_sends_and_copies() -> None:
    """A copy into HBM and a send out of HBM on one chip take turns on its HBM: the send
    that reads 1 MiB delays the copy that lands meanwhile."""
    net = _net("fully_connected", 3)
    big = 1 << 20
    prog = FabricProgram()
    t = prog.add(TRANSFER, 1, 0, 64, 0, (), hbm=0)
    prog.add(COPY, 0, 0, 64, 0, (t,), t)
    prog.add(TRANSFER, 0, 2, big, 0, ())  # starts at 0 and holds chip 0's HBM for big / hbm_bw
    log = simulate_fabric(net, prog)
    copy = log.stage == log.stages.index("copy")
    assert int(log.start[copy][0]) == max(ALPHA + _ps(64, LINK_BW), _ps(big, HBM_BW))


def test_a_send_waiting_for_hbm_does_not_hold_its_link() -> None:
    """A send whose chip's HBM is busy is served first, then takes its link: meanwhile the
    link carries a forwarded chunk (no HBM) queued after it (ADR 0016; before, the waiting
    send held the link idle and the chunk left 25 us late)."""
    net = _net("fully_connected", 3)
    big = 1 << 20
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 2, big, 0, ())  # reads chip 0's HBM for big / hbm_bw from 0
    waits = prog.add(TRANSFER, 0, 1, big, 0, ())  # must wait for that HBM
    forward = prog.add(TRANSFER, 0, 1, 4096, 0, (), hbm=0)  # same link, streams on chip
    log = simulate_fabric(net, prog)
    start = dict(zip(log.op.tolist(), log.start.tolist(), strict=True))
    end = dict(zip(log.op.tolist(), log.end.tolist(), strict=True))
    assert start[forward] == 0 and end[forward] == _ps(4096, LINK_BW)
    assert start[waits] == _ps(big, HBM_BW)  # > the forward's end: the link was free for it
    assert end[waits] == start[waits] + _ps(big, LINK_BW)


def test_reductions_into_one_accumulator_add_in_the_order_their_data_comes() -> None:
    """Two reductions into one accumulator (``into``) do not wait for each other in program
    order: the one whose data comes first adds first, the other ends one burst after it
    (sums commute). Chip 0 of a 4-ring gets chip 2's chunk over two hops, chip 1's over one."""
    net = _net("ring", 4)
    nb = 64 * 1024
    prog = FabricProgram()
    far = prog.add(TRANSFER, 2, 0, nb, 0, (), span=(0, nb // 2))
    near = prog.add(TRANSFER, 1, 0, nb, 0, (), span=(0, nb // 2))
    r_far = prog.add(REDUCTION, 0, 0, nb, 0, (far,), far, span=(0, nb // 2))
    r_near = prog.add(REDUCTION, 0, 0, nb, 0, (near,), near, span=(0, nb // 2), into=r_far)
    prog.into[r_far] = r_far
    log = simulate_fabric(net, prog)
    red = log.stage == log.stages.index("reduce")
    start = dict(zip(log.op[red].tolist(), log.start[red].tolist(), strict=True))
    end = dict(zip(log.op[red].tolist(), log.end[red].tolist(), strict=True))
    arrive = arrival_ps(net, log)
    assert arrive[near] < arrive[far]
    assert start[r_near] < start[r_far]
    grain = max(_ps(BASE.hbm.burst_bytes, REDUCE_BW), _ps(2 * BASE.hbm.burst_bytes, HBM_BW))
    assert end[r_far] >= end[r_near] + grain
    # the same reductions chained in program order (the old direct program): near waits
    prog.into[r_far] = prog.into[r_near] = -1
    prog.deps[r_near] = (near, r_far)
    log = simulate_fabric(net, prog)
    red = log.stage == log.stages.index("reduce")
    chained = dict(zip(log.op[red].tolist(), log.start[red].tolist(), strict=True))
    assert chained[r_near] > chained[r_far]


def test_an_accumulator_must_name_its_first_reduction() -> None:
    net = _net("fully_connected", 3)
    prog = FabricProgram()
    t = prog.add(TRANSFER, 1, 0, 64, 0, ())
    prog.add(REDUCTION, 0, 0, 64, 0, (t,), t, into=5)
    with pytest.raises(ValueError, match="into"):
        simulate_fabric(net, prog)


def test_staging_buffers_make_the_sender_wait(make_topo) -> None:  # type: ignore[no-untyped-def]
    """With one staging buffer per peer, the second chunk cannot leave before the receiver
    has consumed the first and its credit has flown back (one more latency)."""
    net = build_network(make_topo(chips__staging_buffers=1, chips__count=2))
    prog = FabricProgram()
    t0 = prog.add(TRANSFER, 0, 1, 4096, 0, (), hbm=0)
    t1 = prog.add(TRANSFER, 0, 1, 4096, 0, (), hbm=0)
    c0 = prog.add(COPY, 1, 1, 4096, 0, (t0,), t0)
    prog.add(COPY, 1, 1, 4096, 0, (t1, c0), t1)
    log = simulate_fabric(net, prog)
    sends = log.stage == log.stages.index("send")
    burst = BASE.hbm.burst_bytes
    copy_start = ALPHA + _ps(burst, LINK_BW)
    copy_end = max(copy_start + _ps(4096, HBM_BW), ALPHA + _ps(4096, LINK_BW) + _ps(burst, HBM_BW))
    assert log.start[sends].tolist() == [0, copy_end + ALPHA]


def test_dependencies_must_point_backwards() -> None:
    """An op that depends on itself or a later op is rejected with the op ids."""
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 10, 0, (1,))
    prog.add(TRANSFER, 1, 0, 10, 0, ())
    with pytest.raises(ValueError, match="op 0 depends on op 1"):
        simulate_fabric(_net("ring", 2), prog)


def _link_records(log: OpLog, name: str) -> list[tuple[int, int, int]]:
    """(op, start, end) of every record on link ``name``, by start."""
    on = np.flatnonzero(log.engine == log.engines.index(name))
    return sorted((int(log.start[r]), int(log.end[r]), int(log.op[r])) for r in on)


def test_a_dependent_never_starts_before_its_last_producer_starts() -> None:
    """A transfer needing the first half of a producer's span may start early by the time it
    streams its own bytes before that part (ADR 0005 decision 4), but not before that producer
    is under way (ADR 0031): the engine decides it when the producer starts, and a start in
    its past took link 0 -> 2 while ``block`` still held it (two records at once). On 3 chips
    fully connected, 50 GB/s (20 ps a byte), latency 1 us, burst 256 B: ``second`` waits on
    link 1 -> 0 behind ``long`` until 20.04 us; early start 21.04 us + one burst - half of
    ``dep``'s 20 us = 11.045 us, which is before 20.04 us, so ``dep`` starts at 20.04 us (link
    0 -> 2 free since 15 us) and ends 20 us later (its last input byte came at 21.12 us)."""
    net = _net("fully_connected", 3)
    assert LINK_BW == 50 and ALPHA == 1_000_000 and BASE.hbm.burst_bytes == 256  # as below
    prog = FabricProgram()
    first = prog.add(TRANSFER, 1, 0, 2000, 0, (), hbm=0, span=(0, 1000))
    prog.add(TRANSFER, 1, 0, 1_000_000, 0, (), hbm=0)  # long: holds 1 -> 0 until 20.04 us
    second = prog.add(TRANSFER, 1, 0, 4000, 0, (), hbm=0, span=(1000, 3000))
    dep = prog.add(TRANSFER, 0, 2, 1_000_000, 1, (first, second), hbm=0, span=(0, 2000))
    block = prog.add(TRANSFER, 0, 2, 750_000, 0, (), hbm=0)  # holds 0 -> 2 from 0 to 15 us
    log = simulate_fabric(net, prog)
    assert _link_records(log, "link1->0")[2] == (20_040_000, 20_120_000, second)
    assert _link_records(log, "link0->2") == [
        (0, 15_000_000, block),
        (20_040_000, 40_040_000, dep),
    ]
