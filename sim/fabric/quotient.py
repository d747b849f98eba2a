"""A fabric program timed from the ops of representative chips: the quotient by a group of
chip permutations that maps the network and the program onto themselves, ties included,
checked op by op before it is used (:func:`time_by_quotient`).

**The claim.** Let ``G`` be a group of chip permutations acting freely (no element but the
identity fixes a chip), each element an automorphism of the network (links onto links of
the same bandwidth, latency and setup, a switch node onto a switch node) and of the program
(an op onto an op of the same kind, bytes, HBM bytes, step and lane, its route onto the
image's route link by link, its dependencies, consumed transfer and accumulator onto the
image's, and every dependency's streaming geometry, the relative offsets of the two spans
that :func:`sim.fabric.events.simulate_events` reads, kept). Then if, in addition, every
resource serves its ops in an order the map to representatives keeps (below), the event
loop is equivariant: op ``g(i)`` runs at the times of op ``i``, and the whole log is the
log of one op per orbit.

**The quotient program.** Every op has a home chip (a transfer: its sender; a reduction or
copy: its chip). Per chip orbit the least chip is the representative; ``g_c`` is the one
element that takes chip ``c`` to its representative, and ``phi(i) = g_home(i)(i)`` the
op on a representative chip that stands for op ``i``. The quotient program holds the ops
of the representative chips in program order; a dependency ``d`` of one of them becomes
``phi(d)`` (the stand-in for a neighbour's op, as :mod:`sim.collectives.fast` does for a
ring), a consumed transfer likewise, and each link of a route becomes the least link of its
orbit, so that every op that uses a link of one orbit queues at one engine. Chips' HBM,
reduce engines, accumulators and staging pools (per sender, receiver and lane) are used
only by ops of one home chip, so they are the representatives' own.

**Ties.** The event loop breaks equal times by op id (and hop). So the check demands, for
every chip, that ``phi`` keeps the order of its ops' ids, and for every link, that ``phi``
keeps the order of ``(op id, hop)`` of the ops that cross it; and that every dependency of
a quotient op stays earlier in the quotient's order. Any failure returns None: the caller
runs the exact event engine instead.

**Spans.** The streaming rule reads a producer's span against its dependent's. A stand-in
for a neighbour's op may move another range (a ring's turn; a part of a nested split, as
``hierarchical``'s): where no dependent needs part of a span every span is left unknown
(``whole``); otherwise the quotient tells each such dependent the span of the real producer
(``FabricProgram.seen_span``, ADR 0032), so it reads the real geometry. Two real producers
of one dependent with one stand-in must then agree on it (one edge cannot say both).

The checks are linear in the program (numpy over its columns); the event loop runs on
``1 / |G|`` of it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sim.fabric.events import simulate_events
from sim.fabric.holds import op_holds
from sim.fabric.log import op_log
from sim.fabric.network import Network
from sim.fabric.program import TRANSFER, FabricProgram, lanes_of, op_routes
from sim.fabric.scan import distinct
from sim.fabric.switch_ops import at_switch
from sim.oplog import OpLog

I64 = npt.NDArray[np.int64]

__all__ = [
    "ChipGroup",
    "LinkMaps",
    "Quotient",
    "digit_translations",
    "digit_xors",
    "link_maps",
    "link_orbit_minima",
    "order_rotations",
    "stream_geometry",
    "time_by_quotient",
    "time_representatives",
]


@dataclass(frozen=True)
class ChipGroup:
    """A group of chip permutations: ``elements[e][c]`` is chip ``c``'s image under element
    ``e`` (element 0 the identity); ``generators`` index elements that generate it."""

    name: str
    elements: I64  # (|G|, p)
    generators: tuple[int, ...]

    @property
    def order(self) -> int:
        return len(self.elements)


def _digits(p: int, sizes: Sequence[int]) -> I64:
    c = np.arange(p, dtype=np.int64)
    out = []
    for s in sizes:
        out.append(c % s)
        c = c // s
    return np.stack(out)


def _chips(digits: I64, sizes: Sequence[int]) -> I64:
    c = np.zeros(digits.shape[1:], dtype=np.int64)
    for d in reversed(range(len(sizes))):
        c = c * sizes[d] + digits[d]
    return c


def digit_translations(sizes: Sequence[int], dims: Sequence[int] | None = None) -> ChipGroup:
    """Chip ``(i_0, i_1, ...)`` -> ``(i_d + v_d mod s_d)`` for every vector ``v`` over the
    dimensions ``dims`` (default: all): on a switch or fully connected dimension any
    relabelling of a group is a network automorphism, and a translation is one."""
    dims = tuple(range(len(sizes))) if dims is None else tuple(dims)
    p = math.prod(sizes)
    dig = _digits(p, sizes)
    vectors = list(itertools.product(*(range(sizes[d]) for d in dims)))
    elements = np.empty((len(vectors), p), dtype=np.int64)
    for e, v in enumerate(vectors):
        moved = dig.copy()
        for d, shift in zip(dims, v, strict=True):
            moved[d] = (dig[d] + shift) % sizes[d]
        elements[e] = _chips(moved, sizes)
    gens = tuple(
        vectors.index(tuple(1 if x == d else 0 for x in dims)) for d in dims if sizes[d] > 1
    )
    return ChipGroup(f"translations of dimensions {list(dims)}", elements, gens)


def digit_xors(sizes: Sequence[int]) -> ChipGroup | None:
    """Chip ``c`` -> ``c xor x`` for every ``x`` when every size is a power of two (then the
    xor acts digit by digit); None otherwise."""
    if any(s & (s - 1) for s in sizes):
        return None
    p = math.prod(sizes)
    c = np.arange(p, dtype=np.int64)
    elements = c[None, :] ^ c[:, None]
    gens = tuple(1 << b for b in range(p.bit_length() - 1))
    return ChipGroup("xor of chip ids", elements, gens)


def order_rotations(order: Sequence[int], step: int) -> ChipGroup | None:
    """Turning a cyclic chip order (a ring's) by multiples of ``step`` positions: chip
    ``order[q]`` -> ``order[q + k step]``; None unless ``step`` divides its length. On the
    reflected Gray order of two switch dimensions, turning by one node's sweep maps node
    ``j`` onto node ``j + 1`` reflected: a relabelling within every group, so a network
    automorphism (``_invariant`` checks it, as for every group)."""
    p = len(order)
    if step <= 0 or p % step or len(set(order)) != p:
        return None
    at = np.asarray(order, dtype=np.int64)
    elements = np.empty((p // step, p), dtype=np.int64)
    for e in range(p // step):
        elements[e, at] = np.roll(at, -e * step)
    return ChipGroup(f"turns of the ring order by {step}", elements, (1,) if p > step else ())


@dataclass(frozen=True)
class Quotient:
    """What :func:`time_by_quotient` found: the group, its representative chips, the
    quotient program and its log, and per op of the full program the quotient op that
    stands for it (``phi``)."""

    group: ChipGroup
    reps: I64
    program: FabricProgram
    log: OpLog
    phi: I64  # per full op: its stand-in's index in the quotient program


class _Layout:
    """A network's nodes and links as arrays: per link its (from, to, lane) and a code for
    looking a link up by them; per switch node its chips (to map switches with chips)."""

    def __init__(self, net: Network) -> None:
        links = np.asarray(net.links, dtype=np.int64).reshape(-1, 2)
        self.nodes = int(links.max()) + 1 if len(links) else net.chips
        lane = np.zeros(len(links), dtype=np.int64)
        for g in net.parallel:
            for at, k in enumerate(g):
                lane[k] = at
        self.lanes = int(lane.max()) + 1 if len(lane) else 1
        self.u, self.v, self.lane = links[:, 0], links[:, 1], lane
        code = self.code(self.u, self.v, lane)
        self.order = np.argsort(code, kind="stable")
        self.sorted_code = code[self.order]
        members: dict[int, set[int]] = {}
        for a, b in zip(self.u.tolist(), self.v.tolist(), strict=True):
            if a >= net.chips:
                members.setdefault(a, set()).add(b)
        self.switch_chips = members
        self.switch_of = {frozenset(m): w for w, m in members.items()}
        self.bw = np.asarray([(f.numerator, f.denominator) for f in net.link_bws], np.int64)
        self.lat = np.asarray(net.link_latencies_ps, dtype=np.int64)
        setup = net.link_setup_ps or (0,) * len(links)
        self.setup = np.asarray(setup, dtype=np.int64)

    def code(self, u: I64, v: I64, lane: I64) -> I64:
        return (u * self.nodes + v) * self.lanes + lane

    def node_map(self, chips: I64) -> I64 | None:
        """A chip permutation extended to the switch nodes (a switch onto the switch of its
        chips' images), or None when the images of a switch's chips share no switch."""
        p = len(chips)
        out = np.arange(self.nodes, dtype=np.int64)
        out[:p] = chips
        for w, members in self.switch_chips.items():
            image = self.switch_of.get(frozenset(int(chips[c]) for c in members))
            if image is None:
                return None
            out[w] = image
        return out

    def link_map(self, nodes: I64) -> I64 | None:
        """Each link's image under a node permutation, or None when one is not a link or
        differs in bandwidth, latency or setup."""
        code = self.code(nodes[self.u], nodes[self.v], self.lane)
        at = np.searchsorted(self.sorted_code, code)
        at = np.minimum(at, len(self.sorted_code) - 1)
        if len(code) and (self.sorted_code[at] != code).any():
            return None
        image = self.order[at]
        same = (
            (self.bw[image] == self.bw).all()
            and (self.lat[image] == self.lat).all()
            and (self.setup[image] == self.setup).all()
        )
        return image if same else None


class _Ops:
    """A program's columns as arrays, and a map of ops by (kind, home, peer, lane, n-th)."""

    def __init__(self, net: Network, program: FabricProgram, routes: list[tuple[int, ...]]):
        n = len(program)
        self.n, self.p = n, net.chips
        self.kind = np.asarray(program.kind, dtype=np.int64)
        self.src = np.asarray(program.src, dtype=np.int64)
        self.dst = np.asarray(program.dst, dtype=np.int64)
        self.lane = np.asarray(lanes_of(program), dtype=np.int64)
        self.attrs = np.stack(
            [
                self.kind,
                np.asarray(program.nbytes, dtype=np.int64),
                np.asarray(program.hbm, dtype=np.int64),
                np.asarray(program.step, dtype=np.int64),
                self.lane,
            ]
        )
        self.consumes = np.asarray(program.consumes, dtype=np.int64)
        into = program.into or [-1] * n
        self.into = np.asarray(into, dtype=np.int64)
        span = np.fromiter(itertools.chain.from_iterable(program.span), np.int64, 2 * n)
        span = span.reshape(-1, 2)  # (fromiter: a third of asarray's time on pairs)
        self.lo, self.hi = span[:, 0], span[:, 1]
        ndeps = np.fromiter(map(len, program.deps), np.int64, n)
        self.dep_op = np.repeat(np.arange(n, dtype=np.int64), ndeps)
        self.dep = np.fromiter(
            itertools.chain.from_iterable(program.deps), np.int64, len(self.dep_op)
        )
        nhops = np.fromiter(map(len, routes), np.int64, n)
        self.nhops = nhops
        self.hop_op = np.repeat(np.arange(n, dtype=np.int64), nhops)
        self.hop = np.arange(len(self.hop_op), dtype=np.int64) - np.repeat(
            np.cumsum(nhops) - nhops, nhops
        )
        self.hop_link = np.fromiter(
            itertools.chain.from_iterable(routes), np.int64, len(self.hop_op)
        )
        base = self._base(self.src, self.dst)
        order = np.lexsort((np.arange(n), base))
        sb = base[order]
        starts = np.r_[0, np.flatnonzero(sb[1:] != sb[:-1]) + 1]
        nth = np.empty(n, dtype=np.int64)
        run = np.diff(np.r_[starts, n])
        nth[order] = np.arange(n) - np.repeat(starts, run)
        self.width = int(run.max()) + 1 if n else 1
        code = base * self.width + nth
        self.order = np.argsort(code, kind="stable")
        self.sorted_code = code[self.order]

    def _base(self, src: I64, dst: I64) -> I64:
        return ((self.kind * self.p + src) * self.p + dst) * (int(self.lane.max(initial=0)) + 1) + (
            self.lane
        )

    def image(self, src: I64, dst: I64) -> I64 | None:
        """Per op, the op of the same kind, lane and rank among its peers whose chips are
        ``src``/``dst`` (the images of its own), or None when one has no such op."""
        base = self._base(src, dst)
        nth = self.sorted_code_nth()
        code = base * self.width + nth
        at = np.minimum(np.searchsorted(self.sorted_code, code), max(self.n - 1, 0))
        if self.n and (self.sorted_code[at] != code).any():
            return None
        return self.order[at]

    def sorted_code_nth(self) -> I64:
        nth = np.empty(self.n, dtype=np.int64)
        nth[self.order] = self.sorted_code % self.width
        return nth


def _geometry(lo: I64, hi: I64, x: I64, y: I64) -> I64:
    """What the streaming rule reads of a producer's span ``[lo, hi)`` and a dependent's
    ``[x, y)`` (:func:`sim.fabric.events.simulate_events`, ``produced``), as columns."""
    width = hi - lo
    part = (width > 0) & (x < hi) & (lo < y) & ((x > lo) | (y < hi))
    if not part.any():  # no dependent needs part of a span (a blocking step's orders)
        return np.zeros((5, len(part)), dtype=np.int64)
    a = np.maximum(x, lo) - lo
    a = np.where(a >= np.minimum(y, hi) - lo, 0, a)
    off = np.maximum(x, lo) - x
    return np.stack([part, part * a, part * width, part * off, part * (y - x)])


def _invariant(ops: _Ops, lay: _Layout, perm: I64) -> bool:
    """Whether the chip permutation ``perm`` maps the program onto itself (module docstring)."""
    nodes = lay.node_map(perm)
    if nodes is None:
        return False
    links = lay.link_map(nodes)
    if links is None:
        return False
    m = ops.image(perm[ops.src], perm[ops.dst])
    if m is None or len(distinct(m)) != ops.n:
        return False
    if not (ops.attrs[:, m] == ops.attrs).all():
        return False
    for col in (ops.consumes, ops.into):
        want = np.where(col >= 0, m[np.maximum(col, 0)], -1)
        if not (col[m] == want).all():
            return False
    if not (ops.nhops[m] == ops.nhops).all():
        return False
    starts = np.cumsum(ops.nhops) - ops.nhops
    image_hops = ops.hop_link[starts[m[ops.hop_op]] + ops.hop]
    if not (image_hops == links[ops.hop_link]).all():
        return False
    a = np.lexsort((m[ops.dep], m[ops.dep_op]))
    b = np.lexsort((ops.dep, ops.dep_op))
    if not ((m[ops.dep_op][a] == ops.dep_op[b]).all() and (m[ops.dep][a] == ops.dep[b]).all()):
        return False
    d, j = ops.dep, ops.dep_op
    here = _geometry(ops.lo[d], ops.hi[d], ops.lo[j], ops.hi[j])
    there = _geometry(ops.lo[m[d]], ops.hi[m[d]], ops.lo[m[j]], ops.hi[m[j]])
    return bool((here == there).all())


def _increasing(group: I64, key_a: I64, key_b: I64) -> bool:
    """Whether, within each ``group`` (rows already sorted by group and real order), the
    pairs ``(key_a, key_b)`` strictly increase."""
    same = group[1:] == group[:-1]
    up = (key_a[1:] > key_a[:-1]) | ((key_a[1:] == key_a[:-1]) & (key_b[1:] > key_b[:-1]))
    return bool((up | ~same).all())


def time_by_quotient(
    net: Network, program: FabricProgram, groups: Sequence[ChipGroup]
) -> tuple[OpLog, Quotient] | None:
    """:func:`sim.fabric.simulate_fabric` (with contention) of ``program`` from the ops of
    representative chips under the first of ``groups`` that passes every check (module
    docstring): the full log, identical to the event engine's, and the quotient; None when
    none does (the caller times the full program)."""
    if not len(program) or at_switch(net, program):
        return None
    routes = op_routes(net, program)
    ops = _Ops(net, program, routes)
    lay = _Layout(net)
    checked: dict[bytes, bool] = {}  # a permutation's check, once (groups share generators)
    for group in groups:
        got = _try(net, program, routes, ops, lay, group, checked)
        if got is not None:
            return got
    return None


def _try(
    net: Network,
    program: FabricProgram,
    routes: list[tuple[int, ...]],
    ops: _Ops,
    lay: _Layout,
    group: ChipGroup,
    checked: dict[bytes, bool] | None = None,
) -> tuple[OpLog, Quotient] | None:
    el, p = group.elements, net.chips
    if el.shape[1] != p or group.order < 2:
        return None
    # free: no element but the identity fixes a chip
    if ((el[1:] == np.arange(p)[None, :]).any()) or len(np.unique(el, axis=0)) != group.order:
        return None
    # every check below must pass and none has effects, so the cheap refusals go first: the
    # stand-ins' dependencies (a quotient dependency on a neighbour's op whose stand-in
    # moves another range) before the generators' invariance and the order of ties
    rep_of = el.min(axis=0)  # per chip: the least chip of its orbit
    to_rep = el.argmin(axis=0)  # per chip c: the element e with el[e, c] = rep_of[c]
    reps = np.unique(rep_of)
    home = ops.src
    g_home = to_rep[home]  # per op: the element that takes its home chip to its representative
    rows = np.arange(ops.n)
    phi = ops.image(el[g_home, ops.src], el[g_home, ops.dst])
    if phi is None:
        return None
    in_q = np.isin(home, reps)
    q_ops = np.flatnonzero(in_q)  # the quotient program: the representatives' ops in order
    qidx = np.full(ops.n, -1, dtype=np.int64)
    qidx[q_ops] = np.arange(len(q_ops))
    if not (phi[q_ops] == q_ops).all():
        return None
    phq = qidx[phi]
    # the quotient's dependencies: stand-ins, earlier, with the geometry of the real ones
    on_q = in_q[ops.dep_op]
    j, d = ops.dep_op[on_q], ops.dep[on_q]
    if (phq[d] >= qidx[j]).any():
        return None
    here = _geometry(ops.lo[d], ops.hi[d], ops.lo[j], ops.hi[j])
    there = _geometry(ops.lo[phi[d]], ops.hi[phi[d]], ops.lo[j], ops.hi[j])
    differ = ~(here == there).all(axis=0)  # the stand-in moves another range (a turn) ...
    whole = bool(differ.any()) and not here.any()  # ... the same when no one needs a part
    seen = {} if whole else seen_spans(phq[d], qidx[j], ops.lo[d], ops.hi[d], here, differ)
    if seen is None:
        return None
    checked = {} if checked is None else checked
    for g in group.generators:
        key = el[g].tobytes()
        if key not in checked:
            checked[key] = _invariant(ops, lay, el[g])
        if not checked[key]:
            return None
    # ties: per home chip, phi keeps the order of its ops
    by_home = np.lexsort((rows, home))
    if not _increasing(home[by_home], phq[by_home], np.zeros(ops.n, np.int64)):
        return None
    # ties: per link and hop index, phi keeps the order of the ops that cross it there (the
    # engine serves equal times at a link by hops travelled, then op id: ADR 0026)
    by_link = np.lexsort((ops.hop, ops.hop_op, ops.hop_link))
    if not _increasing(ops.hop_link[by_link], phq[ops.hop_op][by_link], ops.hop[by_link]):
        return None
    link_rep = _link_reps(lay, el, len(net.links))
    if link_rep is None:
        return None
    quotient = _quotient_program(program, q_ops, qidx, phi, whole, seen)
    q_routes = [tuple(int(link_rep[k]) for k in routes[i]) for i in q_ops.tolist()]
    q_log = simulate_events(
        net, quotient, op_holds(net, quotient, q_routes), contention=True, routes=q_routes
    )
    q_start = np.cumsum(ops.nhops[q_ops] + (ops.kind[q_ops] != TRANSFER)) - (
        ops.nhops[q_ops] + (ops.kind[q_ops] != TRANSFER)
    )
    nrec = np.where(ops.kind == TRANSFER, ops.nhops, 1)
    offset = np.arange(int(nrec.sum()), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    at = np.repeat(q_start[phq], nrec) + offset
    log = op_log(net, program, nrec, q_log.start[at], q_log.end[at], routes)
    return log, Quotient(group, reps, quotient, q_log, phq)


def link_maps(net: Network, group: ChipGroup, elements: Sequence[int] | None = None) -> I64 | None:
    """Per element of ``group`` (or of ``elements``, indices into it), the image of every
    link (``(elements, links)``), or None when one is not a network automorphism (links
    onto links of the same values)."""
    return LinkMaps(net)(group, elements)


class LinkMaps:
    """:func:`link_maps` on one network, each chip permutation's link map computed once:
    the groups tried on one program share generators (dimension 0's translation generates
    its own group and the group of every translation)."""

    def __init__(self, net: Network) -> None:
        self._lay = _Layout(net)
        self._rows: dict[bytes, I64 | None] = {}

    def of(self, perm: I64) -> I64 | None:
        """The image of every link under the chip permutation ``perm``, or None."""
        key = perm.tobytes()
        if key not in self._rows:
            nodes = self._lay.node_map(perm)
            self._rows[key] = None if nodes is None else self._lay.link_map(nodes)
        return self._rows[key]

    def __call__(self, group: ChipGroup, elements: Sequence[int] | None = None) -> I64 | None:
        pick = range(group.order) if elements is None else elements
        out = np.empty((len(pick), len(self._lay.u)), dtype=np.int64)
        for row, e in enumerate(pick):
            links = self.of(group.elements[e])
            if links is None:
                return None
            out[row] = links
        return out


def link_orbit_minima(maps: I64) -> I64:
    """Per link, the least link of its orbit under the group the link maps ``maps`` (of its
    generators) generate."""
    label = np.arange(maps.shape[1], dtype=np.int64)
    while True:
        new = label.copy()
        for m in maps:
            np.minimum(new, new[m], out=new)
        if (new == label).all():
            return label
        label = new


def stream_geometry(lo: I64, hi: I64, x: I64, y: I64) -> I64:
    """What the streaming rule reads of producers' spans ``[lo, hi)`` and dependents'
    ``[x, y)``, as columns (all zero: no dependent needs part of a span)."""
    return _geometry(lo, hi, x, y)


def time_representatives(
    net: Network, program: FabricProgram, routes: list[tuple[int, ...]]
) -> OpLog:
    """A quotient program timed by the event engine with contention, each op on ``routes``
    (its hops on the representatives of the links it really crosses)."""
    return simulate_events(
        net, program, op_holds(net, program, routes), contention=True, routes=routes
    )


def _link_reps(lay: _Layout, el: I64, nlinks: int) -> I64 | None:
    """Per link, the least link of its orbit (every element's link map; None when an
    element is not a network automorphism)."""
    rep = np.arange(nlinks, dtype=np.int64)
    for perm in el:
        nodes = lay.node_map(perm)
        links = None if nodes is None else lay.link_map(nodes)
        if links is None:
            return None
        np.minimum(rep, links, out=rep)
    return rep


def seen_spans(
    qd: I64, qj: I64, lo: I64, hi: I64, here: I64, differ: npt.NDArray[np.bool_]
) -> dict[tuple[int, int], tuple[int, int]] | None:
    """Per quotient dependency (stand-in ``qd`` of a real producer of span ``[lo, hi)``,
    dependent ``qj``, both quotient indices) whose stand-in moves another range than the
    real producer (``differ``): the real producer's span, as the dependent sees it
    (``FabricProgram.seen_span``), so the streaming rule reads the real geometry (ADR 0032).
    ``here``: the real geometry per dependency (:func:`stream_geometry`). None when two real
    producers of one dependent share a stand-in but not a geometry (one edge of the quotient
    cannot say both)."""
    if not differ.any():  # every stand-in's span reads as the real one's
        return {}
    key = qd * (int(qj.max(initial=0)) + 1) + qj
    order = np.lexsort((key,))
    k, h = key[order], here[:, order]
    same_key = k[1:] == k[:-1]
    if (same_key & (h[:, 1:] != h[:, :-1]).any(axis=0)).any():
        return None
    pick = np.flatnonzero(differ)
    return dict(  # keys and values as Python ints (tolist), not numpy scalars
        zip(
            zip(qd[pick].tolist(), qj[pick].tolist(), strict=True),
            zip(lo[pick].tolist(), hi[pick].tolist(), strict=True),
            strict=True,
        )
    )


def _quotient_program(
    program: FabricProgram,
    q_ops: I64,
    qidx: I64,
    phi: I64,
    whole: bool = False,
    seen: dict[tuple[int, int], tuple[int, int]] | None = None,
) -> FabricProgram:
    """The representatives' ops, their dependencies and consumed transfers replaced by the
    stand-ins' quotient indices (their accumulators are their own chip's); ``whole``: every
    span unknown (``(0, 0)``: the streaming rule reads none, as no dependency of the real
    program needs part of one); ``seen``: per quotient dependency whose stand-in moves
    another range, the real producer's span (:func:`seen_spans`)."""
    pick = q_ops.tolist()
    phq = qidx[phi]
    deps = [tuple(sorted({int(phq[d]) for d in program.deps[i]})) for i in pick]
    consumes = [int(phq[t]) if t >= 0 else -1 for t in (program.consumes[i] for i in pick)]
    into = program.into or [-1] * len(program)
    q_into = [int(qidx[into[i]]) if into[i] >= 0 else -1 for i in pick]
    lane = lanes_of(program)
    return FabricProgram(
        kind=[program.kind[i] for i in pick],
        src=[program.src[i] for i in pick],
        dst=[program.dst[i] for i in pick],
        nbytes=[program.nbytes[i] for i in pick],
        step=[program.step[i] for i in pick],
        deps=deps,
        consumes=consumes,
        hbm=[program.hbm[i] for i in pick],
        span=[(0, 0)] * len(pick) if whole else [program.span[i] for i in pick],
        into=q_into if any(x >= 0 for x in q_into) else [],
        lane=[lane[i] for i in pick] if any(lane) else [],
        seen_span=dict(seen or {}),
    )
