"""The flat ring's schedule held as arrays, its symmetry checked on them, and its quotient
program compiled from the messages of the representatives alone (the full program is never
built): the structure :mod:`sim.collectives.fast_orbit` times, stores and checks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.collectives.algorithms import split_ranges
from sim.collectives.compile import Compiled, chunks, fabric_program_rows
from sim.collectives.schedule import I64, Schedule, message_rows
from sim.fabric import (
    COPY_STAGE,
    FORWARD,
    REDUCE,
    SEND,
    TRANSFER,
    ChipGroup,
    FabricProgram,
    Network,
    digit_translations,
    digit_xors,
    distinct,
    order_rotations,
    seen_spans,
    stream_geometry,
)
from sim.oplog import OpLog

SHAPES = ("switch", "fully_connected")


def groups_for(sizes: tuple[int, ...], ring: Sequence[int] = ()) -> list[ChipGroup]:
    """The groups to try on dimensions of these sizes, largest first: the translations of
    every dimension (one representative chip), the xor of chip ids (sizes powers of two),
    the translations of the outer dimensions, of dimension 0 alone; then the turns of the
    flat ring's order ``ring`` by one sweep of the inner dimensions."""
    out: list[ChipGroup | None] = [digit_translations(sizes)]
    xor = digit_xors(sizes)
    if xor is not None:
        out.append(xor)
    if len(sizes) > 1 and sizes[0] > 1:
        out.append(digit_translations(sizes, range(1, len(sizes))))
        out.append(digit_translations(sizes, (0,)))
    if ring:
        out.append(order_rotations(ring, math.prod(sizes[:-1])))
    return [g for g in out if g is not None and g.order > 1]


@dataclass(frozen=True, eq=False)
class Layout:
    """A schedule as arrays, one entry per message in step order (``step`` non-decreasing);
    every message of step ``s`` is cut into ``k[s]`` chunks, so the compile numbers the ops
    of step ``s`` as ``base[s] + consumer? * W k + chunk * W + m`` (``W`` its messages,
    ``m`` the message's index in it: :func:`sim.collectives.compile.fabric_program`)."""

    step: I64
    src: I64
    dst: I64
    lo: I64
    hi: I64
    reduce: npt.NDArray[np.bool_]
    fresh: npt.NDArray[np.bool_]
    lane: I64
    k: I64  # per step
    shares: tuple[tuple[tuple[int, int], ...], ...]  # per chip (reduce_scatter, all_gather)

    @property
    def steps(self) -> int:
        return len(self.k)

    @cached_property
    def width(self) -> I64:
        """Per step, its messages."""
        return np.bincount(self.step, minlength=self.steps).astype(np.int64)

    @cached_property
    def first(self) -> I64:
        """Per step, its first message."""
        return np.cumsum(self.width) - self.width

    @cached_property
    def base(self) -> I64:
        """Per step, its first op."""
        ops = 2 * self.width * self.k
        out: I64 = np.cumsum(ops) - ops
        return out

    @cached_property
    def m(self) -> I64:
        return np.arange(len(self.src), dtype=np.int64) - self.first[self.step]

    @property
    def ops(self) -> int:
        return int((2 * self.width * self.k).sum())

    @cached_property
    def uniform(self) -> bool:
        """Whether every step names the same pairs, on the same lanes, in the same order."""
        w = int(self.width[0]) if self.steps else 0
        if not w or (self.width != w).any():
            return False
        rows = [x.reshape(-1, w) for x in (self.src, self.dst, self.lane)]
        return all(bool((r == r[:1]).all()) for r in rows)

    @property
    def head(self) -> int:
        """The messages the checks look at: step 0's when :attr:`uniform`, else all."""
        return int(self.width[0]) if self.uniform else len(self.src)

    def full_id(self, gm: I64, consumer: I64, t: I64) -> I64:
        """The program's op of chunk ``t`` of message ``gm`` (its transfer or consumer)."""
        s = self.step[gm]
        w = self.width[s]
        out: I64 = self.base[s] + consumer * w * self.k[s] + t * w + self.m[gm]
        return out


def ring_layout(
    net: Network, collective: str, count: int, bpe: int, chunk: int, depth: int
) -> Layout | None:
    """The flat ring's schedule (:func:`sim.collectives.algorithms.build_schedule`, ring, the
    ring order and its reverse) as a :class:`Layout`, or None when its messages differ in
    size (then chunks differ)."""
    p = net.chips
    order = np.asarray(net.ring_order(), dtype=np.int64)
    halves = split_ranges(0, count, 2)
    segs = [split_ranges(lo, hi, p) for lo, hi in halves]
    seg_lo = np.asarray([[r[0] for r in h] for h in segs], dtype=np.int64)  # [half, chip]
    seg_hi = np.asarray([[r[1] for r in h] for h in segs], dtype=np.int64)
    if len(set((seg_hi - seg_lo).reshape(-1).tolist())) != 1 or seg_hi[0, 0] <= seg_lo[0, 0]:
        return None
    ways = np.stack([order, order[::-1]])  # [ring, position]
    q = np.arange(p, dtype=np.int64)
    phases = []
    if collective != "all_gather":
        phases.append((1, True))
    if collective != "reduce_scatter":
        phases.append((0, False))
    src, dst, lo, hi, red = [], [], [], [], []
    for lag, reduce in phases:
        for s in range(p - 1):
            owner = ways[:, (q - lag - s) % p]  # [ring, position]: whose segment it sends
            src.append(ways.reshape(-1))
            dst.append(ways[:, (q + 1) % p].reshape(-1))
            lo.append(np.stack([seg_lo[h, owner[h]] for h in (0, 1)]).reshape(-1))
            hi.append(np.stack([seg_hi[h, owner[h]] for h in (0, 1)]).reshape(-1))
            red.append(np.full(2 * p, reduce))
    size = int(seg_hi[0, 0] - seg_lo[0, 0])
    k = len(chunks(0, size, bpe, chunk, depth))
    shares = tuple(tuple(h[c] for h in segs) for c in range(p)) if collective != "allreduce" else ()
    n = len(src) * 2 * p
    return Layout(
        np.repeat(np.arange(len(src), dtype=np.int64), 2 * p),
        np.concatenate(src),
        np.concatenate(dst),
        np.concatenate(lo),
        np.concatenate(hi),
        np.concatenate(red),
        np.zeros(n, dtype=bool),
        np.zeros(n, dtype=np.int64),
        np.full(len(src), k, dtype=np.int64),
        shares,
    )


def schedule_layout(schedule: Schedule, rows: I64 | None = None) -> Layout | None:
    """Any schedule as a :class:`Layout`, or None when a step's messages are cut into
    different numbers of chunks or one lands elsewhere (``Message.at``). ``rows``: its
    messages as :func:`~sim.collectives.schedule.message_rows` of steps ``0 .. n-1``, each
    with a message, when ``schedule`` is given without them (its steps are not read then)."""
    bpe, chunk, depth = schedule.bytes_per_element, schedule.chunk_bytes, schedule.depth
    if rows is None:
        a = message_rows(schedule.steps)
        nsteps = len(schedule.steps)
    else:
        a = rows
        nsteps = int(a[0, -1]) + 1 if a.shape[1] else 0
    if a[8].any():
        return None
    size = a[4] - a[3]
    sizes = distinct(size)
    cut = np.asarray([len(chunks(0, int(z), bpe, chunk, depth)) for z in sizes], np.int64)
    k = cut[np.searchsorted(sizes, size)]
    ks = np.zeros(nsteps, dtype=np.int64)
    ks[a[0]] = k  # every message's count; they must agree within a step
    if (ks[a[0]] != k).any():
        return None
    return Layout(
        a[0],
        a[1],
        a[2],
        a[3],
        a[4],
        a[5].astype(bool),
        a[6].astype(bool),
        a[7],
        ks,
        schedule.shares,
    )


class Orbits:
    """The group's bookkeeping: per chip its representative and the element taking it there."""

    def __init__(self, group: ChipGroup) -> None:
        el = group.elements
        self.el = el
        self.to_rep = el.argmin(axis=0)
        self.reps = np.unique(el.min(axis=0))


def message_images(lay: Layout, p: int, el: I64, e: I64) -> I64 | None:
    """Per message, the message of its step on the same lane, of the same rank among those
    of its pair, whose sender and receiver are the images under element ``e`` (one per
    message) of ``el``, or None when one is missing.
    When every step names the same pairs in the same order (``lay.uniform``), found on step 0
    and repeated."""
    n = lay.head
    src, dst, s = lay.src[:n], lay.dst[:n], lay.step[:n]
    lanes = int(lay.lane.max(initial=0)) + 1
    lane = lay.lane[:n]
    code = ((s * p + src) * p + dst) * lanes + lane
    order = np.argsort(code, kind="stable")
    sc = code[order]
    # messages of one step on one pair and lane (an allreduce's two halves) go by their rank
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if n else np.zeros(0, np.int64)
    runs = np.diff(np.r_[starts, n])
    nth = np.empty(n, dtype=np.int64)
    nth[order] = np.arange(n) - np.repeat(starts, runs)
    many = int(runs.max(initial=1))
    sc = sc * many + nth[order]
    e = e[:n]
    want = (((s * p + el[e, src]) * p + el[e, dst]) * lanes + lane) * many + nth
    at = np.minimum(np.searchsorted(sc, want), len(sc) - 1)
    if (sc[at] != want).any():
        return None
    img: I64 = order[at]
    if lay.uniform:
        img = (lay.first[:, None] + img[None, :]).reshape(-1)
    return img


def _pieces_map(lay: Layout, img: I64) -> bool:
    """Whether the ranges map onto their images' by one permutation of pieces (cut at every
    range's ends), in order inside each range and size for size: then a permutation of the
    elements maps every range onto its image's, chunk cuts included (equal sizes are cut
    alike)."""
    cuts = distinct(np.concatenate([lay.lo, lay.hi]))
    size = np.diff(cuts)
    pa, pb = np.searchsorted(cuts, lay.lo), np.searchsorted(cuts, lay.hi)
    if not (pb - pa == (pb - pa)[img]).all():
        return False
    n = pb - pa
    at = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    piece = np.repeat(pa, n) + at
    image = np.repeat(pa[img], n) + at
    if not (size[piece] == size[image]).all():
        return False
    pairs = distinct(piece * len(cuts) + image)
    return len(distinct(pairs // len(cuts))) == len(pairs) == len(distinct(pairs % len(cuts)))


class Invariance:
    """Whether a group's generators map the schedule ``lay`` onto itself (module docstring):
    each maps every message onto a message and, by its link map, every message's route onto
    its image's; then so does every element, the layout being closed under the generators.
    One generator at a time, each chip permutation checked once: the groups tried on one
    schedule share generators (dimension 0's translation generates its own group and the
    group of every translation), and a permutation that fails refuses every group it
    generates before anything else is checked."""

    def __init__(self, lay: Layout, net: Network, rt: RouteTable) -> None:
        self.lay, self.net, self.rt = lay, net, rt
        self.verdict: dict[bytes, bool] = {}

    def refuses(self, perms: Sequence[I64]) -> bool:
        """Whether one of ``perms`` is known not to map the schedule onto itself."""
        return any(self.verdict.get(perm.tobytes()) is False for perm in perms)

    def __call__(self, perm: I64, links: I64) -> bool:
        """Whether the chip permutation ``perm`` maps every message onto a message of the
        same step, size and kind, the ranges onto ranges consistently, and by its link map
        ``links`` every message's route onto its image's."""
        key = perm.tobytes()
        got = self.verdict.get(key)
        if got is None:
            got = self.verdict[key] = self._messages(perm) and self._links(perm, links)
        return got

    def _messages(self, perm: I64) -> bool:
        lay = self.lay
        n = len(lay.src)
        img = message_images(lay, self.net.chips, perm[None, :], np.zeros(n, dtype=np.int64))
        if img is None:
            return False
        same = (
            (lay.hi[img] - lay.lo[img] == lay.hi - lay.lo).all()
            and (lay.reduce[img] == lay.reduce).all()
            and (lay.fresh[img] == lay.fresh).all()
            and len(distinct(img[: lay.head])) == lay.head
        )
        return bool(same) and _pieces_map(lay, img)

    @cached_property
    def _routes(self) -> tuple[I64, I64, I64, I64, I64, npt.NDArray[np.bool_], I64]:
        """The (src, dst, lane) the checked messages take, their hops, and their links."""
        lay, rt, p, h = self.lay, self.rt, self.net.chips, self.lay.head
        lanes = int(lay.lane.max(initial=0)) + 1
        trip = distinct((lay.src[:h] * p + lay.dst[:h]) * lanes + lay.lane[:h])
        a, b, lane = trip // lanes // p, trip // lanes % p, trip % lanes
        hops = rt.hops[a, b]
        width = rt.links0.shape[2]
        hop = np.broadcast_to(np.arange(width, dtype=np.int64)[None, :], (len(a), width))
        used = hop < hops[:, None]
        mine = rt.link(a[:, None], b[:, None], lane[:, None], hop)
        return a, b, lane, hops, hop, used, mine

    def _links(self, perm: I64, links: I64) -> bool:
        rt = self.rt
        a, b, lane, hops, hop, used, mine = self._routes
        ga, gb = perm[a], perm[b]
        if not (rt.hops[ga, gb] == hops).all():
            return False
        there = rt.link(ga[:, None], gb[:, None], lane[:, None], hop)
        return bool((links[mine] == there)[used].all())


class RouteTable:
    """Every pair's lane-0 route as a padded table (``links0[src, dst, hop]``), its hop count,
    and per link its parallel link on each lane (:meth:`sim.fabric.Network.route`)."""

    def __init__(self, net: Network, lanes: int = 1) -> None:
        p = net.chips
        self.hops = np.asarray([[len(r) for r in row] for row in net.routes], dtype=np.int64)
        width = max(1, int(self.hops.max(initial=0)))
        self.links0 = np.zeros((p, p, width), dtype=np.int64)
        for a, row in enumerate(net.routes):
            for b, r in enumerate(row):
                self.links0[a, b, : len(r)] = r
        nl = len(net.links)
        par = net.parallel or [()] * nl
        self.par = np.asarray(
            [[g[w % len(g)] if g else k for w in range(lanes)] for k, g in enumerate(par)],
            dtype=np.int64,
        ).reshape(nl, lanes)

    def link(self, src: I64, dst: I64, lane: I64, hop: I64) -> I64:
        out: I64 = self.par[self.links0[src, dst, hop], lane]
        return out


def stand_ins(lay: Layout, net: Network, orb: Orbits, rt: RouteTable) -> I64 | None:
    """Per message, its stand-in's message (the image under the element taking its home to
    a representative: the sender's for a transfer, the receiver's for a consumer), as
    ``(2, n)``; None when the map does not keep the order the event loop breaks ties by,
    per home chip and per link and hop index, within a step (on step 0 alone when every
    step names the same pairs in the same order)."""
    p = net.chips
    n = lay.head
    gm = np.arange(n, dtype=np.int64)
    s = lay.step[:n]
    src, dst = lay.src[:n], lay.dst[:n]
    out = np.empty((2, len(lay.src)), dtype=np.int64)
    for c, home in enumerate((lay.src, lay.dst)):
        img = message_images(lay, p, orb.el, orb.to_rep[home])
        if img is None:
            return None
        out[c] = img
        h = home[:n]
        by = np.lexsort((gm, s, h))
        if not _increasing(np.stack([h[by], s[by]]), img[:n][by]):
            return None
    # links: transfers' hops (consumers use no link)
    hops = rt.hops[src, dst]
    rep = np.repeat(gm, hops)
    hop = np.arange(len(rep)) - np.repeat(np.cumsum(hops) - hops, hops)
    link = rt.link(src[rep], dst[rep], lay.lane[:n][rep], hop)
    by = np.lexsort((rep, s[rep], hop, link))
    if not _increasing(np.stack([link[by], hop[by], s[rep][by]]), out[0][rep][by]):
        return None
    return out


def _increasing(groups: I64, key: I64) -> bool:
    """Whether ``key`` strictly increases within each run of equal ``groups`` columns."""
    same = (groups[:, 1:] == groups[:, :-1]).all(axis=0)
    return bool(((key[1:] > key[:-1]) | ~same).all())


@dataclass(frozen=True)
class OrbitQuotient:
    """The quotient program (the representatives' ops of the sub-schedule's compile), per
    quotient op its op in the full program, and per message its stand-ins' quotient ops."""

    program: FabricProgram
    compiled: Compiled  # the sub-schedule's (pieces, landing ranges)
    sub_q: I64  # per sub-program op: its stand-in's quotient index
    sub_full: I64  # per sub-program op: its id in the full program
    q_sub: I64  # per quotient op: its sub-program op
    whole: bool


def _sub_rows(lay: Layout, keep: I64) -> I64:
    """The messages ``keep`` of ``lay`` as :func:`~sim.collectives.schedule.message_rows`,
    in their steps (a step none of them is in stays, empty)."""
    out: I64 = np.stack(
        [
            lay.step[keep],
            lay.src[keep],
            lay.dst[keep],
            lay.lo[keep],
            lay.hi[keep],
            lay.reduce[keep],
            lay.fresh[keep],
            lay.lane[keep],
            np.zeros(len(keep), dtype=np.int64),
        ]
    ).astype(np.int64)
    return out


def orbit_quotient(lay: Layout, orb: Orbits, stand: I64, sched: Schedule) -> OrbitQuotient | None:
    """The quotient program of ``lay`` (module docstring), or None when a check fails."""
    reps = orb.reps
    touches = np.isin(lay.src, reps) | np.isin(lay.dst, reps)
    keep = np.flatnonzero(touches)
    sub = fabric_program_rows(sched, _sub_rows(lay, keep))
    prog = sub.program
    # the sub-program's ops as (message, consumer?, chunk), in the compile's order
    step = lay.step[keep]
    per_step = np.bincount(step, minlength=lay.steps)
    first = np.cumsum(per_step) - per_step  # per step: its first kept message
    j = np.arange(len(keep)) - first[step]
    ks = lay.k[step]
    base = (np.cumsum(2 * per_step * lay.k) - 2 * per_step * lay.k)[step]
    w = per_step[step]
    kmax = int(lay.k.max(initial=1))
    c = np.arange(2)[None, :, None]
    t = np.arange(kmax)[None, None, :]
    sub_id = (
        base[:, None, None] + c * (w * ks)[:, None, None] + t * w[:, None, None] + j[:, None, None]
    )
    real = np.broadcast_to(t < ks[:, None, None], sub_id.shape)
    gm = np.broadcast_to(keep[:, None, None], sub_id.shape)[real]
    cc = np.broadcast_to(c, sub_id.shape)[real]
    tt = np.broadcast_to(t, sub_id.shape)[real]
    sub_id = sub_id[real]
    n_sub = len(prog)
    if sub_id.size != n_sub:
        return None
    sub_gm = np.empty(n_sub, np.int64)
    sub_c = np.empty(n_sub, np.int64)
    sub_t = np.empty(n_sub, np.int64)
    sub_gm[sub_id] = gm
    sub_c[sub_id] = cc
    sub_t[sub_id] = tt
    kind = np.asarray(prog.kind, dtype=np.int64)
    src = np.asarray(prog.src, dtype=np.int64)
    home = np.where(sub_c == 0, lay.src[sub_gm], lay.dst[sub_gm])
    if not ((kind == TRANSFER) == (sub_c == 0)).all() or not (src == home).all():
        return None  # the compile did not lay the ops out as (step, consumer?, chunk, message)
    sub_full = lay.full_id(sub_gm, sub_c, sub_t)
    in_q = np.isin(home, reps)
    q_sub = np.flatnonzero(in_q)
    q_full = sub_full[q_sub]
    if len(q_full) > 1 and (np.diff(q_full) <= 0).any():
        return None
    # stand-ins: the image message's op of the same kind and chunk, found among the quotient's
    img_full = lay.full_id(stand[sub_c, sub_gm], sub_c, sub_t)
    at = np.minimum(np.searchsorted(q_full, img_full), len(q_full) - 1)
    if (q_full[at] != img_full).any():
        return None
    sub_q = at
    if not (sub_q[q_sub] == np.arange(len(q_sub))).all():
        return None
    # dependencies: stand-ins, earlier, with the real geometry
    deps = [prog.deps[i] for i in q_sub.tolist()]
    nd = np.fromiter(map(len, deps), np.int64, len(deps))
    dj = np.repeat(np.arange(len(q_sub)), nd)
    dd = np.fromiter((d for ds in deps for d in ds), np.int64, int(nd.sum()))
    if (sub_q[dd] >= dj).any():
        return None
    span = np.asarray(prog.span, dtype=np.int64).reshape(-1, 2)
    jj = q_sub[dj]
    here = stream_geometry(span[dd, 0], span[dd, 1], span[jj, 0], span[jj, 1])
    sd = q_sub[sub_q[dd]]
    there = stream_geometry(span[sd, 0], span[sd, 1], span[jj, 0], span[jj, 1])
    differ = ~(here == there).all(axis=0)  # the stand-in moves another range (a turn) ...
    whole = bool(differ.any()) and not here.any()  # ... the same when no one needs a part
    seen = {} if whole else seen_spans(sub_q[dd], dj, span[dd, 0], span[dd, 1], here, differ)
    if seen is None:
        return None
    into = prog.into or [-1] * n_sub
    pick = q_sub.tolist()
    qpos = np.full(n_sub, -1, dtype=np.int64)
    qpos[q_sub] = np.arange(len(q_sub))
    qp = qpos.tolist()
    q_into = [qp[into[i]] if into[i] >= 0 else -1 for i in pick]
    if any(x < 0 and into[i] >= 0 for x, i in zip(q_into, pick, strict=True)):
        return None
    sq = sub_q.tolist()  # Python ints: indexing a numpy array per dependency cost more

    def picked(column: list[Any]) -> list[Any]:
        return [column[i] for i in pick]

    quotient = FabricProgram(
        kind=picked(prog.kind),
        src=picked(prog.src),
        dst=picked(prog.dst),
        nbytes=picked(prog.nbytes),
        step=picked(prog.step),
        deps=[tuple(sorted({sq[d] for d in prog.deps[i]})) for i in pick],
        consumes=[sq[c] if c >= 0 else -1 for c in picked(prog.consumes)],
        hbm=picked(prog.hbm),
        span=[(0, 0)] * len(pick) if whole else picked(prog.span),
        into=q_into if any(x >= 0 for x in q_into) else [],
        lane=picked(prog.lane) if any(prog.lane) else [],
        seen_span=seen,
    )
    return OrbitQuotient(quotient, sub, sub_q, sub_full, q_sub, whole)


def expander(
    net: Network, lay: Layout, orb: Orbits, stand: I64, q: OrbitQuotient, rep: OpLog, rt: RouteTable
) -> Callable[[], dict[str, I64]]:
    """The full log's columns from the quotient's records (module docstring)."""

    def expand() -> dict[str, I64]:
        nlinks = len(net.links)
        link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
        st = rep.stored
        q_op = st["op"].astype(np.int64)
        q_first = np.searchsorted(q_op, np.arange(len(q.program)))
        # every op of the full program, in its order: (step, consumer?, chunk, message)
        f = np.arange(lay.ops, dtype=np.int64)
        s = np.searchsorted(lay.base, f, side="right") - 1
        w, k = lay.width[s], lay.k[s]
        r = f - lay.base[s]
        c = r // (w * k)
        t = r % (w * k) // w
        gm = lay.first[s] + r % w
        img_full = lay.full_id(stand[c, gm], c, t)
        q_full = q.sub_full[q.q_sub]
        qi = np.searchsorted(q_full, img_full)
        a, b, lane = lay.src[gm], lay.dst[gm], lay.lane[gm]
        nrec = np.where(c == 0, rt.hops[a, b], 1)
        op = np.repeat(f, nrec)
        hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
        at = q_first[qi[op]] + hop
        on_link = c[op] == 0
        link = rt.link(a[op], b[op], lane[op], np.minimum(hop, rt.links0.shape[2] - 1))
        red = lay.reduce[gm[op]]
        return {
            "op": op,
            "chip": np.where(on_link, link_chip[link], b[op]),
            "engine": np.where(on_link, link, np.where(red, nlinks, nlinks + 1)),
            "stage": np.where(
                on_link, np.where(hop == 0, SEND, FORWARD), np.where(red, REDUCE, COPY_STAGE)
            ),
            "start": st["start"][at],
            "end": st["end"][at],
            "nbytes": st["nbytes"][at],
            "macs": np.zeros(len(op), dtype=np.int64),
            "tile": s[op],
        }

    return expand
