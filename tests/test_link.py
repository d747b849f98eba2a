"""The chip network: links and routes of each topology, and the link-level timing engine."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import load_topology
from sim.link import (
    REDUCTION,
    TRANSFER,
    FabricProgram,
    Network,
    build_network,
    ring_route,
    simulate_fabric,
)
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


def test_ring_tie_goes_both_ways() -> None:
    """At distance p/2 the lower chip goes up and the higher chip goes down."""
    assert ring_route(1, 5, 8) == (2, 3, 4, 5)
    assert ring_route(5, 1, 8) == (4, 3, 2, 1)


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
    [("torus2d", 8, (2, 4)), ("torus2d", 16, (4, 4)), ("torus2d", 6, (3, 2)), ("ring", 5, None)],
)
def test_ring_order_is_a_cycle_of_neighbours(
    kind: str, p: int, dims: tuple[int, int] | None
) -> None:
    """The ring order visits every chip once, each next chip one hop away (snake on a torus)."""
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


# --- timing -------------------------------------------------------------------------------


def _ps(nbytes: int, gbs: Fraction) -> int:
    """Picoseconds for nbytes at gbs GB/s, rounded up (1 GB/s = 1 byte/ns)."""
    exact = Fraction(nbytes * 1000) / gbs
    return -(-exact.numerator // exact.denominator)


ALPHA = BASE.chips.link_latency_ps
LINK_BW = BASE.chips.link_bw
REDUCE_BW = BASE.chips.reduce_bw


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_unloaded_transfer_takes_hops_latencies_plus_bytes(hops: int) -> None:
    """One transfer over h hops of a ring ends at h * latency + bytes / bw (cut-through)."""
    net = _net("ring", 8)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, hops, 10_000, 0, ())
    log = simulate_fabric(net, prog)
    assert len(log) == hops
    assert log.makespan_ps == hops * ALPHA + _ps(10_000, LINK_BW)
    assert list(log.stages[s] for s in log.stage) == ["send"] + ["forward"] * (hops - 1)


def test_flows_sharing_a_link_take_turns() -> None:
    """Two transfers over the same link serialise; over different links they overlap."""
    hold = ALPHA + _ps(4096, LINK_BW)
    net = _net("ring", 4)
    shared = FabricProgram()
    shared.add(TRANSFER, 0, 1, 4096, 0, ())
    shared.add(TRANSFER, 0, 2, 4096, 0, ())  # 0 -> 1 -> 2: its first hop is the same link
    assert simulate_fabric(net, shared).makespan_ps == 2 * hold + ALPHA
    apart = FabricProgram()
    apart.add(TRANSFER, 0, 1, 4096, 0, ())
    apart.add(TRANSFER, 2, 3, 4096, 0, ())
    assert simulate_fabric(net, apart).makespan_ps == hold


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
    """A link serves the transfer that is ready first, even if it comes later in the program."""
    net = _net("fully_connected", 3)
    prog = FabricProgram()
    slow = prog.add(TRANSFER, 1, 0, 100_000, 0, ())  # 1 -> 0 arrives late at chip 0
    late = prog.add(TRANSFER, 0, 2, 1000, 0, (slow,))  # waits for it
    early = prog.add(TRANSFER, 0, 2, 1000, 0, ())  # ready at 0: goes first on 0 -> 2
    log = simulate_fabric(net, prog)
    start = {int(o): int(s) for o, s in zip(log.op, log.start, strict=True)}
    assert start[early] == 0
    assert start[late] == ALPHA + _ps(100_000, LINK_BW)


def test_reduce_engine_waits_for_data_and_serves_one_at_a_time() -> None:
    """Reductions start after their transfer arrives and queue on the chip's one engine."""
    net = _net("fully_connected", 3)
    prog = FabricProgram()
    a = prog.add(TRANSFER, 1, 0, 8192, 0, ())
    b = prog.add(TRANSFER, 2, 0, 8192, 0, ())
    prog.add(REDUCTION, 0, 0, 8192, 0, (a,))
    prog.add(REDUCTION, 0, 0, 8192, 0, (b,))
    log = simulate_fabric(net, prog)
    arrive = ALPHA + _ps(8192, LINK_BW)
    assert log.makespan_ps == arrive + 2 * _ps(8192, REDUCE_BW)
    assert list(log.engines[e] for e in log.engine[-2:]) == ["reduce", "reduce"]


def test_dependencies_must_point_backwards() -> None:
    """An op that depends on itself or a later op is rejected with the op ids."""
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 10, 0, (1,))
    prog.add(TRANSFER, 1, 0, 10, 0, ())
    with pytest.raises(ValueError, match="op 0 depends on op 1"):
        simulate_fabric(_net("ring", 2), prog)
