"""Collectives at pod scale by symmetry: the ring algorithm on a ring of ``p`` chips timed from
one chip's ops (the quotient program), its log stored as that chip's records and the ``p``
rotations, its metrics in closed form and its functional check replayed on one chip.

**Why it is exact.** Turning the ring by one (chip ``c`` -> ``c + 1``) maps the ring
schedule onto itself when every segment has the same size (``count`` a multiple of ``2p``):
the message of position ``q`` becomes that of ``q + 1``, its chunks, dependencies, bytes and
HBM reads alike. Every resource the event loop serialises belongs to one chip and is used by
that chip's ops only: link ``c -> c+1`` by ``c``'s ring-0 sends, ``c -> c-1`` by its ring-1
sends, the reduce engine and HBM by ``c``'s sends and the consumers on ``c``, the staging
buffers of pair ``(c, c+1)`` by ``c``'s ring-0 sends and the consumers on ``c+1``. Two ops of
one chip compare in program order by (step, sends before receives, chunk, ring), the same on
every chip, so the loop's first-come-first-served ties break alike on every chip and every
chip's events are chip 0's turned, at the same times. Chip 0's program (``8 (p-1) k`` ops for
``k`` chunks per message) is therefore timed by the event loop itself
(:func:`sim.fabric.simulate_fabric`) on a three-chip view (chip 0, its successor, its
predecessor): a receive on chip 0 stands for the one on chip 1 and depends on chip 0's own
send (``p - 1``'s, turned). Every dependency in the program joins two ops over the same
chunk, so the streaming rule never needs the spans, and the view sets them to unknown.

**The functional check** (:func:`_replay`) moves the data as chip 0's records say, exactly:
each piece holds, per input chip, how often its input was summed in (0, 1, or 2 for "more
than once"; two bit masks over the chips, ADR 0036); a receive on chip 0 takes what its
sender held when the send left, which is chip 0's piece turned by one with its inputs
renamed; sums and copies follow the log's times (writes before reads at equal times, as
:func:`sim.collectives.verify.replay`).
``#wrong`` counts every element of a piece whose inputs are not those it must hold, on every
chip (by symmetry, ``p`` times chip 0's).

Anything else (uneven segments, another topology, algorithm or chunking, fewer than 3
chips) is not taken here and runs through the full program as before.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.collectives.algorithms import build_schedule
from sim.collectives.compile import Compiled, chunks, fabric_program
from sim.collectives.races import symmetric_race
from sim.collectives.run import FAST_PATHS, CollectiveRun
from sim.collectives.schedule import COLLECTIVES, Schedule
from sim.collectives.verify import Replayed, ReplayError, replay
from sim.fabric import (
    COPY,
    HBM_ENGINE,
    REDUCE,
    REDUCE_ENGINE,
    REDUCTION,
    SEND,
    STAGES,
    TRANSFER,
    FabricProgram,
    Network,
    SymmetricLog,
    build_network,
    distinct,
    hbm_default,
    ring_links,
    ring_network,
    simulate_fabric,
)
from sim.limits import ops_budget
from sim.oplog import OpLog
from sim.topology import Topology, dimensions_of

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RingCase:
    """A ring collective that turning the ring maps onto itself."""

    collective: str
    chips: int
    count: int  # elements
    bpe: int
    chunk_bytes: int
    sizes: tuple[int, ...]  # elements of each chunk of a segment
    steps: int
    reduce_steps: int  # the first steps reduce, the rest copy

    @property
    def segment(self) -> int:
        return self.count // (2 * self.chips)


def ring_case(
    topo: Topology, nbytes: object, algorithm: object, collective: object, chunk_bytes: object
) -> RingCase | None:
    """The symmetric ring case of these arguments, or None (then the general path runs and
    gives the errors of bad arguments)."""
    p, bpe = topo.chips.count, topo.bpe
    if algorithm != "ring" or collective not in COLLECTIVES or topo.chips.topology != "ring":
        return None
    dims = dimensions_of(topo.chips)
    if len(dims) != 1 or dims[0].links != 1:  # one ring of single links: the case proved
        return None
    if type(nbytes) is not int or nbytes <= 0 or nbytes % bpe or p < 3:
        return None
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    if type(chunk) is not int or chunk < bpe:
        return None
    chunk -= chunk % bpe
    count = nbytes // bpe
    if count % (2 * p):
        return None
    seg = count // (2 * p)
    depth = max(1, topo.chips.staging_buffers // 2)
    k = 1 << (max(-(-seg * bpe // chunk), depth, 1) - 1).bit_length()  # as chunks() cuts
    steps = (2 if collective == "allreduce" else 1) * (p - 1)
    if 4 * steps * min(k, seg) > ops_budget():  # chip 0's sends and receives of both rings
        return None  # the full path refuses it, naming the budget
    sizes = tuple(hi - lo for lo, hi in chunks(0, seg, bpe, chunk, depth))
    both = collective == "allreduce"
    steps = (2 if both else 1) * (p - 1)
    reduce_steps = 0 if collective == "all_gather" else p - 1
    return RingCase(str(collective), p, count, bpe, chunk, sizes, steps, reduce_steps)


def quotient_program(case: RingCase) -> FabricProgram:
    """Chip 0's ops in program order: per step, its two sends of every chunk (ring 0 to chip
    1, ring 1 to chip ``p-1``, which is node 2 of the view), then the two receives on chip 0
    (each the turned image of a receive on a neighbour), each consuming chip 0's own send of
    the same step, chunk and ring. A send forwards what the receive of the step before wrote
    (from on-chip buffers); in an allreduce's all-gather the copy of a piece also waits for
    the reduction that last wrote it on this chip (in the reduce-scatter, ``p - 1`` steps
    before)."""
    cols, _timed = _quotient_columns(case)
    return _program(cols, cols["deps"])


def _program(cols: dict[str, tuple[Any, ...]], deps: tuple[tuple[int, ...], ...]) -> FabricProgram:
    """A program of its own lists (a caller may change them) from these columns."""
    return FabricProgram(
        kind=list(cols["kind"]),
        src=list(cols["src"]),
        dst=list(cols["dst"]),
        nbytes=list(cols["nbytes"]),
        step=list(cols["step"]),
        deps=list(deps),
        consumes=list(cols["consumes"]),
        hbm=list(cols["hbm"]),
        span=list(cols["span"]),
        into=list(cols["into"]),
    )


@functools.lru_cache(maxsize=1)  # time_quotient builds the program, then compares it
def _quotient_columns(
    case: RingCase,
) -> tuple[dict[str, tuple[Any, ...]], tuple[tuple[int, ...], ...]]:
    """The columns of :func:`quotient_program`, built in numpy (op ``(step, half, chunk,
    ring)``, half 0 the sends), and the dependencies of the timed program
    (:func:`without_implied`): the same without the copies' dependencies on reductions."""
    k, steps, R = len(case.sizes), case.steps, case.reduce_steps
    per_step = 4 * k
    shape = (steps, 2, k, 2)
    n = steps * per_step
    s_, half, t_, r_ = (a.reshape(-1) for a in np.indices(shape, dtype=np.int64))
    ops = np.arange(n, dtype=np.int64)
    send = half == 0
    nb = np.asarray(case.sizes, dtype=np.int64)[t_] * case.bpe
    mine = ops - 2 * k * half  # a receive's own send (a send: itself)
    fed = mine - per_step + 2 * k  # a send's producer: the receive of the step before
    late = (half == 1) & (R > 0) & (s_ - R >= 1)  # all-gather copies past the first step
    before = (s_ - R - 1) * per_step + 2 * k + 2 * t_ + r_
    kind = np.where(send, TRANSFER, np.where(s_ < R, REDUCTION, COPY))
    sends = send.tolist()
    first = ((s_ > 0) & send).tolist()
    fed_l, mine_l, before_l, late_l = fed.tolist(), mine.tolist(), before.tolist(), late.tolist()
    timed: list[tuple[int, ...]] = [
        ((f,) if g else ()) if is_send else (m,)
        for is_send, g, f, m in zip(sends, first, fed_l, mine_l, strict=True)
    ]
    deps = [(b, t[0]) if lt else t for lt, b, t in zip(late_l, before_l, timed, strict=True)]
    cols: dict[str, list[Any]] = {
        "kind": kind.tolist(),
        "src": [0] * n,
        "dst": np.where(send, 1 + r_, 0).tolist(),
        "nbytes": nb.tolist(),
        "step": s_.tolist(),
        "deps": deps,
        "consumes": np.where(send, -1, mine).tolist(),
        "hbm": np.where(send, np.where(s_ == 0, nb, 0), -1).tolist(),
        "span": [(0, 0)] * n,
        "into": [-1] * n,
    }
    # tuples: the cache hands the same columns to every caller, none can change them
    return {name: tuple(col) for name, col in cols.items()}, tuple(timed)


def _view(topo: Topology) -> Network:
    """Chip 0 of the ring with its two neighbours: a three-chip ring (node 1 the successor,
    node 2 the predecessor) with the topology's links, engines, HBM and buffers."""
    return build_network(topo.replace_chips(count=3))


def time_quotient(
    topo: Topology, case: RingCase, view: Network | None = None
) -> tuple[FabricProgram, OpLog]:
    """Chip 0's program and its records, timed by the event loop on the three-chip view
    (``view``: :func:`_view` of ``topo``, where the caller has it): the program without its
    implied dependencies, a step a period (:func:`quotient_program`, ADR 0036)."""
    prog = quotient_program(case)
    timed = without_implied(prog, case)
    net = _view(topo) if view is None else view
    if timed is None:  # not the ring's chains (a changed program): timed as it is
        return prog, simulate_fabric(net, prog)
    return prog, simulate_fabric(net, timed, period=4 * len(case.sizes))


def without_implied(prog: FabricProgram, case: RingCase) -> FabricProgram | None:
    """``prog`` without the all-gather copies' dependencies on the reductions ``p - 1`` steps
    before, or None where ``prog`` is not :func:`quotient_program` of ``case``.

    Each such dependency is implied by the chain of the piece's own ops: that reduction, the
    next step's send of the same chunk and ring, the receive that drains it, and so on to the
    transfer the copy consumes. In a program whose dependencies all span whole ops (as the
    quotient's, ``span`` unknown), a dependency implied by a chain never binds (ADR 0036): its
    producer is decided before the chain's last op, and what it gives the copy (its first
    burst, its end) the chain gives later. So the log is the same, and without it every
    dependency spans at most one step: the program repeats step by step, which
    :mod:`sim.fabric.periodic` uses. A changed quotient (the planted bugs make some) is not
    the ring's chains: it is timed as it is."""
    cols, timed = _quotient_columns(case)
    if prog.seen_span or prog.lane or any(tuple(getattr(prog, f)) != c for f, c in cols.items()):
        return None
    return _program(cols, timed)


def _rep_log(net: Network, case: RingCase, view_log: OpLog) -> OpLog:
    """Chip 0's records with the real network's engine numbers."""
    _links, up, down = ring_links(case.chips)
    nlinks = len(net.links)
    k = len(case.sizes)
    shape = (case.steps, 2, k, 2)
    ring = np.broadcast_to(np.arange(2, dtype=np.int64), shape).reshape(-1)
    is_send = np.broadcast_to(np.arange(2)[None, :, None, None] == 0, shape).reshape(-1)
    stage = view_log.stage.astype(np.int64)
    engine = np.where(
        is_send, np.where(ring == 0, up[0], down[0]), np.where(stage == REDUCE, nlinks, nlinks + 1)
    )
    cols = {c: view_log.column(c) for c in ("op", "start", "end", "nbytes", "tile")}
    cols["stage"] = stage
    cols["engine"] = engine
    cols["chip"] = np.zeros(len(engine), dtype=np.int64)
    return OpLog.from_columns((*net.names, REDUCE_ENGINE, HBM_ENGINE), STAGES, cols)


def _expander(net: Network, case: RingCase, rep: OpLog) -> Any:
    """The full log's columns from chip 0's records: record ``(step, sends|receives, chunk,
    ring, position)`` in the program's order; position ``q`` of ring 0 is chip ``q``, of ring
    1 chip ``p-1-q``; a receive is on the next chip of its ring."""

    def expand() -> dict[str, I64]:
        p, k = case.chips, len(case.sizes)
        _links, up, down = ring_links(p)
        nlinks = len(net.links)
        shape = (case.steps, 2, k, 2, p)
        q = np.arange(p, dtype=np.int64)
        sender = np.stack([q, p - 1 - q])  # [ring, q]
        receiver = np.stack([(q + 1) % p, (p - 2 - q) % p])
        link = np.stack([up[q], down[p - 1 - q]])
        rs = rep.stored
        stage = rs["stage"].astype(np.int64).reshape(case.steps, 2, k, 2)
        red = np.where(stage == REDUCE, nlinks, nlinks + 1)[..., None]
        send_part = np.broadcast_to(link[None, None, :, :], (case.steps, k, 2, p))
        chip_send = np.broadcast_to(sender[None, None], (case.steps, k, 2, p))
        chip_recv = np.broadcast_to(receiver[None, None], (case.steps, k, 2, p))
        engine = np.stack([send_part, np.broadcast_to(red[:, 1], (case.steps, k, 2, p))], axis=1)
        chip = np.stack([chip_send, chip_recv], axis=1)

        def spread(col: str) -> I64:
            return np.broadcast_to(rs[col].reshape(case.steps, 2, k, 2, 1), shape).reshape(-1)

        n = int(np.prod(shape))
        return {
            "op": np.arange(n, dtype=np.int64),
            "chip": chip.reshape(-1),
            "engine": engine.reshape(-1),
            "stage": spread("stage"),
            "start": spread("start"),
            "end": spread("end"),
            "nbytes": spread("nbytes"),
            "macs": np.zeros(n, dtype=np.int64),
            "tile": spread("tile"),
        }

    return expand


def _replay(case: RingCase, prog: FabricProgram, rep: OpLog, lat: int) -> tuple[int, str]:
    """``#wrong`` and the first problem, from chip 0's records (module docstring)."""
    p, k = case.chips, len(case.sizes)
    per_step = 4 * k
    start, end = rep.stored["start"], rep.stored["end"]
    n = len(prog)
    ops = np.arange(n, dtype=np.int64)
    is_send = np.asarray(prog.kind, dtype=np.int64) == TRANSFER
    consumes = np.asarray(prog.consumes, dtype=np.int64)
    recv = np.flatnonzero(~is_send)
    t_of = consumes[recv]
    early = (start[recv] < start[t_of] + lat) | (end[recv] <= end[t_of] + lat)
    if early.any():
        i, t = int(recv[np.argmax(early)]), int(t_of[np.argmax(early)])
        return p * case.count, (
            f"op {i} on chip 0 runs {int(start[i])}..{int(end[i])} ps, but the data of "
            f"transfer op {t} arrives {int(start[t]) + lat}..{int(end[t]) + lat} ps: it uses "
            "data before it arrived"
        )
    # each piece's inputs as two bit masks over the input chips (bit c: chip c's input):
    # ``once`` holds it once, ``twice`` more than once; piece (half, segment, chunk) is
    # number ``(half * p + segment) * k + chunk``
    once = [1] * (2 * p * k)
    twice = [0] * (2 * p * k)
    full = (1 << p) - 1
    order = np.lexsort((ops, is_send.astype(np.int64), end))  # writes before reads
    s_, rest = np.divmod(ops, per_step)
    phase, rest = np.divmod(rest, 2 * k)
    t_, r_ = np.divmod(rest, 2)
    reduce_steps = case.reduce_steps
    reduces = s_ < reduce_steps
    at = np.where(reduces, s_, s_ - reduce_steps)
    lag = reduces.astype(np.int64)
    seg = np.where(r_ == 0, -lag - at, lag + at) % p  # what chip 0 sends this step
    g = np.where(r_ == 0, -1, 1)  # chip 0 receives from chip -1 (ring 0) or +1 (ring 1)
    piece = np.where(phase == 0, (r_ * p + seg) * k + t_, (r_ * p + (seg + g) % p) * k + t_)
    stash: dict[int, tuple[int, int]] = {}
    hi = p - 1
    for op, x, is_recv, up, adds, src in zip(
        order.tolist(),
        piece[order].tolist(),
        phase[order].tolist(),
        (g[order] > 0).tolist(),
        reduces[order].tolist(),
        consumes[order].tolist(),
        strict=True,
    ):
        if not is_recv:
            stash[op] = (once[x], twice[x])
            continue
        a1, a2 = stash.pop(src)
        if up:  # turned by +1: chip c's input becomes chip c + 1's (np.roll by 1)
            a1 = ((a1 << 1) | (a1 >> hi)) & full
            a2 = ((a2 << 1) | (a2 >> hi)) & full
        else:
            a1 = (a1 >> 1) | ((a1 & 1) << hi)
            a2 = (a2 >> 1) | ((a2 & 1) << hi)
        if adds:  # counts add, "more than once" stays so
            b1, b2 = once[x], twice[x]
            two = a2 | b2 | (a1 & b1)
            once[x], twice[x] = (a1 | b1) & ~two, two
        else:
            once[x], twice[x] = a1, a2
    bits = np.asarray([once, twice], dtype=object).reshape(2, 2, p, k)
    if case.collective == "all_gather":
        want_once = np.asarray([[1 << i] * k for i in range(p)], dtype=object)[None]
    else:
        want_once = np.full((1, p, k), full, dtype=object)
    bad = (bits[0] != want_once) | (bits[1] != 0)
    if case.collective == "reduce_scatter":
        bad[:, 1:] = False
    if not bad.any():
        return 0, ""
    sizes = np.asarray(case.sizes, dtype=np.int64)
    wrong = int(p * (sizes[None, None, :] * bad).sum())
    h, i, t = (int(v) for v in np.argwhere(bad)[0])

    def counts(one: int, two: int) -> npt.NDArray[np.int64]:
        return np.asarray([(one >> c & 1) + 2 * (two >> c & 1) for c in range(p)], np.int64)

    want = (1 << i) if case.collective == "all_gather" else full
    why = input_mismatch(counts(int(bits[0, h, i, t]), int(bits[1, h, i, t])), counts(want, 0))
    lo = h * (case.count // 2) + i * case.segment + int(sizes[:t].sum())
    return wrong, f"chip 0, elements [{lo}, {lo + int(sizes[t])}) {why}"


def input_mismatch(got: npt.NDArray[np.int64], exp: npt.NDArray[np.int64]) -> str:
    """What a piece's per-chip input counts ``got`` lack or hold against ``exp``."""
    why = []
    missing = np.flatnonzero((got == 0) & (exp > 0))
    extra = np.flatnonzero((got > 0) & (exp == 0))
    if len(missing):
        why.append(f"lacks the inputs of chips {_few(missing)}")
    if len(extra):
        why.append(f"holds inputs it should not (chips {_few(extra)})")
    if not why:
        why.append("counts an input twice")
    return " and ".join(why)


def _few(chips: npt.NDArray[np.int64]) -> str:
    shown = ", ".join(str(int(c)) for c in chips[:8])
    return shown + (f" and {len(chips) - 8} more" if len(chips) > 8 else "")


class SymmetricRun(CollectiveRun):
    """A :class:`CollectiveRun` of a symmetric ring case: ``log`` is a :class:`SymmetricLog`;
    ``schedule``, ``compiled`` and ``final`` (every chip's values) are built when asked, for
    the sizes where the full program fits."""

    topo: Topology
    case: RingCase
    quotient: FabricProgram
    symmetric: SymmetricLog

    def __init__(
        self,
        topo: Topology,
        case: RingCase,
        net: Network,
        quotient: FabricProgram,
        log: SymmetricLog,
        checked: tuple[int, str],
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "topo", topo)
        setattr_(self, "case", case)
        setattr_(self, "network", net)
        setattr_(self, "quotient", quotient)
        setattr_(self, "log", log)
        setattr_(self, "symmetric", log)
        setattr_(self, "wrong", checked[0])
        setattr_(self, "problem", checked[1])

    @property
    def channels(self) -> int:
        """Today's two counter-rotating rings (the fast path runs only the neutral runtime)."""
        return 0

    def dependency_race(self) -> str:
        """The race check of the program that was timed: chip 0's quotient (every chip's
        pairs are chip 0's turned)."""
        c = self.case
        return symmetric_race(self.quotient, c.chips, c.sizes, c.count, c.reduce_steps)

    @cached_property
    def schedule(self) -> Schedule:
        c = self.case
        return build_schedule(
            self.topo,
            c.count * c.bpe,
            "ring",
            c.collective,
            chunk_bytes=c.chunk_bytes,
            network=self.network,
        )

    @cached_property
    def compiled(self) -> Compiled:
        return fabric_program(self.schedule)

    @cached_property
    def final(self) -> Replayed:
        try:
            return replay(self.schedule, self.network, self.compiled, self.log)
        except ReplayError:
            zero = np.zeros((self.chips, len(self.compiled.bounds) - 1), np.int64)
            return Replayed(zero, zero, zero)

    @property
    def time_ps(self) -> int:
        return self.log.makespan_ps

    @property
    def nbytes(self) -> int:
        return self.case.count * self.case.bpe

    @property
    def chips(self) -> int:
        return self.case.chips

    def __repr__(self) -> str:
        c = self.case
        return f"SymmetricRun(ring {c.collective} of {self.nbytes} B on {c.chips} chips)"

    def metrics(self) -> dict[str, float]:
        """:func:`sim.collectives.metrics.collective_metrics` in closed form: every chip's (and
        link direction's) loads are chip 0's."""
        rep, p = self.symmetric.rep, self.case.chips
        t_ps = self.time_ps
        st = rep.stored
        stage = st["stage"].astype(np.int64)
        engine = st["engine"].astype(np.int64)
        dur = (st["end"] - st["start"]).astype(np.float64)
        on_link = stage == SEND
        nbytes = st["nbytes"].astype(np.float64)
        link_ids = distinct(engine[on_link])  # np.unique imports numpy.ma: ~10 ms cold
        per_link = np.asarray([nbytes[on_link & (engine == e)].sum() for e in link_ids])
        busy = np.asarray([dur[on_link & (engine == e)].sum() for e in link_ids])
        reduce_busy = float(dur[stage == REDUCE].sum())
        q = self.quotient
        hbm = float(
            sum(
                hbm_default(kk, b) if m < 0 else m
                for kk, b, m in zip(q.kind, q.nbytes, q.hbm, strict=True)
            )
        )
        time_ns = t_ps / 1000
        algbw = self.nbytes / time_ns if t_ps else 0.0
        factor = (2.0 if self.case.collective == "allreduce" else 1.0) * (p - 1) / p
        return {
            "time_ns": time_ns,
            "algbw_gbs": algbw,
            "busbw_gbs": algbw * factor,
            "wrong": float(self.wrong),
            "count": float(self.case.count),
            "channels": 0.0,  # today's ring order and its reverse: the neutral runtime
            "transfers": float(p * int(on_link.sum())),
            "records": float(len(self.log)),
            "link_bytes_max": float(per_link.max(initial=0.0)),
            "link_bytes_total": float(p * per_link.sum()),
            "links_used": float(p * int((per_link > 0).sum())),
            "link_util_peak": float(busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
            "hbm_bytes_max": hbm,
            "reduce_util_peak": reduce_busy / t_ps if t_ps else 0.0,
        }


def symmetric_run(
    topo: Topology, nbytes: object, algorithm: object, collective: object, chunk_bytes: object
) -> SymmetricRun | None:
    """The run of a symmetric ring case (module docstring), or None for any other."""
    case = ring_case(topo, nbytes, algorithm, collective, chunk_bytes)
    if case is None:
        return None
    view = _view(topo)  # the three-chip view is also the lazy ring network's template
    net = ring_network(topo, three=view)
    prog, view_log = time_quotient(topo, case, view)
    rep = _rep_log(net, case, view_log)
    log = SymmetricLog(rep, case.chips, _expander(net, case, rep))
    checked = _replay(case, prog, rep, net.latency_ps)
    return SymmetricRun(topo, case, net, prog, log, checked)


FAST_PATHS.append(symmetric_run)
