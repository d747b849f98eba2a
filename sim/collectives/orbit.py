"""The flat ring's schedule held as arrays, its symmetry checked on them, and its quotient
program compiled from the messages of the representatives alone (the full program is never
built): the structure :mod:`sim.collectives.fast_orbit` times, stores and checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sim.collectives.algorithms import split_ranges
from sim.collectives.compile import Compiled, chunks, fabric_program
from sim.collectives.schedule import I64, Message, Schedule
from sim.fabric import (
    COPY_STAGE,
    FORWARD,
    REDUCE,
    SEND,
    TRANSFER,
    ChipGroup,
    FabricProgram,
    Network,
    stream_geometry,
)
from sim.oplog import OpLog

SHAPES = ("switch", "fully_connected")


@dataclass(frozen=True, eq=False)
class Layout:
    """A schedule as arrays: message ``s * M + m`` is message ``m`` of step ``s``; every
    message is cut into the chunks ``sizes`` (elements) relative to its ``lo``."""

    steps: int
    width: int  # M: messages per step
    src: I64
    dst: I64
    lo: I64
    hi: I64
    reduce: np.ndarray
    sizes: tuple[int, ...]
    shares: tuple[tuple[tuple[int, int], ...], ...]  # per chip (reduce_scatter, all_gather)

    @property
    def k(self) -> int:
        return len(self.sizes)

    @cached_property
    def uniform(self) -> bool:
        """Whether every step names the same (sender, receiver) pairs in the same order."""
        w = self.width
        src, dst = self.src.reshape(-1, w), self.dst.reshape(-1, w)
        return bool((src == src[:1]).all() and (dst == dst[:1]).all())

    def step_of(self) -> I64:
        return np.repeat(np.arange(self.steps, dtype=np.int64), self.width)

    def full_id(self, gm: I64, consumer: I64, t: I64) -> I64:
        """The program's op of chunk ``t`` of message ``gm`` (its transfer or consumer)."""
        s, m = gm // self.width, gm % self.width
        w, k = self.width, self.k
        return s * 2 * w * k + consumer * w * k + t * w + m


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
    sizes = tuple(b - a for a, b in chunks(0, size, bpe, chunk, depth))
    shares = tuple(tuple(h[c] for h in segs) for c in range(p)) if collective != "allreduce" else ()
    return Layout(
        len(src),
        2 * p,
        np.concatenate(src),
        np.concatenate(dst),
        np.concatenate(lo),
        np.concatenate(hi),
        np.concatenate(red),
        sizes,
        shares,
    )


class Orbits:
    """The group's bookkeeping: per chip its representative and the element taking it there."""

    def __init__(self, group: ChipGroup) -> None:
        el = group.elements
        self.el = el
        self.to_rep = el.argmin(axis=0)
        self.reps = np.unique(el.min(axis=0))


def message_images(lay: Layout, p: int, el: I64, e: I64) -> I64 | None:
    """Per message, the message of its step whose sender and receiver are the images under
    element ``e`` (one per message) of ``el``, or None when one is missing. When every step
    names the same pairs in the same order (``lay.uniform``), found on step 0 and repeated."""
    w = lay.width
    n = w if lay.uniform else len(lay.src)
    src, dst = lay.src[:n], lay.dst[:n]
    s = np.arange(n, dtype=np.int64) // w
    code = (s * p + src) * p + dst
    order = np.argsort(code, kind="stable")
    sc = code[order]
    if len(sc) > 1 and (sc[1:] == sc[:-1]).any():
        return None  # two messages of one step on one pair: not told apart by chips
    e = e[:n]
    want = (s * p + el[e, src]) * p + el[e, dst]
    at = np.minimum(np.searchsorted(sc, want), len(sc) - 1)
    if (sc[at] != want).any():
        return None
    img = order[at]
    if lay.uniform:
        img = (np.arange(lay.steps, dtype=np.int64)[:, None] * w + img[None, :]).reshape(-1)
    return img


def _distinct(x: I64) -> I64:
    """The distinct values of ``x``, sorted."""
    y = np.sort(x)
    return y[np.r_[True, y[1:] != y[:-1]]] if len(y) else y


def invariant(lay: Layout, net: Network, group: ChipGroup, maps: I64) -> bool:
    """Every generator maps the schedule onto itself (module docstring); every element's
    links map every message's route onto its image's."""
    n = len(lay.src)
    span = int(lay.hi.max(initial=0)) + 1
    for g in group.generators:
        img = message_images(lay, net.chips, group.elements, np.full(n, g, dtype=np.int64))
        if img is None:
            return False
        same = (
            (lay.hi[img] - lay.lo[img] == lay.hi - lay.lo).all()
            and (lay.reduce[img] == lay.reduce).all()
            and len(_distinct(img[: lay.width] if lay.uniform else img))
            == n // (lay.steps if lay.uniform else 1)
        )
        if not same:
            return False
        # ranges onto ranges, consistently: lo -> image lo is a function and one to one
        pairs = _distinct(lay.lo * span + lay.lo[img])
        if len(_distinct(pairs // span)) != len(pairs) or len(_distinct(pairs % span)) != len(
            pairs
        ):
            return False
    p = net.chips
    pairs = _distinct(
        lay.src[: lay.width] * p + lay.dst[: lay.width] if lay.uniform else lay.src * p + lay.dst
    )
    for e in range(group.order):
        perm = group.elements[e]
        for a, b in zip((pairs // p).tolist(), (pairs % p).tolist(), strict=True):
            route = net.routes[a][b]
            if tuple(int(x) for x in maps[e][list(route)]) != net.routes[perm[a]][perm[b]]:
                return False
    return True


class RouteTable:
    """Every pair's route as a padded table (``links[src, dst, hop]``) and its hop count."""

    def __init__(self, net: Network) -> None:
        p = net.chips
        self.hops = np.asarray([[len(r) for r in row] for row in net.routes], dtype=np.int64)
        width = max(1, int(self.hops.max(initial=0)))
        self.links = np.zeros((p, p, width), dtype=np.int64)
        for a, row in enumerate(net.routes):
            for b, r in enumerate(row):
                self.links[a, b, : len(r)] = r


def stand_ins(lay: Layout, net: Network, orb: Orbits, rt: RouteTable) -> I64 | None:
    """Per message, its stand-in's message (the image under the element taking its home to
    a representative: the sender's for a transfer, the receiver's for a consumer), as
    ``(2, n)``; None when the map does not keep the order the event loop breaks ties by,
    per home chip and per link and hop index, within a step (on step 0 alone when every
    step names the same pairs in the same order)."""
    p = net.chips
    n = lay.width if lay.uniform else len(lay.src)
    gm = np.arange(n, dtype=np.int64)
    s = gm // lay.width
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
    link = rt.links[src[rep], dst[rep], hop]
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


def _sub_schedule(lay: Layout, keep: I64, sched: Schedule) -> Schedule:
    steps: list[list[Message]] = [[] for _ in range(lay.steps)]
    for gm in keep.tolist():
        steps[gm // lay.width].append(
            Message(
                int(lay.src[gm]),
                int(lay.dst[gm]),
                int(lay.lo[gm]),
                int(lay.hi[gm]),
                bool(lay.reduce[gm]),
            )
        )
    return Schedule(
        collective=sched.collective,
        algorithm=sched.algorithm,
        chips=sched.chips,
        count=sched.count,
        bytes_per_element=sched.bytes_per_element,
        chunk_bytes=sched.chunk_bytes,
        steps=tuple(tuple(s) for s in steps),
        shares=sched.shares,
        depth=sched.depth,
    )


def orbit_quotient(lay: Layout, orb: Orbits, stand: I64, sched: Schedule) -> OrbitQuotient | None:
    """The quotient program of ``lay`` (module docstring), or None when a check fails."""
    reps = orb.reps
    touches = np.isin(lay.src, reps) | np.isin(lay.dst, reps)
    keep = np.flatnonzero(touches)
    sub = fabric_program(_sub_schedule(lay, keep, sched))
    prog = sub.program
    k = lay.k
    # the sub-program's ops as (message, consumer?, chunk), in the compile's order
    step = keep // lay.width
    per_step = np.bincount(step, minlength=lay.steps)
    first = np.cumsum(per_step) - per_step  # per step: its first kept message
    j = np.arange(len(keep)) - first[step]
    base = 2 * k * first[step]
    w = per_step[step]
    c = np.arange(2)[None, :, None]
    t = np.arange(k)[None, None, :]
    sub_id = (
        base[:, None, None] + c * w[:, None, None] * k + t * w[:, None, None] + j[:, None, None]
    )
    gm = np.broadcast_to(keep[:, None, None], sub_id.shape)
    cc = np.broadcast_to(c, sub_id.shape)
    tt = np.broadcast_to(t, sub_id.shape)
    n_sub = len(prog)
    if sub_id.size != n_sub:
        return None
    sub_gm = np.empty(n_sub, np.int64)
    sub_c = np.empty(n_sub, np.int64)
    sub_t = np.empty(n_sub, np.int64)
    sub_gm[sub_id.reshape(-1)] = gm.reshape(-1)
    sub_c[sub_id.reshape(-1)] = cc.reshape(-1)
    sub_t[sub_id.reshape(-1)] = tt.reshape(-1)
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
    whole = not (here == there).all()
    if whole and here.any():
        return None
    into = prog.into or [-1] * n_sub
    pick = q_sub.tolist()
    qpos = np.full(n_sub, -1, dtype=np.int64)
    qpos[q_sub] = np.arange(len(q_sub))
    q_into = [int(qpos[into[i]]) if into[i] >= 0 else -1 for i in pick]
    if any(x < 0 and into[i] >= 0 for x, i in zip(q_into, pick, strict=True)):
        return None
    quotient = FabricProgram(
        kind=[prog.kind[i] for i in pick],
        src=[prog.src[i] for i in pick],
        dst=[prog.dst[i] for i in pick],
        nbytes=[prog.nbytes[i] for i in pick],
        step=[prog.step[i] for i in pick],
        deps=[tuple(sorted({int(sub_q[d]) for d in prog.deps[i]})) for i in pick],
        consumes=[int(sub_q[prog.consumes[i]]) if prog.consumes[i] >= 0 else -1 for i in pick],
        hbm=[prog.hbm[i] for i in pick],
        span=[(0, 0)] * len(pick) if whole else [prog.span[i] for i in pick],
        into=q_into if any(x >= 0 for x in q_into) else [],
    )
    return OrbitQuotient(quotient, sub, sub_q, sub_full, q_sub, whole)


def expander(
    net: Network, lay: Layout, orb: Orbits, stand: I64, q: OrbitQuotient, rep: OpLog, rt: RouteTable
) -> Callable[[], dict[str, I64]]:
    """The full log's columns from the quotient's records (module docstring)."""

    def expand() -> dict[str, I64]:
        k, w = lay.k, lay.width
        nlinks = len(net.links)
        link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
        st = rep.stored
        q_op = st["op"].astype(np.int64)
        q_first = np.searchsorted(q_op, np.arange(len(q.program)))
        # every op of the full program, in its order: (step, consumer?, chunk, message)
        shape = (lay.steps, 2, k, w)
        s = np.arange(lay.steps)[:, None, None, None]
        c = np.broadcast_to(np.arange(2)[None, :, None, None], shape).reshape(-1)
        t = np.broadcast_to(np.arange(k)[None, None, :, None], shape).reshape(-1)
        gm = np.broadcast_to(s * w + np.arange(w)[None, None, None, :], shape).reshape(-1)
        img_full = lay.full_id(stand[c, gm], c, t)
        q_full = q.sub_full[q.q_sub]
        qi = np.searchsorted(q_full, img_full)
        a, b = lay.src[gm], lay.dst[gm]
        nrec = np.where(c == 0, rt.hops[a, b], 1)
        op = np.repeat(np.arange(len(c), dtype=np.int64), nrec)
        hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
        at = q_first[qi[op]] + hop
        on_link = c[op] == 0
        link = rt.links[a[op], b[op], np.minimum(hop, rt.links.shape[2] - 1)]
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
            "tile": np.repeat(np.arange(lay.steps, dtype=np.int64), 2 * k * w)[op],
        }

    return expand
