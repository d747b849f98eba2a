"""A GEMM failure's explanation says how busy the busiest HBM pseudo-channel was against the
mean (issue 26): the baseline comparison's explain lines and a data check's message."""

from __future__ import annotations

import pytest

import benches.gemm as gemm
from sim import GemmShape, run_gemm
from sim.gemm.datacheck import DataHazard
from sim.gemm.metrics import hbm_channel_busy


def test_the_busiest_channel_is_a_metric_beside_the_mean() -> None:
    params = {"shape": (100, 300, 200), "variant": "prefetch", "pe": "tile"}
    got = gemm.run(params).metrics
    run = run_gemm(GemmShape(100, 300, 200), "prefetch", gemm.TOPOLOGY)
    channel, busy_ps, total_ps = hbm_channel_busy(run.program)
    pcs = gemm.TOPOLOGY.hbm.num_pcs
    assert 0 <= channel < pcs
    assert got["hbm.busiest_pc_ns"] == busy_ps / 1000
    # the channels' bursts add up to what hbm.busy_ns averages over them
    assert total_ps / pcs / 1000 == pytest.approx(got["hbm.busy_ns"], rel=1e-12)
    assert got["hbm.busiest_pc_ns"] >= got["hbm.busy_ns"]


def test_explain_says_how_busy_the_busiest_channel_was_against_the_mean() -> None:
    base = {"hbm.busy_ns": 1000.0, "hbm.busiest_pc_ns": 1000.0, "latency_ns": 5000.0}
    now = {"hbm.busy_ns": 1000.0, "hbm.busiest_pc_ns": 2500.0, "latency_ns": 6000.0}
    lines = gemm.explain(now, base)
    assert lines[0] == (
        "busiest HBM pseudo-channel 2.5 us busy, 2.50x the mean of 1 us (baseline 1.00x)"
    ), lines


def test_a_data_check_failure_says_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def hazard(run: object) -> None:
        raise DataHazard("RAW hazard: op 7 reads sram[0x0, 0x1000) (B buffer 1) early")

    monkeypatch.setattr(gemm, "check_gemm_data", hazard)
    res = gemm.run({"shape": (128, 128, 128), "variant": "double_buffer", "pe": "tile"})
    assert not res.ok
    assert "(B buffer 1) early; busiest HBM pseudo-channel" in res.message, res.message
    assert "x the mean" in res.message
