"""The per-record fabric invariants of ``benches._records`` (issue 26, class 4) on a log the
engine wrote and on the same log with one record moved."""

from __future__ import annotations

import dataclasses

import numpy as np

from benches._records import fabric_records
from sim import load_topology
from sim.fabric import TRANSFER, FabricProgram, Network, build_network, simulate_fabric
from sim.oplog import OpLog

TOPO = load_topology().replace_chips(count=3, topology="fully_connected", torus_dims=(1, 3))


def _case() -> tuple[Network, OpLog, int]:
    """The case of tests/sim/test_link.py's dependent-never-starts-early test: ``dep``
    (op 3) on link 0 -> 2 after ``block`` (op 4, 0..15 us)."""
    net = build_network(TOPO)
    prog = FabricProgram()
    first = prog.add(TRANSFER, 1, 0, 2000, 0, (), hbm=0, span=(0, 1000))
    prog.add(TRANSFER, 1, 0, 1_000_000, 0, (), hbm=0)
    second = prog.add(TRANSFER, 1, 0, 4000, 0, (), hbm=0, span=(1000, 3000))
    dep = prog.add(TRANSFER, 0, 2, 1_000_000, 1, (first, second), hbm=0, span=(0, 2000))
    prog.add(TRANSFER, 0, 2, 750_000, 0, (), hbm=0)
    return net, simulate_fabric(net, prog), dep


def test_the_engines_log_keeps_the_hop_rule() -> None:
    net, log, _dep = _case()
    assert fabric_records(log, TOPO, net) == []


def test_a_first_hop_on_a_busy_link_is_named() -> None:
    """A first hop's start is not fixed by the rule (it waits on data, HBM or a buffer), but
    it cannot start while its link still carries another transfer: the log the engine wrote
    before ADR 0031 (``dep`` at 11.045 us, ``block`` holding link 0 -> 2 until 15 us) fails,
    naming the link, the op and both times."""
    net, log, dep = _case()
    start = np.asarray(log.start).copy()
    end = np.asarray(log.end).copy()
    at = int(np.flatnonzero(np.asarray(log.op) == dep)[0])
    start[at], end[at] = 11_045_120, 31_045_120
    moved = dataclasses.replace(log, start=start, end=end)
    problems = fabric_records(moved, TOPO, net)
    assert len(problems) == 1, problems
    assert "1 link record(s) start while their link is busy" in problems[0]
    assert (
        f"link0->2 (op {dep}, hop 0) starts at 11045120 ps, the link is busy until 15000000 ps"
        in problems[0]
    )
