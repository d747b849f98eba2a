"""The symmetric fast path (sim.collectives.fast, sim.fabric.symmetry) against the full program
timed by the exact event engine: the same op log record for record, the same metrics, the
same functional check; and the cases it must leave to the full program."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import sim.collectives.fast as fast
from sim import load_topology
from sim.collectives import (
    all_gather,
    allreduce,
    build_schedule,
    collective_metrics,
    fabric_program,
    reduce_scatter,
    run_schedule,
)
from sim.collectives.verify import ReplayError, check, replay
from sim.fabric import SymmetricLog, build_network, ring_network
from sim.oplog import OpLog
from sim.topology import Topology

BASE = load_topology()
RUNS = {"allreduce": allreduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather}


def _ring(p: int, **chips: int) -> Topology:
    return BASE.replace_chips(count=p, topology="ring", **chips)


def _exact(topo: Topology, n: int, collective: str, chunk: int | None = None) -> object:
    net = build_network(topo)
    schedule = build_schedule(topo, n, "ring", collective, chunk_bytes=chunk, network=net)
    return run_schedule(schedule, net)


@pytest.mark.parametrize("p", [3, 4, 5, 8])
def test_the_lazy_ring_network_is_build_networks(p: int) -> None:
    """Above its exact size the ring network computes routes when asked; they are the table's,
    and every other field is build_network's, whether it builds its three-chip template or is
    handed one (the symmetric path's view)."""
    topo = _ring(p)
    want = build_network(topo)
    three = build_network(topo.replace_chips(count=3))
    for got in (ring_network(topo, exact_up_to=0), ring_network(topo, exact_up_to=0, three=three)):
        assert dataclasses.replace(got, routes=want.routes) == want
        assert [list(row) for row in got.routes] == [list(row) for row in want.routes]


CASES = [
    (p, collective, n, chunk)
    for p in (3, 4, 5, 6, 8, 16)
    for collective in RUNS
    for n, chunk in ((4 * p * 2, None), (p * 3 * 1024 * 1024, None), (p * 2 * 65_536, 16_384))
]


@pytest.mark.parametrize(("p", "collective", "n", "chunk"), CASES)
def test_the_symmetric_path_gives_the_event_engines_log(
    p: int, collective: str, n: int, chunk: int | None
) -> None:
    """Ring collectives on rings: every record, every metric and #wrong equal to the full
    program's through the event engine (which the fabric oracle checks)."""
    topo = _ring(p)
    kw = {} if chunk is None else {"chunk_bytes": chunk}
    run = RUNS[collective](topo, n, **kw)
    assert isinstance(run, fast.SymmetricRun)
    assert isinstance(run.log, SymmetricLog) and len(run.log.rep) * p == len(run.log)
    ref = _exact(topo, n, collective, chunk)
    assert run.log.equals(ref.log), run.log.first_difference(ref.log)  # type: ignore[attr-defined]
    assert collective_metrics(run) == collective_metrics(ref)  # type: ignore[arg-type]
    assert (run.wrong, run.problem) == (ref.wrong, ref.problem) == (0, "")  # type: ignore[attr-defined]
    assert np.array_equal(run.values(1), ref.values(1))  # type: ignore[attr-defined]


def test_a_staging_bound_and_a_two_buffer_machine_stay_exact() -> None:
    """Fewer staging buffers (credits bind) and a slow reduce engine: still the same log."""
    topo = _ring(6, staging_buffers=2, reduce_gbs=25)
    run = allreduce(topo, 6 * 4 * 1024 * 1024)
    assert isinstance(run, fast.SymmetricRun)
    ref = _exact(topo, 6 * 4 * 1024 * 1024, "allreduce")
    assert run.log.equals(ref.log), run.log.first_difference(ref.log)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "p", "n", "algorithm"),
    [
        ("ring", 4, 4 * 2 * 1000 + 2, "ring"),  # segments one element apart: not symmetric
        ("ring", 2, 4096, "ring"),  # both rings share the one link pair
        ("ring", 8, 8 << 20, "halving_doubling"),  # direct on rings is symmetric (ADR 0026)
        ("fully_connected", 8, 8 << 20, "ring"),
        ("ring", 4, 2, "ring"),  # fewer elements than segments
    ],
)
def test_other_cases_run_the_full_program(kind: str, p: int, n: int, algorithm: str) -> None:
    topo = BASE.replace_chips(count=p, topology=kind)
    run = allreduce(topo, n, algorithm)
    assert not isinstance(run, fast.SymmetricRun)
    assert run.wrong == 0


def _late(log: OpLog, op: int, end: int) -> OpLog:
    """``log`` with op ``op``'s record ending at ``end``."""
    cols = {c: log.column(c).copy() for c in ("chip", "engine", "stage", "op", "start", "end")}
    cols["end"][np.flatnonzero(log.column("op") == op)] = end
    cols.update({c: log.column(c) for c in ("nbytes", "macs", "tile")})
    return OpLog.from_columns(log.engines, log.stages, cols)


def test_the_one_chip_replay_finds_what_the_full_replay_finds() -> None:
    """Data that did not travel in time: a reduction of step 0 that ends after the send of
    step 1 forwards its chunk. Moved on chip 0 (and so, by symmetry, on every chip), both the
    one-chip replay and the full replay of the written-out log count the same wrong elements;
    a receive that ends before its data arrives is refused by both."""
    p, n = 5, 5 * 2 * 65_536
    topo = _ring(p)
    case = fast.ring_case(topo, n, "ring", "allreduce", None)
    assert case is not None
    prog, view_log = fast.time_quotient(topo, case)
    net = ring_network(topo)
    rep = fast._rep_log(net, case, view_log)
    k = len(case.sizes)
    recv, forward = 2 * k, 4 * k  # C(0, 0, ring 0), T(1, 0, ring 0)
    bad = _late(rep, recv, int(rep.stored["end"][forward]) + 1)
    wrong, problem = fast._replay(case, prog, bad, net.latency_ps)
    assert wrong > 0 and "lacks the inputs" in problem
    full = SymmetricLog(bad, p, fast._expander(net, case, bad))
    schedule = build_schedule(topo, n, "ring", network=net)
    compiled = fabric_program(schedule)
    got = replay(schedule, net, compiled, full.expanded())
    assert check(schedule, compiled.bounds, got)[0] == wrong
    arrive = int(rep.stored["end"][recv - 2 * k]) + net.latency_ps
    early = _late(rep, recv, arrive)  # ends as its data's last byte arrives
    wrong, problem = fast._replay(case, prog, early, net.latency_ps)
    assert wrong == p * case.count and "before it arrived" in problem
    with pytest.raises(ReplayError, match="before it arrived"):
        replay(schedule, net, compiled, SymmetricLog(early, p, fast._expander(net, case, early)))


def test_a_pod_scale_ring_is_stored_as_one_chips_records() -> None:
    """1024 chips: the log holds one chip's records; its length and metrics come without
    writing the 33.5 million records out (the full columns are never built here)."""
    topo = _ring(1024)
    run = allreduce(topo, 256 << 20)
    assert isinstance(run, fast.SymmetricRun) and run.wrong == 0
    log = run.log
    assert isinstance(log, SymmetricLog) and len(log) == 1024 * len(log.rep) == 33_521_664
    m = collective_metrics(run)
    assert m["records"] == len(log) and m["links_used"] == 2048
    assert m["link_bytes_total"] == 2 * 1023 * (256 << 20)  # 2 (p-1) n
    assert not log._full  # type: ignore[attr-defined]
    assert dataclasses.is_dataclass(run)


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "allreduce"])
def test_the_one_chip_check_counts_what_the_full_replay_counts(collective: str) -> None:
    """Every collective, data late at every step's first forward: each step's first receive
    on chip 0 ends after the next step's send forwards it. The one-chip check (bit masks of
    each piece's inputs, ADR 0036) counts the wrong elements the full replay of the written-out
    log counts, and finds some where the collective checks the pieces that moved."""
    p, n = 5, 5 * 2 * 65_536
    topo = _ring(p)
    case = fast.ring_case(topo, n, "ring", collective, None)
    assert case is not None
    prog, view_log = fast.time_quotient(topo, case)
    net = ring_network(topo)
    rep = fast._rep_log(net, case, view_log)
    per_step = 4 * len(case.sizes)
    bad = rep
    for s in range(case.steps - 1):  # the receive of (s, chunk 0, ring 0) after (s + 1)'s send
        recv, forward = s * per_step + per_step // 2, (s + 1) * per_step
        bad = _late(bad, recv, int(bad.stored["end"][forward]) + 1)
    wrong, problem = fast._replay(case, prog, bad, net.latency_ps)
    schedule = build_schedule(topo, n, "ring", collective, network=net)
    compiled = fabric_program(schedule)
    full = SymmetricLog(bad, p, fast._expander(net, case, bad))
    got = replay(schedule, net, compiled, full.expanded())
    assert check(schedule, compiled.bounds, got)[0] == wrong
    assert wrong > 0 and "chip 0, elements" in problem
