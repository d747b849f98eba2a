"""The flat ring on two switch dimensions by the quotient (sim.fabric.quotient,
sim.collectives.fast_product): its order is a reflected Gray code of the chips' digits, so
no translation of digits maps it onto itself, but turning it by one node's sweep does
(node ``j`` is node ``j - 1`` reflected, one node on). The op log must be the event
engine's, every column, and the quotient one node's chips."""

from __future__ import annotations

import hashlib

import pytest

from sim import load_topology
from sim.collectives import run_collective
from sim.collectives.catalog import build_schedule
from sim.collectives.fast_product import QuotientRun
from sim.collectives.run import run_schedule
from sim.fabric import build_network
from sim.oplog import COLUMNS


def _two_level(inner: int, outer: int) -> object:
    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    return load_topology("npu-1h").replace_dimensions(
        [{"shape": "switch", "size": inner, **link}, {"shape": "switch", "size": outer, **link}]
    )


def _sha(log: object) -> str:
    h = hashlib.sha256()
    for c in COLUMNS:
        h.update(log.column(c).tobytes())  # type: ignore[attr-defined]
    return h.hexdigest()


@pytest.mark.parametrize("collective", ["allreduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize(("inner", "outer"), [(2, 4), (4, 4), (8, 2), (8, 8)])
def test_flat_ring_is_timed_from_one_node(collective: str, inner: int, outer: int) -> None:
    topo = _two_level(inner, outer)
    nbytes = 1 << 18
    run = run_collective(topo, nbytes, "ring", collective)  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun)
    assert run.quotient is not None
    assert list(run.quotient.reps) == list(range(inner))  # one node's chips
    net = build_network(topo)  # type: ignore[arg-type]
    ref = run_schedule(build_schedule(topo, nbytes, "ring", collective, network=net), net)  # type: ignore[arg-type]
    assert _sha(run.log) == _sha(ref.log)
    assert run.wrong == ref.wrong == 0
