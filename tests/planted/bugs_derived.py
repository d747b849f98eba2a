"""Planted bugs of issue 26's classes 3 (a derived metric from the wrong counter), 4 (a
constant-size error on a big config) and 6 (an engine bug the model moves with), each unlike
the issue's own examples (mac_util from issued MACs; the fetch engine counting its first
record twice; the last hop's latency charged twice).

Every bug also exists as ``<bug>+before-26``: the same bug with the checks this issue added
(``benches._invariants``) switched off, which is the gate as it was before them, so a test can
show the bug passes (or fails without naming its cause) there and is named here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from bugs_registry import Bug


def _wrap_metrics(module: str, name: str, change: Callable[[dict[str, float], Any], None]) -> None:
    """Patch the metrics function ``module.name`` (and ``sim``'s re-export) to ``change`` its
    output dict in place (``change(out, run)``)."""
    import importlib

    import sim

    mod = importlib.import_module(module)
    original = getattr(mod, name)

    def patched(run: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        out = dict(original(run, *args, **kwargs))
        change(out, run)
        return out

    setattr(mod, name, patched)
    setattr(sim, name, patched)


# -- class 3: a derived metric from the wrong counter ----------------------------------------


def _pe_util_over_composite_window() -> None:
    """gemm pe_util divides by the composite window (first start to last end) instead of the
    PE window (first issue to last retire): every kernel with DMA before its first issue
    reads as less busy."""

    def change(out: dict[str, float], run: Any) -> None:
        out["pe_util"] = out["pe_util"] * out["pe_window_ns"] / out["composite_window_ns"]

    _wrap_metrics("sim.gemm.metrics", "gemm_metrics", change)


def _busbw_from_busiest_link() -> None:
    """ccl busbw_gbs from the busiest link's bytes instead of algbw x nccl-tests' factor."""

    def change(out: dict[str, float], run: Any) -> None:
        if out["time_ns"]:
            out["busbw_gbs"] = out["link_bytes_max"] / out["time_ns"]

    _wrap_metrics("sim.collectives.metrics", "collective_metrics", change)


def _overlap_over_the_longer_part() -> None:
    """tp_layer overlap_eff divides the hidden time by the longer of compute and
    communication instead of the shorter (what could have been hidden)."""

    def change(out: dict[str, float], run: Any) -> None:
        comp, comm, lat = out["compute_ns"], out["comm_ns"], out["latency_ns"]
        out["overlap_eff"] = (comp + comm - lat) / max(comp, comm)

    _wrap_metrics("sim.tp.metrics", "layer_metrics", change)


# -- class 4: a constant-size error on a big config ------------------------------------------


def _pe_busy_one_record_extra() -> None:
    """gemm's PE busy time counts one tile-op's issue slot too many (records + 1) x T: on
    128x8192x160 that is 16 ns of 40 us, +0.04 % against the 0.1 % time tolerance."""

    def change(out: dict[str, float], run: Any) -> None:
        t_ns = run.program.T / 1000
        out["gemm.pe.busy_ns"] += t_ns
        out["gemm.busy_ns"] += t_ns

    _wrap_metrics("sim.gemm.metrics", "gemm_metrics", change)


def _hbm_busy_one_record_twice() -> None:
    """gemm's hbm.busy_ns counts the first write-back's bursts twice: 8 bursts of one
    pseudo-channel, 8 ns of 19 us on 128x8192x160, under the 0.1 % time tolerance."""

    def change(out: dict[str, float], run: Any) -> None:
        topo, prog = run.program.topo, run.program
        st = run.log.stored
        first = int(st["nbytes"][st["stage"] == run.log.stages.index("dma_out")][0])
        bursts = -(-first // topo.hbm.burst_bytes)
        out["hbm.busy_ns"] += bursts * prog.channels.burst_ps / topo.hbm.num_pcs / 1000

    _wrap_metrics("sim.gemm.metrics", "gemm_metrics", change)


# -- class 6: an engine bug the model (same engine, contention off) moves with ---------------


def _patch_dimensions(change: Callable[[Any], Any]) -> None:
    """Patch the network builder's per-link values (``sim.fabric.network.build_dimensions``):
    every network, for the simulation and the model alike, is built from them."""
    import sim.fabric.network as network

    original = network.build_dimensions

    def patched(dims: Any) -> Any:
        return change(original(dims))

    network.build_dimensions = patched  # type: ignore[assignment]


def _switch_uplink_latency_twice() -> None:
    """Every chip -> switch link charges its flight time twice (the switch's ingress latency
    added to the cable's): each transfer through the switch arrives one latency late."""

    def change(d: Any) -> Any:
        lats = tuple(
            lat * 2 if u < d.chips <= v else lat
            for lat, (u, v) in zip(d.link_latencies_ps, d.links, strict=True)
        )
        return dataclasses.replace(d, link_latencies_ps=lats)

    _patch_dimensions(change)


def _last_hop_latency_twice() -> None:
    """The last hop of every route through a switch (switch -> chip) charges its flight time
    twice: each transfer lands one latency late, and nothing of the link records moves (the
    hop starts when its data is at the switch, as before)."""

    def change(d: Any) -> Any:
        lats = tuple(
            lat * 2 if u >= d.chips > v else lat
            for lat, (u, v) in zip(d.link_latencies_ps, d.links, strict=True)
        )
        return dataclasses.replace(d, link_latencies_ps=lats)

    _patch_dimensions(change)


def _switch_downlink_half_bandwidth() -> None:
    """The switch -> chip links run at half the link bandwidth (a per-direction rate read as
    the sum of both directions, divided twice)."""

    def change(d: Any) -> Any:
        bws = tuple(
            bw / 2 if u >= d.chips > v else bw
            for bw, (u, v) in zip(d.link_bws, d.links, strict=True)
        )
        return dataclasses.replace(d, link_bws=bws)

    _patch_dimensions(change)


def _before_26() -> None:
    """The gate without this issue's checks (``benches._invariants`` returns no problem)."""
    import benches._invariants as inv

    inv.gemm_invariants = lambda *a, **k: []  # type: ignore[assignment]
    inv.ccl_invariants = lambda *a, **k: []  # type: ignore[assignment]
    inv.tp_invariants = lambda *a, **k: []  # type: ignore[assignment]


_BUGS: dict[str, Bug] = {
    "derived-pe-util-over-composite-window": _pe_util_over_composite_window,
    "derived-busbw-from-busiest-link": _busbw_from_busiest_link,
    "derived-overlap-over-the-longer-part": _overlap_over_the_longer_part,
    "records-pe-busy-one-record-extra": _pe_busy_one_record_extra,
    "records-hbm-busy-one-record-twice": _hbm_busy_one_record_twice,
    "engine-switch-uplink-latency-twice": _switch_uplink_latency_twice,
    "engine-switch-downlink-half-bandwidth": _switch_downlink_half_bandwidth,
    "engine-last-hop-latency-twice": _last_hop_latency_twice,
}


def _with_before_26(bug: Bug) -> Bug:
    def planted() -> None:
        bug()
        _before_26()

    return planted


BUGS: dict[str, Bug] = {
    **_BUGS,
    **{f"{name}+before-26": _with_before_26(bug) for name, bug in _BUGS.items()},
}
