"""One clock for GEMMs and collectives on p chips: a heap-driven joint event engine.

``sim.core`` times one chip's GEMM and ``sim.fabric`` times a collective on the links; each
has its own clock. A tensor-parallel layer needs both on the same chips at once, competing
for each chip's HBM, so this module times one :class:`JointProgram` holding both
(docs/adr/0014-tensor-parallel-layer.md).

Resources and their service rules (integer picoseconds; equal times in program order):

* per chip, **in program order** (as ``sim.core``): the DMA engines, the fetch unit and the
  PE. A ``BLOCK`` (a group of GEMM output tiles, the coarse granule) holds the PE for its
  duration; tile-level ``DMA`` / ``SERVE`` / ``PIPE`` ops keep ``sim.core``'s meaning
  (setup, bursts on pseudo-channels, latency, release deps ``~d``; service; issue/retire).
* per chip, **first come, first served**: the reduce engine (busy ``bytes / reduce_gbs``),
  and the HBM pseudo-channels. Every HBM access (a tile DMA's bursts, a slice of a block's
  traffic, a collective's send, reduction or copy) is dealt in ``burst_bytes`` bursts over
  the chip's channels and each channel serves its bursts back to back at ``burst_ps`` in
  the order they arrive, so tile-level GEMM traffic and collective traffic contend channel
  by channel. A ``BLOCK``'s bytes are **background** traffic: the GEMM streams them at its
  own pace, the chip's other accesses take the HBM first, and the block ends once its PE
  time is over and its bytes have had the HBM time left over:
  ``end = max(start + dur, start + bytes / hbm_bw + foreground busy time in [start, end])``
  (a block holds the PE until it ends).
* per link direction, first come, first served (``sim.fabric``'s physics): a transfer holds
  a direction for ``bytes / link_bw``, hop ``i+1`` starts ``latency`` after hop ``i`` and
  ends no earlier than hop ``i`` plus ``latency``; the first hop also reads the sender's
  HBM; the data has arrived ``latency`` after the last hop ends.

Simplifications against ``sim.fabric.simulate_fabric`` (stated in ADR 0014): a dependent
starts when its producer has *ended* (no burst-level streaming inside a chunk), and
staging buffers are not modelled (the schedules' own dependencies bound what is in flight).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sim.errors import NpuSimError
from sim.fabric import Network
from sim.hbm import channel_counts
from sim.oplog import OpLog
from sim.topology import Topology

__all__ = [
    "BLOCK",
    "COPY",
    "DMA",
    "PIPE",
    "REDUCE",
    "SERVE",
    "STAGES",
    "TRANSFER",
    "JointError",
    "JointProgram",
    "local_engines",
    "simulate_joint",
]

BLOCK, DMA, SERVE, PIPE, TRANSFER, REDUCE, COPY = range(7)
#: stage names of the joint log (tile-level GEMM stages, coarse GEMMs, collective steps)
STAGES = (
    "dma_in",
    "fetch",
    "gemm",
    "dma_out",
    "gemm1",
    "gemm2",
    "send",
    "forward",
    "reduce",
    "copy",
)
ST = {name: i for i, name in enumerate(STAGES)}
_SEND, _FORWARD = ST["send"], ST["forward"]
_READY, _ARRIVE, _CHECK, _HOP, _DONE, _RELEASE = range(6)


class JointError(NpuSimError, RuntimeError):
    """A joint program cannot be timed: a dependency cycle or a malformed op."""


def local_engines(topo: Topology) -> tuple[str, ...]:
    """Per-chip engines: the DMA engines, fetch, PE, reduce engine and HBM (copies)."""
    return (*(f"dma{e}" for e in range(topo.dma.engines)), "fetch", "pe", "reduce", "hbm")


@dataclass
class JointProgram:
    """Ops of every chip in program order, as parallel lists (op id = index).

    ``res`` is a chip-local engine index (:func:`local_engines`) for BLOCK / DMA / SERVE /
    PIPE; ``dst`` the receiver of a TRANSFER; ``hbm`` the bytes an op moves through its
    chip's HBM (a transfer: the sender's); ``deps`` earlier op ids (``~d``: the release of
    DMA ``d``); ``dur``/``lat`` as in :class:`sim.core.Op` (BLOCK: ``dur`` only).
    """

    kind: list[int] = field(default_factory=list)
    chip: list[int] = field(default_factory=list)
    res: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)
    stage: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    hbm: list[int] = field(default_factory=list)
    macs: list[int] = field(default_factory=list)
    tile: list[int] = field(default_factory=list)
    dur: list[int] = field(default_factory=list)
    lat: list[int] = field(default_factory=list)
    chans: list[tuple[tuple[int, int], ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kind)

    def add(
        self,
        kind: int,
        chip: int,
        deps: Sequence[int] = (),
        *,
        stage: str,
        res: int = -1,
        dst: int = -1,
        nbytes: int = 0,
        hbm: int = 0,
        macs: int = 0,
        tile: int = -1,
        dur: int = 0,
        lat: int = 0,
        chans: tuple[tuple[int, int], ...] = (),
    ) -> int:
        self.kind.append(kind)
        self.chip.append(chip)
        self.res.append(res)
        self.dst.append(dst)
        self.deps.append(tuple(deps))
        self.stage.append(ST[stage])
        self.nbytes.append(nbytes)
        self.hbm.append(hbm)
        self.macs.append(macs)
        self.tile.append(tile)
        self.dur.append(dur)
        self.lat.append(lat)
        self.chans.append(chans)
        return len(self.kind) - 1

    def hbm_bytes(self, chips: int) -> list[int]:
        """Bytes each chip moves through its HBM."""
        out = [0] * chips
        for c, b in zip(self.chip, self.hbm, strict=True):
            out[c] += b
        return out


class _Engine:
    """The state of one run; :func:`simulate_joint` is its public face."""

    def __init__(self, topo: Topology, net: Network, prog: JointProgram) -> None:
        self.topo, self.net, self.prog = topo, net, prog
        self.local = local_engines(topo)
        self.nloc = len(self.local)
        self.pe_res = self.local.index("pe")
        self.reduce_res = self.local.index("reduce")
        self.hbm_eng = self.local.index("hbm")
        p = net.chips
        self.burst_ps, self.burst_bytes = topo.hbm.burst_ps, topo.hbm.burst_bytes
        self.num_pcs = topo.hbm.num_pcs
        self.ch = [[0] * self.num_pcs for _ in range(p)]
        self.rot = [0] * p
        n = len(prog)
        self.nres = p * self.nloc + len(net.links)
        self.queue: list[list[int]] = [[] for _ in range(self.nres)]
        for i in range(n):
            if prog.kind[i] in (BLOCK, DMA, SERVE, PIPE):
                self.queue[prog.chip[i] * self.nloc + prog.res[i]].append(i)
        self.head = [0] * self.nres
        self.busy = [False] * self.nres
        self.fifo: list[list[tuple[int, int]]] = [[] for _ in range(self.nres)]
        self.fifo_head = [0] * self.nres
        self.ready = [False] * n
        self.waiting = [len(d) for d in prog.deps]
        self.dependents: list[list[int]] = [[] for _ in range(n)]
        self.on_release: list[list[int]] = [[] for _ in range(n)]
        for i, deps in enumerate(prog.deps):
            for d in deps:
                t = ~d if d < 0 else d
                if not 0 <= t < i or (d < 0 and prog.kind[t] != DMA):
                    raise JointError(f"op {i} depends on {d}: dependencies must be earlier ops")
                (self.on_release if d < 0 else self.dependents)[t].append(i)
        # tile DMAs reach their channels in program order per chip (as sim.core serves them)
        self.dma_order: list[list[int]] = [[] for _ in range(p)]
        for i in range(n):
            if prog.kind[i] == DMA:
                self.dma_order[prog.chip[i]].append(i)
        self.dma_next = [0] * p
        self.dma_arrived: dict[int, int] = {}
        self.end = [-1] * n
        self.hop_end = [0] * n
        # per chip, the aggregate HBM time of every foreground access: [t0, t1) intervals
        self.fg_t0: list[list[int]] = [[] for _ in range(p)]
        self.fg_t1: list[list[int]] = [[] for _ in range(p)]
        self.fg_longest = [0] * p
        self.heap: list[tuple[int, int, int, int, int]] = []
        self.rec: list[tuple[int, int, int, int, int, int, int, int, int]] = []

    # --- helpers -------------------------------------------------------------------------
    def at(self, t: int, op: int, code: int, arg: int = 0) -> None:
        heapq.heappush(self.heap, (t, 1, op, code, arg))

    def free_at(self, t: int, res: int) -> None:
        heapq.heappush(self.heap, (t, 0, res, 0, 0))

    def hbm_access(self, chip: int, nbytes: int, t: int) -> int:
        """Deal ``nbytes`` over the chip's channels from a rotating start; the last burst's end."""
        span = self.net.hbm_ps(nbytes)
        self.fg_t0[chip].append(t)
        self.fg_t1[chip].append(t + span)
        self.fg_longest[chip] = max(self.fg_longest[chip], span)
        nb = -(-nbytes // self.burst_bytes)
        cc = channel_counts(self.rot[chip], nb, self.num_pcs)
        self.rot[chip] = (self.rot[chip] + nb) % self.num_pcs
        return self.bursts(chip, cc, t)

    def bursts(self, chip: int, chans: tuple[tuple[int, int], ...], t: int) -> int:
        ch, burst = self.ch[chip], self.burst_ps
        last = t
        for c, cnt in chans:
            s = ch[c] if ch[c] > t else t
            s += cnt * burst
            ch[c] = s
            if s > last:
                last = s
        return last

    def foreground(self, chip: int, a: int, b: int) -> int:
        """HBM time the chip's foreground accesses took within ``[a, b)`` (at most b - a)."""
        t0s, t1s = self.fg_t0[chip], self.fg_t1[chip]
        busy = 0
        for k in range(bisect.bisect_left(t0s, a - self.fg_longest[chip]), len(t0s)):
            x, y = t0s[k], t1s[k]
            if x >= b:
                break
            lo, hi = (x if x > a else a), (y if y < b else b)
            if hi > lo:
                busy += hi - lo
        return busy if busy < b - a else b - a

    def check_block(self, i: int, start: int, now: int) -> None:
        """A block's PE time is over at ``now`` or earlier: it ends when its bytes have had
        ``bytes / hbm_bw`` of the HBM time the foreground accesses left over."""
        prog = self.prog
        chip = prog.chip[i]
        need = start + self.net.hbm_ps(prog.hbm[i]) + self.foreground(chip, start, now)
        if need > now:
            self.at(need, i, _CHECK, start)
            return
        self.free_at(now, chip * self.nloc + prog.res[i])
        self.finish(i, self.pe_res, chip, start, now)

    def record(self, op: int, eng: int, chip: int, start: int, end: int, stage: int) -> None:
        prog = self.prog
        self.rec.append((chip, eng, stage, op, start, end, prog.nbytes[op], prog.macs[op], 0))

    # --- servers -------------------------------------------------------------------------
    def try_inorder(self, r: int, now: int) -> None:
        q = self.queue[r]
        if self.busy[r] or self.head[r] >= len(q) or not self.ready[q[self.head[r]]]:
            return
        i = q[self.head[r]]
        self.head[r] += 1
        self.busy[r] = True
        prog, k = self.prog, self.prog.kind[i]
        eng = r % self.nloc
        chip = prog.chip[i]
        if k == DMA:
            t0 = now + prog.dur[i]
            self.free_at(t0, r)
            self.at(t0, i, _ARRIVE, now)
            return
        if k == SERVE:
            self.free_at(now + prog.dur[i], r)
            self.finish(i, eng, chip, now, now + prog.dur[i])
            return
        if k == PIPE:
            self.free_at(now + prog.dur[i], r)
            self.finish(i, eng, chip, now, now + prog.lat[i])
            return
        dur = prog.dur[i]  # BLOCK: the PE is held until the block ends (its bytes moved)
        self.at(now + dur, i, _CHECK, now)

    def fcfs(self, r: int, op: int, hop: int, now: int) -> None:
        if self.busy[r]:
            self.fifo[r].append((op, hop))
        else:
            self.busy[r] = True
            self.start_fcfs(r, op, hop, now)

    def start_fcfs(self, r: int, i: int, hop: int, now: int) -> None:
        prog, net = self.prog, self.net
        chip = prog.chip[i]
        if prog.kind[i] == REDUCE:
            red = net.reduce_ps(prog.nbytes[i])
            self.free_at(now + red, r)
            last = self.hbm_access(chip, prog.hbm[i], now) if prog.hbm[i] > 0 else now
            self.finish(i, self.reduce_res, chip, now, max(now + red, last))
            return
        route = net.routes[chip][prog.dst[i]]
        link = route[hop]
        occ = net.link_ps(prog.nbytes[i])
        if hop == 0:
            last = self.hbm_access(chip, prog.hbm[i], now) if prog.hbm[i] > 0 else now
            end = max(now + occ, last)
        else:
            end = max(now + occ, self.hop_end[i] + net.latency_ps)
        self.hop_end[i] = end
        self.free_at(end, r)
        stage = _FORWARD if hop else _SEND
        self.rec.append(
            (net.link_chip(link), self.nloc + link, stage, i, now, end, prog.nbytes[i], 0, hop)
        )
        if hop + 1 < len(route):
            self.at(now + net.latency_ps, i, _HOP, hop + 1)
        else:
            self.at(end + net.latency_ps, i, _DONE, -1)

    def free(self, r: int, now: int) -> None:
        if r < self.net.chips * self.nloc and r % self.nloc != self.reduce_res:
            self.busy[r] = False
            self.try_inorder(r, now)
            return
        h = self.fifo_head[r]
        if h < len(self.fifo[r]):
            self.fifo_head[r] = h + 1
            op, hop = self.fifo[r][h]
            self.start_fcfs(r, op, hop, now)
        else:
            self.busy[r] = False

    def finish(self, i: int, eng: int, chip: int, start: int, end: int) -> None:
        self.record(i, eng, chip, start, end, self.prog.stage[i])
        self.at(end, i, _DONE, -1)

    def arrive(self, chip: int, now: int) -> None:
        """Tile DMAs whose setup is over take their channels, in program order: one that is
        set up waits for the earlier DMAs of its chip (sim.core's in-order channels)."""
        order, prog = self.dma_order[chip], self.prog
        while self.dma_next[chip] < len(order) and order[self.dma_next[chip]] in self.dma_arrived:
            i = order[self.dma_next[chip]]
            self.dma_next[chip] += 1
            start = self.dma_arrived.pop(i)
            last = self.bursts(chip, prog.chans[i], now)
            self.at(last, i, _RELEASE)
            self.finish(i, prog.res[i], chip, start, last + prog.lat[i])

    # --- events --------------------------------------------------------------------------
    def on_ready(self, i: int, now: int) -> None:
        prog = self.prog
        k, chip = prog.kind[i], prog.chip[i]
        if k in (BLOCK, DMA, SERVE, PIPE):
            self.ready[i] = True
            self.try_inorder(chip * self.nloc + prog.res[i], now)
        elif k == TRANSFER:
            if chip == prog.dst[i]:
                raise JointError(f"op {i}: a transfer from chip {chip} to itself")
            self.fcfs(self.net.chips * self.nloc + self.net.routes[chip][prog.dst[i]][0], i, 0, now)
        elif k == REDUCE:
            self.fcfs(chip * self.nloc + self.reduce_res, i, 0, now)
        else:  # COPY: HBM writes only
            self.finish(i, self.hbm_eng, chip, now, self.hbm_access(chip, prog.hbm[i], now))

    def run(self) -> OpLog:
        prog = self.prog
        for i in range(len(prog)):
            if not self.waiting[i]:
                self.at(0, i, _READY)
        heap, pop = self.heap, heapq.heappop
        base = self.net.chips * self.nloc
        while heap:
            now, prio, who, code, arg = pop(heap)
            if prio == 0:
                self.free(who, now)
            elif code == _READY:
                self.on_ready(who, now)
            elif code == _DONE:
                self.end[who] = now
                for j in self.dependents[who]:
                    self.waiting[j] -= 1
                    if not self.waiting[j]:
                        self.at(now, j, _READY)
            elif code == _HOP:
                link = self.net.routes[prog.chip[who]][prog.dst[who]][arg]
                self.fcfs(base + link, who, arg, now)
            elif code == _ARRIVE:
                self.dma_arrived[who] = arg
                self.arrive(prog.chip[who], now)
            elif code == _CHECK:
                self.check_block(who, arg, now)
            else:  # _RELEASE
                for j in self.on_release[who]:
                    self.waiting[j] -= 1
                    if not self.waiting[j]:
                        self.at(now, j, _READY)
        stuck = [i for i, e in enumerate(self.end) if e < 0]
        if stuck:
            raise JointError(
                f"joint program did not finish: {len(stuck)} ops never ran (e.g. {stuck[:3]}, "
                f"waiting on {[prog.deps[i] for i in stuck[:3]]}): a dependency cycle"
            )
        return self.oplog()

    def oplog(self) -> OpLog:
        names = (*self.local, *self.net.names)
        if not self.rec:
            return OpLog.from_columns(names, STAGES, {"op": []})
        arr = np.asarray(self.rec, dtype=np.int64)
        order = np.lexsort((arr[:, 8], arr[:, 3]))
        arr = arr[order]
        cols = {
            name: arr[:, j]
            for j, name in enumerate(("chip", "engine", "stage", "op", "start", "end", "nbytes"))
        }
        cols["macs"] = arr[:, 7]
        cols["tile"] = np.asarray(self.prog.tile, dtype=np.int64)[arr[:, 3]]
        return OpLog.from_columns(names, STAGES, cols)


def simulate_joint(topo: Topology, net: Network, prog: JointProgram) -> tuple[OpLog, list[int]]:
    """Time ``prog`` (module docstring); the op log and every op's end time (ps).

    A transfer's end is the arrival of its last byte (last hop end + latency).
    Engines of the log are :func:`local_engines` (with the ``chip`` column) then the links.
    """
    eng = _Engine(topo, net, prog)
    log = eng.run()
    return log, eng.end
