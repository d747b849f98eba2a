"""Periodic programs timed from a few periods (sim.fabric.periodic, ADR 0036): the loop that
skips the periods that repeat gives the plain loop's log record for record; it skips where the
state repeats and the program does, and nowhere else; the ring quotient's implied
dependencies change no record."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.collectives.fast as fast
import sim.fabric as fabric
import sim.fabric.periodic as periodic
from sim import load_topology
from sim.fabric import FabricProgram, build_network, simulate_fabric
from sim.oplog import OpLog
from sim.topology import Topology

BASE = load_topology()


def _ring(p: int, preset: str = "npu-1h", **chips: int) -> Topology:
    return load_topology(preset).replace_chips(count=p, topology="ring", **chips)


def _jumps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int, int]]:
    """Every jump the loop makes from now on: (cut op, periods skipped, first and last op
    whose records it wrote)."""
    seen: list[tuple[int, int, int, int]] = []
    jump = periodic.Periodic._jump

    def spy(self: periodic.Periodic, *args: Any) -> Any:
        out = jump(self, *args)
        if out:
            seen.append(self.jumps[-1])
        return out

    monkeypatch.setattr(periodic.Periodic, "_jump", spy)
    return seen


def _three(topo: Topology, n: int, collective: str) -> tuple[OpLog, OpLog, OpLog]:
    """The quotient timed as built, without its implied dependencies, and that again by
    periods."""
    p = topo.chips.count
    case = fast.ring_case(topo, n // (2 * p) * (2 * p), "ring", collective, None)
    assert case is not None
    view = build_network(topo.replace_chips(count=3))
    prog = fast.quotient_program(case)
    timed = fast.without_implied(prog, case)
    assert timed is not None
    period = 4 * len(case.sizes)
    plain = simulate_fabric(view, prog)
    return plain, simulate_fabric(view, timed), simulate_fabric(view, timed, period=period)


CASES = [
    ("npu-1h", 9, 9 << 20, "allreduce", {}),
    ("npu-1h", 16, 64 << 20, "allreduce", {}),
    ("npu-1h", 33, 64 << 20, "allreduce", {}),
    ("npu-1h", 16, 64 << 20, "reduce_scatter", {}),
    ("npu-1h", 16, 64 << 20, "all_gather", {}),
    ("npu-1h", 12, 48 << 20, "allreduce", {"staging_buffers": 1}),  # credits bind each chunk
    ("npu-1h", 12, 48 << 20, "allreduce", {"staging_buffers": 2, "reduce_gbs": 20}),
    ("npu-1h", 17, 17 << 20, "allreduce", {"link_latency_ns": 20_000}),  # a two-step beat
    ("mi300x-8", 24, 96 << 20, "allreduce", {}),  # HBM and engine faster than its links
    ("h100-sxm-8", 10, 5 << 20, "all_gather", {"staging_buffers": 3}),
]


@pytest.mark.parametrize(("preset", "p", "n", "collective", "chips"), CASES)
def test_skipping_the_periods_that_repeat_keeps_every_record(
    monkeypatch: pytest.MonkeyPatch,
    preset: str,
    p: int,
    n: int,
    collective: str,
    chips: dict[str, int],
) -> None:
    """The ring quotient: as built, without its implied dependencies, and by periods, the
    same log; and the loop did skip periods (every case has steps enough)."""
    jumps = _jumps(monkeypatch)
    plain, timed, by_periods = _three(_ring(p, preset, **chips), n, collective)
    assert timed.equals(plain), timed.first_difference(plain)
    assert by_periods.equals(plain), by_periods.first_difference(plain)
    assert jumps and sum(j[1] for j in jumps) >= 2


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=st.integers(3, 14),
    chunks=st.integers(1, 9),
    collective=st.sampled_from(["allreduce", "reduce_scatter", "all_gather"]),
    staging=st.integers(1, 6),
    reduce_gbs=st.sampled_from([8, 40, 256, 4000]),
    latency_ns=st.sampled_from([1, 300, 1000, 9000]),
    bw=st.sampled_from([12.5, 50.0, 400.0]),
)
def test_random_rings_keep_every_record(
    p: int,
    chunks: int,
    collective: str,
    staging: int,
    reduce_gbs: int,
    latency_ns: int,
    bw: float,
) -> None:
    """Random machines and sizes: by periods or not, the same log."""
    topo = BASE.replace_chips(
        count=p,
        topology="ring",
        staging_buffers=staging,
        reduce_gbs=reduce_gbs,
        link_latency_ns=latency_ns,
        link_bw_gbs=bw,
    )
    n = 2 * p * chunks * topo.chips.chunk_bytes
    plain, timed, by_periods = _three(topo, n, collective)
    assert timed.equals(plain), timed.first_difference(plain)
    assert by_periods.equals(plain), by_periods.first_difference(plain)


def _changed(prog: FabricProgram, op: int, nbytes: int) -> FabricProgram:
    out = prog.copy()
    out.nbytes[op] = nbytes
    return out


def test_a_period_that_differs_is_never_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """One send in the middle of the reduce-scatter moves a byte less: the program repeats up
    to it and from it on, not across it. The loop skips on both sides and never over it, and
    the log is the plain loop's."""
    jumps = _jumps(monkeypatch)
    topo = _ring(32)
    case = fast.ring_case(topo, 32 << 20, "ring", "allreduce", None)
    assert case is not None
    view = build_network(topo.replace_chips(count=3))
    timed = fast.without_implied(fast.quotient_program(case), case)
    assert timed is not None
    period = 4 * len(case.sizes)
    odd = 15 * period + 1  # step 15: chunk 0, ring 1's send
    prog = _changed(timed, odd, timed.nbytes[odd] - 1)
    want = simulate_fabric(view, prog)
    got = simulate_fabric(view, prog, period=period)
    assert got.equals(want), got.first_difference(want)
    assert want.stored["end"][odd] != simulate_fabric(view, timed).stored["end"][odd]
    assert any(last < odd for _c, _m, _first, last in jumps)
    assert any(first > odd for _c, _m, first, _last in jumps)
    for _cut, _m, first, last in jumps:
        assert not first <= odd <= last


def test_a_changed_quotient_is_timed_as_it_is() -> None:
    """A quotient whose sends wait for the wrong receive (the planted bug's kind) is not the
    ring's chains: nothing is dropped from it, and it is timed without periods."""
    topo = _ring(8)
    case = fast.ring_case(topo, 8 << 20, "ring", "allreduce", None)
    assert case is not None
    prog = fast.quotient_program(case)
    assert fast.without_implied(prog, case) is not None
    k = len(case.sizes)
    send = 4 * k + 1  # step 1, chunk 0, ring 1: waits for ring 0's receive instead
    prog.deps[send] = (prog.deps[send][0] - 1,)  # changed in place, as the planted bug does
    assert fast.without_implied(prog, case) is None
    # the columns the check compares with are not the changed program's lists
    assert fast.without_implied(fast.quotient_program(case), case) is not None


def _drains_late(n: int, lag: int, odd: int) -> FabricProgram:
    """A program of period 4 (not a ring quotient), after a review's reproducer: per period
    ``k`` a reduction on chip 2 after the period before (the cut op), a small transfer
    0 -> 1 after it, a copy on chip 1 that drains the transfer of ``lag`` periods before, and
    a reduction on chip 2 after the copy. Transfer ``odd`` alone is on lane 1, a staging pool
    of its own. Then a tail whose four transfers start as lane 0's credits allow."""
    prog = FabricProgram()
    lanes: list[int] = []

    def add(*args: Any, lane: int = 0, **kw: Any) -> int:
        lanes.append(lane)
        return prog.add(*args, **kw)

    sends: list[int] = []
    after: tuple[int, ...] = ()
    for k in range(n):
        x = add(fabric.REDUCTION, 2, 2, 1 << 10, k, after)
        sends.append(add(fabric.TRANSFER, 0, 1, 128, k, (x,), lane=int(k == odd)))
        if k >= lag:
            t = sends[k - lag]
            c = add(fabric.COPY, 1, 1, 1 << 10, k, (t, x), consumes=t)
        else:
            c = add(fabric.COPY, 1, 1, 1 << 10, k, (x,))
        after = (add(fabric.REDUCTION, 2, 2, 1 << 10, k, (c,)),)
    r = add(fabric.REDUCTION, 0, 0, 1 << 10, n, (sends[-1],))
    z = add(fabric.REDUCTION, 1, 1, 64 << 20, n, (r,))
    for _ in range(4):
        b = add(fabric.TRANSFER, 0, 1, 1 << 10, n, (r,))
        add(fabric.COPY, 1, 1, 1 << 10, n, (b, z), consumes=b)
    prog.lane = lanes
    return prog


def test_a_buffer_goes_back_to_the_pool_of_the_transfer_it_drained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A copy drains a transfer two periods back, below the ops the cuts compare: where that
    transfer is on a lane of its own, the buffer the copy frees goes back to that lane's pool,
    not to the pool its counterpart a period before used. The loop does not skip across it
    (it did: lane 0 came out one credit rich and the tail's transfers started early)."""
    jumps = _jumps(monkeypatch)
    net = build_network(
        BASE.replace_chips(count=3, topology="ring", staging_buffers=3, link_latency_ns=1)
    )
    prog = _drains_late(40, 2, 8)
    want = simulate_fabric(net, prog)
    got = simulate_fabric(net, prog, period=4)
    assert got.equals(want), got.first_difference(want)
    assert jumps  # it does skip, before and after the odd lane
    plain = _drains_late(40, 2, -1)
    assert simulate_fabric(net, plain, period=4).equals(simulate_fabric(net, plain))
