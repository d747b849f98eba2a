"""The independent closed-form check of collectives (benches._alpha_beta): the textbook time
of each uncontended single-message case, against the simulation, exactly."""

from __future__ import annotations

import pytest

from benches._alpha_beta import alpha_beta, check_alpha_beta
from sim.collectives import run_collective
from sim.topology import load_topology

BASE = load_topology("npu-1h")


def _topo(shape: str, p: int):  # type: ignore[no-untyped-def]
    return BASE.replace_chips(count=p, topology=shape, torus_dims=(1, p))


CASES = [
    ("sendrecv", "direct", "ring", 8),
    ("sendrecv", "direct", "switch", 4),
    ("broadcast", "direct", "fully_connected", 2),
    ("broadcast", "ring", "switch", 2),
    ("reduce", "direct", "fully_connected", 2),
    ("reduce", "direct", "switch", 2),
    ("allreduce", "direct", "fully_connected", 2),
    ("allreduce", "direct", "switch", 2),
]


@pytest.mark.parametrize(("collective", "algorithm", "shape", "p"), CASES)
@pytest.mark.parametrize("size", [4096, 64 * 1024, 4 * 1024 * 1024])
def test_each_covered_case_is_its_textbook_time_exactly(
    collective: str, algorithm: str, shape: str, p: int, size: int
) -> None:
    topo = _topo(shape, p)
    want = alpha_beta(topo, collective, algorithm, size)
    assert want is not None and want.tolerance_ps == 0
    got = run_collective(topo, size, algorithm, collective).time_ps
    assert got == want.time_ps, want.formula


def test_a_reduction_ends_one_reduction_burst_after_its_last_byte() -> None:
    """reduce on 2 chips is sendrecv's one message, its copy's tail (a burst through HBM)
    replaced by a reduction's (a burst through the reduce engine, read and written in HBM)."""
    topo = _topo("fully_connected", 2)
    copy = alpha_beta(topo, "broadcast", "direct", 65536)
    red = alpha_beta(topo, "reduce", "direct", 65536)
    assert copy is not None and red is not None
    burst, hbm = topo.hbm.burst_bytes, topo.hbm.hbm_to_router_bw_gbs
    assert red.time_ps - copy.time_ps == round(2 * burst * 1000 / hbm) - round(burst * 1000 / hbm)


@pytest.mark.parametrize(
    ("collective", "algorithm", "shape", "p"),
    [
        ("allreduce", "direct", "fully_connected", 4),  # p - 1 messages into one HBM
        ("broadcast", "direct", "fully_connected", 4),  # the root's HBM serves three sends
        ("allreduce", "ring", "ring", 2),  # two steps, not one message
        ("reduce", "direct", "switch", 4),  # three senders share the root's downlink
    ],
)
def test_contended_or_multi_step_cases_are_not_covered(
    collective: str, algorithm: str, shape: str, p: int
) -> None:
    assert alpha_beta(_topo(shape, p), collective, algorithm, 65536) is None


def test_a_time_off_by_a_hop_latency_is_named_as_one() -> None:
    topo = _topo("switch", 2)
    want = alpha_beta(topo, "reduce", "direct", 65536)
    assert want is not None
    alpha = round(topo.chips.link_latency_ns * 1000)
    (msg,) = check_alpha_beta(topo, "reduce", "direct", 65536, want.time_ps + alpha)
    assert "off by +1000000 ps = +1 x the hop latency alpha" in msg, msg
    (msg,) = check_alpha_beta(topo, "reduce", "direct", 65536, want.time_ps + 65536 * 20)
    assert "= +1 x n / beta" in msg, msg
    assert check_alpha_beta(topo, "reduce", "direct", 65536, want.time_ps) == []
