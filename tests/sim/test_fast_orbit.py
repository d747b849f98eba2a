"""Collectives on two switch (or fully connected) dimensions timed from representatives'
ops generated directly (sim.collectives.orbit, fast_orbit): the flat ring (its Gray order
turned by one node's sweep: node j is node j - 1 reflected) and direct (peers by digit-wise
offset, kept by every translation of the digits: ADR 0032). The op log must be the event
engine's, every column; the metrics collective_metrics' of the exact run; #wrong the
replay's, also when broken."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from sim import load_topology
from sim.collectives import collective_metrics, run_collective
from sim.collectives.catalog import build_schedule
from sim.collectives.fast_orbit import (
    OrbitRun,
    _Fallback,
    _realign,
    _realign_plan,
    _refined,
    _replay,
)
from sim.collectives.fast_product import QuotientRun
from sim.collectives.run import run_schedule
from sim.fabric import build_network
from sim.oplog import COLUMNS, OpLog


def _two_level(inner: int, outer: int, shape: str = "switch") -> object:
    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    return load_topology("npu-1h").replace_dimensions(
        [{"shape": shape, "size": inner, **link}, {"shape": "switch", "size": outer, **link}]
    )


def _sha(log: object) -> str:
    h = hashlib.sha256()
    for c in COLUMNS:
        h.update(log.column(c).tobytes())  # type: ignore[attr-defined]
    return h.hexdigest()


def _exact(topo: object, nbytes: int, collective: str) -> object:
    net = build_network(topo)  # type: ignore[arg-type]
    return run_schedule(build_schedule(topo, nbytes, "ring", collective, network=net), net)  # type: ignore[arg-type]


@pytest.mark.parametrize("collective", ["allreduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize(("inner", "outer"), [(2, 4), (4, 4), (8, 2), (8, 8)])
def test_flat_ring_is_timed_from_one_node(collective: str, inner: int, outer: int) -> None:
    topo = _two_level(inner, outer)
    nbytes = 1 << 18
    run = run_collective(topo, nbytes, "ring", collective)  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    assert run.group.order == outer  # one node's chips stand for all
    assert len(run.log.rep) * outer == len(run.log)  # type: ignore[attr-defined]
    ref = _exact(topo, nbytes, collective)
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]
    assert collective_metrics(run) == collective_metrics(ref)  # type: ignore[arg-type]


@pytest.mark.parametrize("nbytes", [4 * 2 * 32, 1 << 20, 3 << 16])
def test_chunkings_and_sizes_on_fully_connected_nodes(nbytes: int) -> None:
    """Fully connected nodes, one element per segment up to several chunks per message."""
    topo = _two_level(4, 8, "fully_connected")
    run = run_collective(topo, nbytes, "ring", "allreduce")  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    ref = _exact(topo, nbytes, "allreduce")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert collective_metrics(run) == collective_metrics(ref)  # type: ignore[arg-type]


def test_uneven_segments_take_the_general_path() -> None:
    topo = _two_level(4, 4)
    run = run_collective(topo, 4 * 33 * 2, "ring", "allreduce")  # type: ignore[arg-type]
    assert not isinstance(run, OrbitRun)
    assert isinstance(run, QuotientRun)  # the quotient of the full program still applies


def test_a_reduction_before_its_data_counts_everything_wrong() -> None:
    topo = _two_level(4, 4)
    run = run_collective(topo, 1 << 16, "ring", "allreduce")  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    rep = run.log.rep  # type: ignore[attr-defined]
    st = rep.stored
    red = np.flatnonzero(st["stage"] == rep.stages.index("reduce"))[3]
    start = st["start"].copy()
    start[red] = 0
    bad = OpLog.from_columns(rep.engines, rep.stages, {**st, "start": start})
    wrong, why = _replay(run.layout, run.orbits, run.orbit, bad, run.network, "allreduce")
    assert wrong == 16 * run.count and "before it arrived" in why


def test_a_receive_of_the_wrong_data_is_counted() -> None:
    """A reduction fed by another transfer of the same size (planted in the quotient): the
    replay from one node must count the pieces that lack an input or hold one twice."""
    topo = _two_level(4, 4)
    run = run_collective(topo, 1 << 16, "ring", "allreduce")  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun) and run.wrong == 0
    prog = run.orbit.program
    cons = [i for i, t in enumerate(prog.consumes) if t >= 0]
    i, j = cons[5], cons[6]
    consumes = list(prog.consumes)
    consumes[i] = consumes[j]
    bad = replace(run.orbit, program=replace(prog, consumes=consumes))
    wrong, why = _replay(run.layout, run.orbits, bad, run.log.rep, run.network, "allreduce")  # type: ignore[attr-defined]
    assert wrong > 0 and wrong % 4 == 0  # every node alike
    assert "lacks the inputs" in why or "holds inputs" in why or "twice" in why


@pytest.mark.parametrize("outer", [2, 4])
def test_h100_nodes_with_lanes(outer: int) -> None:
    """h100-sxm-8x4's NVSwitch ports (lanes) and NICs, nodes grown or shrunk, the neutral
    runtime: the ring takes lane 0; the log is the event engine's."""
    topo = load_topology("h100-sxm-8x4")
    dims = [dict(d) for d in topo.to_dict()["chips"]["dimensions"]]  # type: ignore[attr-defined]
    dims[1]["size"] = outer
    topo = topo.replace_dimensions(dims).replace_collectives(  # type: ignore[attr-defined]
        launch_ns=None, step_sync_ns=None, channels=None, protocol=None, protocols=None
    )
    run = run_collective(topo, 1 << 20, "ring", "allreduce")
    assert isinstance(run, OrbitRun)
    ref = _exact(topo, 1 << 20, "allreduce")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert collective_metrics(run) == collective_metrics(ref)  # type: ignore[arg-type]


@pytest.mark.parametrize("collective", ["allreduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize(("inner", "outer"), [(2, 4), (4, 4), (8, 4)])
def test_direct_is_timed_from_representatives(collective: str, inner: int, outer: int) -> None:
    """direct (every chip to the chip its digits plus offset d's name, d by flat index: ADR
    0032): every translation of the digits keeps those offsets, so one chip stands for all;
    the program is never built."""
    topo = _two_level(inner, outer)
    nbytes = 1 << 18
    run = run_collective(topo, nbytes, "direct", collective)  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    assert run.group.order == inner * outer  # one representative chip
    assert len(run.log.rep) * run.group.order == len(run.log)  # type: ignore[attr-defined]
    net = build_network(topo)  # type: ignore[arg-type]
    sched = build_schedule(topo, nbytes, "direct", collective, network=net)  # type: ignore[arg-type]
    ref = run_schedule(sched, net)
    assert _sha(run.log) == _sha(ref.log)
    assert run.wrong == ref.wrong == 0
    assert collective_metrics(run) == collective_metrics(ref)


@pytest.mark.parametrize("algorithm", ["ring", "direct"])
def test_a_given_chunk_size_is_the_one_timed(algorithm: str) -> None:
    topo = _two_level(4, 4)
    nbytes, chunk = 1 << 18, 4096
    run = run_collective(topo, nbytes, algorithm, "allreduce", chunk_bytes=chunk)  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    net = build_network(topo)  # type: ignore[arg-type]
    sched = build_schedule(topo, nbytes, algorithm, "allreduce", chunk_bytes=chunk, network=net)  # type: ignore[arg-type]
    ref = run_schedule(sched, net)
    assert _sha(run.log) == _sha(ref.log)
    assert collective_metrics(run) == collective_metrics(ref)


def _h100(outer: int) -> object:
    """h100-sxm-8x4 with ``outer`` nodes and the neutral runtime: 18 NVSwitch lanes, so every
    message of the hierarchical algorithms is cut over the lanes at offsets of its own."""
    topo = load_topology("h100-sxm-8x4")
    dims = [dict(d) for d in topo.to_dict()["chips"]["dimensions"]]  # type: ignore[attr-defined]
    dims[1]["size"] = outer
    return topo.replace_dimensions(dims).replace_collectives(  # type: ignore[attr-defined]
        launch_ns=None, step_sync_ns=None, channels=None, protocol=None, protocols=None
    )


@pytest.mark.parametrize(
    ("collective", "algorithm"),
    [
        ("allreduce", "hierarchical"),
        ("reduce_scatter", "hierarchical"),
        ("all_gather", "hierarchical"),
        ("allreduce", "tree_ring"),
    ],
)
@pytest.mark.parametrize("topo_name", ["npu 2", "npu 4", "h100 2", "h100 4"])
def test_hierarchical_and_tree_ring_are_timed_from_one_rail(
    collective: str, algorithm: str, topo_name: str
) -> None:
    """hierarchical and tree_ring keep only the translations of dimension 0 (one rail), and
    under them a neighbour's transfer stands in with another range: the replay takes the
    stand-in's data at the offsets of the real range (_refined, _realign: h100's lanes cut
    every message at offsets of its own, and an all-gather's parts arrive from chips the
    sub-schedule leaves out). The log, the metrics and #wrong are the event engine's."""
    name, outer = topo_name.split()
    topo = _two_level(8, int(outer)) if name == "npu" else _h100(int(outer))
    nbytes = 1 << 18
    run = run_collective(topo, nbytes, algorithm, collective)  # type: ignore[arg-type]
    assert isinstance(run, OrbitRun)
    assert run.group.order == 8  # one rail: chip 0 of every node stands for its node
    assert len(run.log.rep) * 8 == len(run.log)  # type: ignore[attr-defined]
    net = build_network(topo)  # type: ignore[arg-type]
    sched = build_schedule(topo, nbytes, algorithm, collective, network=net)  # type: ignore[arg-type]
    ref = run_schedule(sched, net)
    assert _sha(run.log) == _sha(ref.log)
    assert run.wrong == ref.wrong == 0
    assert collective_metrics(run) == collective_metrics(ref)


def test_realign_takes_the_stand_ins_counts_at_the_real_offsets() -> None:
    """Pieces [0, 2) [2, 3) [3, 5) of a stand-in, read as the pieces [5, 8) [8, 10) of a
    range as long: the first wanted piece lies over two stand-in pieces, which must agree;
    where they do not, that piece would hold two kinds of data and the replay falls back."""
    bounds = np.asarray([0, 2, 3, 5, 8, 10], dtype=np.int64)
    data = np.asarray([[1, 0], [1, 0], [0, 1]], dtype=np.int8)
    got = _realign(data, _realign_plan(bounds, (0, 3), (3, 5)))
    assert got.tolist() == [[1, 0], [0, 1]]
    mixed = np.asarray([[1, 0], [1, 1], [0, 1]], dtype=np.int8)
    with pytest.raises(_Fallback):
        _realign(mixed, _realign_plan(bounds, (0, 3), (3, 5)))
    with pytest.raises(_Fallback):  # not as long
        _realign_plan(bounds, (0, 3), (3, 4))


def test_refined_carries_a_stand_ins_cuts_to_its_consumer_to_a_fixpoint() -> None:
    """Op 0 moves [0, 8) (cut at 3) and stands in for the transfer op 1 consumes ([8, 16));
    op 1 stands in for op 2's ([16, 24)): the cut at 3 reaches 11, and then 19. Ranges of
    different lengths cannot stand for each other."""
    bounds = np.asarray([0, 3, 8, 16, 24], dtype=np.int64)
    lo, hi = np.asarray([0, 2, 3]), np.asarray([2, 3, 4])
    cons, stand = np.asarray([1, 2]), np.asarray([0, 1])
    got = _refined(bounds, lo, hi, cons, stand, 1)
    assert got.tolist() == [0, 3, 8, 11, 16, 19, 24]
    with pytest.raises(_Fallback):
        _refined(
            bounds, np.asarray([0, 1]), np.asarray([2, 4]), np.asarray([1]), np.asarray([0]), 1
        )


def _invariant_before(lay: Any, net: Any, group: Any, maps: Any, rt: Any) -> bool:
    """orbit.invariant as it was before each generator's verdict was kept (verbatim; now
    orbit.Invariance)."""
    from sim.collectives.orbit import _pieces_map, message_images
    from sim.fabric import distinct

    n = len(lay.src)
    for g in group.generators:
        img = message_images(lay, net.chips, group.elements, np.full(n, g, dtype=np.int64))
        if img is None:
            return False
        same = (
            (lay.hi[img] - lay.lo[img] == lay.hi - lay.lo).all()
            and (lay.reduce[img] == lay.reduce).all()
            and (lay.fresh[img] == lay.fresh).all()
            and len(distinct(img[: lay.head])) == lay.head
        )
        if not same:
            return False
        if not _pieces_map(lay, img):
            return False
    p, h = net.chips, lay.head
    lanes = int(lay.lane.max(initial=0)) + 1
    trip = distinct((lay.src[:h] * p + lay.dst[:h]) * lanes + lay.lane[:h])
    a, b, lane = trip // lanes // p, trip // lanes % p, trip % lanes
    hops = rt.hops[a, b]
    width = rt.links0.shape[2]
    hop = np.arange(width)[None, :]
    used = hop < hops[:, None]
    mine = rt.link(a[:, None], b[:, None], lane[:, None], np.broadcast_to(hop, used.shape))
    for row, g in enumerate(group.generators):
        perm = group.elements[g]
        ga, gb = perm[a], perm[b]
        if not (rt.hops[ga, gb] == hops).all():
            return False
        there = rt.link(ga[:, None], gb[:, None], lane[:, None], np.broadcast_to(hop, used.shape))
        if not (maps[row][mine] == there)[used].all():
            return False
    return True


@pytest.mark.parametrize(
    ("algorithm", "collective", "topo_name"),
    [
        ("hierarchical", "allreduce", "h100 2"),
        ("hierarchical", "all_gather", "npu 4"),
        ("tree_ring", "allreduce", "h100 2"),
        ("direct", "reduce_scatter", "npu 4"),
        ("ring", "allreduce", "npu 4"),
    ],
)
def test_each_generators_verdict_is_the_groups_check(
    algorithm: str, collective: str, topo_name: str
) -> None:
    """The groups tried on one schedule share generators, so each permutation's link map and
    verdict are kept across them (LinkMaps, Invariance): over every group the fast path may
    try, in its order, with one cache, each group's verdict is the check made afresh, and
    the link maps are link_maps'."""
    from sim.collectives.hierarchical import HIERARCHICAL_ALGORITHMS, hierarchical_messages
    from sim.collectives.orbit import (
        Invariance,
        RouteTable,
        groups_for,
        ring_layout,
        schedule_layout,
    )
    from sim.fabric import LinkMaps, link_maps

    name, outer = topo_name.split()
    topo = _two_level(8, int(outer)) if name == "npu" else _h100(int(outer))
    net = build_network(topo)  # type: ignore[arg-type]
    sizes = tuple(net.sizes)
    nbytes = 1 << 18
    if algorithm == "ring":
        lay = ring_layout(net, collective, nbytes // 4, 4, 1 << 16, 2)
    elif algorithm in HIERARCHICAL_ALGORITHMS:
        empty, rows = hierarchical_messages(topo, nbytes, algorithm, collective, network=net)  # type: ignore[arg-type]
        lay = schedule_layout(empty, rows)
    else:
        lay = schedule_layout(build_schedule(topo, nbytes, algorithm, collective, network=net))  # type: ignore[arg-type]
    assert lay is not None
    rt = RouteTable(net, int(lay.lane.max(initial=0)) + 1)
    shared, maps_of = Invariance(lay, net, rt), LinkMaps(net)
    verdicts = []
    for group in [*groups_for(sizes, net.ring_order()), *groups_for(sizes)]:
        maps = link_maps(net, group, group.generators)
        got = maps_of(group, group.generators)
        assert (got is None) == (maps is None)
        if maps is None:
            continue
        assert got is not None and (got == maps).all()
        want = _invariant_before(lay, net, group, maps, rt)
        perms = [group.elements[g] for g in group.generators]
        assert shared.refuses(perms) <= (not want)
        assert all(shared(x, row) for x, row in zip(perms, maps, strict=True)) == want
        fresh = Invariance(lay, net, rt)  # the check made afresh, nothing kept
        assert all(fresh(x, row) for x, row in zip(perms, maps, strict=True)) == want
        verdicts.append(want)
    assert True in verdicts
    assert (False in verdicts) == (algorithm != "direct")  # direct: every translation and xor
