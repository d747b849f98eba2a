"""A GEMM run's metrics from its op log: busy time, occupancy, windows, utilisation, bytes.

Definitions (README "GEMM metrics", docs/adr/0006):

* an engine's **busy** time is the time it is *held*: a DMA engine for its setup, the
  fetch unit for its service, the PE issue slot for T per tile-op. A stage's busy time
  is the union of its engines' held intervals.
* **in flight** (``inflight_ns``): the union of the records' ``[start, end)`` intervals,
  waiting for channels and latency included;
* ``hbm.busy_ns``: channel time of every burst moved, per pseudo-channel on average;
* composite window: first start to last end over all records (the kernel's latency);
  PE window: first GEMM issue to last GEMM retire; occupancy: busy / composite window;
* ``mac_util``: useful (real) MACs / (peak MAC/ns x latency), the end-to-end figure;
* ``pe_util``: MACs issued (padded) / (peak MAC/ns x PE window);
* ``useful_eff``: real MACs / padded MACs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sim.gemm.model import gemm_model, roofline_tflops
from sim.gemm.program import GemmProgram
from sim.gemm.run import GemmRun
from sim.oplog import OpLog, Repeat, copies

__all__ = [
    "Reduced",
    "busy_ps",
    "gemm_metrics",
    "hbm_channel_busy",
    "held_end",
    "stage_engine_table",
]

PS = 1000.0  # ps per ns, for reporting only


def busy_ps(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> int:
    """Length of the union of intervals ``[start, end)`` (any order, overlaps merged)."""
    if len(start) == 0:
        return 0
    if len(start) > 1 and bool((start[1:] < start[:-1]).any()):
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # in start order the union is [first start, last reach) less the gaps between runs
    gaps = start[1:] - reach[:-1]
    return int(reach[-1] - start[0] - gaps[gaps > 0].sum())


def held_end(run: GemmRun) -> npt.NDArray[np.int64]:
    """When each record's engine is free again: DMA after setup, PE after T, fetch at end."""
    log, prog = run.log, run.program
    return _held(log.engine, log.start, log.end, prog.fetch_res, prog.pe_res, prog.setup, prog.T)


def _held(
    engine: npt.NDArray[np.signedinteger[Any]],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    fetch_res: int,
    pe_res: int,
    setup: int,
    t: int,
) -> npt.NDArray[np.int64]:
    held = end.copy()
    dma = engine < fetch_res
    held[dma] = start[dma] + setup
    pe = engine == pe_res
    held[pe] = start[pe] + t
    return held


def stage_engine_table(log: OpLog) -> dict[tuple[str, str], tuple[int, int]]:
    """``(stage, engine) -> (inflight_ps, records)`` for every pair present in the log."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    key = log.stage.astype(np.int64) * len(log.engines) + log.engine
    for k in np.flatnonzero(np.bincount(key)):
        sel = key == k
        stage, engine = divmod(int(k), len(log.engines))
        pair = (log.stages[stage], log.engines[engine])
        out[pair] = (busy_ps(log.start[sel], log.end[sel]), int(sel.sum()))
    return out


class Reduced:
    """A compressed log with most copies of each long period left out, and what they add.

    Copy ``i`` of a period (the stored period is copy 0) overlaps in time only copies
    within ``w = ceil(span / shift)`` of it. Keeping the first ``2w + 2`` copies and
    dropping the rest (later records move back by the dropped copies' shift) changes an
    additive quantity by ``dropped x`` the period's share, and a union of intervals by
    ``dropped x`` the share copy ``w + 1`` adds to copies ``0..w`` (the same for every
    later copy), provided no record outside the period reaches a dropped copy: checked
    here, and a period that fails the check is kept whole. Exact (docs/adr/0011).
    """

    def __init__(self, log: OpLog) -> None:
        self.log = log
        keep = {i: self._width(r) for i, r in enumerate(log.repeats)}
        while True:
            self._build(keep)
            bad = [i for i, d in self.drops.items() if not self._isolated(d)]
            if not bad:
                break
            for i in bad:
                keep[i] = log.repeats[i].n  # keep that period whole
        self.engine = self.cols["engine"]
        self.stage = self.cols["stage"]
        self.start = self.cols["start"]
        self.end = self.cols["end"]
        self.nbytes = self.cols["nbytes"]
        self.macs = self.cols["macs"]

    def _width(self, r: Repeat) -> int:
        st = self.log.stored
        span = int(st["end"][r.lo : r.hi].max() - st["start"][r.lo : r.hi].min())
        w = -(-span // r.shift_ps)
        return 2 * w + 2

    def _build(self, keep: dict[int, int]) -> None:
        st, log = self.log.stored, self.log
        names = ("engine", "stage", "start", "end", "nbytes", "macs")
        parts: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in (*names, "after")}
        self.drops: dict[int, tuple[int, int, int, int, int, int]] = {}
        pos = size = acc = 0

        def add(sl: slice, copy_of: Repeat | None = None, k: int = 0) -> None:
            nonlocal size
            for c in names:
                src = st[c][sl]
                if copy_of is not None:
                    src = copies(c, src, copy_of, 1, k)
                if c in ("start", "end"):
                    src = src - acc
                parts[c].append(src)
            length = len(parts["start"][-1])
            parts["after"].append(np.full(length, acc, np.int64))
            size += length

        for i, r in enumerate(log.repeats):
            add(slice(pos, r.hi))
            kept = min(r.n, keep[i])
            if kept:
                add(slice(r.lo, r.hi), r, kept)
            dropped = r.n - kept
            if dropped:
                w = (keep[i] - 2) // 2
                self.drops[i] = (
                    size - (kept + 1) * (r.hi - r.lo),
                    r.hi - r.lo,
                    kept,
                    dropped,
                    r.shift_ps,
                    w,
                )
                acc += dropped * r.shift_ps
            pos = r.hi
        add(slice(pos, len(st["op"])))
        self.cols = {c: np.concatenate(v) for c, v in parts.items()}
        self.after = self.cols["after"]

    def _isolated(self, d: tuple[int, int, int, int, int, int]) -> bool:
        lo, length, kept, _, lam, w = d
        s, e = self.cols["start"], self.cols["end"]
        src = slice(lo, lo + length)
        first, last = int(s[src].min()), int(e[src].max())
        hi = lo + (kept + 1) * length
        pre_reach = int(e[:lo].max()) if lo else first
        post_min = int(s[hi:].min()) if hi < len(s) else last + kept * lam
        return pre_reach <= first + (w + 1) * lam and post_min >= last + (kept - w - 1) * lam

    def count(self, mask: npt.NDArray[np.bool_]) -> int:
        return self.total(None, mask)

    def total(self, values: npt.NDArray[np.int64] | None, mask: npt.NDArray[np.bool_]) -> int:
        """Sum of ``values`` (or the number of records) over ``mask``, dropped copies included."""

        def part(sl: slice) -> int:
            if values is None:
                return int(np.count_nonzero(mask[sl]))
            return int(values[sl][mask[sl]].sum())

        out = part(slice(None))
        for lo, length, _, dropped, _, _ in self.drops.values():
            out += dropped * part(slice(lo, lo + length))
        return out

    def union(
        self, start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_]
    ) -> int:
        """Length of the union of ``[start, end)`` over ``mask`` in the full log."""

        def part(sl: slice) -> int:
            m = mask[sl]
            return busy_ps(start[sl][m], end[sl][m])

        out = part(slice(None))
        for lo, length, _, dropped, _, w in self.drops.values():
            steady = part(slice(lo, lo + (w + 2) * length)) - part(slice(lo, lo + (w + 1) * length))
            out += dropped * steady
        return out

    def max_end(self, mask: npt.NDArray[np.bool_]) -> int:
        """The last end over ``mask`` in the full log."""
        best = int((self.end + self.after)[mask].max())
        for lo, length, kept, dropped, lam, _ in self.drops.values():
            sl = slice(lo + kept * length, lo + (kept + 1) * length)
            m = mask[sl]
            if m.any():
                last = int((self.end[sl] + self.after[sl])[m].max()) + dropped * lam
                best = max(best, last)
        return best

    def min_start(self, mask: npt.NDArray[np.bool_]) -> int:
        return int(self.start[mask].min())  # a dropped copy starts after the copy kept before it


def gemm_metrics(run: GemmRun) -> dict[str, float]:
    """The flat metric dict of one GEMM run (names carry their units).

    Works on the compressed log (:class:`Reduced`): its cost follows the records the
    simulator stored, not the records of the full log.
    """
    log, prog = run.log, run.program
    plan, topo = prog.plan, prog.topo
    red = Reduced(log)
    engine, start, end, nbytes = red.engine, red.start, red.end, red.nbytes
    held = _held(engine, start, end, prog.fetch_res, prog.pe_res, prog.setup, prog.T)
    everything = np.ones(len(start), dtype=bool)
    first = red.min_start(everything)
    makespan = red.max_end(everything)
    if makespan != log.makespan_ps:
        raise AssertionError(f"reduced makespan {makespan} != the log's {log.makespan_ps}")
    window = max(makespan - first, 1)
    masks: dict[int, npt.NDArray[np.bool_]] = {}
    stages: dict[int, list[int]] = {}
    for e_i in range(len(log.engines)):
        sel = engine == e_i
        if sel.any():
            st = red.stage[sel]
            if bool(np.any(st != st[0])):
                raise ValueError(f"engine {log.engines[e_i]} serves more than one stage")
            masks[e_i] = sel
            stages.setdefault(int(st[0]), []).append(e_i)
    pe = masks[prog.pe_res]
    pe_window = red.max_end(pe) - red.min_start(pe)
    issued_macs = red.total(red.macs, pe)
    real_macs = plan.shape.macs

    def stage_bytes(name: str) -> int:
        s_i = log.stages.index(name)
        return sum(red.total(nbytes, masks[e]) for e in stages.get(s_i, []))

    hbm_read, hbm_write = stage_bytes("dma_in"), stage_bytes("dma_out")
    dma = engine < prog.fetch_res
    bursts = red.total(-(-nbytes // topo.hbm.burst_bytes), dma)
    latency_ns = makespan / PS
    peak = topo.pe.peak_macs_per_ns
    moved = hbm_read + hbm_write
    intensity = 2 * real_macs / moved
    tflops = 2 * real_macs / latency_ns / 1000.0
    m: dict[str, float] = {
        "latency_ns": latency_ns,
        "composite_window_ns": window / PS,
        "pe_window_ns": pe_window / PS,
        "tile_ops": plan.tile_ops,
        "mac_util": real_macs / (peak * latency_ns),
        "pe_util": issued_macs / (peak * pe_window / PS),
        "useful_eff": real_macs / plan.padded_macs,
        "hbm_read_bytes": hbm_read,
        "hbm_write_bytes": hbm_write,
        "hbm_bytes": moved,
        "hbm.busy_ns": bursts * prog.channels.burst_ps / topo.hbm.num_pcs / PS,
        "achieved_gbs": moved / latency_ns,
        "tflops": tflops,
        "arith_intensity_flop_per_byte": intensity,
        "roofline_frac": tflops / roofline_tflops(topo, intensity),
        "sram_bytes": prog.sram_bytes(),
        "macs_issued": issued_macs,  # padded MACs included: the PE does them (energy)
        "fetch_bytes": stage_bytes("fetch"),  # operand bytes SRAM -> PE (energy)
        "buffers_a": prog.buffers.a,
        "buffers_b": prog.buffers.b,
        "buffers_c": prog.buffers.c,
    }
    for s_i, stage in enumerate(log.stages):
        engines = stages.get(s_i, [])
        per: dict[int, tuple[int, int]] = {}
        for e_i in engines:
            sel = masks[e_i]
            busy = red.total(held - start, sel)  # an engine holds one op at a time
            per[e_i] = (busy, red.union(start, end, sel))
        if len(engines) == 1:
            busy, inflight = per[engines[0]]
        else:
            sel = np.logical_or.reduce([masks[e] for e in engines])
            busy, inflight = red.union(start, held, sel), red.union(start, end, sel)
        m[f"{stage}.busy_ns"] = busy / PS
        m[f"{stage}.inflight_ns"] = inflight / PS
        m[f"{stage}.occupancy"] = busy / window
        records = {e_i: red.count(masks[e_i]) for e_i in engines}
        m[f"{stage}.records"] = sum(records.values())
        for e_i in engines:
            name = f"{stage}.{log.engines[e_i]}"
            busy, inflight = per[e_i]
            m[f"{name}.busy_ns"] = busy / PS
            m[f"{name}.inflight_ns"] = inflight / PS
            m[f"{name}.occupancy"] = busy / window
            m[f"{name}.records"] = records[e_i]
    model = gemm_model(plan.shape, prog.variant, topo, program=prog)
    m["model_latency_ns"] = model.ideal_ps / PS
    m["model_mac_util"] = model.mac_util
    m["model_ratio"] = makespan / model.ideal_ps
    m["bound_compute_ns"] = model.compute_bound_ps / PS
    m["bound_hbm_ns"] = model.hbm_bound_ps / PS
    m["bound_ns"] = model.lower_bound_ps / PS
    m["model_hbm_bytes"] = model.hbm_bytes
    return m


def hbm_channel_busy(prog: GemmProgram) -> tuple[int, int, int]:
    """The busiest HBM pseudo-channel, its busy time and every channel's together (ps): each
    DMA's bursts on the channels its address range stripes over (``Op.chans``), block by
    block (``hbm.busy_ns`` is the total over ``num_pcs``). About 0.1 s at 2048 blocks."""
    bursts = np.zeros(prog.topo.hbm.num_pcs, np.int64)
    for b in range(prog.num_blocks):
        for op in prog.block_ops(b):
            for ch, n in op.chans:
                bursts[ch] += n
    ps = prog.channels.burst_ps
    top = int(np.argmax(bursts))
    return top, int(bursts[top]) * ps, int(bursts.sum()) * ps
