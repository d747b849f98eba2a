"""Collectives on a product of switch / fully connected dimensions timed from
representatives' ops generated directly: the flat ring from one node's, ``direct`` from one
chip's, ``hierarchical`` and ``tree_ring`` from one rail's (:data:`SCHEDULED`). The full
schedule is held as arrays, the full program never built.

**The group.** The flat ring's order is a reflected Gray code of the chips' digits
(:func:`sim.fabric.dimensions.gray_order`): node ``j`` is swept the other way from node
``j - 1``. Turning the order by one node's sweep (``B = s_0 ... s_{n-2}`` positions) maps
node ``j`` onto node ``j + 1`` reflected, a relabelling within every group and so a network
automorphism; the turns form a group acting freely, whose representatives are node 0's
chips (:func:`sim.fabric.quotient.order_rotations`).

**The checks**, on the schedule's arrays (every message of a step is cut into the same
chunks, so op ``(step, consumer?, chunk, message)`` of the program is message ``m`` of its
step, and the compile's order is by those keys): every element is a network automorphism
that maps every message's route onto its image's, link by link
(:func:`sim.fabric.quotient.link_maps`); each generator maps every message onto a message of
the same step, size and kind, and the ranges onto ranges consistently (one range -> one
range), so the compiled program maps onto itself; per home chip, and per link and hop
index, the map to representatives keeps the message order within a step (the event loop's
ties: :mod:`sim.fabric.quotient`); every dependency of a quotient op is earlier and keeps
its streaming geometry with its stand-in. Any failure returns None and the general path
runs.

**The quotient program** is the compile of the *sub-schedule*: the messages a
representative sends or receives. A chip's dependencies are its own, so the ops of the
representatives are those of the full program, in its order; a consumed transfer from
another node stands for the representative's image of it (its stand-in). The unchanged
event engine times it (:func:`sim.fabric.quotient.time_representatives`).

**The log** is a :class:`~sim.fabric.SymmetricLog`: the representatives' records, the full
columns written out from them when read (op ``i`` has the times of its stand-in, its own
chips and links). **Metrics** in closed form: every link's load is its representative
link's, every chip's its representative's. **``#wrong``** is the replay of the
representatives' ops in time order on counts of inputs per piece (0, 1, 2 for "more than
once"): a receive takes what its stand-in's sender held when it left, inputs relabelled
by the element that took the real sender there, at the real range's offsets (the pieces
are the sub-schedule's, refined by every stand-in's cuts: :func:`_refined`); each piece
must hold what the collective defines, on every chip (``|G|`` times the
representatives'), and no op may use data before it arrived.
"""

from __future__ import annotations

from functools import cached_property
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from sim.collectives.catalog import build_schedule
from sim.collectives.fast import SymmetricRun, input_mismatch
from sim.collectives.hierarchical import HIERARCHICAL_ALGORITHMS, hierarchical_messages
from sim.collectives.orbit import (
    SHAPES,
    Invariance,
    Layout,
    OrbitQuotient,
    Orbits,
    RouteTable,
    expander,
    groups_for,
    orbit_quotient,
    ring_layout,
    schedule_layout,
    stand_ins,
)
from sim.collectives.races import compiled_race
from sim.collectives.run import FAST_PATHS
from sim.collectives.schedule import COLLECTIVES, I64, Schedule
from sim.errors import NpuSimError
from sim.fabric import (
    FORWARD,
    HBM_ENGINE,
    REDUCE,
    REDUCE_ENGINE,
    REDUCTION,
    SEND,
    STAGES,
    TRANSFER,
    ChipGroup,
    LinkMaps,
    Network,
    SymmetricLog,
    build_network,
    distinct,
    hbm_default,
    link_orbit_minima,
    time_representatives,
)
from sim.limits import memory_budget_bytes, ops_budget
from sim.oplog import OpLog
from sim.topology import Topology, dimensions_of


class _Fallback(Exception):
    """A shape the symmetric replay does not follow: the general path runs instead."""


def _replay(
    lay: Layout, orb: Orbits, q: OrbitQuotient, rep: OpLog, net: Network, collective: str
) -> tuple[int, str]:
    """``#wrong`` and the first problem, from the representatives' records (module
    docstring)."""
    prog, sub = q.program, q.compiled
    sp = sub.program
    p, count = net.chips, int(sub.bounds[-1])
    n = len(prog)
    st = rep.stored
    op, start, end = st["op"], st["start"], st["end"]
    engine = st["engine"].astype(np.int64)
    first = np.searchsorted(op, np.arange(n))
    last = np.r_[first[1:], len(op)] - 1
    kind = np.asarray(prog.kind, dtype=np.int64)
    cons = np.flatnonzero(kind != TRANSFER)
    t_of = np.asarray(prog.consumes, dtype=np.int64)[cons]
    lats = np.asarray(net.link_latencies_ps, dtype=np.int64)
    lt = last[t_of]
    lat = lats[engine[lt]]
    cj = first[cons]
    early = (start[cj] < start[lt] + lat) | (end[cj] <= end[lt] + lat)
    if early.any():
        i, t = int(cons[np.argmax(early)]), int(t_of[np.argmax(early)])
        j, e = int(first[i]), int(last[t])
        return p * count, (
            f"op {i} on chip {prog.src[i]} runs {int(start[j])}..{int(end[j])} ps, but the data "
            f"of transfer op {t} arrives {int(start[e] + lats[engine[e]])}.."
            f"{int(end[e] + lats[engine[e]])} ps: it uses data before it arrived"
        )
    reps = orb.reps
    sub_lo, sub_hi = np.asarray(sub.lo, dtype=np.int64), np.asarray(sub.hi, dtype=np.int64)
    q_sub = np.asarray(q.q_sub, dtype=np.int64)
    at = np.asarray(sub.bounds, dtype=np.int64)
    bounds = _refined(at, sub_lo, sub_hi, q_sub[cons], q_sub[t_of], len(reps) * p)
    pieces = len(bounds) - 1
    state = np.zeros((len(reps), pieces, p), dtype=np.int8)
    state[np.arange(len(reps)), :, reps] = 1
    times = end[first]  # a send is read when its first hop ends
    order = np.lexsort((np.arange(n), (kind == TRANSFER).astype(np.int64), times))
    row = np.searchsorted(reps, np.asarray(prog.src, dtype=np.int64))
    lo = np.searchsorted(bounds, at[sub_lo]).tolist()  # the ops' ranges in the refined pieces
    hi = np.searchsorted(bounds, at[sub_hi]).tolist()
    stash: dict[int, np.ndarray] = {}
    plans: dict[tuple[int, ...], tuple[I64, ...]] = {}  # _realign's, per pair of ranges
    # per op as Python values (numpy scalars per op cost more than the arrays' work)
    kinds, rows, q_sub_l = kind.tolist(), row.tolist(), q.q_sub.tolist()
    els = list(orb.el)  # each element's chip permutation
    to_rep = orb.to_rep.tolist()
    for i in order.tolist():
        si = q_sub_l[i]
        k = kinds[i]
        if k == TRANSFER:
            if sub.fresh[si]:  # reads the chip's input buffer
                fresh = np.zeros((hi[si] - lo[si], p), dtype=np.int8)
                fresh[:, prog.src[i]] = 1
                stash[i] = fresh
            else:
                stash[i] = state[rows[i], lo[si] : hi[si]].copy()
            continue
        t_sub = sp.consumes[si]  # the real transfer
        stand = prog.consumes[i]
        g = els[to_rep[sp.src[t_sub]]]
        data = stash.get(stand)
        s_sub = q_sub_l[stand]
        if data is None:
            raise _Fallback
        if hi[s_sub] - lo[s_sub] != hi[si] - lo[si]:  # the stand-in's range is cut otherwise
            key = (lo[s_sub], hi[s_sub], lo[si], hi[si])
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = _realign_plan(bounds, key[:2], key[2:])
            data = _realign(data, plan)
        data = data[:, g]
        piece = state[rows[i], lo[si] : hi[si]]
        if k == REDUCTION:  # counts 0, 1, 2 ("more than once"): int8 holds their sum
            piece += data
            np.minimum(piece, 2, out=piece)
        else:
            piece[:] = data
    starts, size = bounds[:-1], np.diff(bounds)
    want = np.ones((len(reps), pieces, p), dtype=np.int8)
    defined = np.ones((len(reps), pieces), dtype=bool)
    if collective != "allreduce":
        owner = np.full(pieces, -1, dtype=np.int64)
        for c, ranges in enumerate(lay.shares):
            for a, b in ranges:
                owner[(starts >= a) & (starts < b)] = c
        if collective == "all_gather":
            want[:] = 0
            want[:, np.arange(pieces), owner] = 1
        else:
            defined = owner[None, :] == reps[:, None]
    bad = (state != want).any(axis=2) & defined
    if not bad.any():
        return 0, ""
    wrong = int(orb.el.shape[0] * (size[None, :] * bad).sum())
    r, x = (int(v) for v in np.argwhere(bad)[0])
    why = input_mismatch(state[r, x], want[r, x])
    lo_e, hi_e = int(bounds[x]), int(bounds[x + 1])
    return wrong, f"chip {int(reps[r])}, elements [{lo_e}, {hi_e}) {why}"


def _refined(bounds: I64, lo: I64, hi: I64, cons: I64, stand: I64, width: int) -> I64:
    """The cuts of the replay's pieces: the sub-schedule's ``bounds`` and, to a fixpoint,
    every cut inside a stand-in's range carried to the same offset of the range its consumer
    receives (per sub-program op, ``lo`` and ``hi`` index ``bounds``; ``cons`` the consumers,
    ``stand`` their stand-ins' transfers). The real data changes where the stand-in's does;
    the sub-schedule leaves out the messages of other chips that cut it there (an
    all-gather's parts arrive from many chips). :class:`_Fallback` when the ranges differ in
    length, or the replay's state (``width`` bytes a piece) would pass the memory budget."""
    e0, f0 = bounds[lo[cons]], bounds[lo[stand]]
    length = bounds[hi[stand]] - f0
    if (bounds[hi[cons]] - e0 != length).any():
        raise _Fallback
    cuts = bounds
    while True:
        a = np.searchsorted(cuts, f0, side="right")
        n = np.searchsorted(cuts, f0 + length, side="left") - a
        at = np.repeat(a - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        moved = cuts[at] + np.repeat(e0 - f0, n)
        more = distinct(np.concatenate([cuts, moved]))
        if len(more) == len(cuts):
            return cuts
        if len(more) * width > memory_budget_bytes() // 2:
            raise _Fallback  # the general path replays the full log instead
        cuts = more


def _realign(data: npt.NDArray[np.int8], plan: tuple[I64, ...]) -> npt.NDArray[np.int8]:
    """``data``, the input counts of a stand-in's pieces, as the pieces of the real range of
    the same length (``plan``: :func:`_realign_plan`): a stand-in moves the image of the real
    range, which the sub-schedule may cut at other offsets (its other messages' ends fall
    elsewhere). Each wanted piece takes the counts of the pieces under it, which must agree
    (else :class:`_Fallback`: a piece would hold two kinds of data). On the pieces of
    :func:`_refined` each wanted piece lies inside one stand-in piece, so the check costs
    nothing there; it keeps the step safe on any coarser cut."""
    first, a, b = plan
    if len(a) and (data[a] != data[b]).any():
        raise _Fallback
    return data[first]


def _realign_plan(bounds: I64, have: tuple[int, int], want: tuple[int, int]) -> tuple[I64, ...]:
    """For :func:`_realign` from the pieces ``have`` (a range of piece indices into
    ``bounds``) to the pieces ``want``: per wanted piece the first piece of ``have`` under
    it, and the pairs of pieces under one wanted piece that must agree (every further one
    with the first)."""
    h = bounds[have[0] : have[1] + 1] - bounds[have[0]]
    w = bounds[want[0] : want[1] + 1] - bounds[want[0]]
    if h[-1] != w[-1]:
        raise _Fallback
    first = np.searchsorted(h, w[:-1], side="right") - 1
    last = np.searchsorted(h, w[1:], side="left") - 1
    n = last - first
    a = np.repeat(first, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + 1
    return first, a, np.repeat(first, n)


class OrbitRun(SymmetricRun):
    """A :class:`SymmetricRun` of a collective on a product of dimensions, timed from its
    representatives' ops (module docstring); ``schedule``, ``compiled`` and ``final`` are built when
    asked, for the sizes where the full program fits."""

    algorithm: str
    collective: str
    count: int
    chunk: int
    group: ChipGroup
    orbit: OrbitQuotient
    layout: Layout
    orbits: Orbits

    def __init__(
        self,
        topo: Topology,
        net: Network,
        algorithm: str,
        collective: str,
        count: int,
        chunk: int,
        group: ChipGroup,
        orbit: OrbitQuotient,
        log: SymmetricLog,
        checked: tuple[int, str],
        layout: Layout,
        orbits: Orbits,
    ) -> None:
        setattr_ = object.__setattr__
        for name, value in (
            ("layout", layout),
            ("orbits", orbits),
            ("topo", topo),
            ("network", net),
            ("algorithm", algorithm),
            ("collective", collective),
            ("count", count),
            ("chunk", chunk),
            ("group", group),
            ("orbit", orbit),
            ("quotient", orbit.program),
            ("log", log),
            ("symmetric", log),
            ("wrong", checked[0]),
            ("problem", checked[1]),
        ):
            setattr_(self, name, value)

    def dependency_race(self) -> str:
        """The race check (:func:`sim.collectives.races.compiled_race`) of the compile the
        timed quotient was built from: the messages the representatives send or receive. A
        chip's dependencies are its own, so the representatives' ops there are the full
        program's; every other chip's are their images (the orbit checks). The inherited
        check reads the flat ring's ``case``, which this run does not have."""
        return compiled_race(self.orbit.compiled)

    @cached_property
    def schedule(self) -> Schedule:
        return build_schedule(
            self.topo,
            self.nbytes,
            self.algorithm,
            self.collective,
            chunk_bytes=self.chunk,
            network=self.network,
        )

    @property
    def nbytes(self) -> int:
        return self.count * self.topo.bpe

    @property
    def chips(self) -> int:
        return self.network.chips

    def __repr__(self) -> str:
        return (
            f"OrbitRun({self.algorithm} {self.collective} of {self.nbytes} B on {self.chips} "
            "chips, "
            f"{len(self.group.elements)} turns)"
        )

    def metrics(self) -> dict[str, float]:
        """:func:`sim.collectives.metrics.collective_metrics` in closed form: every link's
        records are its representative link's (the group acts freely, so no element fixes
        a link), every chip's its representative's."""
        p, turns = self.chips, self.group.order
        rep = self.symmetric.rep
        t_ps = self.time_ps
        st = rep.stored
        stage = st["stage"].astype(np.int64)
        engine = st["engine"].astype(np.int64)
        dur = (st["end"] - st["start"]).astype(np.float64)
        nbytes = st["nbytes"].astype(np.float64)
        on_link = (stage == SEND) | (stage == FORWARD)
        nlinks = len(self.network.links)
        per_link = np.bincount(engine[on_link], weights=nbytes[on_link], minlength=nlinks)
        busy = np.bincount(engine[on_link], weights=dur[on_link], minlength=nlinks)
        chip = st["chip"].astype(np.int64)
        red = stage == REDUCE
        reduce_busy = np.bincount(chip[red], weights=dur[red], minlength=p)
        q = self.quotient
        qk, qb, qm = (np.asarray(c, dtype=np.int64) for c in (q.kind, q.nbytes, q.hbm))
        code = qb * 3 + qk  # hbm_default of each distinct (kind, bytes)
        keys = distinct(code)
        default = np.asarray([hbm_default(c % 3, c // 3) for c in keys.tolist()], np.int64)
        moved = np.where(qm < 0, default[np.searchsorted(keys, code)], qm)
        # per chip in op order, as the loop over ops added them (integers: exact)
        hbm = np.bincount(np.asarray(q.src, dtype=np.int64), weights=moved, minlength=p)
        time_ns = t_ps / 1000
        algbw = self.nbytes / time_ns if t_ps else 0.0
        factor = (2.0 if self.collective == "allreduce" else 1.0) * (p - 1) / p
        return {
            "time_ns": time_ns,
            "algbw_gbs": algbw,
            "busbw_gbs": algbw * factor,
            "wrong": float(self.wrong),
            "count": float(self.count),
            "channels": 0.0,
            "transfers": float(turns * int((stage == SEND).sum())),
            "records": float(len(self.log)),
            "link_bytes_max": float(per_link.max(initial=0.0)),
            "link_bytes_total": float(turns * per_link.sum()),
            "links_used": float(turns * int((per_link > 0).sum())),
            "link_util_peak": float(busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
            "hbm_bytes_max": float(hbm.max(initial=0.0)),
            "reduce_util_peak": float(reduce_busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
        }


#: Algorithms taken here besides the flat ring (their schedules are small; their programs
#: are not). ``hierarchical`` and ``tree_ring`` keep only dimension 0's translations (one
#: rail): a translation of the outer digit changes which part of a reduction the next
#: dimension's send streams from. Under them a neighbour's transfer stands in with another
#: range: a dependent that needs part of it would be told the real producer's span
#: (:func:`sim.fabric.seen_spans`, ADR 0032; none does since ADR 0034, whose disjoint
#: dependencies carry no data) and the replay reads the stand-in's data at the real range's
#: offsets (:func:`_refined`, :func:`_realign`). The rest (pairwise, trees,
#: halving-doubling) run on :mod:`sim.collectives.fast_product` from their full programs.
SCHEDULED = ("direct", "hierarchical", "tree_ring")


def orbit_run(
    topo: Topology, nbytes: object, algorithm: object, collective: object, chunk_bytes: object
) -> OrbitRun | None:
    """The run of a collective on two or more switch / fully connected dimensions from its
    representatives' ops (module docstring), or None for any other case."""
    if collective not in COLLECTIVES or (algorithm != "ring" and algorithm not in SCHEDULED):
        return None
    dims = dimensions_of(topo.chips)
    if len(dims) < 2 or any(d.shape not in SHAPES for d in dims) or dims[-1].size < 2:
        return None
    bpe = topo.bpe
    if type(nbytes) is not int or nbytes <= 0 or nbytes % bpe:
        return None
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    if type(chunk) is not int or chunk < bpe:
        return None
    chunk -= chunk % bpe
    net = build_network(topo)
    count = nbytes // bpe
    depth = max(1, topo.chips.staging_buffers // 2)
    sizes = tuple(d.size for d in dims)
    if algorithm == "ring":
        lay = ring_layout(net, str(collective), count, bpe, chunk, depth)
        groups = groups_for(sizes, net.ring_order())[-1:]
        shares = lay.shares if lay is not None else ()
    else:
        rows = None
        try:
            if algorithm in HIERARCHICAL_ALGORITHMS:  # its messages as arrays, no objects
                sched, rows = hierarchical_messages(
                    topo, nbytes, str(algorithm), str(collective), chunk_bytes=chunk, network=net
                )
            else:
                sched = build_schedule(
                    topo, nbytes, str(algorithm), str(collective), chunk_bytes=chunk, network=net
                )
        except NpuSimError:
            return None  # the general path says why
        if sched.blocking or sched.channels:
            return None
        lay = schedule_layout(sched, rows)
        groups = groups_for(sizes)
        shares = sched.shares
    if lay is None or not len(lay.src):
        return None
    base = Schedule(
        collective=collective,
        algorithm=algorithm,  # type: ignore[arg-type]
        chips=net.chips,
        count=count,
        bytes_per_element=bpe,
        chunk_bytes=chunk,
        steps=(),
        shares=shares,
        depth=depth,
    )
    rt = RouteTable(net, int(lay.lane.max(initial=0)) + 1)
    checks = _Checks(LinkMaps(net), Invariance(lay, net, rt))
    for group in groups:
        got = _run_on(topo, net, lay, group, rt, base, checks)
        if got is not None:
            return got
    return None


class _Checks(NamedTuple):
    """What the groups tried on one schedule share: each generator's link map and its
    verdict (:class:`~sim.collectives.orbit.Invariance`)."""

    link_maps: LinkMaps
    invariance: Invariance


def _run_on(
    topo: Topology,
    net: Network,
    lay: Layout,
    group: ChipGroup,
    rt: RouteTable,
    base: Schedule,
    checks: _Checks,
) -> OrbitRun | None:
    if (group.elements[1:] == np.arange(net.chips)).any():
        return None  # not free
    perms = [group.elements[g] for g in group.generators]
    if checks.invariance.refuses(perms):
        return None  # a generator another group tried does not keep the schedule
    maps = checks.link_maps(group, group.generators)
    if maps is None:
        return None
    orb = Orbits(group)
    stand = stand_ins(lay, net, orb, rt)  # the cheap refusal first: the order of ties
    if stand is None or not all(
        checks.invariance(perm, row) for perm, row in zip(perms, maps, strict=True)
    ):
        return None
    hops = rt.hops[lay.src, lay.dst]
    records = int((lay.k[lay.step] * (hops + 1)).sum()) // group.order  # the quotient's
    if records > ops_budget():
        return None  # the general path refuses it, naming the budget
    q = orbit_quotient(lay, orb, stand, base)
    if q is None:
        return None
    link_rep = link_orbit_minima(maps).tolist()
    lanes = q.program.lane or [0] * len(q.program)
    on_reps: dict[tuple[int, int, int], tuple[int, ...]] = {}  # per (src, dst, lane)
    q_routes: list[tuple[int, ...]] = []
    for kk, a, b, w in zip(q.program.kind, q.program.src, q.program.dst, lanes, strict=True):
        if kk != TRANSFER:
            q_routes.append(())
            continue
        r = on_reps.get((a, b, w))
        if r is None:
            r = on_reps[a, b, w] = tuple(link_rep[x] for x in net.route(a, b, w))
        q_routes.append(r)
    view = time_representatives(net, q.program, q_routes)
    names = (*net.names, REDUCE_ENGINE, HBM_ENGINE)
    rep = OpLog.from_columns(names, STAGES, {c: view.column(c) for c in view.stored})
    log = SymmetricLog(rep, group.order, expander(net, lay, orb, stand, q, rep, rt))
    try:
        checked = _replay(lay, orb, q, rep, net, str(base.collective))
    except _Fallback:
        return None
    return OrbitRun(
        topo,
        net,
        str(base.algorithm),
        str(base.collective),
        base.count,
        base.chunk_bytes,
        group,
        q,
        log,
        checked,
        lay,
        orb,
    )


FAST_PATHS.append(orbit_run)
