"""Per-record invariants that do not dilute with size (issue 26, class 4).

A constant-size error (one record counted twice, one hop charged one latency too many) is
0.04 % of a big config's time and passes a 0.1 % tolerance. These checks hold for every
record, or for an engine's busy time against its records, exactly, in integer picoseconds,
so one wrong record fails however many right ones surround it. The constants come from the
topology section the rule names, never from the simulator's program or network objects
(except where the topology's values are transformed by a protocol, below):

GEMM engines (the timing rules of ``sim/core`` and the busy definitions of
``sim.gemm.metrics``, ADR 0006):

* a **fetch** record lasts ``nbytes / fetch.fetch_gbs`` (rounded up to a ps), and the fetch
  engine's ``busy_ns`` is the sum of those service times;
* a **PE** record (tile PE) issues ``tile_m * tile_k * tile_n`` MACs and lasts
  ``pipeline_stages x stage_ns``; the PE's ``busy_ns`` is ``records x stage_ns``;
* a **DMA** engine is held for ``dma.setup_ns`` per record: its ``busy_ns`` is ``records x
  setup``, and no DMA record is shorter than its setup, the HBM latency and one burst;
* every engine's ``records`` is the number of its records in the log.

Fabric transfers (the rules of ``sim.fabric.simulate``, ADR 0005, 0010): per link record,

* no hop is shorter than ``bytes / link_bw`` (plus the link's setup under a protocol);
* hop ``h > 0`` of a transfer is ready one latency of hop ``h-1``'s link after hop ``h-1``
  started (cut-through), and starts then or when its link frees, whichever is later:
  ``start_h == max(start_{h-1} + lat_{h-1}, end of the link's previous record)``;
* it ends ``end_h == max(start_h + bytes / bw_h, end_{h-1} + lat_{h-1})``;
* a link carries one transfer at a time: no record (a first hop too, whose start waits on
  data, HBM or a staging buffer and is otherwise free) starts before the link's previous
  record ends (ADR 0005 decisions 1-2; ADR 0031 found first hops started in the engine's past
  on a link that had meanwhile served another).

So an unloaded transfer of ``h`` hops arrives ``h x latency + bytes / bw`` after it starts,
and a failure names the link and the hop. On a one-level topology with neutral collectives
(no protocol, no launch) every link's bandwidth and latency are ``chips.link_bw_gbs`` and
``chips.link_latency_ns``; otherwise (dimensions, protocols: a derated network) the run's own
network's per-link values are used, which still checks the engine's rules per record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from benches._derived import column_total
from sim import OpLog, Topology
from sim.topology.system import CollectivesConfig

__all__ = ["fabric_records", "gemm_records", "link_constants"]

I64 = npt.NDArray[np.int64]
#: at most this many offending records are named in one message
SHOWN = 3


def _ps(nbytes: I64 | int, gbs: Fraction) -> Any:
    """Whole picoseconds to move ``nbytes`` at ``gbs`` GB/s, rounded up (numpy or int)."""
    return -(-(np.asarray(nbytes, dtype=np.int64) * 1000 * gbs.denominator) // gbs.numerator)


def _gbs(value: float) -> Fraction:
    return Fraction(str(value))


# -- GEMM -------------------------------------------------------------------------------------


def gemm_records(sim_run: Any, metrics: Mapping[str, float]) -> list[str]:
    """Every GEMM engine's records and busy time against its service time (module docstring)."""
    log, topo = sim_run.log, sim_run.program.topo
    st = log.stored
    engine, stage = st["engine"], st["stage"]
    dur = st["end"] - st["start"]
    problems: list[str] = []

    def scope(e: int) -> str:
        sel = engine == e
        return f"{log.stages[int(stage[sel][0])]}.{log.engines[e]}"

    def bad_records(name: str, sel: npt.NDArray[np.bool_], want: I64, what: str) -> None:
        wrong = np.flatnonzero(sel & (dur != want))
        if len(wrong):
            shown = ", ".join(
                f"record {int(i)} (op {int(st['op'][i])}) lasts {int(dur[i])} ps"
                for i in wrong[:SHOWN]
            )
            problems.append(
                f"engine {name}: {len(wrong)} record(s) not {what}: {shown}, expected "
                f"{int(np.broadcast_to(want, dur.shape)[wrong[0]])} ps"
            )

    def busy(name: str, want_ps: int, what: str) -> None:
        key = f"{name}.busy_ns"
        if key in metrics and round(float(metrics[key]) * 1000) != want_ps:
            problems.append(
                f"engine {name}: busy_ns {float(metrics[key]):.6g} but {what} = "
                f"{want_ps / 1000:.6g} ns"
            )

    pe_cfg = topo.pe
    setup_ps = round(topo.dma.setup_ns * 1000)
    burst_ps = math.ceil(
        Fraction(topo.hbm.burst_bytes * 1000 * topo.hbm.num_pcs)
        / _gbs(topo.hbm.hbm_to_router_bw_gbs)
    )
    for e, ename in enumerate(log.engines):
        sel = engine == e
        if not sel.any():
            continue
        name = scope(e)
        count = column_total(log, None, sel)
        key = f"{name}.records"
        if key in metrics and int(metrics[key]) != count:
            problems.append(f"engine {name}: records {int(metrics[key])} but the log has {count}")
        if ename == "fetch":
            service = _ps(st["nbytes"], _gbs(topo.fetch.fetch_gbs))
            bad_records(name, sel, service, "bytes / fetch_gbs")
            busy(name, column_total(log, service, sel), "the sum of its records' bytes / fetch_gbs")
            if f"{log.stages[int(stage[sel][0])]}.busy_ns" in metrics:
                busy(
                    log.stages[int(stage[sel][0])], column_total(log, service, sel), "fetch service"
                )
        elif ename == "pe" and pe_cfg.model != "systolic":
            t_ps = round(pe_cfg.stage_ns * 1000)
            bad_records(
                name, sel, np.full_like(dur, pe_cfg.pipeline_stages * t_ps), "D x T (retire)"
            )
            macs = pe_cfg.tile_m * pe_cfg.tile_k * pe_cfg.tile_n
            off = np.flatnonzero(sel & (st["macs"] != macs))
            if len(off):
                problems.append(
                    f"engine {name}: record {int(off[0])} issues {int(st['macs'][off[0]])} MACs, "
                    f"a tile-op is {macs}"
                )
            busy(name, count * t_ps, f"records {count} x T {pe_cfg.stage_ns} ns")
            busy(log.stages[int(stage[sel][0])], count * t_ps, f"records {count} x T")
        elif ename.startswith("dma"):
            busy(name, count * setup_ps, f"records {count} x setup {topo.dma.setup_ns} ns")
            floor = setup_ps + round(topo.hbm.latency_ns * 1000) + burst_ps
            short = np.flatnonzero(sel & (dur < floor))
            if len(short):
                i = int(short[0])
                problems.append(
                    f"engine {name}: record {i} (op {int(st['op'][i])}) lasts {int(dur[i])} ps, "
                    f"under setup + HBM latency + one burst = {floor} ps"
                )
    return problems


# -- fabric -----------------------------------------------------------------------------------


def link_constants(topo: Topology, net: Any) -> tuple[list[Fraction], I64, I64, str]:
    """Per link of ``net``: bandwidth (GB/s), latency and setup (ps), and where they come from."""
    nlinks = len(net.links)
    if not topo.chips.dimensions and topo.collectives == CollectivesConfig():
        bw = _gbs(topo.chips.link_bw_gbs)
        lat = round(topo.chips.link_latency_ns * 1000)
        return (
            [bw] * nlinks,
            np.full(nlinks, lat, dtype=np.int64),
            np.zeros(nlinks, dtype=np.int64),
            "chips.link_bw_gbs / chips.link_latency_ns",
        )
    setup = net.link_setup_ps or (0,) * nlinks
    return (
        list(net.link_bws),
        np.asarray(net.link_latencies_ps, dtype=np.int64),
        np.asarray(setup, dtype=np.int64),
        "the run's network (dimensions or a protocol)",
    )


def fabric_records(log: OpLog, topo: Topology, net: Any, *, what: str = "") -> list[str]:
    """Every link record of a fabric op log against the cut-through rules (module docstring).

    A symmetric log (``SymmetricLog``) is checked on its stored records (one chip's, the rest
    are the same records turned)."""
    st = (
        log.stored
        if log.compressed
        else {c: log.column(c) for c in ("stage", "engine", "op", "start", "end", "nbytes")}
    )
    if "send" not in log.stages:
        return []
    send, forward = log.stages.index("send"), log.stages.index("forward")
    stage = st["stage"]
    # the log's engine codes -> the network's link indices (a joint log puts others first)
    index = {n: k for k, n in enumerate(net.names)}
    to_link = np.asarray([index.get(n, -1) for n in log.engines], dtype=np.int64)
    link_all = to_link[st["engine"].astype(np.int64)]
    on_link = ((stage == send) | (stage == forward)) & (link_all >= 0)
    if not on_link.any():
        return []
    names = net.names
    link = link_all[on_link]
    op = st["op"][on_link]
    start, end, nbytes = st["start"][on_link], st["end"][on_link], st["nbytes"][on_link]
    fwd = stage[on_link] == forward
    bws, lats, setups, source = link_constants(topo, net)
    # bytes / bw per record, grouped by bandwidth (few distinct values)
    occupy = np.zeros(len(link), dtype=np.int64)
    bw_code: dict[Fraction, list[int]] = {}
    for k, bw in enumerate(bws):
        bw_code.setdefault(bw, []).append(k)
    for bw, ks in bw_code.items():
        sel = np.isin(link, ks)
        occupy[sel] = _ps(nbytes[sel], bw)
    occupy += setups[link]
    problems: list[str] = []
    head = f"{what}: " if what else ""

    def name(i: int) -> str:
        return str(names[int(link[i])])

    def report(kind: str, idx: npt.NDArray[np.intp], got: I64, want: I64) -> None:
        if not len(idx):
            return
        shown = "; ".join(
            f"{name(int(i))} (op {int(op[i])}, hop {'> 0' if fwd[i] else '0'}"
            + (f", after {name(int(i) - 1)}" if fwd[i] else "")
            + f") {kind} {int(got[i])} ps, expected {int(want[i])} ps"
            for i in idx[:SHOWN]
        )
        problems.append(f"{head}{len(idx)} link record(s) break the hop rule ({source}): {shown}")

    short = np.flatnonzero(end - start < occupy)
    report("lasts", short, end - start, occupy)
    # the link's previous record (by start, then log order) ends when the link frees
    order = np.lexsort((np.arange(len(link)), start, link))
    free = np.zeros(len(link), dtype=np.int64)
    same_link = link[order][1:] == link[order][:-1]
    free[order[1:]] = np.where(same_link, end[order][:-1], 0)
    busy = np.flatnonzero(start < free)
    if len(busy):
        shown = "; ".join(
            f"{name(int(i))} (op {int(op[i])}, hop {'> 0' if fwd[i] else '0'}) starts at "
            f"{int(start[i])} ps, the link is busy until {int(free[i])} ps"
            for i in busy[:SHOWN]
        )
        problems.append(
            f"{head}{len(busy)} link record(s) start while their link is busy ({source}): {shown}"
        )
        return problems  # the hop rule below reads the link's previous record as its server
    # hop h > 0: the record before it in the log is hop h-1 of the same op
    i = np.flatnonzero(fwd)
    i = i[i > 0]
    prev = i - 1
    same = op[prev] == op[i]
    if not bool(same.all()):
        problems.append(f"{head}a forward hop does not follow its transfer's previous hop")
        i, prev = i[same], prev[same]
    lat_prev = lats[link[prev]]
    ready = start[prev] + lat_prev
    want_start = np.maximum(ready, free[i])
    report("starts at", i[start[i] != want_start], start, _at(i, want_start, len(link)))
    want_end = np.maximum(start[i] + occupy[i], end[prev] + lat_prev)
    report("ends at", i[end[i] != want_end], end, _at(i, want_end, len(link)))
    return problems


def _at(idx: npt.NDArray[np.intp], values: I64, n: int) -> I64:
    out = np.zeros(n, dtype=np.int64)
    out[idx] = values
    return out
