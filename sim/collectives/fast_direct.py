"""`direct` allreduce on a ring by symmetry: timed from its representative chips' quotient
program (one on an odd ring, two on an even one: :mod:`sim.fabric.ring_quotient`, ADR
0026), its log stored as their records and the turns, its metrics in closed form and its
functional check replayed from the representatives.

**The check** (:func:`_replay`): every reduction of a representative must start no earlier
than its data's head arrives (its send's last hop start plus the latency) and end after
its last byte arrived; every send must cross the ring distance in hops, on the links of its
route (the representatives of ``s + h`` or ``s - h``); and each chunk on each
representative chip must hold its own input and every other chip's exactly once (a
reduction per sender ``r - k``). ``#wrong`` counts the elements of chunks that do not, on
every chip (``p / g`` times the representatives'), or every element when data is used
before it came. Anything else (another algorithm, collective, topology, lanes, links that
differ, fewer than 3 chips, a non-neutral runtime) is not taken here.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

import numpy as np

from sim.collectives.catalog import build_schedule
from sim.collectives.compile import chunks
from sim.collectives.fast import SymmetricRun
from sim.collectives.races import quotient_race
from sim.collectives.run import FAST_PATHS
from sim.collectives.schedule import Schedule
from sim.fabric import (
    HBM_ENGINE,
    REDUCE,
    REDUCE_ENGINE,
    SEND,
    STAGES,
    FabricProgram,
    Network,
    SymmetricLog,
    direct_by_ring_rotation,
    expand_direct,
    goes_up,
    hbm_default,
    ring_links,
    ring_network,
    ring_turn,
)
from sim.limits import ops_budget
from sim.oplog import OpLog
from sim.topology import Topology, dimensions_of


def _replay(net: Network, prog: FabricProgram, rep: OpLog, count: int) -> tuple[int, str]:
    """``#wrong`` and the first problem, from the representatives' records (module
    docstring)."""
    p, g = net.chips, ring_turn(net.chips)
    _links, up, down = ring_links(p)
    lat = net.latency_ps
    st = rep.stored
    op, start, end = st["op"], st["start"], st["end"]
    engine, stage = st["engine"], st["stage"]
    first = np.searchsorted(op, np.arange(len(prog)))
    last = np.r_[first[1:], len(op)] - 1
    present = np.zeros(len(prog), dtype=bool)
    present[op] = True
    kinds = prog.kind
    for i, (s, d) in enumerate(zip(prog.src, prog.dst, strict=True)):
        if kinds[i] != 0:
            continue
        k = (d - s) % p
        want = (
            [int(up[(s + h) % g]) for h in range(k)]
            if goes_up(p, s, k)
            else [int(down[(s - h) % g]) for h in range(p - k)]
        )
        got = engine[first[i] : last[i] + 1].tolist()
        if got != want:
            return p * count, f"transfer op {i} ({s} -> {d}) crossed links {got}, not {want}"
    seen: dict[tuple[int, int], list[int]] = {}
    for i, t in enumerate(prog.consumes):
        if t < 0:
            continue
        j, lt = int(first[i]), int(last[t])
        if not present[i] or stage[j] != REDUCE:
            continue  # a reduction left out of the log: its input is missing below
        if start[j] < start[lt] + lat or end[j] <= end[lt] + lat:
            return p * count, (
                f"op {i} on chip {prog.src[i]} runs {int(start[j])}..{int(end[j])} ps, but "
                f"the data of transfer op {t} arrives {int(start[lt]) + lat}.."
                f"{int(end[lt]) + lat} ps: it uses data before it arrived"
            )
        r = prog.src[i]
        sender = (r - (prog.dst[t] - prog.src[t])) % p
        seen.setdefault((r, prog.span[i][0]), []).append(sender)
    wrong, why = 0, ""
    spans = sorted(set(prog.span))
    for r in range(g):
        for lo, hi in spans:
            got = sorted([r, *seen.get((r, lo), [])])
            if got != list(range(p)):
                wrong += (p // g) * (hi - lo)
                why = why or f"chip {r}, elements [{lo}, {hi}) holds the inputs of {got[:8]}"
    return wrong, why


class DirectRun(SymmetricRun):
    """A :class:`SymmetricRun` of direct allreduce on a ring (module docstring)."""

    count: int
    chunk: int

    def __init__(
        self,
        topo: Topology,
        net: Network,
        quotient: FabricProgram,
        log: SymmetricLog,
        count: int,
        chunk_bytes: int,
        checked: tuple[int, str],
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "topo", topo)
        setattr_(self, "network", net)
        setattr_(self, "quotient", quotient)
        setattr_(self, "log", log)
        setattr_(self, "symmetric", log)
        setattr_(self, "count", count)
        setattr_(self, "chunk", chunk_bytes)
        setattr_(self, "wrong", checked[0])
        setattr_(self, "problem", checked[1])

    def dependency_race(self) -> str:
        """The race check of the representatives' program that was timed."""
        return quotient_race(self.quotient)

    @cached_property
    def schedule(self) -> Schedule:
        t = self.topo
        return build_schedule(
            t, self.nbytes, "direct", "allreduce", chunk_bytes=self.chunk, network=self.network
        )

    @property
    def nbytes(self) -> int:
        return self.count * self.topo.bpe

    @property
    def chips(self) -> int:
        return self.network.chips

    def __repr__(self) -> str:
        return f"DirectRun(direct allreduce of {self.nbytes} B on a {self.chips}-ring)"

    def metrics(self) -> dict[str, float]:
        """:func:`sim.collectives.metrics.collective_metrics` in closed form: every link's
        records are those of its representative link, every chip's its representative's."""
        p = self.chips
        g = ring_turn(p)
        turns = p // g
        rep = self.symmetric.rep
        t_ps = self.time_ps
        st = rep.stored
        stage = st["stage"].astype(np.int64)
        engine = st["engine"].astype(np.int64)
        dur = (st["end"] - st["start"]).astype(np.float64)
        nbytes = st["nbytes"].astype(np.float64)
        on_link = stage != REDUCE
        ids = np.unique(engine[on_link])
        per_link = np.asarray([nbytes[on_link & (engine == e)].sum() for e in ids])
        busy = np.asarray([dur[on_link & (engine == e)].sum() for e in ids])
        chip = st["chip"].astype(np.int64)
        red = stage == REDUCE
        reduce_busy = [dur[red & (chip == r)].sum() for r in range(g)]
        q = self.quotient
        hbm = np.zeros(g)
        for kk, s, b, m in zip(q.kind, q.src, q.nbytes, q.hbm, strict=True):
            hbm[s] += hbm_default(kk, b) if m < 0 else m
        time_ns = t_ps / 1000
        algbw = self.nbytes / time_ns if t_ps else 0.0
        return {
            "time_ns": time_ns,
            "algbw_gbs": algbw,
            "busbw_gbs": algbw * (2.0 * (p - 1) / p),  # as bus_factor
            "wrong": float(self.wrong),
            "count": float(self.count),
            "channels": 0.0,
            "transfers": float(turns * int((stage == SEND).sum())),
            "records": float(len(self.log)),
            "link_bytes_max": float(per_link.max(initial=0.0)),
            "link_bytes_total": float(turns * per_link.sum()),
            "links_used": float(turns * int((per_link > 0).sum())),
            "link_util_peak": float(busy.max(initial=0.0) / t_ps) if t_ps else 0.0,
            "hbm_bytes_max": float(hbm.max()),
            "reduce_util_peak": float(max(reduce_busy) / t_ps) if t_ps else 0.0,
        }


def direct_ring_run(
    topo: Topology, nbytes: object, algorithm: object, collective: object, chunk_bytes: object
) -> DirectRun | None:
    """The run of direct allreduce on a ring by symmetry, or None for any other case."""
    p, bpe = topo.chips.count, topo.bpe
    if algorithm != "direct" or collective != "allreduce" or topo.chips.topology != "ring":
        return None
    dims = dimensions_of(topo.chips)
    if len(dims) != 1 or dims[0].links != 1 or p < 3:
        return None
    if type(nbytes) is not int or nbytes <= 0 or nbytes % bpe:
        return None
    chunk = topo.chips.chunk_bytes if chunk_bytes is None else chunk_bytes
    if type(chunk) is not int or chunk < bpe:
        return None
    chunk -= chunk % bpe
    count = nbytes // bpe
    plan = chunks(0, count, bpe, chunk, max(1, topo.chips.staging_buffers // 2))
    g = ring_turn(p)
    if len(plan) * g * (p - 1) * (p // 2 + 1) > ops_budget():  # the quotient's records
        return None  # the full path refuses it, naming the budget
    net = ring_network(topo)
    if not net.uniform or net.latency_ps <= 0 or net.staging_buffers < 1:
        return None
    sizes = [(b - a) * bpe for a, b in plan]
    prog, rep_view = direct_by_ring_rotation(net, sizes, plan)
    rep = OpLog.from_columns(
        (*net.names, REDUCE_ENGINE, HBM_ENGINE),
        STAGES,
        {c: rep_view.column(c) for c in ("op", "chip", "engine", "stage", "start", "end")}
        | {c: rep_view.column(c) for c in ("nbytes", "tile")},
    )
    log = SymmetricLog(rep, p // g, lambda: expand_direct(net, len(sizes), rep))
    checked = _replay(net, prog, rep, count)
    return DirectRun(topo, replace(net), prog, log, count, chunk, checked)


FAST_PATHS.append(direct_ring_run)
