"""A collective's races from its dependency graph (sim.collectives.races), fast paths too."""

from __future__ import annotations

import dataclasses

import pytest

from sim.collectives import COLLECTIVE_ALGORITHMS, algorithms_for, run_collective
from sim.collectives.compile import Compiled
from sim.collectives.fast import SymmetricRun
from sim.collectives.fast_direct import DirectRun
from sim.collectives.races import compiled_race, quotient_race, symmetric_race
from sim.fabric import REDUCTION, TRANSFER, FabricProgram
from sim.topology import load_topology

TOPOLOGIES = ("ring", "fully_connected", "switch", "torus2d")


def _topo(shape: str, chips: int = 4):  # type: ignore[no-untyped-def]
    dims = {4: (2, 2), 6: (2, 3), 8: (2, 4)}[chips]
    return load_topology("npu-1h").replace_chips(count=chips, topology=shape, torus_dims=dims)


def _cases() -> list[tuple[str, str, str]]:
    out = [("allreduce", t, a) for t in TOPOLOGIES for a in algorithms_for(t)]
    for c, algos in COLLECTIVE_ALGORITHMS.items():
        if c != "allreduce":
            out += [(c, t, a) for t in TOPOLOGIES for a in algos]
    return out


@pytest.mark.parametrize(("collective", "shape", "algorithm"), _cases())
def test_every_collective_as_built_is_race_free(
    collective: str, shape: str, algorithm: str
) -> None:
    topo = _topo(shape, 6)
    run = run_collective(topo, 96 * 1024, algorithm, collective)  # the catalog offers it
    assert run.dependency_race() == ""


def _drop(prog: FabricProgram, op: int, dep: int) -> FabricProgram:
    deps = list(prog.deps)
    deps[op] = tuple(d for d in deps[op] if d != dep)
    return dataclasses.replace(prog, deps=deps)


def test_a_reduction_that_does_not_wait_for_the_sum_it_adds_to_is_named_with_it() -> None:
    run = run_collective(_topo("switch", 4), 64 * 1024, "recursive_halving", "reduce_scatter")
    c = run.compiled
    prog = c.program
    # a reduction of step 1 whose elements a step-0 reduction wrote on its chip
    i = next(
        i
        for i, k in enumerate(prog.kind)
        if k == REDUCTION
        and prog.step[i] == 1
        and any(prog.kind[d] == REDUCTION for d in prog.deps[i])
    )
    before = next(d for d in prog.deps[i] if prog.kind[d] == REDUCTION)
    assert compiled_race(c) == ""
    bad = Compiled(_drop(prog, i, before), c.bounds, c.lo, c.hi, c.reduce, c.fresh)
    msg = compiled_race(bad)
    assert msg.startswith(f"race: reduction op {i} on chip {prog.src[i]} (step 1"), msg
    assert (
        f"does not depend on reduction op {before} " in msg and "which produced its operand" in msg
    )


def test_a_send_that_does_not_wait_for_the_reduction_it_forwards_is_named_with_it() -> None:
    """Ring reduce-scatter, a step's send reading its buffer before the step before has
    reduced into it (the race of ``planted: ccl-rs-send-reads-stale-step``)."""
    run = run_collective(_topo("torus2d", 4), 64 * 1024, "ring", "reduce_scatter")
    c = run.compiled
    prog = c.program
    i = next(
        i for i, k in enumerate(prog.kind) if k == TRANSFER and prog.step[i] == 1 and prog.deps[i]
    )
    (before,) = prog.deps[i]
    assert prog.kind[before] == REDUCTION and prog.step[before] == 0
    bad = Compiled(_drop(prog, i, before), c.bounds, c.lo, c.hi, c.reduce, c.fresh)
    msg = compiled_race(bad)
    assert msg.startswith(
        f"race: transfer op {i} (chip {prog.src[i]} -> chip {prog.dst[i]}, step 1"
    )
    assert f"does not depend on reduction op {before} on chip {prog.src[i]} (step 0" in msg


def test_a_consumer_that_does_not_wait_for_its_transfer_is_named() -> None:
    run = run_collective(_topo("fully_connected", 4), 64 * 1024, "direct", "allreduce")
    c = run.compiled
    prog = c.program
    i = next(i for i, k in enumerate(prog.kind) if k == REDUCTION)
    t = prog.consumes[i]
    bad = Compiled(_drop(prog, i, t), c.bounds, c.lo, c.hi, c.reduce, c.fresh)
    msg = compiled_race(bad)
    assert f"reduction op {i} on chip" in msg and f"transfer op {t} " in msg
    assert "which produced the data it reduces" in msg


def test_the_ring_fast_path_checks_chip_0s_quotient_it_timed() -> None:
    run = run_collective(_topo("ring", 8), 8 * 16 * 1024, "ring", "allreduce")
    assert isinstance(run, SymmetricRun)
    assert run.dependency_race() == ""
    q, case = run.quotient, run.case
    # a send of step 2 that does not wait for the receive of step 1 it forwards
    k = len(case.sizes)
    send = 2 * 4 * k
    (dep,) = q.deps[send]
    bad = _drop(q, send, dep)
    msg = symmetric_race(bad, case.chips, case.sizes, case.count, case.reduce_steps)
    assert msg.startswith(f"race: transfer op {send} (chip 0 -> chip 0's successor, step 2"), msg
    assert f"does not depend on reduction op {dep} on chip 0 (step 1" in msg
    # a receive that does not wait for the transfer it drains (the neighbour's send)
    recv = 2 * k + 1  # step 0: its receives, chunk 0, ring 1
    t = q.consumes[recv]
    msg = symmetric_race(_drop(q, recv, t), case.chips, case.sizes, case.count, case.reduce_steps)
    assert f"race: reduction op {recv} on chip 0 (step 0" in msg, msg
    assert f"transfer op {t} " in msg and "the data it reduces" in msg
    # the all-gather's copy of a piece needs the reduction it overwrites, but the ring
    # orders them without that edge too (the sum comes back round): the full program and
    # the quotient agree that dropping it is no race, because the quotient's paths count
    # their turns round the ring
    copy = next(
        i for i in range(len(q)) if q.kind[i] != TRANSFER and q.step[i] == case.reduce_steps + 1
    )
    before = next(d for d in q.deps[copy] if q.kind[d] == REDUCTION)
    args = (case.chips, case.sizes, case.count, case.reduce_steps)
    assert symmetric_race(_drop(q, copy, before), *args) == ""
    full = run.compiled
    f_copy = next(
        i
        for i, kk in enumerate(full.program.kind)
        if kk != TRANSFER and full.program.step[i] == case.reduce_steps + 1
    )
    f_before = next(d for d in full.program.deps[f_copy] if full.program.kind[d] == REDUCTION)
    dropped = _drop(full.program, f_copy, f_before)
    assert (
        compiled_race(Compiled(dropped, full.bounds, full.lo, full.hi, full.reduce, full.fresh))
        == ""
    )


def test_the_direct_fast_path_checks_its_representatives_program() -> None:
    run = run_collective(_topo("ring", 8), 8 * 16 * 1024, "direct", "allreduce")
    assert isinstance(run, DirectRun)
    assert run.dependency_race() == ""
    q = run.quotient
    i = next(i for i, k in enumerate(q.kind) if k == REDUCTION)
    msg = quotient_race(_drop(q, i, q.consumes[i]))
    assert f"reduction op {i} on chip {q.src[i]}" in msg and "the data it reduces" in msg


@pytest.mark.parametrize(
    ("algorithm", "collective"),
    [
        ("ring", "allreduce"),
        ("direct", "allreduce"),
        ("ring", "all_gather"),
        ("direct", "reduce_scatter"),
    ],
)
def test_the_orbit_fast_path_checks_its_representatives_program(
    algorithm: str, collective: str
) -> None:
    """On two switch dimensions (sim.collectives.fast_orbit) the timed quotient stands for
    the compile of the messages the representatives send or receive: that compile is the one
    checked, and a dependency dropped from it is named."""
    from sim.collectives.fast_orbit import OrbitRun

    link = {"link_bw_gbs": 50, "link_latency_ns": 1000}
    topo = load_topology("npu-1h").replace_dimensions(
        [{"shape": "switch", "size": 4, **link}, {"shape": "switch", "size": 2, **link}]
    )
    run = run_collective(topo, 8 * 16 * 1024, algorithm, collective)
    assert isinstance(run, OrbitRun)
    assert run.dependency_race() == ""
    c = run.orbit.compiled
    prog = c.program
    i = next(i for i, k in enumerate(prog.kind) if k != TRANSFER and prog.consumes[i] >= 0)
    bad = Compiled(_drop(prog, i, prog.consumes[i]), c.bounds, c.lo, c.hi, c.reduce, c.fresh)
    msg = compiled_race(bad)
    assert f"op {i} on chip {prog.src[i]}" in msg and f"transfer op {prog.consumes[i]} " in msg
