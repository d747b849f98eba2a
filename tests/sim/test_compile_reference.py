"""The vectorised compile phase (``sim.collectives.compile``) against the op-by-op one as it was
before (``tests/sim/compile_reference.py``, kept verbatim): the same program, field by field,
and the same per-op pieces, for the schedule of every collective x algorithm x topology shape
the catalog offers (chunked and not, with channels, protocols, lanes and landing offsets), and
the same error where one fails."""

from __future__ import annotations

import dataclasses
from typing import Any

import compile_reference as ref
import numpy as np
import pytest

import sim.collectives.run as run_module
from sim import load_topology
from sim.collectives import run_collective
from sim.collectives.catalog import collective_algorithms
from sim.collectives.compile import Compiled, _columns, _op_by_op, _plan, fabric_program
from sim.collectives.lockstep import compile_schedule
from sim.collectives.schedule import Message, Schedule

BASE = load_topology()
SHAPES = ("ring", "fully_connected", "switch", "torus2d")
COLLS = ("allreduce", "reduce_scatter", "all_gather", "broadcast", "alltoall", "reduce", "sendrecv")


def _schedules(topo: Any, nbytes: int, alg: str, coll: str, **kw: Any) -> list[Schedule]:
    """The schedules ``run_collective`` compiles for one collective (none if it refuses)."""
    got: list[Schedule] = []
    real = run_module.compile_schedule

    def capture(schedule: Schedule) -> Compiled:
        got.append(schedule)
        return real(schedule)

    run_module.compile_schedule = capture
    try:
        run_collective(topo, nbytes, alg, coll, **kw)
    except (ValueError, KeyError):
        pass  # a combination the catalog refuses: whatever was compiled before still counts
    finally:
        run_module.compile_schedule = real
    return got


def _cases() -> list[tuple[str, Any, int, str, str, dict[str, Any]]]:
    out = []
    for shape in SHAPES:
        kw_t = {"torus_dims": [2, 4]} if shape == "torus2d" else {}
        for p in (2, 8):
            if shape == "torus2d" and p != 8:
                continue
            topo = BASE.replace_chips(topology=shape, count=p, **kw_t)
            for coll in COLLS:
                for alg in collective_algorithms(coll, shape):
                    for nbytes in (4096, 3 << 20):
                        out.append(
                            (f"{shape}-p{p}-{coll}-{alg}-{nbytes}", topo, nbytes, alg, coll, {})
                        )
    ring = BASE.replace_chips(topology="ring", count=8)
    out.append(("ring-channels-4", ring, 3 << 20, "ring", "allreduce", {"channels": 4}))
    out.append(("ring-ll128", ring, 3 << 20, "ring", "allreduce", {"protocol": "ll128"}))
    out.append(("ring-odd-size", ring, (3 << 20) + 12, "ring", "allreduce", {}))
    mi = load_topology("mi300x-8")
    for nbytes in (1 << 20, 64 << 20):
        out.append((f"mi300x-8-ring-{nbytes}", mi, nbytes, "ring", "allreduce", {}))
    return out


CASES = _cases()


def _same(old: Compiled, new: Compiled) -> None:
    for f in dataclasses.fields(old.program):
        assert getattr(new.program, f.name) == getattr(old.program, f.name), f"program.{f.name}"
    for f in ("bounds", "lo", "hi", "reduce", "fresh"):
        assert getattr(new, f) == getattr(old, f), f


def _outcome(fn: Any, schedule: Schedule) -> Any:
    try:
        return fn(schedule)
    except Exception as exc:  # the comparison is the point
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compile_is_the_reference(case: tuple[Any, ...]) -> None:
    _label, topo, nbytes, alg, coll, kw = case
    schedules = _schedules(topo, nbytes, alg, coll, **kw)
    for schedule in schedules:
        old, new = _outcome(ref.compile_schedule, schedule), _outcome(compile_schedule, schedule)
        if isinstance(old, tuple) or isinstance(new, tuple):
            assert old == new
        else:
            _same(old, new)


def test_the_cases_compile_something() -> None:
    """The capture is not vacuous: most cases reach the compile phase, several steps each."""
    reached = [c for c in CASES if _schedules(*c[1:5], **c[5])]
    assert len(reached) >= 0.8 * len(CASES)


def test_columns_and_op_by_op_agree_where_both_run() -> None:
    """The column build and the op-by-op loop it falls back to give the same program."""
    ring = BASE.replace_chips(topology="ring", count=8)
    for alg in ("ring", "double_binary_tree", "direct"):
        for schedule in _schedules(ring, 3 << 20, alg, "allreduce"):
            fast = fabric_program(schedule)
            slow = _op_by_op(schedule, *_plan(schedule))
            _same(slow, fast)


def _random_schedule(rng: Any) -> Schedule:
    """A schedule no algorithm writes: messages of several sizes in one step (so their chunk
    counts differ), shared accumulators, overlapping receives (the op-by-op fallback),
    fresh sends, lanes and landing offsets, in random steps over 2..6 chips."""
    chips = int(rng.integers(2, 7))
    count = int(rng.integers(1, 400))
    steps = []
    for _s in range(int(rng.integers(1, 5))):
        step = []
        for _m in range(int(rng.integers(1, 2 * chips + 1))):
            src, dst = (int(x) for x in rng.choice(chips, size=2, replace=False))
            lo = int(rng.integers(0, count))
            hi = int(rng.integers(lo + 1, count + 1))
            at = None
            if rng.random() < 0.15:
                at = int(rng.integers(0, count - (hi - lo) + 1))
            step.append(
                Message(
                    src,
                    dst,
                    lo,
                    hi,
                    reduce=bool(rng.random() < 0.6),
                    fresh=bool(rng.random() < 0.2),
                    lane=int(rng.integers(0, 2)),
                    at=at,
                )
            )
        steps.append(tuple(step))
    return Schedule(
        collective="allreduce",
        algorithm="ring",
        chips=chips,
        count=count,
        bytes_per_element=int(rng.choice([1, 2, 4])),
        chunk_bytes=int(rng.choice([16, 64, 256, 1 << 20])),
        steps=tuple(steps),
        depth=int(rng.choice([1, 2, 4])),
        blocking=bool(rng.random() < 0.3),
    )


def test_random_schedules_compile_as_the_reference() -> None:
    """Seeded random schedules (``_random_schedule``): the same program or the same error,
    and both the column build and its op-by-op fallback are reached."""
    rng = np.random.default_rng(20261203)
    columns = 0
    for _i in range(400):
        schedule = _random_schedule(rng)
        old, new = _outcome(ref.compile_schedule, schedule), _outcome(compile_schedule, schedule)
        if isinstance(old, tuple) or isinstance(new, tuple):
            assert old == new
            continue
        _same(old, new)
        columns += _columns(schedule, *_plan(schedule)) is not None
    assert 40 <= columns <= 360  # both paths taken


def test_blocking_steps_are_the_references_on_random_programs() -> None:
    """``lockstep.block_steps`` (all ops at once) against the op-by-op reference on random
    programs: steps with gaps between their numbers, chips idle in a step, copies and
    reductions among the transfers, dependencies of their own to merge with."""
    from sim.collectives.lockstep import block_steps
    from sim.fabric import COPY, REDUCTION, TRANSFER, FabricProgram

    rng = np.random.default_rng(20261206)
    added = 0
    for _i in range(300):
        prog = FabricProgram()
        for op in range(int(rng.integers(1, 40))):
            kind = int(rng.choice([TRANSFER, TRANSFER, COPY, REDUCTION]))
            src, dst = (int(x) for x in rng.integers(0, 5, size=2))
            deps = tuple(sorted({int(x) for x in rng.integers(0, op, size=2)})) if op else ()
            step = int(rng.choice([0, 2, 3, 7]))
            prog.add(kind, src, dst if kind == TRANSFER else src, 8, step, deps)
        before = list(prog.deps)
        old = dataclasses.replace(prog, deps=list(before))
        ref.block_steps(old)
        block_steps(prog)
        assert prog.deps == old.deps
        added += sum(a != b for a, b in zip(prog.deps, before, strict=True))
    assert added > 1000  # the blocking dependencies were there to find


def _rows_compile(schedule: Schedule) -> Compiled:
    from sim.collectives.compile import fabric_program_rows
    from sim.collectives.schedule import message_rows

    return fabric_program_rows(
        dataclasses.replace(schedule, steps=()), message_rows(schedule.steps)
    )


def test_the_rows_compile_is_the_schedules() -> None:
    """fabric_program_rows (the messages as arrays, chunks cut per distinct size) against
    fabric_program on every case's schedules that land where they are sent, on the seeded
    random ones (different chunk counts in a step, shared accumulators, the op-by-op
    fallback) with empty steps planted before, between and after, and one landing offset
    refused."""
    from sim.collectives.compile import fabric_program_rows
    from sim.collectives.schedule import message_rows

    compared = 0
    for case in CASES:
        for schedule in _schedules(*case[1:5], **case[5]):
            if not any(m.at is not None for s in schedule.steps for m in s):
                _same(fabric_program(schedule), _rows_compile(schedule))
                compared += 1
    assert compared >= 100
    rng = np.random.default_rng(20261207)
    columns = 0
    for _i in range(300):
        schedule = _random_schedule(rng)
        steps = [tuple(dataclasses.replace(m, at=None) for m in s) for s in schedule.steps]
        steps = [(), *steps[:1], (), *steps[1:], ()]
        schedule = dataclasses.replace(schedule, steps=tuple(steps))
        _same(fabric_program(schedule), _rows_compile(schedule))
        columns += _columns(schedule, *_plan(schedule)) is not None
    assert 30 <= columns <= 270  # both paths taken
    moved = Schedule("allreduce", "ring", 2, 8, 4, 64, ((Message(0, 1, 0, 4, False, at=4),),))
    with pytest.raises(ValueError, match="lands"):
        fabric_program_rows(moved, message_rows(moved.steps))
