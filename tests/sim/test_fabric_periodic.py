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
