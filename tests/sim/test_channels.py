"""Channels (ADR 0021 decision 2, sim.collectives.channels): a ring collective split over
``c`` directed rings, arc-disjoint Hamiltonian cycles on a fully connected network.

Expected times are written from the link rate and the topology's constants, not read back
from the simulator."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

from sim import load_topology
from sim.collectives import CollectiveError, allreduce, build_schedule, link_bytes
from sim.collectives.channels import (
    MAX_CHANNELS,
    disjoint_cycles,
    max_channels,
    ring_channels,
)
from sim.collectives.run import all_gather, reduce_scatter
from sim.fabric import build_network
from sim.topology import Topology
from sim.topology.schema import build
from sim.topology.system import CollectivesConfig, DimensionConfig

BASE = load_topology()
KIB, MIB = 1024, 1024 * 1024


def _topo(kind: str = "fully_connected", p: int = 8, *, fast_memory: bool = False) -> Topology:
    """npu-1h's chips as ``kind`` with fp32 elements; ``fast_memory``: HBM and reduce engine
    far faster than the links, so a large ring is link-bound."""
    data: dict[str, Any] = BASE.to_dict()
    data["dtype"]["bytes_per_element"] = 4
    dims = (2, p // 2) if kind == "torus2d" else (1, p)
    data["chips"].update(count=p, topology=kind, torus_dims=list(dims))
    if fast_memory:
        data["hbm"]["hbm_to_router_bw_gbs"] = 1_000_000
        data["chips"]["reduce_gbs"] = 1_000_000
    return build(data, f"test {kind} p={p}")


def _arcs(cycle: tuple[int, ...]) -> list[tuple[int, int]]:
    return list(itertools.pairwise((*cycle, cycle[0])))


@pytest.mark.parametrize("p", [*range(2, 27), 31, 32, 40])
def test_fully_connected_splits_into_arc_disjoint_hamiltonian_rings(p: int) -> None:
    """Every ring visits every chip once; no arc is in two rings; there are p-1 of them
    (Tillson 1980) where the search or Walecki's construction finds them (odd p, even p up
    to 24), p-2 for 4, 6 and larger even p; ring 0 is the ring order, ring 1 its reverse."""
    cycles = disjoint_cycles(p)
    arcs = [a for c in cycles for a in _arcs(c)]
    assert all(sorted(c) == list(range(p)) for c in cycles)
    assert len(arcs) == len(set(arcs))
    full = p % 2 == 1 or (p not in (4, 6) and p <= 24)
    assert len(cycles) == (p - 1 if full else p - 2)
    if p >= 3:
        assert cycles[0] == tuple(range(p))
        assert cycles[1] == tuple(range(p - 1, -1, -1))
    assert disjoint_cycles(p) == cycles  # deterministic (and cached)


@pytest.mark.parametrize("p", [4, 6])
def test_four_and_six_chips_have_no_p_minus_one_disjoint_rings(p: int) -> None:
    """The p-2 of disjoint_cycles is the most: no p-1 directed Hamiltonian cycles of K*_p
    are pairwise arc-disjoint for p = 4, 6 (checked over all cycles from chip 0)."""
    cycles = [(0, *rest) for rest in itertools.permutations(range(1, p))]
    sets = [frozenset(_arcs(c)) for c in cycles]

    def grow(chosen: list[int], start: int) -> int:
        best = len(chosen)
        for j in range(start, len(sets)):
            if all(not (sets[j] & sets[i]) for i in chosen):
                best = max(best, grow([*chosen, j], j + 1))
                if best >= p - 1:
                    return best
        return best

    assert grow([], 0) == p - 2 == len(disjoint_cycles(p))


def test_channels_take_rings_and_lanes_as_the_adr_says() -> None:
    """Fully connected with 2 links per pair: channel i on ring i mod 7, lane i div 7;
    ring: alternate directions, lane i div 2; switch: port i mod ports."""
    fc = _topo()
    two = DimensionConfig("fully_connected", 8, 50, 1000, links=2)
    fc2 = dataclasses.replace(fc, chips=dataclasses.replace(fc.chips, dimensions=(two,)))
    net = build_network(fc2)
    assert max_channels(fc2, net) == 14
    chans = ring_channels(fc2, net, 15)
    rings = disjoint_cycles(8)
    assert [(c.order, c.lane) for c in chans] == [(rings[i % 7], (i // 7) % 2) for i in range(15)]
    ring = _topo("ring")
    three = DimensionConfig("ring", 8, 50, 1000, links=3)
    ring3 = dataclasses.replace(ring, chips=dataclasses.replace(ring.chips, dimensions=(three,)))
    chans = ring_channels(ring3, build_network(ring3), 6)
    forward, back = tuple(range(8)), tuple(range(7, -1, -1))
    assert [(c.order, c.lane) for c in chans] == [
        (forward, 0), (back, 0), (forward, 1), (back, 1), (forward, 2), (back, 2)
    ]  # fmt: skip
    sw = _topo("switch")
    ports = DimensionConfig("switch", 8, 50, 1000, ports=2)
    sw2 = dataclasses.replace(sw, chips=dataclasses.replace(sw.chips, dimensions=(ports,)))
    assert max_channels(sw2, build_network(sw2)) == 2
    assert [c.lane for c in ring_channels(sw2, build_network(sw2), 3)] == [0, 1, 0]


@pytest.mark.parametrize(
    ("kind", "p", "auto"),
    [("fully_connected", 8, 7), ("fully_connected", 6, 4), ("ring", 8, 2), ("switch", 8, 1)],
)
def test_auto_is_the_number_of_link_disjoint_rings(kind: str, p: int, auto: int) -> None:
    topo = _topo(kind, p)
    assert allreduce(topo, 64 * KIB, channels="auto").channels == auto
    by_topology = dataclasses.replace(topo, collectives=CollectivesConfig(channels=-1))
    run = allreduce(by_topology, 64 * KIB)
    assert run.channels == auto and run.wrong == 0


@pytest.mark.parametrize("kind", ["fully_connected", "ring", "switch", "torus2d"])
def test_two_channels_are_todays_two_rings(kind: str) -> None:
    """Two channels: the ring order and its reverse on the halves, the same schedule and
    op log as the neutral default (0)."""
    topo = _topo(kind)
    n = 3 * MIB + 4 * 13
    assert build_schedule(topo, n, channels=2).steps == build_schedule(topo, n).steps
    assert allreduce(topo, n, channels=2).log.equals(allreduce(topo, n).log)


def test_seven_channels_load_every_link_direction_equally() -> None:
    """7 channels on 8 fully connected chips use all 56 link directions, each carrying the
    same 2 (p-1) n / (c p) bytes, and the data that travelled sums right."""
    p, c = 8, 7
    n = c * p * 4 * 1000  # a whole number of elements per part and chip
    run = allreduce(_topo(), n, channels=c)
    per_link = link_bytes(run)
    assert run.wrong == 0 and run.channels == c
    assert len(per_link) == p * (p - 1)
    assert np.all(per_link == 2 * (p - 1) * n // (c * p))


def test_seven_channels_run_at_the_link_rate_of_all_56_links() -> None:
    """Link-bound (fast HBM and reduce engines), 7 channels take the busiest link's bytes
    over its rate plus the pipeline's fill (one flight latency, a few bursts per step), and
    are 7/2 times as fast as today's two rings, which load 16 of the 56 link directions."""
    p, c = 8, 7
    n = 64 * MIB // (c * p) * (c * p)
    topo = _topo(fast_memory=True)
    bw = float(topo.chips.link_bw)  # bytes per ns
    link_ns = 2 * (p - 1) * n / (c * p) / bw
    burst_ns = topo.hbm.burst_bytes / bw
    fill_ns = topo.chips.link_latency_ns + 2 * (p - 1) * 3 * burst_ns
    seven = allreduce(topo, n, channels=c).time_ps / 1000
    assert link_ns <= seven <= link_ns + fill_ns
    today = allreduce(topo, n).time_ps / 1000
    two_ring_ns = 2 * (p - 1) * n / (2 * p) / bw
    assert two_ring_ns <= today <= two_ring_ns + fill_ns
    assert today / seven == pytest.approx(c / 2, rel=0.01)


@pytest.mark.parametrize(
    ("kind", "p", "c"),
    [
        *(("fully_connected", 8, c) for c in (1, 3, 5, 7, 9)),
        ("fully_connected", 5, 4),
        ("fully_connected", 6, 4),
        ("fully_connected", 2, 3),
        ("ring", 8, 3),
        ("switch", 6, 3),
        ("torus2d", 8, 4),
    ],
)
def test_every_channel_path_passes_the_functional_check(kind: str, p: int, c: int) -> None:
    """#wrong = 0 from the replayed op log, for allreduce, reduce-scatter and all-gather,
    an odd element count (parts and shares of unequal sizes)."""
    topo = _topo(kind, p)
    n = 4 * (5 * MIB // 4 + 7)
    for run in (
        allreduce(topo, n, channels=c),
        reduce_scatter(topo, n, channels=c),
        all_gather(topo, n, channels=c),
    ):
        assert run.wrong == 0, run.problem
        assert run.channels == c


def test_more_channels_than_rings_share_the_first_rings() -> None:
    """9 channels on 8 fully connected chips: channels 7 and 8 run round rings 0 and 1
    again, so those rings' links carry two parts and the others one."""
    p, c = 8, 9
    n = c * p * 4 * 100
    run = allreduce(_topo(), n, channels=c)
    per_link = link_bytes(run)
    part = 2 * (p - 1) * n // (c * p)
    doubled = {run.network.links.index(a) for r in disjoint_cycles(p)[:2] for a in _arcs(r)}
    assert run.wrong == 0
    assert sorted(np.flatnonzero(per_link == 2 * part).tolist()) == sorted(doubled)
    assert np.count_nonzero(per_link == part) == p * (p - 1) - len(doubled)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"channels": MAX_CHANNELS + 1}, "channels"),
        ({"channels": -2}, "channels"),
        ({"channels": "many"}, "auto"),
        ({"channels": True}, "channels"),
        ({"channels": 3, "algorithm": "direct"}, "'ring' only"),
    ],
)
def test_bad_channels_are_refused(kw: dict[str, Any], match: str) -> None:
    args = dict(kw)
    algorithm = args.pop("algorithm", "ring")
    with pytest.raises(CollectiveError, match=match):
        allreduce(_topo(), 64 * KIB, algorithm, **args)


def test_the_topology_sets_the_channels_and_the_argument_overrides_it() -> None:
    topo = dataclasses.replace(_topo(), collectives=CollectivesConfig(channels=5))
    assert allreduce(topo, 64 * KIB).channels == 5
    assert allreduce(topo, 64 * KIB, channels=0).log.equals(allreduce(_topo(), 64 * KIB).log)
    assert allreduce(topo, 64 * KIB, "direct").channels == 0  # not a ring: no channels
