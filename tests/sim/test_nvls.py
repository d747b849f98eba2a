"""``nvls``: allreduce on a switch that reduces (docs/adr/0021 decision 3). The engine's ops at
a switch (sim.fabric.switch_ops), the schedule and program (sim.collectives.nvls,
nvls_program), the functional check on data that travelled (and two planted bugs it
catches), the time against the ports' bandwidth, the lower bounds and the model."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.collectives import (
    CollectiveError,
    bounds_ps,
    build_schedule,
    check,
    collective_model,
    run_collective,
)
from sim.collectives.nvls_model import nvls_bounds
from sim.collectives.nvls_program import nvls_program, pull_window
from sim.collectives.verify import replay
from sim.fabric import (
    COPY,
    REDUCTION,
    SWITCH_REDUCE,
    TRANSFER,
    FabricProgram,
    build_network,
    simulate_fabric,
)
from sim.topology import Topology, load_topology

YAML = Path(__file__).resolve().parents[1] / "data" / "topologies" / "nvls-8.yaml"


@pytest.fixture(scope="module")
def nvls8() -> Topology:
    return load_topology(YAML)


def _switch(topo: Topology, p: int, ports: int, reduce_gbs: float = 25) -> Topology:
    dim = {"shape": "switch", "size": p, "ports": ports, "link_bw_gbs": 25}
    dim.update(link_latency_ns=250, switch_reduce_gbs=reduce_gbs)
    return topo.replace_dimensions([dim])


# --- the engine: ops at a switch -------------------------------------------------------------


def _up_reduce_down(p: int) -> FabricProgram:
    """Every chip sends 64 KiB up; the switch sums them into one accumulator and sends the sum
    down to chip 0, which stores it."""
    prog = FabricProgram()
    sw = p
    ups = [prog.add(TRANSFER, i, sw, 65536, 0, ()) for i in range(p)]
    first = len(prog)
    sums = tuple(
        prog.add(REDUCTION, sw, sw, 65536, 0, (u,), consumes=u, hbm=0, into=first) for u in ups
    )
    down = prog.add(TRANSFER, sw, 0, 65536, 1, sums, hbm=0)
    prog.add(COPY, 0, 0, 65536, 1, (down,), consumes=down)
    return prog


def test_a_reduction_at_a_switch_runs_on_its_ports_engine_at_the_switch_rate(
    nvls8: Topology,
) -> None:
    """The switch's reduce engine of a port is a bandwidth server at switch_reduce_gbs: at 5
    GB/s (a fifth of the port) the sum of 64 KiB takes 64 KiB / 5 GB/s, on the engine of the
    port the data came in by, and the transfer down cannot end before it."""
    topo = _switch(nvls8, 4, 1, reduce_gbs=5)
    net = build_network(topo)
    log = simulate_fabric(net, _up_reduce_down(4))
    at = log.stage == SWITCH_REDUCE
    assert int(at.sum()) == 4
    assert set(log.chip[at].tolist()) == {4}  # recorded at the switch node
    names = {log.engines[e] for e in log.engine[at].tolist()}
    assert names == {f"reduce@link{i}->sw" for i in range(4)}
    work = 65536 * 1000 // 5  # ps at 5 GB/s
    assert all(e - s >= work for s, e in zip(log.start[at], log.end[at], strict=True))
    down = int(log.end[log.op == 8].max())
    assert down >= int(log.end[at].max())
    fast = simulate_fabric(build_network(_switch(nvls8, 4, 1, reduce_gbs=25)), _up_reduce_down(4))
    assert fast.makespan_ps < log.makespan_ps


def test_a_switch_that_does_not_reduce_refuses_a_reduction(nvls8: Topology) -> None:
    net = build_network(_switch(nvls8, 4, 1, reduce_gbs=0))
    with pytest.raises(ValueError, match="switch_reduce_gbs"):
        simulate_fabric(net, _up_reduce_down(4))


def test_a_multicast_occupies_each_destination_port(nvls8: Topology) -> None:
    """One transfer up, a copy at the switch (no staging buffer), then one transfer down per
    chip: each down link carries it once, each after the data reached the switch."""
    net = build_network(_switch(nvls8, 4, 2))
    prog = FabricProgram()
    up = prog.add(TRANSFER, 0, 4, 1 << 20, 0, (), lane=1)
    src = prog.add(COPY, 4, 4, 1 << 20, 0, (up,), consumes=up, hbm=0, lane=1)
    downs = [prog.add(TRANSFER, 4, i, 1 << 20, 1, (src,), hbm=0, lane=1) for i in range(4)]
    log = simulate_fabric(net, prog)
    names = [log.engines[int(log.engine[log.op == d][0])] for d in downs]
    assert names == [f"linksw->{i}#1" for i in range(4)]
    first_byte_up = int(log.start[log.op == up][0]) + net.link_latencies_ps[0]
    assert all(int(log.start[log.op == d][0]) >= first_byte_up for d in downs)


# --- the collective --------------------------------------------------------------------------


@pytest.mark.parametrize("nbytes", [0, 4, 28, 4096, 1 << 20, 3 * (1 << 20) + 12])
def test_nvls_from_yaml_sums_from_data_that_travelled(nvls8: Topology, nbytes: int) -> None:
    run = sim.allreduce(nvls8, nbytes, "nvls")
    assert (run.wrong, run.problem) == (0, "")
    if nbytes:
        assert (run.log.stage == SWITCH_REDUCE).any()


def test_nvls_needs_a_switch_that_reduces(nvls8: Topology) -> None:
    with pytest.raises(CollectiveError, match=r"chips.dimensions\[0\].switch_reduce_gbs"):
        sim.allreduce(_switch(nvls8, 8, 4, reduce_gbs=0), 4096, "nvls")
    with pytest.raises(CollectiveError, match="switch"):
        sim.allreduce(load_topology("npu-1h"), 4096, "nvls")
    with pytest.raises(CollectiveError, match="ring"):  # nvls runs allreduce only
        run_collective(nvls8, 4096, "nvls", "reduce_scatter")


def _planted(topo: Topology, nbytes: int, plant: str) -> int:
    """#wrong of an nvls run whose program has one planted bug."""
    net = build_network(topo)
    schedule = build_schedule(topo, nbytes, "nvls", network=net)
    compiled = nvls_program(schedule, net)
    prog = compiled.program
    sw = net.chips
    if plant == "none":
        pass
    elif plant == "dropped":  # chip 0's copy of the first chunk never goes up; chip 1's twice
        first = next(i for i, k in enumerate(prog.kind) if k == TRANSFER and prog.src[i] == 0)
        prog.src[first] = 1
    else:  # the first multicast goes to the next chip instead (its copy lands there too)
        mc = next(
            i
            for i, k in enumerate(prog.kind)
            if k == TRANSFER and prog.src[i] == sw and prog.step[i] == 3
        )
        wrong = (prog.dst[mc] + 1) % sw
        store = prog.consumes.index(mc)
        prog.dst[mc] = wrong
        prog.src[store] = prog.dst[store] = wrong
    log = simulate_fabric(net, prog)
    wrong_count, _ = check(schedule, compiled.bounds, replay(schedule, net, compiled, log))
    return wrong_count


def test_planted_bugs_are_caught(nvls8: Topology) -> None:
    assert _planted(nvls8, 1 << 16, "none") == 0
    assert _planted(nvls8, 1 << 16, "dropped") > 0
    assert _planted(nvls8, 1 << 16, "misrouted") > 0


# --- time ------------------------------------------------------------------------------------


def test_a_large_message_runs_at_the_ports_bandwidth(nvls8: Topology) -> None:
    """8 chips, 4 ports of 25 GB/s each way: each port direction carries (1 + 1/p) n / ports,
    so the time is that over 25 GB/s (the ADR's n / (ports bw) plus the owner's round trip
    of its shard), within the pipeline's fill: the pull window plus one round of chunks and
    four flights. busbw beats the ring's on the same ports."""
    p, ports, bw, lat = 8, 4, 25, 250_000  # chips, ports, GB/s, ps
    n = 1 << 30
    run = sim.allreduce(nvls8, n, "nvls")
    chunk = 1 << 20  # chips.chunk_kib
    ideal = (1 + 1 / p) * n / (ports * bw) * 1000  # ps
    window = pull_window(run.network, chunk)
    fill = (window + p) * chunk / bw * 1000 + 4 * lat
    assert ideal <= run.time_ps <= ideal + fill
    busbw = 2 * (p - 1) / p * n / (run.time_ps / 1000)
    assert busbw > 0.95 * 2 * (p - 1) / (p + 1) * ports * bw
    ring = sim.allreduce(nvls8, n, "ring")
    assert run.time_ps < ring.time_ps


@pytest.mark.parametrize("p,ports", [(2, 1), (4, 4), (8, 1), (8, 18), (16, 4)])
@pytest.mark.parametrize("nbytes", [4096, 1 << 18, 1 << 22])
def test_no_nvls_run_beats_its_lower_bounds(
    nvls8: Topology, p: int, ports: int, nbytes: int
) -> None:
    topo = _switch(nvls8, p, ports)
    run = sim.allreduce(topo, nbytes, "nvls")
    assert run.wrong == 0
    assert max(nvls_bounds(topo, nbytes)) <= run.time_ps
    assert bounds_ps(topo, nbytes).time_ps <= run.time_ps  # the machine's, switch reducing


@pytest.mark.parametrize("p,ports", [(2, 1), (4, 4), (8, 4), (8, 18), (16, 4)])
def test_the_model_follows_large_messages(nvls8: Topology, p: int, ports: int) -> None:
    """At 256 MiB (tens to hundreds of chunks a port) the model is within 12% of the simulator;
    benchmarks/nvls_model_error.py prints the whole sweep (small and middle sizes are worse:
    docs in sim/collectives/nvls_model.py)."""
    topo = _switch(nvls8, p, ports)
    n = 256 << 20
    got = sim.allreduce(topo, n, "nvls").time_ps
    modelled = collective_model(topo, "nvls", n).time_ps
    assert abs(modelled / got - 1) < 0.12


def test_nvls_runs_simple_on_a_preset_whose_tuner_chooses_and_refuses_another() -> None:
    """h100-sxm-8 lets the tuner choose (``protocol: auto``); nvls takes Simple, as NCCL's
    tuner does, and a forced LL is one clear error."""
    from sim import load_topology
    from sim.collectives import CollectiveError, run_collective

    topo = load_topology("h100-sxm-8")
    run = run_collective(topo, 1 << 20, "nvls")
    assert run.protocol == "simple" and run.wrong == 0
    with pytest.raises(CollectiveError, match="nvls runs the Simple protocol only"):
        run_collective(topo, 1 << 20, "nvls", protocol="ll")
