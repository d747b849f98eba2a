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

import numpy as np

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
    received chunk of the step before it (module docstring); in place.

    "The step before" is the previous step that has any op, on any chip; a chip with no op in
    it waits for nothing. Found for all ops at once (the last op of each kind per chip and
    step is the largest id), then merged into each transfer's own dependencies."""
    n = len(prog)
    if not n:
        return
    kind = np.asarray(prog.kind, dtype=np.int64)
    src = np.asarray(prog.src, dtype=np.int64)
    steps, index = np.unique(np.asarray(prog.step, dtype=np.int64), return_inverse=True)
    width = len(steps)
    key = src * width + index
    ops = np.arange(n, dtype=np.int64)
    sends = kind == TRANSFER
    last_send = np.full((int(src.max()) + 1) * width, -1, dtype=np.int64)
    last_recv = np.full_like(last_send, -1)
    np.maximum.at(last_send, key[sends], ops[sends])
    np.maximum.at(last_recv, key[~sends], ops[~sends])
    waiting = np.flatnonzero(sends & (index > 0))
    before = key[waiting] - 1  # the same chip, the step before
    deps = prog.deps
    for op, a, b in zip(
        waiting.tolist(), last_send[before].tolist(), last_recv[before].tolist(), strict=True
    ):
        if a < 0 and b < 0:
            continue
        new = {*deps[op], a, b}
        new.discard(-1)
        deps[op] = tuple(sorted(new))
