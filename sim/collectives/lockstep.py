"""A schedule compiled for the fabric, with blocking steps where the schedule asks for them.

:func:`sim.collectives.compile.fabric_program` orders ops by the data they move only, so the
steps of a schedule pipeline chunk by chunk (NCCL's way). A **blocking** schedule
(``Schedule.blocking``: MPI's pairwise alltoall, each step a blocking ``MPI_Sendrecv``) also
orders each chip's steps: every transfer a chip sends in step ``s`` depends on the last
transfer it sent and the last chunk it received in its step before (a dependency carries no
data, so the fabric's streaming rule applies to it: the step may start once that last chunk
is under way and cannot end before it has ended, so consecutive steps overlap by at most one
chunk).
"""

from __future__ import annotations

from sim.collectives.compile import Compiled, fabric_program
from sim.collectives.schedule import Schedule
from sim.fabric import TRANSFER, FabricProgram


def compile_schedule(schedule: Schedule) -> Compiled:
    """:func:`fabric_program` of ``schedule``, with its steps blocking when it says so."""
    compiled = fabric_program(schedule)
    if schedule.blocking:
        block_steps(compiled.program)
    return compiled


def block_steps(prog: FabricProgram) -> None:
    """Make each chip's transfers of step ``s`` depend on its last transfer and its last
    received chunk of the step before it (module docstring); in place."""
    last: dict[tuple[int, int], list[int]] = {}  # (chip, step) -> [last send, last receive]
    for op, (kind, src, step) in enumerate(zip(prog.kind, prog.src, prog.step, strict=True)):
        last.setdefault((src, step), [-1, -1])[0 if kind == TRANSFER else 1] = op
    steps = sorted({s for _c, s in last})
    before = dict(zip(steps[1:], steps, strict=False))
    for op, (kind, src, step) in enumerate(zip(prog.kind, prog.src, prog.step, strict=True)):
        if kind != TRANSFER or step not in before:
            continue
        waits = [x for x in last.get((src, before[step]), ()) if x >= 0]
        if waits:
            prog.deps[op] = tuple(sorted({*prog.deps[op], *waits}))
