"""Protocols, per-step synchronisation and launch (ADR 0021 decision 2,
sim.collectives.protocols): a protocol's network, ``auto``'s choice, a call's start, and the
model and bounds that follow them.

Expected values are written from the collectives section's numbers and the link rate."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from sim import load_topology
from sim.collectives import (
    CollectiveError,
    allreduce,
    bounds_ps,
    build_schedule,
    chunks,
    collective_metrics,
    fabric_program,
)
from sim.collectives.model import model
from sim.collectives.protocols import choose_protocol, modelled_ps, protocol_network
from sim.fabric import build_network, simulate_fabric
from sim.topology import Topology
from sim.topology.schema import build
from sim.topology.system import PROTOCOLS, CollectivesConfig, ProtocolConfig
from sim.units import ps_for_bytes

BASE = load_topology()
KIB, MIB = 1024, 1024 * 1024


def _topo(kind: str = "fully_connected", p: int = 8, **collectives: Any) -> Topology:
    """npu-1h's chips as ``kind``, fp32, HBM and reduce engines far faster than the links
    (a large ring is link-bound), with the given ``collectives`` section."""
    data: dict[str, Any] = BASE.to_dict()
    data["dtype"]["bytes_per_element"] = 4
    data["chips"].update(count=p, topology=kind)
    data["hbm"]["hbm_to_router_bw_gbs"] = 1_000_000
    data["chips"]["reduce_gbs"] = 1_000_000
    topo = build(data, f"test {kind} p={p}")
    return dataclasses.replace(topo, collectives=CollectivesConfig(**collectives))


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling"])
def test_neutral_collectives_run_todays_program(algorithm: str) -> None:
    """npu-1h as loaded: the run's log is the fabric's timing of the schedule's program on
    the topology's own network (no launch, no derating, no channels)."""
    n = 3 * MIB
    run = allreduce(BASE, n, algorithm)
    net = build_network(BASE)
    want = simulate_fabric(net, fabric_program(build_schedule(BASE, n, algorithm)).program)
    assert run.log.equals(want)
    # the topology's own network: every field, the routes route for route (a ring's fast
    # path computes them when asked, sim.fabric.RingRoutes)
    assert dataclasses.replace(run.network, routes=net.routes) == net
    assert [list(row) for row in run.network.routes] == [list(row) for row in net.routes]
    assert run.protocol == "simple" and run.channels == 0
    assert run.time_ps == want.makespan_ps
    assert protocol_network(net, CollectivesConfig(), "simple") is net


def test_a_protocol_derates_every_link_and_its_step_holds_the_links_chips_send_on() -> None:
    """ADR 0023 decision 2: bandwidth times the efficiency on every link; the step cost
    (step_sync + step_ns) occupies every link a chip sends on before each transfer's bytes;
    latency unchanged; a switch's links down carry no setup."""
    cfg = CollectivesConfig(step_sync_ns=300, ll128=ProtocolConfig(0.92, 200))
    for kind in ("fully_connected", "switch"):
        net = build_network(_topo(kind))
        got = protocol_network(net, cfg, "ll128")
        assert got.link_bws == tuple(bw * Fraction(92, 100) for bw in net.link_bws)
        assert got.link_latencies_ps == net.link_latencies_ps
        want = tuple(500_000 if u < net.chips else 0 for u, _v in net.links)
        assert got.link_setup_ps == want and any(want)
        assert got.link_ps(1000, 0) == want[0] + ps_for_bytes(1000, got.link_bws[0])
        assert (got.links, got.routes, got.reduce_bw, got.hbm_bw) == (
            net.links,
            net.routes,
            net.reduce_bw,
            net.hbm_bw,
        )


@pytest.mark.parametrize(("kind", "channels"), [("fully_connected", 7), ("ring", 0)])
def test_each_chunk_a_chip_sends_holds_its_link_a_step_longer(kind: str, channels: int) -> None:
    """A small ring allreduce is a chain of 2 (p-1) steps of ``k`` chunks per message: the
    handshake (step_sync + step_ns) holds the sender's link before each chunk, so the call is
    at least 2 (p-1) handshakes longer and at most 2 (p-1) k longer; and its log is the
    fabric's timing of the same program on the network with that setup."""
    p, n = 8, 4 * KIB
    base = allreduce(_topo(kind), n, channels=channels)
    slow = _topo(kind, step_sync_ns=1500, simple=ProtocolConfig(1.0, 250))
    got = allreduce(slow, n, channels=channels)
    assert got.wrong == 0
    k = max(
        len(chunks(m.lo, m.hi, 4, got.schedule.chunk_bytes, got.schedule.depth))
        for step in got.schedule.steps
        for m in step
    )
    more = got.time_ps - base.time_ps
    assert 2 * (p - 1) * 1_750_000 <= more <= 2 * (p - 1) * k * 1_750_000
    net = build_network(slow).derated(Fraction(1), 0, 1_750_000)
    assert got.log.equals(simulate_fabric(net, fabric_program(got.schedule).program))


def test_launch_shifts_every_record_and_counts_in_the_bandwidths() -> None:
    n = 1 * MIB
    plain = allreduce(_topo(), n, channels=7)
    run = allreduce(_topo(launch_ns=12_000), n, channels=7)
    launch = 12_000_000
    assert run.launch_ps == launch and run.wrong == 0
    assert np.array_equal(run.log.start, plain.log.start + launch)
    assert np.array_equal(run.log.end, plain.log.end + launch)
    assert run.time_ps == plain.time_ps + launch
    got = collective_metrics(run)
    assert got["time_ns"] == run.time_ps / 1000
    assert got["algbw_gbs"] == pytest.approx(n / (run.time_ps / 1000))
    one_chip = allreduce(_topo(p=1, launch_ns=12_000), n)
    assert one_chip.time_ps == launch and len(one_chip.log) == 0


LATENCY_TABLE = {  # Simple has a long handshake, LL a short one at half the rate
    "step_sync_ns": 100,
    "simple": ProtocolConfig(1.0, 1000),
    "ll128": ProtocolConfig(0.92, 500),
    "ll": ProtocolConfig(0.5, 200),
}


@pytest.mark.parametrize("n", [4 * KIB, 1 * MIB, 256 * MIB])
def test_auto_picks_the_least_modelled_time(n: int) -> None:
    """Per call, the protocol with the least alpha-beta time on its network; the tiny call
    runs LL and the huge one Simple, and the simulator agrees that they are the fastest."""
    topo = _topo(protocol="auto", **LATENCY_TABLE)
    cfg = topo.collectives
    net = build_network(topo)
    schedule = build_schedule(topo, n, channels=7)
    times = {p: modelled_ps(schedule, protocol_network(net, cfg, p)) for p in PROTOCOLS}
    chosen = choose_protocol(schedule, net, cfg)
    assert times[chosen] == min(times.values())
    run = allreduce(topo, n, channels=7)
    assert run.protocol == chosen and run.wrong == 0
    assert model(topo, "ring", n, channels=7).protocol == chosen
    if n == 4 * KIB:
        assert chosen == "ll"
    if n == 256 * MIB:
        assert chosen == "simple"
    if n != 1 * MIB:
        others = [allreduce(topo, n, channels=7, protocol=p).time_ps for p in PROTOCOLS]
        assert run.time_ps == min(others)


def test_auto_ties_go_to_the_higher_efficiency() -> None:
    """Nothing to send (every protocol takes the launch alone): Simple. LL128 at Simple's
    efficiency and cost: still Simple (the table's order)."""
    topo = _topo(protocol="auto", ll=ProtocolConfig(0.5, 0))
    assert allreduce(topo, 0).protocol == "simple"
    same = _topo(protocol="auto", ll128=ProtocolConfig(1.0, 0))
    assert allreduce(same, 1 * MIB).protocol == "simple"
    favour = _topo(protocol="auto", simple=ProtocolConfig(1.0, 1000), ll128=ProtocolConfig(1.0, 0))
    assert allreduce(favour, 1 * MIB).protocol == "ll128"


def test_the_argument_overrides_the_topology_protocol() -> None:
    topo = _topo(protocol="ll")
    assert allreduce(topo, 64 * KIB).protocol == "ll"
    assert allreduce(topo, 64 * KIB, protocol="simple").log.equals(allreduce(_topo(), 64 * KIB).log)
    with pytest.raises(CollectiveError, match="protocol = 'fast'"):
        allreduce(topo, 64 * KIB, protocol="fast")


CONFIGS = [
    ("fully_connected", 8, "ring", 7, {"launch_ns": 20_000, "step_sync_ns": 1500}),
    ("fully_connected", 8, "ring", 3, {"protocol": "ll128"}),
    ("fully_connected", 8, "ring", 0, {"protocol": "ll", "launch_ns": 5000}),
    ("ring", 8, "ring", 0, {"step_sync_ns": 700, "protocol": "ll128"}),
    ("switch", 6, "ring", 2, {"launch_ns": 3000, "step_sync_ns": 500}),
    ("fully_connected", 8, "direct", 0, {"launch_ns": 8000, "step_sync_ns": 900}),
    ("switch", 8, "halving_doubling", 0, {"protocol": "ll", "step_sync_ns": 400}),
]


@pytest.mark.parametrize(("kind", "p", "algorithm", "channels", "cfg"), CONFIGS)
@pytest.mark.parametrize("n", [16 * KIB, 48 * MIB])
def test_model_and_bounds_follow_launch_steps_protocol_and_channels(
    kind: str, p: int, algorithm: str, channels: int, cfg: dict[str, Any], n: int
) -> None:
    """With a collectives section the model is as close to the simulator as without one
    (within 3 % of the same ratio; a ring within 3 % of the simulator); its time is the
    launch plus its terms; no run beats the lower bounds, which grow by the launch."""
    topo = _topo(kind, p, **cfg)
    run = allreduce(topo, n, algorithm, channels=channels or None)
    got = model(topo, algorithm, n, channels=channels or None)
    assert run.wrong == 0
    neutral = _topo(kind, p)
    before = (
        allreduce(neutral, n, algorithm, channels=channels or None).time_ps
        / model(neutral, algorithm, n, channels=channels or None).time_ps
    )
    assert run.time_ps / got.time_ps == pytest.approx(before, abs=0.03)
    if algorithm == "ring":
        assert run.time_ps / got.time_ps == pytest.approx(1.0, abs=0.03)
    terms = max(got.pipeline_ps, got.critical_path_ps, got.resource_path_ps, got.one_port_ps)
    terms = max(terms, got.busiest_link_ps, got.busiest_engine_ps, got.busiest_hbm_ps)
    assert got.time_ps == got.launch_ps + terms == topo.collectives.launch_ps + terms
    bounds = bounds_ps(topo, n, protocol=run.protocol)
    assert run.time_ps >= bounds.time_ps
    assert run.time_ps >= bounds_ps(topo, n, protocol="auto").time_ps
    plain = bounds_ps(dataclasses.replace(topo, collectives=CollectivesConfig()), n)
    assert bounds.hbm - plain.hbm == pytest.approx(topo.collectives.launch_ps)


def _parsed(**collectives: Any) -> Topology:
    """:func:`_topo`'s machine with its ``collectives`` section read as a file gives it."""
    data: dict[str, Any] = _topo().to_dict()
    data["collectives"] = collectives
    return build(data, "test collectives section")


def test_a_protocol_list_lets_the_tuner_choose_among_those_only() -> None:
    """``protocol: [ll, simple]`` is NCCL_PROTO=LL,Simple: the tuner never picks LL128, even
    where LL128 would model fastest (between LL's latency and Simple's bandwidth)."""
    steps = {"simple": {"step_ns": 3000}, "ll128": {"step_ns": 10}, "ll": {"step_ns": 10}}
    every = _parsed(protocol="auto", protocols=steps)
    some = _parsed(protocol=["ll", "simple"], protocols=steps)
    assert some.collectives.protocol == "simple,ll"  # canonical order, as PROTOCOLS lists them
    assert some.to_dict()["collectives"]["protocol"] == ["simple", "ll"]
    picked = {allreduce(every, 4 * MIB).protocol, allreduce(some, 4 * MIB).protocol}
    assert picked == {"ll128", "simple"} or picked == {"ll128", "ll"}
    assert allreduce(some, 4 * MIB).wrong == 0
    assert {allreduce(some, n).protocol for n in (8, 64 * MIB)} <= {"ll", "simple"}


@pytest.mark.parametrize("bad", [["ll", "ll"], ["ll", "fast"], [], "ll, simple", [1]])
def test_a_bad_protocol_list_is_one_clear_error(bad: object) -> None:
    with pytest.raises(Exception, match=r"collectives\.protocol.*list of distinct protocols"):
        _parsed(protocol=bad)
