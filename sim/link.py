"""Chips joined by links: the network of a topology, its routes, and a link-level timing engine.

Semantics (docs/adr/0005-interconnect-physics.md, docs/adr/0010-interconnect-completion.md):

* A **link** is one direction of a cable between two nodes. A transfer of ``b`` bytes
  occupies it for ``b / link_bw`` (:meth:`Network.link_ps`), one transfer at a time, so
  flows that share a link contend; its data arrives ``link_latency_ns`` after it leaves.
  Latency is flight time, not occupancy (ASTRA-sim's congestion-aware link): two
  back-to-back transfers on one link arrive at ``latency + 2 b / link_bw``. A link serves
  the transfers waiting for it first come, first served (equal ready times in program
  order).
* A transfer crosses its route **cut-through**: hop ``i+1`` is ready ``latency`` after hop
  ``i`` started (the head has crossed the hop) and starts then, or when its link frees,
  and ends no earlier than hop ``i`` ended plus ``latency``. An unloaded ``h``-hop transfer
  therefore arrives ``h * latency + b / link_bw`` after it starts. A switch is a
  non-blocking crossbar: its hop adds latency only.
* Each chip has one **reduce engine**, also first come, first served: reducing ``b``
  bytes takes ``b / reduce_gbs``. It runs concurrently with the chip's links.
* Each chip's **HBM** is one server of the aggregate bandwidth ``hbm_to_router_bw_gbs``:
  what ``num_pcs`` pseudo-channels give under a perfectly interleaved address map (ADR
  0010 says where that equals the per-channel model and where it does not). It serves
  ops in the order they are ready (a send once it has its staging buffer), and an op takes
  its link or reduce engine only when the HBM starts on its bytes, so no link or engine is
  held idle while its op waits for memory (ADR 0016).
* Reductions into one **accumulator** (``FabricProgram.into``) add in the order they
  start, each ending one burst after the one before it: sums commute (ADR 0016).

Topologies (``chips.topology``): ``ring`` (bidirectional; shortest path, a tie at distance
p/2 goes up from the lower chip and down from the higher one), ``fully_connected`` (a link
per ordered pair), ``torus2d`` (``rows x cols``, chip ``r*cols + c``; dimension order:
along the row first, then along the column, each dimension routed like a ring) and
``switch`` (one link each way between every chip and a non-blocking switch, so every
route is two hops: the switch adds a hop).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from sim.oplog import OpLog
from sim.topology import Topology
from sim.units import ps_for_bytes

__all__ = [
    "COPY",
    "HBM_ENGINE",
    "REDUCE_ENGINE",
    "REDUCTION",
    "STAGES",
    "TRANSFER",
    "FabricProgram",
    "Network",
    "arrival_ps",
    "build_network",
    "hbm_default",
    "one_after_another",
    "ring_route",
    "simulate_fabric",
    "torus_cycle",
]

STAGES = ("send", "forward", "reduce", "copy")
SEND, FORWARD, REDUCE, COPY_STAGE = range(4)
REDUCE_ENGINE = "reduce"
HBM_ENGINE = "hbm"
SWITCH = "sw"


def ring_route(src: int, dst: int, size: int) -> tuple[int, ...]:
    """Positions visited after ``src`` on the shortest way round a ring of ``size`` to ``dst``.

    A tie (distance exactly size/2) goes up (increasing index) from the lower position and
    down from the higher one, so an exchange between the two halves uses both directions.
    """
    up = (dst - src) % size
    down = (src - dst) % size
    go_up = up < down or (up == down and src < dst)
    step, dist = (1, up) if go_up else (-1, down)
    return tuple((src + step * i) % size for i in range(1, dist + 1))


@dataclass(frozen=True)
class Network:
    """The links of one topology and the route of every chip pair.

    Nodes are chips ``0..chips-1``; a switch, when there is one, is node ``chips``.
    ``routes[src][dst]`` lists the link indices a transfer crosses, in order.
    """

    kind: str
    chips: int
    dims: tuple[int, int]
    links: tuple[tuple[int, int], ...]
    routes: tuple[tuple[tuple[int, ...], ...], ...]
    latency_ps: int
    link_bw: Fraction
    reduce_bw: Fraction
    hbm_bw: Fraction
    staging_buffers: int
    burst_bytes: int

    @property
    def names(self) -> tuple[str, ...]:
        """Engine names of the links: ``link3->4``, ``link3->sw``, ``linksw->4``."""
        return tuple(f"link{self._node(u)}->{self._node(v)}" for u, v in self.links)

    def _node(self, node: int) -> str:
        return SWITCH if node == self.chips else str(node)

    def link_chip(self, link: int) -> int:
        """The chip a link belongs to: its sending chip, or the chip a switch port feeds."""
        u, v = self.links[link]
        return u if u < self.chips else v

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return self.routes[src][dst]

    def hops(self, src: int, dst: int) -> int:
        return len(self.routes[src][dst])

    def link_ps(self, nbytes: int) -> int:
        """Time a transfer of ``nbytes`` occupies one link direction: bytes / link_bw.

        Latency is flight time, not occupancy: it is added to arrival, not to this.
        """
        return ps_for_bytes(nbytes, self.link_bw)

    def hbm_ps(self, nbytes: int) -> int:
        """Time the chip's HBM (one bandwidth server) takes to read or write ``nbytes``."""
        return ps_for_bytes(nbytes, self.hbm_bw)

    def reduce_ps(self, nbytes: int) -> int:
        """Time one reduce engine takes to reduce ``nbytes`` into a local buffer."""
        return ps_for_bytes(nbytes, self.reduce_bw)

    def out_links(self, chip: int) -> tuple[int, ...]:
        """Links leaving ``chip`` (its injection ports)."""
        return tuple(i for i, (u, _v) in enumerate(self.links) if u == chip)

    def ring_order(self) -> tuple[int, ...]:
        """A Hamiltonian cycle of one-hop edges: consecutive chips (and last, first) are neighbours.

        Identity for ring, fully_connected and switch. On a ``rows x cols`` torus: a snake
        when a side is even; when both are odd (>= 3), the snake of the first ``rows-1`` rows
        with the last row spliced in through its wrap-around link (:func:`torus_cycle`).
        """
        if self.kind != "torus2d":
            return tuple(range(self.chips))
        rows, cols = self.dims
        return tuple(r * cols + c for r, c in torus_cycle(rows, cols))


def torus_cycle(rows: int, cols: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of the ``rows x cols`` torus as ``(row, col)`` cells.

    A torus with a side of 1 is a ring (row-major order). With an even side, a snake
    (:func:`_snake`) needs no wrap-around link. With both sides odd a grid has no
    Hamiltonian cycle (it is bipartite with an odd number of cells), so one wrap link is
    used: snake the first ``rows-1`` rows (an even number), then replace the snake's edge
    ``(rows-2, cols-1) -> (rows-2, cols-2)`` by the detour down to ``(rows-1, cols-1)``,
    along the last row through its wrap link (``cols-1, 0, 1, ..., cols-2``) and back up.
    """
    if rows == 1 or cols == 1:
        return [divmod(i, cols) for i in range(rows * cols)]
    if rows % 2 == 0:
        return _snake(rows, cols)
    if cols % 2 == 0:
        return [(r, c) for c, r in _snake(cols, rows)]
    cells = _snake(rows - 1, cols)
    at = cells.index((rows - 2, cols - 1))
    detour = [(rows - 1, (cols - 1 + j) % cols) for j in range(cols)]
    return cells[: at + 1] + detour + cells[at + 1 :]


def _snake(rows: int, cols: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of a rows x cols grid (rows even) as (row, col) pairs.

    Row 0 left to right, then rows 1.. alternately right-to-left and left-to-right over
    columns 1..cols-1, ending at (rows-1, 1); column 0 then climbs back to (0, 0).
    """
    cells = [(0, c) for c in range(cols)]
    for r in range(1, rows):
        span = range(cols - 1, 0, -1) if r % 2 else range(1, cols)
        cells += [(r, c) for c in span]
    cells += [(r, 0) for r in range(rows - 1, 0, -1)]
    return cells


def build_network(topo: Topology) -> Network:
    """The network of ``topo.chips``: links and routes, per the module docstring."""
    cfg = topo.chips
    p, kind = cfg.count, cfg.topology
    dims = cfg.torus_dims if kind == "torus2d" else (1, p)
    node_paths = [[_node_path(kind, p, dims, s, d) for d in range(p)] for s in range(p)]
    links: dict[tuple[int, int], int] = {}
    if kind == "switch":
        for c in range(p):
            links.setdefault((c, p), len(links))
            links.setdefault((p, c), len(links))
    for s in range(p):
        for d in range(p):
            path = [s, *node_paths[s][d]]
            for u, v in itertools.pairwise(path):
                links.setdefault((u, v), len(links))
    order = sorted(links, key=lambda uv: (min(uv), uv))
    index = {uv: i for i, uv in enumerate(order)}
    routes = tuple(
        tuple(
            tuple(index[uv] for uv in itertools.pairwise([s, *node_paths[s][d]])) for d in range(p)
        )
        for s in range(p)
    )
    return Network(
        kind=kind,
        chips=p,
        dims=dims,
        links=tuple(order),
        routes=routes,
        latency_ps=cfg.link_latency_ps,
        link_bw=cfg.link_bw,
        reduce_bw=cfg.reduce_bw,
        hbm_bw=topo.hbm.bw,
        staging_buffers=cfg.staging_buffers,
        burst_bytes=topo.hbm.burst_bytes,
    )


def _node_path(kind: str, p: int, dims: tuple[int, int], src: int, dst: int) -> list[int]:
    """Nodes visited after ``src`` on the way to ``dst`` (empty when src == dst)."""
    if src == dst:
        return []
    if kind == "fully_connected":
        return [dst]
    if kind == "switch":
        return [p, dst]
    if kind == "ring":
        return list(ring_route(src, dst, p))
    if kind == "torus2d":
        rows, cols = dims
        (r0, c0), (r1, c1) = divmod(src, cols), divmod(dst, cols)
        path = [r0 * cols + c for c in ring_route(c0, c1, cols)]
        return path + [r * cols + c1 for r in ring_route(r0, r1, rows)]
    raise ValueError(
        f"chips.topology {kind!r} has no network; use ring, fully_connected, torus2d or switch"
    )


TRANSFER, REDUCTION, COPY = 0, 1, 2  # FabricProgram op kinds


@dataclass
class FabricProgram:
    """Transfers, reductions and copies in program order, as parallel lists (op id = index).

    ``kind[i]`` is :data:`TRANSFER` (``src -> dst``), :data:`REDUCTION` or :data:`COPY` (on
    chip ``src``); ``deps[i]`` are ids of earlier ops whose results op ``i`` needs.
    ``consumes[i]`` is the transfer whose staged data a reduction or copy drains (-1: none);
    while it is pending that transfer holds one staging buffer at its receiver.
    ``span[i]`` is the element range op ``i`` moves (``(0, 0)``: unknown, treat as whole);
    a dependent needs a producer only for the part of its span they share.
    ``hbm[i]`` is the bytes op ``i`` moves through its chip's HBM (-1: the default, see
    :func:`hbm_default`); a transfer that forwards a chunk its chip has just reduced or
    received streams it from on-chip buffers and moves 0.
    ``into[i]`` (reductions; -1: none) names an **accumulator**, by the id of its first
    reduction: reductions with the same ``into`` add their data into the same elements and
    do not depend on each other. Sums commute, so they add in the order they start (the
    order their data comes in), each ending no earlier than one burst after the one before
    it into the accumulator (ADR 0016); an op that needs the sum depends on all of them.
    """

    kind: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)
    consumes: list[int] = field(default_factory=list)
    hbm: list[int] = field(default_factory=list)
    span: list[tuple[int, int]] = field(default_factory=list)
    into: list[int] = field(default_factory=list)

    def add(
        self,
        kind: int,
        src: int,
        dst: int,
        nbytes: int,
        step: int,
        deps: tuple[int, ...],
        consumes: int = -1,
        hbm: int = -1,
        span: tuple[int, int] = (0, 0),
        into: int = -1,
    ) -> int:
        self.kind.append(kind)
        self.src.append(src)
        self.dst.append(dst)
        self.nbytes.append(nbytes)
        self.step.append(step)
        self.deps.append(deps)
        self.consumes.append(consumes)
        self.hbm.append(hbm)
        self.span.append(span)
        self.into.append(into)
        return len(self.kind) - 1

    def __len__(self) -> int:
        return len(self.kind)


def hbm_default(kind: int, nbytes: int) -> int:
    """HBM bytes of an op: a send reads its data, a copy writes it, a reduction reads the local
    operand and writes the sum (the received operand is in a staging buffer)."""
    return 2 * nbytes if kind == REDUCTION else nbytes


def _op_ps(net: Network, kind: int, nbytes: int, hbm: int) -> tuple[int, int]:
    """Time of an op of ``nbytes`` on its own engine, and on its chip's HBM."""
    own = net.link_ps(nbytes) if kind == TRANSFER else net.reduce_ps(nbytes) if kind else 0
    if kind == COPY:
        own = 0
    return own, net.hbm_ps(hbm)


def _holds(
    net: Network, program: FabricProgram
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per op: time on its own engine, on its chip's HBM, until it ends (the longer), and
    for one burst (the streaming granule: ``hbm.burst_bytes``)."""
    if not len(program):
        return [], [], [], []
    code = np.zeros(len(program), dtype=np.int64)
    table = np.zeros((0, 1), dtype=np.int64)  # per code: the column values seen so far
    for col in (program.kind, program.nbytes, program.hbm):
        vals, inv = np.unique(np.asarray(col, dtype=np.int64), return_inverse=True)
        pairs, code = np.unique(code * len(vals) + inv.reshape(-1), return_inverse=True)
        code = code.reshape(-1)  # renumbered: codes stay below len(program)
        table = np.vstack([table[:, pairs // len(vals)], vals[pairs % len(vals)]])
    per_key = []
    for k, b, m in table.T.tolist():
        mem = hbm_default(k, b) if m < 0 else m
        a, h = _op_ps(net, k, b, mem)
        g = min(b, net.burst_bytes)
        ga, gh = _op_ps(net, k, g, mem * g // b if b else 0)
        per_key.append((a, h, max(a, h), max(ga, gh)))
    per_op = np.asarray(per_key, dtype=np.int64)[code]
    first, hbm, total, burst = (per_op[:, c].tolist() for c in range(4))
    return first, hbm, total, burst


def _dependents(program: FabricProgram) -> list[list[int]]:
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


def _accumulators(program: FabricProgram) -> list[int]:
    """``program.into`` checked (a reduction names the first reduction of its accumulator,
    which names itself), or all -1 when the program gives none."""
    n = len(program)
    if not program.into:
        return [-1] * n
    into = program.into
    if len(into) != n:
        raise ValueError(f"program has {n} ops but {len(into)} accumulator entries ('into')")
    g = np.asarray(into, dtype=np.int64)
    ops = np.flatnonzero(g >= 0)
    kind = np.asarray(program.kind, dtype=np.int64)[ops]
    bad = (g[ops] > ops) | (kind != REDUCTION)
    bad |= g[np.minimum(g[ops], n - 1)] != g[ops]
    if bad.any():
        i = int(ops[np.argmax(bad)])
        raise ValueError(
            f"op {i} adds into accumulator {into[i]}: it must be a reduction and {into[i]} the "
            "first, earlier reduction of that accumulator (into[g] == g)"
        )
    return into


@dataclass(frozen=True)
class _OneShot:
    """A program of ``rounds`` rounds of the same ``M`` transfers (one per (sender, receiver)
    pair, none with dependencies, each consumed by one reduction), then the reductions in the
    same order: reduction ``K + i`` consumes transfer ``i``, depends on it alone and, when
    its receiver gets more than one message, adds into the accumulator of its round's chunk
    on that chip (named by the reduction of the first message to it, ``first``, the same
    for every round). This is the program of ``direct``; :func:`_one_shot` recognises it."""

    rounds: int
    width: int  # M: transfers per round
    first: npt.NDArray[np.int64]  # per message: the first message to its receiver, or -1


def _one_shot(net: Network, program: FabricProgram) -> _OneShot | None:
    """The one-shot structure of ``program`` (:class:`_OneShot`), or None if it has another.

    Compares the program's lists with the structure's directly (list comparisons run at C
    speed; a direct program at 32 chips has half a million ops)."""
    n = len(program)
    half = n // 2
    if n == 0 or n % 2 or net.staging_buffers < 1:
        return None
    kind, src, dst = program.kind, program.src, program.dst
    if kind[:half].count(TRANSFER) != half or kind[half:].count(REDUCTION) != half:
        return None
    s0, d0 = src[0], dst[0]
    width = next((i for i in range(1, half) if src[i] == s0 and dst[i] == d0), half)
    if half % width:
        return None
    rounds = half // width
    pairs = list(zip(src[:width], dst[:width], strict=True))
    if len(set(pairs)) != width:
        return None
    if src[:half] != src[:width] * rounds or dst[:half] != dst[:width] * rounds:
        return None
    if src[half:] != dst[:half] or dst[half:] != dst[:half]:
        return None
    if program.consumes[:half] != [-1] * half or program.consumes[half:] != list(range(half)):
        return None
    deps = program.deps
    if any(deps[:half]):
        return None
    if (np.fromiter(map(len, deps[half:]), np.int64, half) != 1).any():
        return None
    ids = np.arange(half, dtype=np.int64)
    if (np.fromiter(itertools.chain.from_iterable(deps[half:]), np.int64, half) != ids).any():
        return None
    receiver = np.asarray(dst[:width], dtype=np.int64)
    _, at, count = np.unique(receiver, return_index=True, return_inverse=False, return_counts=True)
    first_of = dict(zip(receiver[at].tolist(), at.tolist(), strict=True))
    many = dict(zip(receiver[at].tolist(), (count > 1).tolist(), strict=True))
    first = np.asarray([first_of[d] if many[d] else -1 for d in receiver.tolist()], dtype=np.int64)
    base = (ids // width) * width
    want = np.where(np.tile(first, rounds) >= 0, half + base + np.tile(first, rounds), -1)
    into = program.into or [-1] * n
    if into[:half] != [-1] * half or into[half:] != want.tolist():
        return None
    spans = program.span  # the same chunk for every message of a round, and for its reduction
    if spans[half:] != spans[:half]:
        return None
    for t in range(rounds):
        if spans[t * width : (t + 1) * width].count(spans[t * width]) != width:
            return None
    return _OneShot(rounds, width, first)


def one_after_another(
    group: npt.NDArray[np.int64],
    begin: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    grain: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Ends of ops that one server takes in turn (adds into an accumulator, transfers on a
    link): within each ``group``, in order of ``begin`` (ties by index), each ends no
    earlier than ``grain`` after the one before it ended (a max-plus scan per group)."""
    order = np.lexsort((np.arange(len(group)), begin, group))
    g, e, w = group[order], end[order], grain[order]
    new = np.r_[True, g[1:] != g[:-1]]
    csum = np.cumsum(w)
    lead = np.flatnonzero(new)
    seg = np.cumsum(new) - 1
    acc = csum - (csum[lead] - w[lead])[seg]  # grains so far in the group, this one included
    v = e - acc
    shift = (int(v.max()) - int(v.min()) + 1) * seg
    out = np.empty_like(end)
    out[order] = np.maximum.accumulate(v + shift) - shift + acc
    return out


def _one_shot_uncontended(
    net: Network, program: FabricProgram, shape: _OneShot, holds: tuple[list[int], ...]
) -> OpLog:
    """:func:`simulate_fabric` with ``contention=False`` for a one-shot program, round by round
    in numpy: the same recurrences the event loop follows, so the same log.

    Without contention each pair's hop ``h`` is a FIFO server of that pair's transfers only,
    served in round order; a transfer of round ``t >= B`` (``B`` staging buffers) gets the
    earliest credit its pair has back and not yet used (credits of later rounds come back
    after it leaves); a reduction starts when the first burst of its input is there and adds
    into its accumulator after those of its round that started before it.
    """
    rounds, width, lat = shape.rounds, shape.width, net.latency_ps
    half = rounds * width
    first, _hbm, total, burst = (np.asarray(h, dtype=np.int64) for h in holds)
    t_first = first[:half].reshape(rounds, width)
    t_total = total[:half].reshape(rounds, width)
    t_burst = burst[:half].reshape(rounds, width)
    r_total = total[half:].reshape(rounds, width)
    r_burst = burst[half:].reshape(rounds, width)
    src = np.asarray(program.src[:width], dtype=np.int64)
    dst = np.asarray(program.dst[:width], dtype=np.int64)
    routes = [net.routes[s][d] for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    hops = np.asarray([len(r) for r in routes], dtype=np.int64)
    deepest = int(hops.max())
    last = hops - 1
    cols = np.arange(width)
    group = np.where(shape.first >= 0, shape.first, cols)
    begins = np.zeros((rounds, width, deepest), dtype=np.int64)
    ends = np.zeros((rounds, width, deepest), dtype=np.int64)
    r_begin = np.zeros((rounds, width), dtype=np.int64)
    r_end = np.zeros((rounds, width), dtype=np.int64)
    link_free = np.zeros((deepest, width), dtype=np.int64)
    buffers = net.staging_buffers
    pool = np.zeros((buffers, width), dtype=np.int64)  # credits back, not yet used
    for t in range(rounds):
        if t < buffers:
            grant = np.zeros(width, dtype=np.int64)
        else:
            slot = pool.argmin(axis=0)
            grant = pool[slot, cols]
        begin = np.maximum(grant, link_free[0])
        end = np.maximum(begin + t_total[t], t_burst[t])
        begins[t, :, 0], ends[t, :, 0] = begin, end
        link_free[0] = end
        for h in range(1, deepest):
            on = hops > h
            b = np.maximum(begin + lat, link_free[h])
            e = np.maximum(b + t_first[t], end + lat)
            begin, end = np.where(on, b, begin), np.where(on, e, end)
            link_free[h] = np.where(on, e, link_free[h])
            begins[t, :, h], ends[t, :, h] = begin, end
        b_last, e_last = begins[t, cols, last], ends[t, cols, last]
        head = np.minimum(b_last + lat + t_burst[t], e_last + lat)
        done = np.maximum(head + r_total[t], e_last + lat + r_burst[t])
        r_begin[t] = head
        r_end[t] = one_after_another(group, head, done, r_burst[t])
        credit = r_end[t] + lat
        if t < buffers:
            pool[t] = credit
        else:
            pool[slot, cols] = credit
    route = np.zeros((width, deepest), dtype=np.int64)
    for m, r in enumerate(routes):
        route[m, : len(r)] = r
    hop_at = np.flatnonzero(np.arange(deepest) < hops[:, None])  # (message, hop) of a round
    t_eng = np.tile(route.reshape(-1)[hop_at], rounds)
    link_chip = np.asarray([net.link_chip(i) for i in range(len(net.links))], dtype=np.int64)
    hop_of = np.tile(hop_at % deepest, rounds)
    t_op = (np.arange(rounds, dtype=np.int64)[:, None] * width + hop_at // deepest).reshape(-1)
    op = np.concatenate([t_op, np.arange(half, 2 * half, dtype=np.int64)])
    nlinks = len(net.links)
    cols_out = {
        "op": op,
        "chip": np.concatenate([link_chip[t_eng], np.tile(dst, rounds)]),
        "engine": np.concatenate([t_eng, np.full(half, nlinks, dtype=np.int64)]),
        "stage": np.concatenate(
            [np.where(hop_of == 0, SEND, FORWARD), np.full(half, REDUCE, dtype=np.int64)]
        ),
        "start": np.concatenate([begins.reshape(rounds, -1)[:, hop_at].ravel(), r_begin.ravel()]),
        "end": np.concatenate([ends.reshape(rounds, -1)[:, hop_at].ravel(), r_end.ravel()]),
        "nbytes": np.asarray(program.nbytes, dtype=np.int64)[op],
        "tile": np.asarray(program.step, dtype=np.int64)[op],
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols_out)


def simulate_fabric(net: Network, program: FabricProgram, *, contention: bool = True) -> OpLog:
    """Time ``program`` on ``net`` (module docstring): a heap of ``(time, op id, hop)`` events.

    Every link direction and reduce engine is a FIFO server: an op that is ready while it is
    busy queues and starts when it frees (first come, first served; equal times in program
    order). A transfer occupies each link of its route for ``bytes / link_bw``; its first hop
    also reads the sender's HBM. Hop ``i+1`` starts ``latency`` after hop ``i`` started (or
    later, when its link frees) and cannot end before hop ``i`` ended plus ``latency``; the
    data has arrived ``latency`` after the last hop ends. Each chip's HBM is one bandwidth
    server of requests in the order ops are ready; an op takes its link or engine once the
    HBM starts on its bytes (ADR 0016). Reductions into one accumulator end one burst apart,
    in the order they start.

    Ops **stream** their inputs, at the granule of one HBM burst: an op may start once the
    first burst of each input is there (a transfer's first burst has arrived, a reduction
    or copy has produced its first burst) and cannot end before one burst after its last
    input byte. A link direction is held until its transfer ends; the reduce engine and HBM
    are bandwidth servers, busy for an op's work only. A transfer whose data a later op
    consumes first takes one of the receiver's ``staging_buffers`` for its (sender,
    receiver) pair and gets it back ``latency`` after the consumer ends (the credit flies
    back). Returns one record per hop and per reduction or copy, sorted by op id and hop;
    ``tile`` holds the op's step.

    ``contention=False`` times the same program as if flows did not contend: each (sender,
    receiver) pair has a link of its own at every hop (its chunks still queue behind each
    other), every op has a reduce engine and HBM to itself; staging buffers are as in the
    machine. That is the congestion-unaware critical path of
    :func:`sim.collective_model.model`. A one-shot program (``direct``: :class:`_OneShot`)
    is then timed round by round in numpy (:func:`_one_shot_uncontended`), with the same
    recurrences and so the same log (``tests/test_link_fast.py`` compares both engines).
    With contention, direct on a fully connected or switch network is timed from chip 0's
    share of the events and the other chips' records follow by turning the chips
    (:func:`_one_shot_by_rotation`): the same log, from ``1/p`` of the events.
    """
    shape = _one_shot(net, program)
    if contention and shape is not None and _rotation_invariant(net, program, shape):
        return _one_shot_by_rotation(net, program, shape)
    holds = _holds(net, program)
    if not contention and shape is not None:
        return _one_shot_uncontended(net, program, shape, holds)
    return _simulate_events(net, program, holds, contention=contention)


def _rotation_invariant(net: Network, program: FabricProgram, shape: _OneShot) -> bool:
    """Whether turning the chips by one (chip ``c`` -> ``c + 1 mod p``) maps ``program`` on
    ``net`` onto itself, ties included (:func:`_one_shot_by_rotation`): a fully connected
    or switch network, direct's message order (message ``(k-1) p + s`` goes from ``s`` to
    ``s + k``: offset first, so the ops that share a chip's HBM, reduce engine, port or
    accumulator are in the same order on every chip), and every message of a round alike."""
    p, width = net.chips, shape.width
    if net.kind not in ("fully_connected", "switch") or p < 2 or width != p * (p - 1):
        return False
    if program.src[:width] != list(range(p)) * (p - 1):
        return False
    if program.dst[:width] != [(s + k) % p for k in range(1, p) for s in range(p)]:
        return False
    half = shape.rounds * width
    if program.step.count(program.step[0]) != len(program.step):
        return False
    for col in (program.nbytes[:half], program.hbm[:half], program.hbm[half:]):
        for t in range(0, half, width):
            if col[t : t + width].count(col[t]) != width:
                return False
    return True


def _one_shot_by_rotation(net: Network, program: FabricProgram, shape: _OneShot) -> OpLog:
    """:func:`simulate_fabric` with contention of a one-shot program that turning the chips
    maps onto itself (:func:`_rotation_invariant`), from one chip's share of the events.

    Turning the chips by one maps every link, engine, HBM, staging buffer and accumulator
    onto another and keeps the order of any two ops that use the same one (their ids
    compare by round, then offset), so every chip's ops run at the same times as chip
    0's counterparts (the event loop is equivariant). Chip 0 sees its own sends ``0 -> k``
    and the reductions of the messages ``p-k -> 0``, which are its sends turned by ``k``:
    so the reduction of offset ``k`` consumes chip 0's send of offset ``k`` (its data
    arrives at ``k`` when the turned message arrives at 0), that send's staging buffer
    comes back when that reduction ends, and on a switch every send's second hop queues at
    chip 0's own port out of the switch. That program, ``p - 1`` transfers and reductions
    per round, runs through the event loop; the log of all chips follows by turning.
    """
    p, rounds, width = net.chips, shape.rounds, shape.width
    half = rounds * width
    k = p - 1  # messages of chip 0 per round: offsets 1..p-1, kept in offset order
    lo = np.arange(rounds, dtype=np.int64)[:, None] * width + np.arange(k)[None, :] * p
    picked = lo.reshape(-1)  # real op ids of chip 0's sends, round by round, by offset
    sub = FabricProgram(
        kind=[TRANSFER] * (rounds * k) + [REDUCTION] * (rounds * k),
        src=[0] * (2 * rounds * k),
        dst=[d for _t in range(rounds) for d in range(1, p)] + [0] * (rounds * k),
        nbytes=[program.nbytes[i] for i in picked.tolist()] * 2,
        step=[0] * (2 * rounds * k),
        deps=[()] * (rounds * k) + [(i,) for i in range(rounds * k)],
        consumes=[-1] * (rounds * k) + list(range(rounds * k)),
        hbm=[program.hbm[i] for i in picked.tolist()]
        + [program.hbm[half + i] for i in picked.tolist()],
        span=[program.span[i] for i in picked.tolist()] * 2,
        into=[-1] * (rounds * k)
        + (
            [rounds * k + t * k for t in range(rounds) for _d in range(k)]
            if k > 1  # one accumulator per round, named by its first reduction
            else [-1] * (rounds * k)
        ),
    )
    view = net
    if net.kind == "switch":  # a send's second hop: chip 0's port out of the switch
        up = net.routes[0][1][0]
        down = net.routes[1][0][1]
        routes = [list(r) for r in net.routes]
        routes[0] = [r if not r else (up, down) for r in net.routes[0]]
        view = replace(net, routes=tuple(tuple(r) for r in routes))
    log = _simulate_events(view, sub, _holds(view, sub), contention=True)
    hops = 2 if net.kind == "switch" else 1
    t_start = log.start[: rounds * k * hops].reshape(rounds, k, hops)
    t_end = log.end[: rounds * k * hops].reshape(rounds, k, hops)
    r_start = log.start[rounds * k * hops :].reshape(rounds, k)
    r_end = log.end[rounds * k * hops :].reshape(rounds, k)
    # every chip s: its send of offset k is message (k-1) p + s, the same times as chip 0's;
    # the log's columns follow from that order (what _log derives from the program)
    start = np.concatenate(
        [np.repeat(t_start, p, axis=1).reshape(-1), np.repeat(r_start, p, axis=1).reshape(-1)]
    )
    end = np.concatenate(
        [np.repeat(t_end, p, axis=1).reshape(-1), np.repeat(r_end, p, axis=1).reshape(-1)]
    )
    src = np.tile(np.arange(p, dtype=np.int64), k)
    dst = (src + np.repeat(np.arange(1, p, dtype=np.int64), p)) % p
    route = np.asarray([net.routes[a][b] for a, b in zip(src.tolist(), dst.tolist(), strict=True)])
    link_chip = np.asarray([net.link_chip(i) for i in range(len(net.links))], dtype=np.int64)
    nb = np.asarray(program.nbytes[:half:width], dtype=np.int64)  # per round
    ops = np.arange(half, dtype=np.int64)
    stage_of = np.asarray([SEND, FORWARD][:hops], dtype=np.int64)
    cols = {
        "op": np.concatenate([np.repeat(ops, hops), half + ops]),
        "chip": np.concatenate(
            [np.tile(link_chip[route].reshape(-1), rounds), np.tile(dst, rounds)]
        ),
        "engine": np.concatenate(
            [np.tile(route.reshape(-1), rounds), np.full(half, len(net.links), dtype=np.int64)]
        ),
        "stage": np.concatenate([np.tile(stage_of, half), np.full(half, REDUCE, dtype=np.int64)]),
        "start": start,
        "end": end,
        "nbytes": np.concatenate([np.repeat(nb, width * hops), np.repeat(nb, width)]),
        "tile": np.full(half * (hops + 1), program.step[0], dtype=np.int64),
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)


def _simulate_events(
    net: Network, program: FabricProgram, holds: tuple[list[int], ...], *, contention: bool
) -> OpLog:
    """The event-driven engine of :func:`simulate_fabric`.

    Only start and end times are dynamic: each record has a slot (op by op, hop by hop, the
    log's order), and its chip, engine and stage follow from the op afterwards.
    """
    n = len(program)
    kind, src, dst = program.kind, program.src, program.dst
    first, hbm_hold, total, burst = holds
    dependents = _dependents(program)
    into = _accumulators(program)
    acc_end = [0] * n  # per accumulator (by its first reduction): when its last add ended
    waiting = [len(d) for d in program.deps]
    p, lat, routes = net.chips, net.latency_ps, net.routes
    nlinks = len(net.links)
    consumes = program.consumes
    staged = [False] * n
    for t in consumes:
        if t >= 0:
            staged[t] = True
    credits = [net.staging_buffers] * (p * p)
    held: list[deque[int]] = [deque() for _ in range(p * p)]
    granted = [False] * n
    hbm_got = [False] * n
    head = [0] * n  # when the first burst of every input is there
    tail = [0] * n  # when the last byte of every input is there
    hop_end = [0] * n
    hops = max((len(r) for row in routes for r in row), default=1)
    servers = nlinks + p if contention else nlinks + p + p * p * hops
    busy = [False] * servers  # links, reduce engines, then (contention=False) pair links
    queue: list[deque[tuple[int, int]]] = [deque() for _ in range(servers)]
    hbm_free = [0] * p
    conn = [s * p + d for s, d in zip(src, dst, strict=True)]
    # per op: the servers of its hops (a transfer) or its reduce engine (one entry)
    if contention:
        pair_res = [routes[s][d] for s in range(p) for d in range(p)]
    else:
        pair_res = [
            tuple(nlinks + p + c * hops + h for h in range(len(routes[c // p][c % p])))
            for c in range(p * p)
        ]
    res_of = [
        pair_res[c] if k == TRANSFER else (nlinks + s,)
        for k, s, c in zip(kind, src, conn, strict=True)
    ]
    nrec = [
        len(routes[s][d]) if k == TRANSFER else 1 for k, s, d in zip(kind, src, dst, strict=True)
    ]
    slot = list(itertools.accumulate(nrec, initial=0))
    r_start = [0] * slot[-1]
    r_end = [0] * slot[-1]
    done = 0
    ready = [i for i in range(n) if not waiting[i]]
    if lat > 0:  # nothing comes back at time 0: past the staging buffers, pairs wait in id order
        for idx, i in enumerate(ready):
            if kind[i] == TRANSFER and staged[i]:
                c = conn[i]
                if credits[c]:
                    credits[c] -= 1
                    granted[i] = True
                else:
                    held[c].append(i)
                    ready[idx] = -1
    heap = [(0, i, 0) for i in ready if i >= 0]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    spans = program.span

    def produced(i: int, begin: int, end: int, grain: int) -> None:
        """Op ``i`` delivers its span linearly from ``begin`` to ``end`` at the consumer's side:
        a dependent may start as soon as the part it needs first is coming, and cannot end
        before one burst after ``end``."""
        lo, hi = spans[i]
        width = hi - lo
        for j in dependents[i]:
            x, y = spans[j]
            if width > 0 and y > x and (x > lo or y < hi):  # j needs part of i's span
                a = max(x, lo) - lo
                if a >= min(y, hi) - lo:
                    a = 0
                first_burst = begin + (end - begin) * a // width + grain
                last = end  # i's data is complete (and checkable) only when i ends
                # j reaches that part only after streaming its own bytes before it
                first_burst -= total[j] * (max(x, lo) - x) // (y - x)
            else:
                first_burst, last = begin + grain, end
            if first_burst > last:
                first_burst = last
            if first_burst > head[j]:
                head[j] = first_burst
            if last > tail[j]:
                tail[j] = last
            waiting[j] -= 1
            if not waiting[j]:
                push(heap, (head[j], j, 0))

    while heap:
        now, i, hop = pop(heap)
        if i < 0:  # server `hop` frees: its first queued op starts
            if not queue[hop]:
                busy[hop] = False
                continue
            res = hop
            i, hop = queue[hop].popleft()
            k = kind[i]
        elif hop < 0:  # a staging buffer comes back to the pair of transfer `i`
            c = conn[i]
            if held[c]:
                j = held[c].popleft()
                granted[j] = True
                push(heap, (now, j, 0))
            else:
                credits[c] += 1
            continue
        else:
            k = kind[i]
            if k == TRANSFER and hop == 0 and staged[i] and not granted[i]:
                c = conn[i]
                if not credits[c]:
                    held[c].append(i)
                    continue
                credits[c] -= 1
                granted[i] = True
            if contention and hbm_hold[i] and not hbm_got[i]:
                chip = src[i]
                hs = hbm_free[chip] if hbm_free[chip] > now else now
                hbm_free[chip] = hs + hbm_hold[i]
                hbm_got[i] = True
                if hs > now:
                    push(heap, (hs, i, 0))
                    continue
            if k == COPY:
                res = -1
            else:
                res = res_of[i][hop]
                if busy[res]:
                    queue[res].append((i, hop))
                    continue
                busy[res] = contention or k == TRANSFER
        # op i starts its hop `hop` on server `res` at `now`
        done += 1
        if k == TRANSFER:
            begin = now
            if hop == 0:
                end = begin + total[i]
                if tail[i] + burst[i] > end:
                    end = tail[i] + burst[i]
            else:
                end = begin + first[i]
                if hop_end[i] + lat > end:
                    end = hop_end[i] + lat
            hop_end[i] = end
            push(heap, (end, -1, res))
            at = slot[i] + hop
            r_start[at] = begin
            r_end[at] = end
            if hop + 1 < nrec[i]:
                push(heap, (begin + lat, i, hop + 1))
            else:
                produced(i, begin + lat, end + lat, burst[i])
        else:
            chip = src[i]
            begin = now
            end = begin + total[i]
            if tail[i] + burst[i] > end:
                end = tail[i] + burst[i]
            g = into[i]
            if g >= 0:  # adds after the accumulator's previous add, one burst behind it
                if acc_end[g] + burst[i] > end:
                    end = acc_end[g] + burst[i]
                acc_end[g] = end
            if k == REDUCTION and contention:  # busy for its work, not while data trickles in
                push(heap, (begin + first[i], -1, res))
            at = slot[i]
            r_start[at] = begin
            r_end[at] = end
            if consumes[i] >= 0:
                push(heap, (end + lat, consumes[i], -1))
            produced(i, begin, end, burst[i])
    if done < slot[-1]:
        stuck = [i for i in range(n) if waiting[i]][:3]
        raise RuntimeError(
            f"fabric program did not finish ({done} of {slot[-1]} records): a dependency "
            f"cycle or every staging buffer held by data that waits (e.g. ops {stuck}); "
            "raise chips.staging_buffers"
        )
    return _log(net, program, np.asarray(nrec, dtype=np.int64), r_start, r_end)


def _log(
    net: Network,
    program: FabricProgram,
    nrec: npt.NDArray[np.int64],
    start: list[int] | npt.NDArray[np.int64],
    end: list[int] | npt.NDArray[np.int64],
) -> OpLog:
    """The op log of ``program``: one record per hop of each transfer and per other op, in op
    and hop order, with the given start and end times; chip, engine and stage follow from
    each op (a hop's link and the chip it belongs to, the reduce engine, HBM for a copy)."""
    n, p, nlinks = len(program), net.chips, len(net.links)
    kind = np.asarray(program.kind, dtype=np.int64)
    src = np.asarray(program.src, dtype=np.int64)
    op = np.repeat(np.arange(n, dtype=np.int64), nrec)
    hop = np.arange(len(op), dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    deepest = max(1, max((len(r) for row in net.routes for r in row), default=1))
    route = np.zeros((p * p, deepest), dtype=np.int64)
    for s, row in enumerate(net.routes):
        for d, r in enumerate(row):
            route[s * p + d, : len(r)] = r
    conn = src * p + np.asarray(program.dst, dtype=np.int64)
    link = route[conn[op], np.minimum(hop, deepest - 1)]
    k = kind[op]
    link_chip = np.asarray([net.link_chip(i) for i in range(nlinks)], dtype=np.int64)
    on_link = k == TRANSFER
    cols = {
        "op": op,
        "chip": np.where(on_link, link_chip[link] if nlinks else 0, src[op]),
        "engine": np.where(on_link, link, np.where(k == REDUCTION, nlinks, nlinks + 1)),
        "stage": np.where(
            on_link,
            np.where(hop == 0, SEND, FORWARD),
            np.where(k == REDUCTION, REDUCE, COPY_STAGE),
        ),
        "start": np.asarray(start, dtype=np.int64),
        "end": np.asarray(end, dtype=np.int64),
        "nbytes": np.asarray(program.nbytes, dtype=np.int64)[op],
        "tile": np.asarray(program.step, dtype=np.int64)[op],
    }
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)


def arrival_ps(net: Network, log: OpLog) -> dict[int, int]:
    """When each transfer's last byte reached its destination: its last hop's end + latency."""
    is_link = (log.stage == SEND) | (log.stage == FORWARD)
    out: dict[int, int] = {}
    for op, end in zip(log.op[is_link].tolist(), log.end[is_link].tolist(), strict=True):
        out[op] = max(out.get(op, 0), end + net.latency_ps)
    return out
