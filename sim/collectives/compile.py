"""A schedule compiled to a fabric program: chunks, dependencies, accumulators.

Every message is cut into **equal chunks** (sizes within one element; :func:`chunks`): ``k``
the next power of two of ``max(ceil(bytes / chunk), staging_buffers / 2)`` (``chips.chunk_kib``)
by recursive halving, one transfer each, so a message just above a chunk becomes two half
chunks, never a chunk and a sliver.

Timing (:func:`sim.collectives.run.run_collective`) follows the data, chunk by chunk: a
transfer leaves when the elements it carries are ready on the sender (the ops that last
wrote them have ended) and it has a staging buffer at the receiver; the receiver reduces it
(reduce engine and HBM) or copies it (HBM) as soon as it has arrived and the local elements
are ready (:func:`sim.fabric.simulate_fabric`). So consecutive steps pipeline chunk by
chunk. Within a step, transfers are issued round-robin over the step's messages, one chunk
each; every send of a step reads the data as it was before the step. Sends marked ``fresh``
read the chip's input buffer (one-shot ``direct`` reduces into a separate output). The
reductions a step makes into the same chunk of one chip (direct: one per peer; a tree node:
one per child) form one **accumulator**: sums commute, so each adds when its data has come,
in arrival order, not in message order (ADR 0016; MPI lets an implementation reorder a
commutative reduction, MPI-3.1 section 5.9.1). A transfer takes its message's lane (the
parallel link or switch port of its channel, :func:`sim.collectives.channels.set_lanes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import chain

import numpy as np

from sim.collectives.channels import set_lanes
from sim.collectives.schedule import (
    I64,
    Range,
    Schedule,
    message_steps,
)
from sim.fabric import (
    COPY,
    REDUCTION,
    TRANSFER,
    FabricProgram,
    distinct,
)


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


@dataclass
class Compiled:
    """A schedule as a fabric program, with what each op moves (for the replay).

    ``bounds`` are the element offsets of the pieces (every chunk is a range of pieces);
    per op: its piece range, whether a consumer reduces, whether a send reads the input.
    """

    program: FabricProgram
    bounds: list[int]
    lo: list[int] = field(default_factory=list)
    hi: list[int] = field(default_factory=list)
    reduce: list[bool] = field(default_factory=list)
    fresh: list[bool] = field(default_factory=list)


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

    Built step by step as columns (:func:`_columns`) when no receive of a step reads what
    another receive of the same step writes (every step of today's schedules); otherwise op
    by op (:func:`_op_by_op`). Both give the same program.
    """
    one_shot = _one_shot_program(schedule)
    if one_shot is not None:
        return one_shot
    cache, bounds = _plan(schedule)
    return _columns(schedule, cache, bounds) or _op_by_op(schedule, cache, bounds)


def _plan(schedule: Schedule) -> tuple[dict[Range, list[Range]], list[int]]:
    """Each message range's chunks, and the piece bounds: every chunk's cuts, where it is
    sent and where it lands."""
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
    return cache, sorted(cuts)


def _op_by_op(schedule: Schedule, cache: dict[Range, list[Range]], bounds: list[int]) -> Compiled:
    """:func:`fabric_program` built op by op with ``FabricProgram.add``: any schedule."""
    bpe = schedule.bytes_per_element
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


def _columns(
    schedule: Schedule, cache: dict[Range, list[Range]], bounds: list[int]
) -> Compiled | None:
    """:func:`fabric_program` built a column at a time (the same program as
    :func:`_op_by_op`); None when a receive of a step reads or writes pieces another receive
    of the step writes (other than the reductions of one accumulator), or a message names a
    node that is no chip: the op-by-op loop then.

    Within a step every send reads the pieces as they were before the step; so does every
    receive when the step's receives into one chip write disjoint pieces or share an
    accumulator (same pieces, all reductions). So what does not read the pieces' last
    writers is computed for all steps at once: a step's transfers are its messages' chunks
    round-robin (chunk ``t`` of every message, then ``t + 1``), ops ``n0 .. n0 + T``; its
    receives follow in the same order, ops ``n0 + T .. n0 + 2T``; its accumulators are its
    reductions with the same chip and pieces. Only the dependencies go step by step.
    """
    chips = schedule.chips
    msgs = [m for step in schedule.steps for m in step]
    if not msgs:
        return Compiled(FabricProgram(), bounds)
    wide = len(bounds)
    if len(schedule.steps) * chips * wide * wide >= 1 << 62:  # keys below would overflow
        return None
    attrs = np.asarray(
        [(m.src, m.dst, m.reduce, m.fresh, m.lane, m.at is not None) for m in msgs],
        dtype=np.int64,
    )
    if attrs[:, :2].max() >= chips or attrs[:, :2].min() < 0:
        return None
    edges = np.asarray(bounds, dtype=np.int64)
    cuts: dict[Range, tuple[I64, I64]] = {}  # range -> its chunks' element cuts, piece cuts
    for r, plan in cache.items():
        e = np.asarray([x for x, _y in plan] + [plan[-1][1]], dtype=np.int64)
        cuts[r] = e, np.searchsorted(edges, e)
    got = [cuts[m.lo, m.hi] for m in msgs]
    e_cat = np.concatenate([e for e, _p in got])
    p_cat = np.concatenate([p for _e, p in got])
    l_cat = p_cat
    if attrs[:, 5].any():  # landing elsewhere (Message.at): its pieces there
        l_cat = np.concatenate(
            [
                p if m.at is None else np.searchsorted(edges, e - m.lo + m.at)
                for m, (e, p) in zip(msgs, got, strict=True)
            ]
        )
    k = np.asarray([len(e) - 1 for e, _p in got], dtype=np.int64)  # chunks per message
    width = np.asarray([len(step) for step in schedule.steps], dtype=np.int64)
    return _compile_columns(schedule, bounds, attrs, e_cat, p_cat, l_cat, k, width)


def fabric_program_rows(schedule: Schedule, rows: I64) -> Compiled:
    """:func:`fabric_program` of ``schedule`` with its messages given as
    :func:`~sim.collectives.schedule.message_rows` (``schedule.steps`` is not read; a step
    without a row is an empty step): the same program, the chunks cut per distinct message
    size instead of per message object. The fast paths hold their messages as arrays (one
    rail's 34 k messages at p = 256 took 0.1 s as objects). One one-shot step, or a schedule
    the columns do not take, goes through the objects and :func:`fabric_program`; a row
    that lands elsewhere (``Message.at``, which the rows do not hold) is a ``ValueError``."""
    if rows[8].any():
        raise ValueError("fabric_program_rows: the rows do not say where a message lands")
    nsteps = int(rows[0].max(initial=-1)) + 1
    one_step = nsteps == 1 and bool(rows[5].all() and rows[6].all())
    got = _columns_of_rows(schedule, rows, nsteps) if rows.shape[1] and not one_step else None
    if got is not None:
        return got
    return fabric_program(replace(schedule, steps=message_steps(rows, nsteps)))


def _columns_of_rows(schedule: Schedule, rows: I64, nsteps: int) -> Compiled | None:
    """:func:`_plan` and the start of :func:`_columns` on message rows: a message's chunks
    are its size's, moved to its offset (:func:`_bisect` halves ``[lo, hi)`` where it halves
    ``[0, hi - lo)``, shifted by ``lo``)."""
    bpe, chunk, depth = schedule.bytes_per_element, schedule.chunk_bytes, schedule.depth
    lo, hi = rows[3], rows[4]
    size = hi - lo
    sizes = distinct(size)
    rel = [chunks(0, int(z), bpe, chunk, depth) for z in sizes.tolist()]
    k_of = np.asarray([len(r) for r in rel], dtype=np.int64)
    cut_of = np.asarray([x for r in rel for x in [*(a for a, _b in r), r[-1][1]]], np.int64)
    first_cut = np.cumsum(k_of + 1) - (k_of + 1)
    which = np.searchsorted(sizes, size)
    k = k_of[which]
    n_cut = k + 1
    at = np.arange(int(n_cut.sum()), dtype=np.int64) - np.repeat(np.cumsum(n_cut) - n_cut, n_cut)
    e_cat = np.repeat(lo, n_cut) + cut_of[np.repeat(first_cut[which], n_cut) + at]
    edges = distinct(np.concatenate([np.asarray([0, schedule.count], np.int64), e_cat]))
    bounds = edges.tolist()
    wide = len(bounds)
    if nsteps * schedule.chips * wide * wide >= 1 << 62:  # keys would overflow
        return None
    attrs = np.ascontiguousarray(rows[[1, 2, 5, 6, 7, 8]].T)
    if attrs[:, :2].max() >= schedule.chips or attrs[:, :2].min() < 0:
        return None
    p_cat = np.searchsorted(edges, e_cat)
    width = np.bincount(rows[0], minlength=nsteps).astype(np.int64)
    return _compile_columns(schedule, bounds, attrs, e_cat, p_cat, p_cat, k, width)


def _compile_columns(
    schedule: Schedule,
    bounds: list[int],
    attrs: I64,
    e_cat: I64,
    p_cat: I64,
    l_cat: I64,
    k: I64,
    width: I64,
) -> Compiled | None:
    """The rest of :func:`_columns` from its messages as arrays: per message (in step
    order) ``attrs`` (src, dst, reduce, fresh, lane, moved) and ``k`` chunks, their
    ``k + 1`` element cuts (``e_cat``), piece cuts where sent (``p_cat``) and landed
    (``l_cat``), concatenated; per step its messages (``width``)."""
    chips = schedule.chips
    pieces = len(bounds) - 1
    wide = pieces + 1
    bpe = schedule.bytes_per_element
    step_of = np.repeat(np.arange(len(width), dtype=np.int64), width)  # per message
    n = int(k.sum())
    m_of = np.repeat(np.arange(len(attrs), dtype=np.int64), k)
    firsts = np.cumsum(width) - width  # each step's first message
    busy = width > 0
    k_lo = np.minimum.reduceat(k, firsts[busy])
    k_hi = np.maximum.reduceat(k, firsts[busy])
    size = np.zeros(len(width), dtype=np.int64)  # transfers per step
    size[busy] = np.add.reduceat(k, firsts[busy])
    base = np.cumsum(size) - size  # each step's first transfer
    if (k_lo == k_hi).all():  # each step round-robin over messages of k chunks
        j = np.arange(n, dtype=np.int64) - np.repeat(base, size)
        w, kk = np.repeat(width, size), _per_step(k_hi, busy, size)
        order = np.repeat(base, size) + (j % w) * kk + j // w
    else:  # by step, then chunk index within its message, then message
        t_of = np.arange(n, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        order = np.lexsort((m_of, t_of, step_of[m_of]))
    mi = m_of[order]
    pos = order + mi  # a message's k chunks have k + 1 cuts
    elo, ehi = e_cat[pos], e_cat[pos + 1]
    plo, phi = p_cat[pos], p_cat[pos + 1]
    llo, lhi = l_cat[pos], l_cat[pos + 1]
    src, dst, lane = attrs[mi, 0], attrs[mi, 1], attrs[mi, 4]
    red, fresh, moved = attrs[mi, 2] != 0, attrs[mi, 3] != 0, attrs[mi, 5] != 0
    step = step_of[mi]
    t_op = np.arange(n, dtype=np.int64) + np.repeat(base, size)
    c_op = t_op + np.repeat(size, size)
    # the receives of a step into one chip and pieces: an accumulator, or one receive
    key = ((step * chips + dst) * wide + llo) * wide + lhi
    by_key = np.argsort(key)
    sk = key[by_key]
    new = np.ones(n, dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    starts = np.flatnonzero(new)
    group = np.empty(n, dtype=np.int64)
    group[by_key] = np.cumsum(new) - 1
    count = np.diff(np.append(starts, n))
    head = np.minimum.reduceat(by_key, starts)  # the first receive of each group
    hs, hd, hl, hh = step[head], dst[head], llo[head], lhi[head]
    if ((hs[1:] == hs[:-1]) & (hd[1:] == hd[:-1]) & (hl[1:] < hh[:-1])).any():
        return None  # receives of a step into one chip overlap: op by op
    shared = count[group] > 1
    if (shared & ~red).any():
        return None  # a copy into pieces another receive of the step writes
    first = c_op[head][group]  # the accumulator (or the receive itself) of each receive
    is_acc = np.zeros(int(c_op[-1]) + 2, dtype=bool)  # op -> first of several reductions
    acc: dict[int, tuple[int, ...]] = {}  # such an op -> all that add into it
    if shared.any():
        idx = np.flatnonzero(shared)
        idx = idx[np.argsort(group[idx], kind="stable")]
        ops, gid = c_op[idx].tolist(), group[idx]
        ends = [*(np.flatnonzero(gid[1:] != gid[:-1]) + 1).tolist(), len(ops)]
        a = 0
        for b in ends:
            acc[ops[a]] = tuple(ops[a:b])
            a = b
        is_acc[first[shared]] = True
    nb = (ehi - elo) * bpe
    t_width = np.where(fresh, 0, phi - plo)
    c_width = lhi - llo
    src_l, dst_l, nb_l, red_l = src.tolist(), dst.tolist(), nb.tolist(), red.tolist()
    kind_l = np.where(red, REDUCTION, COPY).tolist()
    span = list(zip(elo.tolist(), ehi.tolist(), strict=True))
    landed = span
    if moved.any():  # lands elsewhere: its span unknown
        landed = [(0, 0) if x else r for r, x in zip(span, moved.tolist(), strict=True)]
    into_l = np.where(shared, first, -1).tolist() if shared.any() else [-1] * n
    lo_l, hi_l = plo.tolist(), phi.tolist()
    llo_l, lhi_l = (llo.tolist(), lhi.tolist()) if moved.any() else (lo_l, hi_l)
    fresh_l = fresh.tolist() if fresh.any() else [False] * n
    lane_l = lane.tolist() if lane.any() else [0] * n
    out = Compiled(FabricProgram(), bounds)
    prog = out.program
    lanes: list[int] = []
    writer = np.full((chips, pieces), -1, dtype=np.int64)
    for at in np.flatnonzero(size).tolist():
        a, t = int(base[at]), int(size[at])
        b, n0 = a + t, 2 * a
        t_deps, t_has = _last_writers(writer, src[a:b], plo[a:b], t_width[a:b], is_acc, acc)
        c_deps, _ = _last_writers(writer, dst[a:b], llo[a:b], c_width[a:b], is_acc, acc, t_op[a:b])
        cw = c_width[a:b]
        if cw.min() == cw.max() == 1:
            writer[dst[a:b], llo[a:b]] = first[a:b]
        else:
            writer[np.repeat(dst[a:b], cw), _ragged(llo[a:b], cw)] = np.repeat(first[a:b], cw)
        prog.kind += [TRANSFER] * t
        prog.kind += kind_l[a:b]
        prog.src += src_l[a:b]
        prog.src += dst_l[a:b]
        prog.dst += dst_l[a:b]
        prog.dst += dst_l[a:b]
        prog.nbytes += nb_l[a:b]
        prog.nbytes += nb_l[a:b]
        prog.step += [at] * (2 * t)
        prog.deps += t_deps
        prog.deps += c_deps
        prog.consumes += [-1] * t
        prog.consumes += range(n0, n0 + t)
        prog.hbm += [0] * t if t_has.all() else np.where(t_has, 0, nb[a:b]).tolist()
        prog.hbm += [-1] * t
        prog.span += span[a:b]
        prog.span += landed[a:b]
        prog.into += [-1] * t
        prog.into += into_l[a:b]
        lanes += lane_l[a:b]
        lanes += [0] * t
        out.lo += lo_l[a:b]
        out.lo += llo_l[a:b]
        out.hi += hi_l[a:b]
        out.hi += lhi_l[a:b]
        out.reduce += red_l[a:b]
        out.reduce += red_l[a:b]
        out.fresh += fresh_l[a:b]
        out.fresh += [False] * t
    if lane.any():
        prog.lane = lanes
    return out


def _per_step(values: I64, busy: np.ndarray, size: I64) -> I64:
    """``values`` (one per busy step) repeated ``size`` times per step (0 for idle steps)."""
    full = np.zeros(len(busy), dtype=np.int64)
    full[busy] = values
    out: I64 = np.repeat(full, size)
    return out


def _ragged(lo: I64, width: I64) -> I64:
    """``lo[i], lo[i] + 1, .., lo[i] + width[i] - 1`` for every ``i``, concatenated."""
    starts = np.cumsum(width) - width
    out: I64 = np.arange(int(width.sum()), dtype=np.int64) - np.repeat(starts - lo, width)
    return out


def _last_writers(
    writer: I64,
    rows: I64,
    lo: I64,
    width: I64,
    is_acc: np.ndarray,
    acc: dict[int, tuple[int, ...]],
    last: I64 | None = None,
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Per op ``i``: :func:`_deps` of pieces ``lo[i] .. lo[i] + width[i]`` of chip ``rows[i]``
    (``writer``: each piece's last writer, -1: none), with ``last[i]`` after them when given
    (it is later than every writer); and whether it found any writer."""
    n = len(rows)
    if n and width.min() == width.max() == 1:
        w = writer[rows, lo]
        found = w >= 0
        if not acc or not is_acc[np.where(found, w, -1)].any():
            ws = w.tolist()
            if last is None:
                if found.all():
                    return [(x,) for x in ws], found
                return [(x,) if x >= 0 else () for x in ws], found
            ts = last.tolist()
            if found.all():
                return list(zip(ws, ts, strict=True)), found
            return [(x, t) if x >= 0 else (t,) for x, t in zip(ws, ts, strict=True)], found
    op = np.repeat(np.arange(n, dtype=np.int64), width)
    w = writer[np.repeat(rows, width), _ragged(lo, width)]
    keep = w >= 0
    op, w = op[keep], w[keep]
    found = np.bincount(op, minlength=n) > 0
    if acc:
        hit = is_acc[w]
        if hit.any():
            grown = [acc[x] for x in w[hit].tolist()]
            sizes = np.fromiter(map(len, grown), dtype=np.int64, count=len(grown))
            op = np.concatenate((op[~hit], np.repeat(op[hit], sizes)))
            w = np.concatenate((w[~hit], np.fromiter(chain.from_iterable(grown), dtype=np.int64)))
    if last is not None:
        op = np.concatenate((op, np.arange(n, dtype=np.int64)))
        w = np.concatenate((w, last))
    big = len(is_acc)
    key = distinct(op * big + w)
    op = key // big
    return _split((key - op * big).tolist(), np.bincount(op, minlength=n)), found


def _split(values: list[int], counts: np.ndarray) -> list[tuple[int, ...]]:
    """``values`` cut into consecutive tuples of ``counts[i]`` values."""
    n = len(counts)
    if not n:
        return []
    c = int(counts[0])
    if (counts == c).all():
        if c == 0:
            return [()] * n
        if c == 1:
            return [(v,) for v in values]
        return list(zip(*[iter(values)] * c, strict=True))
    ends = np.cumsum(counts).tolist()
    return [tuple(values[a:b]) for a, b in zip([0, *ends[:-1]], ends, strict=True)]


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
