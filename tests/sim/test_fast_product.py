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


def test_hierarchical_is_timed_from_one_rail_with_the_spans_its_stand_ins_stand_for() -> None:
    """hierarchical: a translation of the outer digit changes which part of dimension 0's
    reduction a dimension-1 send streams from (a real asymmetry), so only the translations of
    dimension 0 keep the program; under them a neighbour's transfer stands in with another
    range, and the quotient tells each such dependent the real producer's span
    (FabricProgram.seen_span, ADR 0032). The log is the event engine's."""
    topo = _two_level(2)
    # (run_collective takes sim.collectives.fast_orbit first, which builds no full program)
    run = product_run(topo, 1 << 18, "hierarchical", "allreduce", None)  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun) and run.quotient is not None
    assert run.quotient.group.name == "translations of dimensions [0]"
    assert run.quotient.program.seen_span  # the case it is for
    ref = _event(topo, 1 << 18, "hierarchical", "allreduce")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]
    assert run.wrong == ref.wrong == 0  # type: ignore[attr-defined]


def test_asymmetric_streaming_falls_back_to_the_event_engine() -> None:
    """pairwise: its lockstep dependencies join disjoint blocks, and the streaming rule reads
    their absolute offsets, which every translation moves: the checks must refuse every
    group, and the log stays exact."""
    topo = _two_level(2)
    run = run_collective(topo, 1 << 18, "pairwise", "alltoall")  # type: ignore[arg-type]
    assert isinstance(run, QuotientRun) and run.quotient is None
    ref = _event(topo, 1 << 18, "pairwise", "alltoall")
    assert _sha(run.log) == _sha(ref.log)  # type: ignore[attr-defined]


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
