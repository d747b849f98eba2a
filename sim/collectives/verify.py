"""The functional check of a collective: its op log replayed on exact data.

Functional check (nccl-tests' ``#wrong``), by **replaying the op log**
(:func:`replay`): chip ``c`` starts with the integers ``x_c[e] = a_c + b_c * e``. Each
transfer copies what its sender holds when its first hop has sent its last byte (ops
stream, so that is when all of it has been read), its data lands where its recorded links
end, and its consumer (the reduction or copy recorded on the receiving chip) applies it
when it ends. Every operation treats the elements of a piece alike, so a piece's
values stay ``A + B e`` and are kept as the exact integer pair ``(A, B)`` plus a bit mask of
the inputs summed into it: exact at any size without materialising ``p x count`` numbers.
A transfer whose recorded links do not lead from its sender to its consumer's chip, or a
consumer that starts before its data arrived, is an error naming the ops. When every
consumer reduces a fresh send (``direct``), sums and ORs commute, so the replay adds the
log's reductions up in numpy instead of in time order (same result, :func:`_replay_sums`).
A message that lands at another offset (``Message.at``: alltoall's blocks) moves its pieces
by ``s`` elements, and ``A + B e`` becomes ``(A + B s) + B e`` there: still exact.

What each chip must end with (:func:`expected`) is each collective's definition: the sum
(allreduce; reduce_scatter on a chip's shares; reduce on the root), a share's owner's input
(all_gather), the root's input (broadcast), chip ``c-1``'s input (sendrecv), block ``d`` of
chip ``i``'s input as block ``i`` of chip ``d`` (alltoall).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.collectives.compile import Compiled
from sim.collectives.schedule import (
    I64,
    Schedule,
)
from sim.fabric import (
    COPY_STAGE,
    FORWARD,
    REDUCE,
    REDUCTION,
    SEND,
    SWITCH_REDUCE,
    TRANSFER,
    Network,
)
from sim.oplog import OpLog


def input_coefficients(chips: int) -> tuple[I64, I64]:
    """``(a, b)``: chip ``c`` starts with ``x_c[e] = a[c] + b[c] * e``, fixed pseudo-random ints."""
    rng = np.random.default_rng(20240601 + chips)
    return rng.integers(1, 1 << 20, chips, dtype=np.int64), rng.integers(
        1, 1 << 10, chips, dtype=np.int64
    )


class ReplayError(RuntimeError):
    """The op log moves data in a way no network could (names the ops involved)."""


@dataclass(frozen=True)
class Replayed:
    """Every chip's final values per piece (``A + B e``), the inputs summed in (bit masks)."""

    a: I64
    b: I64
    mask: I64


def _route_problems(net: Network, compiled: Compiled, log: OpLog) -> str:
    """Check that each transfer's recorded links lead from its sender to its consumer's chip,
    and that each consumer starts after its data arrived; "" if they all do."""
    prog = compiled.program
    link = (log.stage == SEND) | (log.stage == FORWARD)
    ops, eng = log.op[link], log.engine[link].astype(np.int64)
    ends = np.asarray(net.links, dtype=np.int64).reshape(-1, 2)
    u, v = ends[eng, 0], ends[eng, 1]
    first = np.ones(len(ops), dtype=bool)
    first[1:] = ops[1:] != ops[:-1]
    last = np.ones(len(ops), dtype=bool)
    last[:-1] = first[1:]
    src = np.asarray(prog.src, dtype=np.int64)
    dst = np.asarray(prog.dst, dtype=np.int64)
    names = net.names
    broken = np.flatnonzero(~first & (u != np.roll(v, 1)))
    if len(broken):
        i = int(broken[0])
        return f"op {int(ops[i])}: its links {names[eng[i - 1]]} and {names[eng[i]]} do not join"
    bad = np.flatnonzero(first & (u != src[ops]))
    if len(bad):
        i = int(bad[0])
        return f"op {int(ops[i])}: transfer {src[ops[i]]}->{dst[ops[i]]} starts on {names[eng[i]]}"
    lat = np.asarray(net.link_latencies_ps, dtype=np.int64)[eng[last]]  # each last hop's
    n = len(prog)
    arrive = np.zeros(n, dtype=np.int64)
    begins = np.zeros(n, dtype=np.int64)
    at = np.full(n, -1, dtype=np.int64)
    last_link = np.zeros(n, dtype=np.int64)
    tops = ops[last]
    arrive[tops] = log.end[link][last] + lat
    begins[tops] = log.start[link][last] + lat
    at[tops] = v[last]
    last_link[tops] = eng[last]
    consumer = ~link
    c_op = log.op[consumer].astype(np.int64)
    c_chip = log.chip[consumer].astype(np.int64)
    c_start, c_end = log.start[consumer], log.end[consumer]
    t = np.asarray(prog.consumes, dtype=np.int64)[c_op]
    tt = np.maximum(t, 0)
    missing = (t >= 0) & (at[tt] < 0)
    elsewhere = (t >= 0) & ~missing & (at[tt] != c_chip)
    early = (t >= 0) & ~missing & ~elsewhere & ((c_start < begins[tt]) | (c_end <= arrive[tt]))
    failed = np.flatnonzero(missing | elsewhere | early)
    if len(failed):
        i = int(failed[0])
        op, chip, t_i = int(c_op[i]), int(c_chip[i]), int(t[i])
        if missing[i]:
            return f"op {op} on chip {chip} consumes transfer op {t_i}, which never crossed a link"
        if elsewhere[i]:
            return (
                f"op {t_i}: transfer {prog.src[t_i]}->{prog.dst[t_i]} left its data at chip "
                f"{at[t_i]} (its last link is {names[last_link[t_i]]}), not at chip {chip}, "
                f"where op {op} consumes it: the data skipped a link"
            )
        return (
            f"op {op} on chip {chip} runs {int(c_start[i])}..{int(c_end[i])} ps, but the data of "
            f"transfer op {t_i} arrives {begins[t_i]}..{arrive[t_i]} ps: it uses data before it "
            "arrived"
        )
    return ""


def replay(schedule: Schedule, net: Network, compiled: Compiled, log: OpLog) -> Replayed:
    """Move the data as the op log says (module docstring) and return every chip's result.

    Raises :class:`ReplayError` when a transfer's links do not lead to the chip that consumes
    it, or when an op consumes data before it arrived.
    """
    problem = _route_problems(net, compiled, log)
    if problem:
        raise ReplayError(problem)
    p, pieces = schedule.chips, len(compiled.bounds) - 1
    a0, b0 = input_coefficients(p)
    m0 = (
        np.left_shift(np.int64(1), np.arange(p, dtype=np.int64))
        if p < 63
        else np.zeros(p, np.int64)
    )
    a = np.repeat(a0[:, None], pieces, axis=1)
    b = np.repeat(b0[:, None], pieces, axis=1)
    mask = np.repeat(m0[:, None], pieces, axis=1)
    prog = compiled.program
    sends = log.stage == SEND
    consumer = (log.stage == REDUCE) | (log.stage == COPY_STAGE)
    switches = schedule.nodes - p  # a switch sums what arrived there, from zero (nvls)
    if switches:
        consumer |= log.stage == SWITCH_REDUCE
        a, b, mask = (np.vstack([x, np.zeros((switches, pieces), np.int64)]) for x in (a, b, mask))
    summed = _replay_sums(compiled, log, consumer, (a, b, mask), (a0, b0, m0))
    if summed is not None:
        return summed
    times = np.concatenate([log.end[sends], log.end[consumer]])
    ops = np.concatenate([log.op[sends], log.op[consumer]])
    kinds = np.concatenate(
        [np.ones(int(sends.sum()), np.int64), np.zeros(int(consumer.sum()), np.int64)]
    )
    order = np.lexsort((ops, kinds, times))  # at equal times, writes land before reads
    in_lists = _replay_in_lists(compiled, ops[order], (a, b, mask), (a0, b0, m0))
    if in_lists is not None:
        return Replayed(in_lists.a[:p], in_lists.b[:p], in_lists.mask[:p])
    lo, hi, fresh, consumes = compiled.lo, compiled.hi, compiled.fresh, prog.consumes
    bounds = compiled.bounds
    src = prog.src
    stash: dict[int, tuple[I64, I64, I64]] = {}
    for op in ops[order].tolist():
        x, y = lo[op], hi[op]
        if prog.kind[op] == TRANSFER:
            s = src[op]
            if fresh[op]:
                n = y - x
                stash[op] = (np.full(n, a0[s]), np.full(n, b0[s]), np.full(n, m0[s]))
            else:
                stash[op] = (a[s, x:y].copy(), b[s, x:y].copy(), mask[s, x:y].copy())
            continue
        t = consumes[op]
        da, db, dm = stash.pop(t)
        shift = bounds[lo[t]] - bounds[x]  # it landed elsewhere (Message.at): A + B e, e moved
        if shift:
            da = da + db * shift
        c = src[op]
        if prog.kind[op] == REDUCTION:
            a[c, x:y] += da
            b[c, x:y] += db
            mask[c, x:y] |= dm
        else:
            a[c, x:y] = da
            b[c, x:y] = db
            mask[c, x:y] = dm
    return Replayed(a[:p], b[:p], mask[:p])


#: how many pieces an op may move on average for :func:`_replay_in_lists` to replay the log
#: (wider ops are cheaper as numpy slices)
LIST_WIDTH = 8


def _replay_in_lists(
    compiled: Compiled,
    seq: I64,
    start: tuple[I64, I64, I64],
    inputs: tuple[I64, I64, I64],
) -> Replayed | None:
    """:func:`replay`'s loop over ``seq`` (the log's sends and consumers in replay order) on
    flat Python lists of exact integers instead of numpy slices: the same sums, element by
    element (most ops move one piece, where a slice costs more than its one addition).
    Integers are exact, and numpy's int64 wraps modulo 2**64, which sums and products
    respect, so the two agree whenever every final value fits int64. None (the numpy loop
    then replays it, and raises what it raises) when the log has another shape: an op's
    piece range outside the pieces or reversed, a chip outside the rows, a consumer of no
    transfer or of one not sent before it (or consumed twice), a consumer and its transfer of
    different widths, wide ops (:data:`LIST_WIDTH`), or a final value outside int64."""
    prog = compiled.program
    ops = seq.astype(np.int64)
    rows, pieces = start[0].shape
    if not len(ops) or not pieces:
        return None
    lo = np.asarray(compiled.lo, dtype=np.int64)
    hi = np.asarray(compiled.hi, dtype=np.int64)
    x, width = lo[ops], hi[ops] - lo[ops]
    chip = np.asarray(prog.src, dtype=np.int64)[ops]
    bad = (x < 0) | (width < 0) | (x + width > pieces) | (chip < 0) | (chip >= rows)
    if bad.any() or width.sum() > LIST_WIDTH * len(ops):
        return None
    kind = np.asarray(prog.kind, dtype=np.int64)[ops]
    t = np.asarray(prog.consumes, dtype=np.int64)[ops]
    users = kind != TRANSFER
    tu = t[users]
    if (tu < 0).any() or not np.array_equal(hi[tu] - lo[tu], width[users]):
        return None
    bounds = np.asarray(compiled.bounds, dtype=np.int64)
    shift = np.zeros(len(ops), dtype=np.int64)
    shift[users] = bounds[lo[tu]] - bounds[x[users]]  # it landed elsewhere (Message.at)
    fresh = np.asarray(compiled.fresh, dtype=bool)
    # what each entry does: 0 sends one piece, 1 sends the input (fresh), 2 adds one piece,
    # 3 copies one piece, 5 / 6 add / copy one piece that landed elsewhere (alltoall's
    # blocks: its value moves by the shift), 4 anything else (wider)
    one = width == 1
    code = np.full(len(ops), 4, dtype=np.int64)
    code[~users & one] = 0
    code[~users & fresh[ops]] = 1
    plain = users & one & (shift == 0)
    code[plain & (kind == REDUCTION)] = 2
    code[plain & (kind != REDUCTION)] = 3
    moved = users & one & (shift != 0)
    code[moved & (kind == REDUCTION)] = 5
    code[moved & (kind != REDUCTION)] = 6
    cell = chip * pieces + x
    a, b, mask = (v.ravel().tolist() for v in start)
    given = [tuple(v) for v in zip(*(w.tolist() for w in inputs), strict=True)]  # per chip
    stash: dict[int, Any] = {}  # one piece or a fresh send: ints; more: lists
    t_of = t.tolist()
    by = shift.tolist()
    try:
        for op, c, at, tr, sh in zip(
            ops.tolist(), code.tolist(), cell.tolist(), t_of, by, strict=True
        ):
            if c == 0:
                stash[op] = (a[at], b[at], mask[at])
            elif c == 2:
                da, db, dm = stash.pop(tr)
                a[at] += da
                b[at] += db
                mask[at] |= dm
            elif c == 3:
                a[at], b[at], mask[at] = stash.pop(tr)
            elif c == 1:
                stash[op] = given[at // pieces]
            elif c == 5 or c == 6:  # one piece from a one-piece send: its value scalar
                da, db, dm = stash.pop(tr)
                if c == 5:
                    a[at] += da + db * sh
                    b[at] += db
                    mask[at] |= dm
                else:
                    a[at], b[at], mask[at] = da + db * sh, db, dm
            else:
                _replay_wide(compiled, op, at, pieces, stash, (a, b, mask))
    except KeyError:  # not sent before it, or consumed twice
        return None
    try:
        out = [np.asarray(v, dtype=np.int64).reshape(rows, pieces) for v in (a, b, mask)]
    except OverflowError:  # a value outside int64: numpy's wrapped sums say what it holds
        return None
    return Replayed(*out)


def _replay_wide(
    compiled: Compiled,
    op: int,
    at: int,
    pieces: int,
    stash: dict[int, Any],
    state: tuple[list[int], list[int], list[int]],
) -> None:
    """One entry of :func:`_replay_in_lists` that moves several pieces or lands elsewhere:
    op ``op`` at flat index ``at`` (its chip's row, its first piece) of ``state``."""
    prog = compiled.program
    a, b, mask = state
    w = compiled.hi[op] - compiled.lo[op]
    if prog.kind[op] == TRANSFER:
        stash[op] = (a[at : at + w], b[at : at + w], mask[at : at + w])
        return
    tr = prog.consumes[op]
    da, db, dm = stash.pop(tr)
    shift = compiled.bounds[compiled.lo[tr]] - compiled.bounds[compiled.lo[op]]
    if not isinstance(da, list):  # a fresh send's one value (or one piece's): every piece
        da, db, dm = [da + db * shift] * w, [db] * w, [dm] * w
    elif shift:
        da = [u + v * shift for u, v in zip(da, db, strict=True)]
    end = at + w
    if prog.kind[op] == REDUCTION:
        a[at:end] = [u + v for u, v in zip(a[at:end], da, strict=True)]
        b[at:end] = [u + v for u, v in zip(b[at:end], db, strict=True)]
        mask[at:end] = [u | v for u, v in zip(mask[at:end], dm, strict=True)]
    else:
        a[at:end], b[at:end], mask[at:end] = da, db, dm


def _replay_sums(
    compiled: Compiled,
    log: OpLog,
    consumer: npt.NDArray[np.bool_],
    start: tuple[I64, I64, I64],
    inputs: tuple[I64, I64, I64],
) -> Replayed | None:
    """:func:`replay` when every consumer is a reduction of a fresh send (``direct``), each
    transfer consumed once: sums and ORs commute, so the order of the log does not matter and
    each chip's result is its start plus what its reductions received, summed in numpy.
    None when the log has any other shape (the general replay then follows it in order)."""
    prog = compiled.program
    ops = log.op[consumer].astype(np.int64)
    if not len(ops) or (log.stage[consumer] != REDUCE).any():
        return None
    t = np.asarray(prog.consumes, dtype=np.int64)[ops]
    fresh = np.asarray(compiled.fresh, dtype=bool)
    if (t < 0).any() or not fresh[t].all() or np.bincount(t).max() > 1:
        return None
    if not np.array_equal(np.asarray(compiled.lo)[t], np.asarray(compiled.lo)[ops]):
        return None  # a reduction that lands elsewhere: follow the log
    a, b, mask = (x.copy() for x in start)
    a0, b0, m0 = inputs
    chip = np.asarray(prog.src, dtype=np.int64)[ops]
    sender = np.asarray(prog.src, dtype=np.int64)[t]
    lo = np.asarray(compiled.lo, dtype=np.int64)[ops]
    width = np.asarray(compiled.hi, dtype=np.int64)[ops] - lo
    rows = np.repeat(chip, width)
    pieces = np.repeat(lo - np.cumsum(width) + width, width) + np.arange(int(width.sum()))
    who = np.repeat(sender, width)
    np.add.at(a, (rows, pieces), a0[who])
    np.add.at(b, (rows, pieces), b0[who])
    np.bitwise_or.at(mask, (rows, pieces), m0[who])
    return Replayed(a, b, mask)


def expected(
    schedule: Schedule, bounds: Sequence[int]
) -> tuple[I64, I64, I64, npt.NDArray[np.bool_]]:
    """Expected ``(A, B, inputs)`` per chip and piece, and which (chip, piece) are defined.

    allreduce: the sum everywhere; reduce_scatter: the sum on each chip's shares; reduce: the
    sum on the root; all_gather: every share's owner's input everywhere; broadcast: the root's
    input everywhere; sendrecv: chip ``c-1``'s input on chip ``c``; alltoall: on chip ``d``,
    block ``i`` is block ``d`` of chip ``i``'s input (``A + B e`` moved by ``(d - i) q``).
    """
    p, n = schedule.chips, len(bounds) - 1
    a, b = input_coefficients(p)
    m = (
        np.left_shift(np.int64(1), np.arange(p, dtype=np.int64))
        if p < 63
        else np.zeros(p, np.int64)
    )
    defined = np.ones((p, n), dtype=bool)
    kind = schedule.collective
    sums = np.full((p, n), a.sum()), np.full((p, n), b.sum()), np.full((p, n), m.sum())
    starts = np.asarray(bounds[:-1], dtype=np.int64)
    if kind == "allreduce":
        return (*sums, defined)
    if kind == "reduce":
        return (*sums, np.arange(p)[:, None] == schedule.root)
    if kind in ("broadcast", "sendrecv"):
        who = np.full(p, schedule.root) if kind == "broadcast" else (np.arange(p) - 1) % p
        return (
            np.repeat(a[who][:, None], n, 1),
            np.repeat(b[who][:, None], n, 1),
            np.repeat(m[who][:, None], n, 1),
            defined,
        )
    if kind == "alltoall":
        q = max(1, schedule.count // max(p, 1))
        sender = np.minimum(starts // q, p - 1)[None, :]  # block i of chip d came from chip i
        chip = np.arange(p)[:, None]
        return (
            a[sender] + b[sender] * (chip - sender) * q,
            b[sender] + 0 * chip,
            m[sender] + 0 * chip,
            defined,
        )
    owner = np.full(n, -1, dtype=np.int64)
    for c, ranges in enumerate(schedule.shares):
        for lo, hi in ranges:
            owner[(starts >= lo) & (starts < hi)] = c
    if kind == "all_gather":
        return (
            np.tile(a[owner], (p, 1)),
            np.tile(b[owner], (p, 1)),
            np.tile(m[owner], (p, 1)),
            defined,
        )
    return (*sums, owner[None, :] == np.arange(p)[:, None])


REDUCING = ("allreduce", "reduce_scatter", "reduce")


def check(schedule: Schedule, bounds: Sequence[int], got: Replayed) -> tuple[int, str]:
    """nccl-tests' ``#wrong`` (elements whose final value differs from the expected one) and a
    sentence on the first wrong piece ("" when nothing is wrong)."""
    ea, eb, em, defined = expected(schedule, bounds)
    edges = np.asarray(bounds, dtype=np.int64)
    first = np.broadcast_to(edges[:-1], got.a.shape)
    size = np.broadcast_to(np.diff(edges), got.a.shape)
    da, db = got.a - ea, got.b - eb
    # A + B e == EA + EB e  <=>  da + db e == 0: all of the piece, none, or one element e
    safe = np.where(db == 0, 1, db)
    e = -da // safe
    one_right = (db != 0) & (da % safe == 0) & (e >= first) & (e < first + size)
    wrong = np.where((da == 0) & (db == 0), 0, size - one_right.astype(np.int64))
    wrong = np.where(defined, wrong, 0)
    total = int(wrong.sum())
    if not total:
        return 0, ""
    chip, piece = (int(x) for x in np.argwhere(wrong > 0)[0])
    lo, hi = bounds[piece], bounds[piece + 1]
    missing = int(em[chip, piece]) & ~int(got.mask[chip, piece])
    extra = int(got.mask[chip, piece]) & ~int(em[chip, piece])
    why = []
    if missing:
        why.append(f"lacks the inputs of chips {_bits(missing)}")
    if extra:
        why.append(f"holds inputs it should not (chips {_bits(extra)})")
    if not why and schedule.collective in REDUCING:
        why.append("counts an input twice")
    if not why:
        why.append("holds the right chip's data from the wrong place (an offset mixed up)")
    return total, f"chip {chip}, elements [{lo}, {hi}) {' and '.join(why)}"


def _bits(mask: int) -> str:
    return ", ".join(str(i) for i in range(mask.bit_length()) if mask >> i & 1)
