"""`direct` allreduce on a ring by symmetry (sim.collectives.fast_direct, ADR 0026): the same
op log as the exact event engine (every column), the same metrics, and a functional check
that catches a planted fault."""

from __future__ import annotations

import numpy as np
import pytest

from sim import load_topology
from sim.collectives import allreduce, build_schedule, collective_metrics, run_schedule
from sim.collectives.fast_direct import DirectRun, _replay
from sim.fabric import REDUCE, build_network
from sim.oplog import COLUMNS, OpLog

BASE = load_topology()


def _exact(p: int, n: int, chunk: int | None = None) -> tuple[DirectRun, object]:
    topo = BASE.replace_chips(count=p, topology="ring")
    run = allreduce(topo, n, "direct", chunk_bytes=chunk)
    assert isinstance(run, DirectRun)
    net = build_network(topo)
    ref = run_schedule(build_schedule(topo, n, "direct", chunk_bytes=chunk, network=net), net)
    return run, ref


@pytest.mark.parametrize("p", [3, 4, 5, 6, 7, 8, 9, 10])
def test_the_symmetric_log_is_the_event_engines(p: int) -> None:
    """Odd rings (turn by one) and even rings (turn by two, ties at half by parity): every
    record, every column, and every metric equal the exact engine's."""
    for n, chunk in ((2, None), (65_536 + 6, None), (3 * 1024 * 1024 + 2, None), (200_002, 16384)):
        run, ref = _exact(p, n, chunk)
        assert len(run.log.rep) * (p // (1 if p % 2 else 2)) == len(ref.log)  # type: ignore[attr-defined]
        for c in COLUMNS:
            assert np.array_equal(run.log.column(c), ref.log.column(c)), (p, n, c)  # type: ignore[attr-defined]
        assert collective_metrics(run) == collective_metrics(ref), (p, n)  # type: ignore[arg-type]
        assert run.wrong == 0


def test_other_cases_are_not_taken() -> None:
    """Other algorithms, topologies, chip counts and runtimes run the full program."""
    ring = BASE.replace_chips(count=6, topology="ring")
    assert not isinstance(allreduce(ring, 65_536, "ring"), DirectRun)
    assert not isinstance(allreduce(ring.replace_chips(count=2), 65_536, "direct"), DirectRun)
    fc = BASE.replace_chips(count=6, topology="fully_connected")
    assert not isinstance(allreduce(fc, 65_536, "direct"), DirectRun)
    assert not isinstance(allreduce(ring, 65_536, "direct", protocol="simple"), DirectRun)


def _without(rep: OpLog, drop: int) -> OpLog:
    keep = np.ones(len(rep), dtype=bool)
    keep[drop] = False
    return OpLog.from_columns(rep.engines, rep.stages, {c: rep.stored[c][keep] for c in COLUMNS})


def test_the_check_catches_a_missing_reduction_and_early_data() -> None:
    """A reduction left out of the representatives' log leaves its chunk without one input on
    every chip of its orbit; a reduction moved before its data arrived fails every element."""
    run, _ref = _exact(6, 3 * 1024 * 1024 + 2)
    rep, net, prog = run.log.rep, run.network, run.quotient
    red = np.flatnonzero(rep.stored["stage"] == REDUCE)
    wrong, why = _replay(net, prog, _without(rep, int(red[4])), run.count)
    assert wrong > 0 and "holds the inputs" in why
    cols = {c: rep.stored[c].copy() for c in COLUMNS}
    cols["start"][red[4]] = 0
    early = OpLog.from_columns(rep.engines, rep.stages, cols)
    wrong, why = _replay(net, prog, early, run.count)
    assert wrong == 6 * run.count and "before it arrived" in why
