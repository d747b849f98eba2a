"""Networks of dimensions (docs/adr/0021 decision 1): today's one-level networks unchanged,
several dimensions, parallel lanes, per-link bandwidth and latency, NIC latency, the derated
network of a protocol, the int16 limit; the engine against the independent oracle on them."""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import numpy as np
import pytest
from fabric_oracle import random_program, reference

import sim.collectives as ar
from sim import load_topology
from sim.errors import TopologyError
from sim.fabric import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    arrival_ps,
    build_network,
    ring_route,
    simulate_fabric,
)
from sim.fabric.dimensions import link_count
from sim.fabric.one_shot import one_shot
from sim.limits import MAX_CODE
from sim.topology import DimensionConfig, Topology
from sim.units import ps_for_bytes

BASE = load_topology()
DIMS = {4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3), 12: (3, 4), 15: (5, 3), 16: (4, 4)}


def _shorthand(kind: str, p: int, dims: tuple[int, int] | None = None) -> Topology:
    return BASE.replace_chips(count=p, topology=kind, torus_dims=dims or DIMS.get(p, (1, p)))


def _with_dims(*dims: DimensionConfig, topo: Topology = BASE) -> Topology:
    count = int(np.prod([d.size for d in dims]))
    chips = dataclasses.replace(topo.chips, dimensions=tuple(dims), count=count)
    return dataclasses.replace(topo, chips=chips)


def _dim(shape: str, size: int, bw: float = 50, lat: float = 1000, **kw: float) -> DimensionConfig:
    return DimensionConfig(shape, size, bw, lat, **kw)  # type: ignore[arg-type]


# --- today's builder, kept here as it was, to compare against -----------------------------------


def _old_node_path(kind: str, p: int, dims: tuple[int, int], src: int, dst: int) -> list[int]:
    if src == dst:
        return []
    if kind == "fully_connected":
        return [dst]
    if kind == "switch":
        return [p, dst]
    if kind == "ring":
        return list(ring_route(src, dst, p))
    rows, cols = dims
    (r0, c0), (r1, c1) = divmod(src, cols), divmod(dst, cols)
    path = [r0 * cols + c for c in ring_route(c0, c1, cols)]
    return path + [r * cols + c1 for r in ring_route(r0, r1, rows)]


def _old_build(topo: Topology) -> tuple[tuple[tuple[int, int], ...], tuple[object, ...]]:
    """The links and routes of the one-level builder before networks of dimensions."""
    cfg = topo.chips
    p, kind = cfg.count, cfg.topology
    dims = cfg.torus_dims if kind == "torus2d" else (1, p)
    node_paths = [[_old_node_path(kind, p, dims, s, d) for d in range(p)] for s in range(p)]
    links: dict[tuple[int, int], int] = {}
    if kind == "switch":
        for c in range(p):
            links.setdefault((c, p), len(links))
            links.setdefault((p, c), len(links))
    for s in range(p):
        for d in range(p):
            for uv in itertools.pairwise([s, *node_paths[s][d]]):
                links.setdefault(uv, len(links))
    order = sorted(links, key=lambda uv: (min(uv), uv))
    index = {uv: i for i, uv in enumerate(order)}
    routes = tuple(
        tuple(
            tuple(index[uv] for uv in itertools.pairwise([s, *node_paths[s][d]])) for d in range(p)
        )
        for s in range(p)
    )
    return tuple(order), routes


ONE_LEVEL = [
    *[("ring", p) for p in (1, 2, 3, 4, 5, 8, 9)],
    *[("fully_connected", p) for p in (1, 2, 3, 5, 8)],
    *[("switch", p) for p in (1, 2, 3, 5, 8)],
    *[("torus2d", p) for p in (4, 6, 8, 9, 12, 15, 16)],
]


@pytest.mark.parametrize(("kind", "p"), ONE_LEVEL)
def test_one_level_networks_are_todays(kind: str, p: int) -> None:
    """Built from dimensions, a one-level topology has today's links in today's order, today's
    routes, names and values; the same topology written as ``chips.dimensions`` gives the
    same network object."""
    topo = _shorthand(kind, p)
    net = build_network(topo)
    links, routes = _old_build(topo)
    assert net.links == links
    assert net.routes == routes
    assert net.kind == kind and net.chips == p and net.parallel == ()
    assert net.dims == (topo.chips.torus_dims if kind == "torus2d" else (1, p))
    assert net.latency_ps == topo.chips.link_latency_ps and net.link_bw == topo.chips.link_bw
    node = {x: str(x) for x in range(p)} | {p: "sw"}
    assert net.names == tuple(f"link{node[u]}->{node[v]}" for u, v in links)
    c = topo.chips
    if kind == "torus2d":
        rows, cols = c.torus_dims
        dims = (_dim("ring", cols, c.link_bw_gbs, c.link_latency_ns),)
        dims += (_dim("ring", rows, c.link_bw_gbs, c.link_latency_ns),)
    else:
        dims = (_dim(kind, p, c.link_bw_gbs, c.link_latency_ns),)
    assert build_network(_with_dims(*dims, topo=topo)) == net


def test_one_level_op_logs_are_todays_on_many_programs() -> None:
    """Every algorithm on every one-level shape: the op log on the network of dimensions
    equals the log on a network carrying today's links and routes (the old builder's)."""
    for kind, p in [("ring", 5), ("fully_connected", 4), ("switch", 3), ("torus2d", 6)]:
        topo = _shorthand(kind, p)
        net = build_network(topo)
        links, routes = _old_build(topo)
        old = dataclasses.replace(net, links=links, routes=routes)  # type: ignore[arg-type]
        for algorithm in ar.algorithms_for(kind):
            sched = ar.build_schedule(topo, 65_536 + 6, algorithm, network=net)
            prog = ar.fabric_program(sched).program
            for contention in (True, False):
                got = simulate_fabric(net, prog, contention=contention)
                assert got.equals(simulate_fabric(old, prog, contention=contention)), algorithm


# --- several dimensions -----------------------------------------------------------------------

MULTI = [
    (_dim("ring", 4), _dim("fully_connected", 3)),
    (_dim("fully_connected", 2), _dim("switch", 3)),
    (_dim("ring", 3), _dim("ring", 2), _dim("switch", 2)),
    (_dim("switch", 2), _dim("ring", 5)),
    (_dim("ring", 3), _dim("ring", 3), _dim("ring", 2)),
]


def _digits(c: int, sizes: list[int]) -> list[int]:
    out = []
    for s in sizes:
        c, r = divmod(c, s)
        out.append(r)
    return out


@pytest.mark.parametrize("dims", MULTI)
def test_routes_are_dimension_ordered(dims: tuple[DimensionConfig, ...]) -> None:
    """Every route is a path of links from its source to its destination; it changes the
    chips' digits lowest dimension first, each digit once; within a ring dimension it takes
    the shortest way (ring distance hops), within a fully connected one one hop, within a
    switch two hops through that group's switch (a node after the chips)."""
    net = build_network(_with_dims(*dims))
    sizes = [d.size for d in dims]
    p = net.chips
    assert p == int(np.prod(sizes)) and len(net.links) == link_count(dims)
    assert len(set(net.links)) == len(net.links)
    for s, d in itertools.permutations(range(p), 2):
        nodes = [s]
        for link in net.route(s, d):
            u, v = net.links[link]
            assert u == nodes[-1]
            nodes.append(v)
        assert nodes[-1] == d
        chips = [x for x in nodes if x < p]
        changed = []
        for a, b in itertools.pairwise(chips):
            da, db = _digits(a, sizes), _digits(b, sizes)
            moved = [k for k in range(len(sizes)) if da[k] != db[k]]
            assert len(moved) == 1, (s, d, nodes)
            changed.append(moved[0])
        assert changed == sorted(changed), (s, d, nodes)
        want = 0
        ds, dd = _digits(s, sizes), _digits(d, sizes)
        for k, dim in enumerate(dims):
            if ds[k] == dd[k]:
                continue
            if dim.shape == "ring":
                want += min((ds[k] - dd[k]) % dim.size, (dd[k] - ds[k]) % dim.size)
            else:
                want += 1 if dim.shape == "fully_connected" else 2
        assert net.hops(s, d) == want
        for a, b in itertools.pairwise(nodes):
            if b >= p:  # through a switch: both ends in one group of a switch dimension
                assert a < p and nodes[nodes.index(b) + 1] < p


def test_the_ring_tie_goes_by_the_senders_position_parity_inside_a_dimension() -> None:
    """On a 4-ring dimension a tie goes up from an even position, down from an odd one
    (ADR 0022): the position in the dimension counts, not the chip id."""
    net = build_network(_with_dims(_dim("fully_connected", 2), _dim("ring", 4)))
    up = [net.links[k] for k in net.route(0, 4)]  # positions 0 -> 2 of the ring, stride 2
    also_up = [net.links[k] for k in net.route(4, 0)]  # position 2 is even too
    down = [net.links[k] for k in net.route(2, 6)]  # position 1 -> 3: odd, down through 0
    assert up == [(0, 2), (2, 4)] and also_up == [(4, 6), (6, 0)]
    assert down == [(2, 0), (0, 6)]


def test_switch_nodes_and_names() -> None:
    """Two groups of a switch dimension: two switch nodes after the chips, named sw0, sw1;
    a single switch keeps today's name ``sw``."""
    net = build_network(_with_dims(_dim("ring", 2), _dim("switch", 2)))
    assert sorted({max(uv) for uv in net.links if max(uv) >= 4}) == [4, 5]
    assert "link0->sw0" in net.names and "linksw1->3" in net.names
    assert build_network(_shorthand("switch", 3)).names[0] == "link0->sw"


@pytest.mark.parametrize(
    "sizes", [(2, 3), (3, 3), (4, 2, 3), (3, 2), (2, 2, 2), (5,), (1, 4), (3, 1, 2)]
)
def test_ring_order_of_dimensions_steps_one_digit(sizes: tuple[int, ...]) -> None:
    """The ring order of a network of dimensions visits every chip once, each step one hop
    within a ring or fully connected dimension."""
    dims = [_dim("ring" if k % 2 else "fully_connected", s) for k, s in enumerate(sizes)]
    dims.append(_dim("switch", 1))
    net = build_network(_with_dims(*dims))
    assert net.kind == "dimensions"
    order = net.ring_order()
    assert sorted(order) == list(range(net.chips))
    assert all(net.hops(a, b) == 1 for a, b in itertools.pairwise(order))


# --- lanes --------------------------------------------------------------------------------------


def test_lanes_add_parallel_engines_with_readable_names() -> None:
    """``links: 2`` on a ring and ``ports: 3`` on a switch: lane 0's links and names are those
    of the network without lanes, in the same order; lane l's are the same pairs, named
    ``#l``; every name is distinct."""
    one = build_network(_with_dims(_dim("ring", 3), _dim("switch", 2)))
    dims = (_dim("ring", 3, links=2), _dim("switch", 2, ports=3))
    net = build_network(_with_dims(*dims))
    n0 = len(one.links)
    assert net.links[:n0] == one.links and net.names[:n0] == one.names
    assert net.routes == one.routes
    assert len(set(net.names)) == len(net.names) == link_count(dims)
    ring_links = sum(1 for u, v in one.links if max(u, v) < 6)
    assert len(net.links) == n0 + ring_links + 2 * (n0 - ring_links)
    assert "link3->4#1" in net.names and "link3->sw0#2" in net.names
    assert "link3->4#2" not in net.names  # the ring dimension has 2 lanes, not 3
    assert net.lanes == 6


def test_a_lanes_route_takes_lane_mod_each_dimensions_lanes() -> None:
    """Lane l takes, on every hop, lane ``l mod lanes`` of that hop's dimension: the same
    endpoints as lane 0, on that lane's engine."""
    net = build_network(_with_dims(_dim("ring", 3, links=2), _dim("switch", 2, ports=3)))
    lane_of = {}
    for g in net.parallel:
        for at, k in enumerate(g):
            lane_of[k] = at
    for s, d in itertools.permutations(range(net.chips), 2):
        base = net.route(s, d)
        assert net.route(s, d, 0) == base
        for lane in range(8):
            r = net.route(s, d, lane)
            assert [net.links[k] for k in r] == [net.links[k] for k in base]
            for k in r:
                u, v = net.links[k]
                lanes = 3 if max(u, v) >= net.chips else 2
                assert lane_of[k] == lane % lanes, (s, d, lane)


def test_transfers_on_two_lanes_do_not_share_a_link() -> None:
    """Two transfers 0 -> 1 on a ring with two links per neighbour: on one lane the second
    waits for the link; on two lanes it waits only for the sender's HBM, on its own engine."""
    net = build_network(_with_dims(_dim("ring", 2, links=2)))
    b = 1 << 20
    hold = net.link_ps(b)
    assert hold > net.hbm_ps(b)
    for lanes, second in (((0, 0), hold), ((0, 1), net.hbm_ps(b)), ((3, 2), net.hbm_ps(b))):
        prog = FabricProgram()
        for lane in lanes:
            prog.add(TRANSFER, 0, 1, b, 0, (), lane=lane)
        log = simulate_fabric(net, prog)
        assert log.start.tolist() == [0, second], lanes
        names = [log.engines[e] for e in log.engine.tolist()]
        assert names == ["link0->1" + ("#1" if lane % 2 else "") for lane in lanes]
        assert log.equals(reference(net, prog))


def test_the_lane_list_is_checked() -> None:
    net = build_network(_with_dims(_dim("ring", 2, links=2)))
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 64, 0, ())
    prog.add(TRANSFER, 0, 1, 64, 0, (), lane=1)
    assert prog.lane == [0, 1]
    prog.lane = [0]
    with pytest.raises(ValueError, match="lane entries"):
        simulate_fabric(net, prog)
    prog.lane = [0, -1]
    with pytest.raises(ValueError, match="lanes are 0 or more"):
        simulate_fabric(net, prog)


# --- per-link bandwidth and latency -------------------------------------------------------------


def test_links_carry_their_dimensions_values_and_the_nic() -> None:
    """Each link has its dimension's bandwidth and latency; a switch port, either way, adds
    the dimension's NIC latency; the one-value properties refuse a network that differs."""
    dims = (_dim("ring", 3, 64, 700), _dim("switch", 2, 25, 1000, nic_latency_ns=2000))
    net = build_network(_with_dims(*dims))
    for k, (u, v) in enumerate(net.links):
        if max(u, v) >= net.chips:
            assert (net.link_bws[k], net.link_latencies_ps[k]) == (25, 3_000_000)
        else:
            assert (net.link_bws[k], net.link_latencies_ps[k]) == (64, 700_000)
    assert not net.uniform
    with pytest.raises(ValueError, match="link_latencies_ps"):
        _ = net.latency_ps
    with pytest.raises(ValueError, match="link_bws"):
        _ = net.link_bw
    with pytest.raises(ValueError, match="link_bws"):
        net.link_ps(100)
    assert net.link_ps(100, 0) == ps_for_bytes(100, Fraction(64))


def test_an_unloaded_transfer_pays_every_latency_and_its_slowest_link() -> None:
    """Alone on the network, a transfer arrives after the sum of its links' latencies (two
    NIC latencies through a scale-out switch) plus its bytes over its slowest link (or its
    HBM time): cut-through over links that differ."""
    dims = (
        _dim("ring", 3, 64, 700),
        _dim("fully_connected", 2, 200, 300),
        _dim("switch", 2, 25, 1000, nic_latency_ns=2000),
    )
    net = build_network(_with_dims(*dims))
    for s, d in itertools.permutations(range(net.chips), 2):
        for b in (2, 4096, 1 << 20):
            prog = FabricProgram()
            prog.add(TRANSFER, s, d, b, 0, ())
            route = net.route(s, d)
            slowest = max([net.hbm_ps(b), *(net.link_ps(b, k) for k in route)])
            want = sum(net.link_latencies_ps[k] for k in route) + slowest
            assert arrival_ps(net, simulate_fabric(net, prog))[0] == want, (s, d, b)
    across = net.route(0, 6)
    assert sum(net.link_latencies_ps[k] for k in across) == 2 * (1_000_000 + 2_000_000)


def test_a_credit_flies_back_with_the_slowest_links_latency() -> None:
    """One staging buffer: the second transfer of a pair waits for the first's credit, which
    comes back the largest latency of the first's links (here its first hop's, through the
    NIC, not its last one's) after its reduction ends."""
    dims = (_dim("switch", 2, 25, 1000, nic_latency_ns=2000), _dim("ring", 2, 64, 700))
    net = dataclasses.replace(build_network(_with_dims(*dims)), staging_buffers=1)
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 3, 4096, 0, ())
    prog.add(REDUCTION, 3, 3, 4096, 0, (0,), consumes=0)
    prog.add(TRANSFER, 0, 3, 4096, 0, ())
    prog.add(REDUCTION, 3, 3, 4096, 0, (2,), consumes=2)
    log = simulate_fabric(net, prog)
    hops = len(net.route(0, 3))
    assert [net.link_latencies_ps[k] for k in net.route(0, 3)] == [3_000_000] * 2 + [700_000]
    red_end = int(log.end[hops])
    assert int(log.start[hops + 1]) == red_end + 3_000_000
    assert log.equals(reference(net, prog))


# --- the derated network of a protocol ----------------------------------------------------------


def test_a_derated_network_is_one_built_with_those_values() -> None:
    """``derated(f, x)``: every link's bandwidth times f, x more latency on every link that
    leaves a chip; on ring and fully connected networks (every link leaves a chip) that is the
    network built with ``f * bw`` and ``lat + x``, and times every program alike."""
    f, extra_ns = Fraction(92, 100), 250
    for shape, p in (("ring", 5), ("fully_connected", 4)):
        plain = _with_dims(_dim(shape, p, 50, 1000, links=2))
        direct = _with_dims(_dim(shape, p, 46, 1250, links=2))
        derated = build_network(plain).derated(f, extra_ns * 1000)
        assert derated == build_network(direct)
        sched = ar.build_schedule(plain, 200_002, "ring", network=build_network(plain))
        prog = ar.fabric_program(sched).program
        assert simulate_fabric(derated, prog).equals(simulate_fabric(build_network(direct), prog))
    net = build_network(_with_dims(_dim("switch", 3, 50, 1000)))
    out = net.derated(Fraction(1, 2), 7)
    for k, (u, _v) in enumerate(net.links):
        assert out.link_bws[k] == 25
        assert out.link_latencies_ps[k] == 1_000_000 + (7 if u < 3 else 0)
    with pytest.raises(ValueError, match="factor"):
        net.derated(Fraction(0), 0)


# --- the limit of int16 engine codes ------------------------------------------------------------


def test_link_count_counts_every_lane_and_is_refused_past_int16() -> None:
    """``link_count`` is the number of links built; past MAX_CODE engine codes the network is
    refused before anything is built, with the key to change."""
    for dims in [*MULTI, (_dim("ring", 2, links=3), _dim("switch", 3, ports=2))]:
        assert link_count(dims) == len(build_network(_with_dims(*dims)).links)
    big = (_dim("fully_connected", 8, links=4), _dim("switch", 1100, ports=1))
    assert link_count(big) + 1 > MAX_CODE
    with pytest.raises(TopologyError, match=r"chips\.dimensions.*int16"):
        build_network(_with_dims(*big))


# --- the engine against the oracle --------------------------------------------------------------


def _random_dims(rng: np.random.Generator) -> tuple[DimensionConfig, ...]:
    dims = []
    for _ in range(int(rng.integers(1, 4))):
        shape = str(rng.choice(["ring", "fully_connected", "switch"]))
        size = int(rng.integers(1, 4)) if len(dims) else int(rng.integers(2, 4))
        bw = float(rng.choice([12.5, 50, 64, 200]))
        lat = float(rng.choice([0, 0.007, 1, 250]))
        kw = {"ports" if shape == "switch" else "links": int(rng.integers(1, 4))}
        if shape == "switch":
            kw["nic_latency_ns"] = int(rng.choice([0, 0, 2]))
        dims.append(_dim(shape, size, bw, lat, **kw))
    return tuple(dims)


@pytest.mark.parametrize("seed", range(6))
def test_the_event_loop_is_the_oracle_on_dimensions_and_lanes(seed: int) -> None:
    """Random small programs with random lanes on random networks of one to three dimensions
    with their own bandwidths, latencies, NIC latencies, links and ports: the event loop gives
    the oracle's log with and without contention; a stuck program fails in both."""
    rng = np.random.default_rng(1000 + seed)
    compared = 0
    for _ in range(30):
        dims = _random_dims(rng)
        net = build_network(_with_dims(*dims))
        if net.chips < 2:
            continue
        net = dataclasses.replace(
            net,
            staging_buffers=int(rng.integers(1, 4)),
            burst_bytes=int(rng.choice([64, 256, 4096])),
        )
        prog = random_program(rng, net.chips, int(rng.integers(1, 30)), lanes=4)
        for contention in (True, False):
            try:
                want = reference(net, prog, contention=contention)
            except RuntimeError:
                with pytest.raises(RuntimeError, match="did not finish"):
                    simulate_fabric(net, prog, contention=contention)
                continue
            got = simulate_fabric(net, prog, contention=contention)
            assert got.equals(want), (seed, dims, contention, got.first_difference(want))
            compared += 1
    assert compared >= 30, compared


def test_fast_paths_run_only_where_their_assumptions_hold() -> None:
    """direct's program is one-shot on a uniform network on lane 0 (extra lanes idle); on
    lanes or on links that differ the event loop times it; every case agrees with the oracle."""
    plain = _with_dims(_dim("fully_connected", 4, links=2))
    net = build_network(plain)
    prog = ar.fabric_program(ar.build_schedule(plain, 200_002, "direct", network=net)).program
    assert one_shot(net, prog) is not None
    laned = dataclasses.replace(prog, lane=[i % 2 for i in range(len(prog))])
    assert one_shot(net, laned) is None
    slow = dataclasses.replace(net, link_bws=(Fraction(10), *net.link_bws[1:]))
    assert one_shot(slow, prog) is None
    for n, p in ((net, prog), (net, laned), (slow, prog)):
        for contention in (True, False):
            assert simulate_fabric(n, p, contention=contention).equals(
                reference(n, p, contention=contention)
            )


def test_copies_and_reductions_ignore_lanes() -> None:
    net = build_network(_with_dims(_dim("ring", 3, links=2)))
    prog = FabricProgram()
    prog.add(TRANSFER, 0, 1, 4096, 0, (), lane=1)
    prog.add(REDUCTION, 1, 1, 4096, 0, (0,), consumes=0, lane=1)
    prog.add(COPY, 1, 1, 4096, 0, (1,), lane=1)
    assert simulate_fabric(net, prog).equals(reference(net, prog))


@pytest.mark.parametrize("sizes", [(7,), (4, 3), (2, 3, 2), (8, 1, 4)])
def test_digit_shift_is_a_translation_invariant_peer_order(sizes: tuple[int, ...]) -> None:
    """ADR 0032: peer k of chip c adds k's digits to c's, each modulo its size. On one
    dimension that is (c + k) mod p; each offset is a permutation of the chips (a step of
    pairwise is a matching of senders and receivers); offset 0 is the chip itself; and a
    translation t of the digits maps peer k of c onto peer k of t(c), which is why one
    representative chip times direct on a product of switches."""
    from sim.fabric import digit_shift

    p = int(np.prod(sizes))
    for k in range(p):
        peers = [digit_shift(sizes, c, k) for c in range(p)]
        assert sorted(peers) == list(range(p))
        if len(sizes) == 1:
            assert peers == [(c + k) % p for c in range(p)]
    assert [digit_shift(sizes, c, 0) for c in range(p)] == list(range(p))
    for t in range(p):  # digit_shift(sizes, ., t) is the translation by t's digits
        for c in range(p):
            for k in range(p):
                img = digit_shift(sizes, c, t)
                assert digit_shift(sizes, digit_shift(sizes, c, k), t) == digit_shift(sizes, img, k)
    if len(sizes) > 1 and sizes[0] > 1 and p > sizes[0]:  # not the flat offset
        assert any(digit_shift(sizes, c, 1) != (c + 1) % p for c in range(p))


def test_hop_holds_read_each_links_own_setup_not_only_its_bandwidth() -> None:
    """A hop's hold is link_ps of that link: bytes over its bandwidth plus its setup. Two
    links of one bandwidth with different setups (a protocol's handshake on one dimension)
    must not share a cached hold."""
    from sim.fabric.holds import hop_holds

    topo = _with_dims(_dim("switch", 4, 50, 1000), _dim("switch", 2, 50, 1000))
    net = build_network(topo)
    setups = tuple(5_000 if k % 2 else 0 for k in range(len(net.links)))
    net = dataclasses.replace(net, link_setup_ps=setups)
    assert len(set(net.link_bws)) == 1 and len(set(setups)) == 2
    sched = ar.build_schedule(topo, 1 << 16, "ring", network=net)
    prog = ar.fabric_program(sched).program
    from sim.fabric.program import op_routes

    routes = op_routes(net, prog)
    own, _grain = hop_holds(net, prog, routes, [0] * len(prog))
    for r, b, holds in zip(routes, prog.nbytes, own, strict=True):
        assert holds == tuple(net.link_ps(b, k) for k in r)
