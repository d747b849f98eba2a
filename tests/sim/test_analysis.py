"""Metrics from op logs: interval unions, windows, occupancy, utilisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.gemm.layout import STAGES
from sim.gemm.metrics import busy_ps, gemm_metrics
from sim.gemm.run import run_gemm
from sim.gemm.shape import TilePlan
from sim.topology import Topology


def test_busy_time_merges_overlaps_and_keeps_gaps() -> None:
    """[0,10) + [5,15) + [20,30) + [22,25) cover 25 ps."""
    start = np.array([20, 0, 5, 22], dtype=np.int64)
    end = np.array([30, 10, 15, 25], dtype=np.int64)
    assert busy_ps(start, end) == 25
    assert busy_ps(start[:0], end[:0]) == 0


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)), min_size=1, max_size=30))
def test_busy_time_equals_a_brute_force_count(intervals: list[tuple[int, int]]) -> None:
    """The vectorised union equals counting covered picoseconds one by one."""
    start = np.array([s for s, _ in intervals], dtype=np.int64)
    end = np.array([s + d for s, d in intervals], dtype=np.int64)
    covered = set()
    for s, e in zip(start.tolist(), end.tolist(), strict=True):
        covered.update(range(s, e))
    assert busy_ps(start, end) == len(covered)


@pytest.mark.parametrize("variant", ["load_ref", "double_buffer", "prefetch", "resident"])
@pytest.mark.parametrize("shape", ["16x32x16", "256x256x256", "100x300x200"])
def test_gemm_metrics_are_consistent(topo: Topology, shape: str, variant: str) -> None:
    """Occupancies lie in [0, 1], stage busy <= window, per-engine records sum to the
    stage's, and MAC utilisation never exceeds 1."""
    run = run_gemm(shape, variant, topo)
    m = gemm_metrics(run)
    assert m["latency_ns"] == m["composite_window_ns"] == run.latency_ps / 1000
    assert 0 < m["mac_util"] <= m["pe_util"] <= 1 and 0 < m["useful_eff"] <= 1
    for stage in STAGES:
        assert 0 < m[f"{stage}.occupancy"] <= 1
        assert m[f"{stage}.busy_ns"] <= m[f"{stage}.inflight_ns"] <= m["composite_window_ns"]
        per_engine = [
            v
            for k, v in m.items()
            if k.startswith(f"{stage}.") and k.count(".") == 2 and k.endswith(".records")
        ]
        assert sum(per_engine) == m[f"{stage}.records"]
    assert m["gemm.records"] == m["tile_ops"]


def test_useful_efficiency_is_real_over_padded_macs(topo: Topology) -> None:
    """An under-tile shape computes a full tile: efficiency = (M*K*N) / (m*k*n)."""
    run = run_gemm("16x32x16", "load_ref", topo)
    pe = topo.pe
    assert gemm_metrics(run)["useful_eff"] == (16 * 32 * 16) / (pe.tile_m * pe.tile_k * pe.tile_n)


def test_pe_util_uses_the_pe_window(topo: Topology) -> None:
    """pe_util = issued MACs / (peak MAC/ns x PE window), computed from the log by hand."""
    run = run_gemm("64x128x64", "double_buffer", topo)
    log = run.log
    gemm = log.mask(stage="gemm")
    window_ns = (log.end[gemm].max() - log.start[gemm].min()) / 1000
    plan = TilePlan.of(run.program.shape, topo)
    expect = plan.padded_macs / (topo.pe.peak_macs_per_ns * window_ns)
    assert gemm_metrics(run)["pe_util"] == pytest.approx(expect, rel=1e-12)


def test_mac_util_is_useful_macs_over_peak_times_latency(topo: Topology) -> None:
    """mac_util = real MACs / (peak x latency): an under-tile GEMM is far below its pe_util."""
    run = run_gemm("16x32x16", "resident", topo)
    m = gemm_metrics(run)
    expect = 16 * 32 * 16 / (topo.pe.peak_macs_per_ns * run.latency_ps / 1000)
    assert m["mac_util"] == pytest.approx(expect, rel=1e-12)
    assert m["mac_util"] < m["pe_util"] / 10


def test_busy_is_time_held_and_inflight_is_the_interval_union(topo: Topology) -> None:
    """A DMA engine is busy for its setup per transfer; in flight from start to landing."""
    run = run_gemm("256x256x256", "double_buffer", topo)
    log, m = run.log, gemm_metrics(run)
    dma0 = log.mask(engine="dma0")
    assert m["dma_in.dma0.busy_ns"] * 1000 == dma0.sum() * topo.dma.setup_ps
    assert m["dma_in.dma0.inflight_ns"] * 1000 == busy_ps(log.start[dma0], log.end[dma0])
    assert m["dma_in.dma0.busy_ns"] < m["dma_in.dma0.inflight_ns"]
    pe = log.mask(engine="pe")
    assert m["gemm.pe.busy_ns"] * 1000 == pe.sum() * topo.pe.stage_ps


@pytest.mark.parametrize(
    ("shape", "variant"),
    [
        ("1024x1024x1024", "double_buffer"),
        ("1024x1024x1024", "resident"),
        ("2048x512x300", "resident"),
        ("128x65536x128", "prefetch"),
        ("100x8000x6400", "resident"),
        ("300x5000x100", "load_ref"),
    ],
)
def test_metrics_of_the_compressed_log_equal_those_of_the_expanded_log(
    topo: Topology, shape: str, variant: str
) -> None:
    """The closed forms over periods (sums x copies, the steady share of a union) are exact:
    every metric equals the one computed from the log written out record by record."""
    from sim.gemm.metrics import Reduced
    from sim.gemm.run import GemmRun

    run = run_gemm(shape, variant, topo)
    assert run.log.compressed and len(Reduced(run.log).drops) > 0  # copies really left out
    full = GemmRun(run.program, run.log.expanded())
    assert not full.log.compressed and len(full.log) == len(run.log)
    assert gemm_metrics(run) == gemm_metrics(full)


def test_a_record_that_reaches_into_a_period_keeps_the_period_whole(topo: Topology) -> None:
    """A long record before a period overlaps copies that would be left out: the period is
    then kept whole, and the union still equals the expanded log's."""
    from sim.gemm.metrics import Reduced
    from sim.oplog import OpLog, Repeat

    # record 0 = [0, 1000); the period [10, 12) repeats 50 times every 20 ps
    start = np.array([0, 10, 30], np.int64)
    end = np.array([1000, 12, 31], np.int64)
    cols = {"start": start, "end": end, "op": np.arange(3), "tile": np.full(3, -1)}
    log = OpLog.from_columns(("e",), ("s",), cols, repeats=[Repeat(1, 2, 50, 20, 2, 0)])
    red = Reduced(log)
    assert not red.drops  # not isolated: kept whole
    every = np.ones(len(red.start), dtype=bool)
    flat = log.expanded()
    # [0, 1000) covers copies 0..49; copy 50 is [1010, 1012)
    assert red.union(red.start, red.end, every) == busy_ps(flat.start, flat.end) == 1000 + 2
