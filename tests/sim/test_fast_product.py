"""The quotient fast path on two switch dimensions (sim.collectives.fast_product,
sim.fabric.quotient): where a group passes its checks, the op log is the event engine's,
every column; where it does not, the exact engine runs."""

from __future__ import annotations

import hashlib

import pytest

from sim import load_topology
from sim.collectives import run_collective
from sim.collectives.catalog import build_schedule
from sim.collectives.fast_product import QuotientRun, product_run
from sim.collectives.run import run_schedule
from sim.fabric import build_network
from sim.oplog import COLUMNS


def _two_level(outer: int) -> object:
    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    return load_topology("npu-1h").replace_dimensions(
        [{"shape": "switch", "size": 8, **link}, {"shape": "switch", "size": outer, **link}]
    )


def _sha(log: object) -> str:
    h = hashlib.sha256()
    for c in COLUMNS:
        h.update(log.column(c).tobytes())  # type: ignore[attr-defined]
    return h.hexdigest()


def _event(topo: object, nbytes: int, algorithm: str, collective: str) -> object:
    net = build_network(topo)  # type: ignore[arg-type]
    sched = build_schedule(topo, nbytes, algorithm, collective, network=net)  # type: ignore[arg-type]
    return run_schedule(sched, net)


@pytest.mark.parametrize(
    ("collective", "algorithm", "outer"),
    [
        ("allreduce", "direct", 2),
        ("allreduce", "direct", 4),
        ("alltoall", "direct", 4),
        ("sendrecv", "direct", 8),
    ],
)
def test_quotient_log_is_the_event_engines(collective: str, algorithm: str, outer: int) -> None:
    topo = _two_level(outer)
    nbytes = 1 << 18
    run = product_run(topo, nbytes, algorithm, collective, None)  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun)  # (direct also runs from sim.collectives.fast_orbit)
    assert run.quotient is not None  # timed from representatives, not the full program
    assert len(run.quotient.program) * run.quotient.group.order == len(run.compiled.program)
    if collective != "sendrecv":  # peers by digit-wise offset (ADR 0032): one chip for all
        assert run.quotient.group.order == 8 * outer
    ref = _event(topo, nbytes, algorithm, collective)
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]


def test_hierarchical_is_timed_from_one_rail() -> None:
    """hierarchical: only the translations of dimension 0 keep the program (ADR 0032), so one
    rail stands for all. Its stand-ins need no span of their own since ADR 0034 (the
    dependencies that read offsets were between disjoint blocks, which carry no data), so
    the quotient carries none; the log is the event engine's."""
    topo = _two_level(2)
    # (run_collective takes sim.collectives.fast_orbit first, which builds no full program)
    run = product_run(topo, 1 << 18, "hierarchical", "allreduce", None)  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun) and run.quotient is not None
    assert run.quotient.group.name == "translations of dimensions [0]"
    assert not run.quotient.program.seen_span
    ref = _event(topo, 1 << 18, "hierarchical", "allreduce")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("outer", [2, 4])
def test_pairwise_is_timed_from_one_chip(outer: int) -> None:
    """pairwise: its lockstep dependencies join disjoint blocks and carry no data, so the
    streaming rule reads no offsets of them (ADR 0034) and every translation of the digits
    keeps the program: one chip stands for all (ADR 0032's peers by digit-wise offset). The
    log is the event engine's, on a step that wraps past the end of the vector too."""
    topo = _two_level(outer)
    run = run_collective(topo, 1 << 18, "pairwise", "alltoall")  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun) and run.quotient is not None
    assert run.quotient.group.name == "translations of dimensions [0, 1]"
    assert len(run.quotient.reps) == 1
    ref = _event(topo, 1 << 18, "pairwise", "alltoall")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]


def test_tree_ring_is_timed_from_one_rail() -> None:
    """tree_ring: the direct steps inside a node send by offset (ADR 0032) and every rail
    (chip i of every node) runs the same tree, so the translations of dimension 0 keep the
    program: one rail (chip 0 of every node) stands for all."""
    topo = _two_level(4)
    run = product_run(topo, 1 << 18, "tree_ring", "allreduce", None)  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun) and run.quotient is not None
    assert run.quotient.group.name == "translations of dimensions [0]"
    ref = _event(topo, 1 << 18, "tree_ring", "allreduce")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]
