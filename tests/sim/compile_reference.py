"""The compile phase as it was before it was vectorised (commit b5cb104): the reference that
``test_compile_fast.py`` and ``benchmarks/compile_speed.py`` compare the new one against.

A frozen copy, not used by ``sim``: :func:`fabric_program` builds the program op by op with
``FabricProgram.add`` (the general loop, and the one-shot ``direct`` path it tried first),
:func:`compile_schedule` adds the blocking steps, :func:`dependents_of` is the old check.
"""

from __future__ import annotations

import numpy as np

from sim.collectives.channels import set_lanes
from sim.collectives.compile import Compiled
from sim.collectives.schedule import Range, Schedule
from sim.fabric import COPY, REDUCTION, TRANSFER, FabricProgram


def chunks(lo: int, hi: int, bpe: int, chunk: int, depth: int = 1) -> list[Range]:
    """Elements ``[lo, hi)`` cut into equal chunks (within one element) of at most ``chunk``
    bytes and at least ``depth`` of them (while there are elements), their number rounded
    up to a power of two: ``chunk / 2 < size <= chunk`` for large messages."""
    nbytes = (hi - lo) * bpe
    k = 1 << (max(-(-nbytes // chunk), depth, 1) - 1).bit_length()
    return _bisect(lo, hi, k)


def chunk_count(elements: int, bpe: int, chunk: int, depth: int = 1) -> int:
    """At least ``len(chunks(lo, lo + elements, bpe, chunk, depth))``, without cutting them."""
    k = 1 << (max(-(-elements * bpe // chunk), depth, 1) - 1).bit_length()
    return min(k, max(1, elements))


def _bisect(lo: int, hi: int, k: int) -> list[Range]:
    """``[lo, hi)`` halved recursively (first half ``floor``) into ``k`` parts, ``k`` a power of
    two; parts stay within one element of each other, and the halves of a range are cut as
    its own parts are (so halving-doubling's regions fall on chunk boundaries). Parts that
    would be empty are left out."""
    if k == 1 or hi - lo <= 1:
        return [(lo, hi)]
    mid = (lo + hi) // 2
    return _bisect(lo, mid, k // 2) + _bisect(mid, hi, k // 2)


def compile_schedule(schedule: Schedule) -> Compiled:
    """The old :func:`sim.collectives.lockstep.compile_schedule`."""
    compiled = fabric_program(schedule)
    if schedule.blocking:
        block_steps(compiled.program)
    return compiled


def block_steps(prog: FabricProgram) -> None:
    """The old :func:`sim.collectives.lockstep.block_steps` (in place)."""
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


def dependents_of(program: FabricProgram) -> list[list[int]]:
    """The old :func:`sim.fabric.program.dependents_of`."""
    dependents: list[list[int]] = [[] for _ in range(len(program))]
    for i, deps in enumerate(program.deps):
        for d in deps:
            if not 0 <= d < i:
                raise ValueError(f"op {i} depends on op {d}; dependencies must be earlier ops")
            dependents[d].append(i)
    for i, t in enumerate(program.consumes):
        if t >= 0 and (t >= i or program.kind[t] != TRANSFER or t not in program.deps[i]):
            raise ValueError(
                f"op {i} consumes op {t}: it must be an earlier transfer it depends on"
            )
    return dependents


def fabric_program(schedule: Schedule) -> Compiled:
    """The transfers, reductions and copies of ``schedule``, each depending on the data it needs.

    A transfer depends on the ops that last wrote its elements on the sender (none for a
    ``fresh`` send). When those are reductions or copies of received data, the chunk is
    forwarded as it is produced (NCCL's recvReduceSend / recvCopySend) and streams from the
    chip's on-chip buffers; otherwise (the chip's own input) the send reads HBM. Its
    consumer depends on the transfer and on the ops that last wrote those elements on the
    receiver. Every send of a
    step is placed before the step's receives land, so it reads the data as before the
    step. Within a step, transfers go round-robin over the messages, one chunk each.
    Reductions of one step into the same pieces of one chip share an accumulator
    (``FabricProgram.into``): they depend on what the pieces held before the step, not on
    each other, and an op that later reads the pieces depends on all of them.
    """
    one_shot = _one_shot_program(schedule)
    if one_shot is not None:
        return one_shot
    bpe, chunk = schedule.bytes_per_element, schedule.chunk_bytes
    depth = schedule.depth
    cache: dict[Range, list[Range]] = {}
    cuts = {0, schedule.count}
    for step in schedule.steps:
        for m in step:
            if (m.lo, m.hi) not in cache:
                cache[m.lo, m.hi] = chunks(m.lo, m.hi, bpe, chunk, depth)
                cuts.update(x for r in cache[m.lo, m.hi] for x in r)
            if m.at is not None:  # where it lands, cut alike (Message.at)
                cuts.update(x - m.lo + m.at for r in cache[m.lo, m.hi] for x in r)
    bounds = sorted(cuts)
    index = {b: i for i, b in enumerate(bounds)}
    out = Compiled(FabricProgram(), bounds)
    add = out.program.add
    writer = [[-1] * (len(bounds) - 1) for _ in range(schedule.chips)]
    summed: dict[int, list[int]] = {}  # an accumulator's first reduction -> all that add into it
    produced: dict[int, Range] = {}  # consumer op -> the pieces it wrote
    laned = any(m.lane for step in schedule.steps for m in step)
    lanes: list[int] = []  # per op (when a message has a lane > 0): its lane

    def note(lo: int, hi: int, reduce: bool, fresh: bool) -> None:
        out.lo.append(lo)
        out.hi.append(hi)
        out.reduce.append(reduce)
        out.fresh.append(fresh)

    for at, step in enumerate(schedule.steps):
        plans = [cache[m.lo, m.hi] for m in step]
        landed = []
        for t in range(max(map(len, plans), default=0)):
            for m, plan in zip(step, plans, strict=True):
                if t < len(plan):
                    lo, hi = index[plan[t][0]], index[plan[t][1]]
                    deps = () if m.fresh else _deps(writer[m.src], lo, hi, summed)
                    nb = (plan[t][1] - plan[t][0]) * bpe
                    streams = bool(deps) and all(d in produced for d in deps)
                    span = (plan[t][0], plan[t][1])
                    op = add(
                        TRANSFER, m.src, m.dst, nb, at, deps, hbm=0 if streams else nb, span=span
                    )
                    note(lo, hi, m.reduce, m.fresh)
                    if laned:
                        lanes += [0] * (op - len(lanes)) + [m.lane]
                    if m.at is not None:  # lands elsewhere: its pieces there, its span unknown
                        lo, hi = index[plan[t][0] - m.lo + m.at], index[plan[t][1] - m.lo + m.at]
                        span = (0, 0)
                    landed.append((m.dst, lo, hi, nb, op, m.reduce, span))
        adding: dict[tuple[int, int, int], tuple[int, tuple[int, ...]]] = {}
        for dst, lo, hi, nb, op, is_reduce, span in landed:
            key = (dst, lo, hi)
            if is_reduce and key in adding:  # adds into what another reduction of the step does
                first, before = adding[key]
                into = out.program.into
                into[first] = first
                got = add(REDUCTION, dst, dst, nb, at, tuple(sorted({op, *before})), op, span=span)
                into[got] = first
                summed[first].append(got)
            else:
                before = _deps(writer[dst], lo, hi, summed)
                kind = REDUCTION if is_reduce else COPY
                got = add(kind, dst, dst, nb, at, tuple(sorted({op, *before})), op, span=span)
                if is_reduce:
                    adding[key] = (got, before)
                    summed[got] = [got]
            produced[got] = (lo, hi)
            note(lo, hi, is_reduce, False)
            writer[dst][lo:hi] = [adding[key][0] if is_reduce else got] * (hi - lo)
    if laned:
        set_lanes(out.program, lanes + [0] * (len(out.program) - len(lanes)))
    return out


def _one_shot_program(schedule: Schedule) -> Compiled | None:
    """:func:`fabric_program` of a one-step schedule whose messages all reduce fresh data over
    one range (``direct``), built column by column; None for any other schedule.

    The same program the general loop builds: transfer ``t * M + m`` is chunk ``t`` of
    message ``m`` (round-robin), reading HBM and depending on nothing; reduction
    ``K + t * M + m`` consumes it, depends on it alone and adds into the accumulator of
    chunk ``t`` on its chip, named by the reduction of the first message of the step to
    that chip (when the chip gets more than one).
    """
    if len(schedule.steps) != 1:
        return None
    step = schedule.steps[0]
    lo, hi = step[0].lo, step[0].hi
    if not all(m.fresh and m.reduce and m.lo == lo and m.hi == hi for m in step):
        return None
    bpe = schedule.bytes_per_element
    plan = chunks(lo, hi, bpe, schedule.chunk_bytes, schedule.depth)
    bounds = sorted({0, schedule.count, *(x for r in plan for x in r)})
    index = {b: i for i, b in enumerate(bounds)}
    rounds, width = len(plan), len(step)
    half = rounds * width
    src = np.asarray([m.src for m in step], dtype=np.int64)
    dst = np.asarray([m.dst for m in step], dtype=np.int64)
    first_to: dict[int, int] = {}
    count: dict[int, int] = {}
    for m, d in enumerate(dst.tolist()):
        first_to.setdefault(d, m)
        count[d] = count.get(d, 0) + 1
    first = np.asarray(
        [first_to[d] if count[d] > 1 else -1 for d in dst.tolist()], dtype=np.int64
    )  # the first message of the step to dst[m], when dst[m] gets more than one
    nb = np.asarray([(b - a) * bpe for a, b in plan], dtype=np.int64)
    per_op = np.repeat(nb, width)
    t_ids = np.arange(half, dtype=np.int64)
    into = np.where(
        np.tile(first, rounds) >= 0, half + t_ids - np.tile(np.arange(width) - first, rounds), -1
    )
    r_deps: list[tuple[int, ...]] = [(t,) for t in t_ids.tolist()]
    spans = [r for r in plan for _ in range(width)]
    piece_lo = [index[a] for a, _b in plan for _ in range(width)]
    piece_hi = [index[b] for _a, b in plan for _ in range(width)]
    program = FabricProgram(
        kind=[TRANSFER] * half + [REDUCTION] * half,
        src=np.tile(src, rounds).tolist() + np.tile(dst, rounds).tolist(),
        dst=np.tile(dst, rounds).tolist() * 2,
        nbytes=per_op.tolist() * 2,
        step=[0] * (2 * half),
        deps=[()] * half + r_deps,
        consumes=[-1] * half + t_ids.tolist(),
        hbm=per_op.tolist() + [-1] * half,
        span=spans * 2,
        into=[-1] * half + into.tolist(),
    )
    return Compiled(
        program,
        bounds,
        lo=piece_lo * 2,
        hi=piece_hi * 2,
        reduce=[True] * (2 * half),
        fresh=[True] * half + [False] * half,
    )


def _deps(writers: list[int], lo: int, hi: int, summed: dict[int, list[int]]) -> tuple[int, ...]:
    """The ops whose results pieces ``lo..hi`` hold: their last writers, and for an
    accumulator (a writer that is the first of several reductions) all that added into it."""
    if hi - lo == 1:
        w = writers[lo]
        if w < 0:
            return ()
        return tuple(summed[w]) if w in summed else (w,)
    ops: set[int] = set()
    for w in set(writers[lo:hi]):
        if w >= 0:
            ops.update(summed.get(w, (w,)))
    return tuple(sorted(ops))
