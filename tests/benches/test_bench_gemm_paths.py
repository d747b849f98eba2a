"""Every code path of the GEMM program has a gated config, and the gate sees what matters."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benches import gemm as bench
from pytest_npubench.compare import compare_metric
from sim.gemm import program as gemm
from sim.gemm.layout import MODES
from sim.gemm.metrics import gemm_metrics
from sim.gemm.program import GemmProgram
from sim.gemm.run import run_gemm
from sim.gemm.shape import GemmShape, TilePlan
from sim.topology import Topology

ROOT = Path(__file__).resolve().parents[2]


def gated_params() -> list[dict[str, Any]]:
    return [dict(c.params) for c in bench.BENCH.configs if not c.regen_only]


def test_every_mode_of_the_program_has_a_gated_config() -> None:
    """Each mode a GemmProgram can take (MODES) is reached by at least one gated config,
    as are under-tile shapes and shapes that are not tile multiples."""
    reached: set[str] = set()
    under = ragged = False
    for p in gated_params():
        shape = GemmShape(*p["shape"])
        reached.add(GemmProgram(shape, p["variant"], bench.TOPOLOGY).mode)
        plan = TilePlan.of(shape, bench.TOPOLOGY)
        under |= plan.under_tile
        ragged |= (shape.M % plan.m, shape.K % plan.k, shape.N % plan.n) != (0, 0, 0)
    missing = sorted(set(MODES) - reached)
    assert not missing, f"modes with no gated config: {missing}; add a cheap shape to GATED"
    assert under and ragged


def test_counters_are_gated_exactly_and_times_at_the_latency_tolerance() -> None:
    """Tile-ops, HBM bytes and record counts gate at 0; busy and in-flight times gate."""
    spec = bench.METRICS
    for name in ("tile_ops", "hbm_read_bytes", "hbm_write_bytes", "dma_in.dma0.records"):
        assert spec[name].gate and spec[name].tolerance == 0.0
    for name in ("latency_ns", "dma_in.dma1.busy_ns", "hbm.busy_ns", "gemm.pe.busy_ns"):
        assert spec[name].gate and spec[name].tolerance == bench.LATENCY_TOLERANCE


def _regressions(topo: Topology, base: Topology, params: dict[str, Any]) -> list[str]:
    shape = GemmShape(*params["shape"])
    now = gemm_metrics(run_gemm(shape, params["variant"], topo))
    before = gemm_metrics(run_gemm(shape, params["variant"], base))
    return [
        name
        for name, metric in bench.METRICS.items()
        if metric.gate
        and name in now  # the bench's own counts and energies are not gemm_metrics'
        and compare_metric(metric, before[name], now[name]).verdict != "pass"
    ]


SLOWDOWNS = {  # one engine 0.5 % slower, as a temporary topology
    "dma setup": ("dma__setup_ns", lambda t: t.dma.setup_ns * 1.005),
    "fetch": ("fetch__fetch_gbs", lambda t: t.fetch.fetch_gbs / 1.005),
    "pe stage": ("pe__stage_ns", lambda t: t.pe.stage_ns * 1.005),
    "hbm bandwidth": ("hbm__hbm_to_router_bw_gbs", lambda t: t.hbm.hbm_to_router_bw_gbs / 1.005),
    "hbm latency": ("hbm__latency_ns", lambda t: t.hbm.latency_ns * 1.005),
}
#: A PE stage must be whole clock cycles (ADR 0009): 16.08 ns is 402 cycles at 25 GHz.
ALSO = {"pe stage": {"clock_ghz": 25.0}}


@pytest.mark.parametrize("engine", SLOWDOWNS)
def test_a_half_percent_slower_engine_fails_a_gated_metric(
    topo: Topology, make_topo: Callable[..., Topology], engine: str
) -> None:
    """Compared through pytest_npubench.compare, the YAML topology vs a copy with one engine
    0.5 % slower moves at least one gated metric beyond its tolerance in a gated config."""
    key, value = SLOWDOWNS[engine]
    slower = make_topo(**{key: round(value(topo), 3)}, **ALSO.get(engine, {}))
    for params in gated_params():
        if failed := _regressions(slower, topo, params):
            assert all(bench.METRICS[n].gate for n in failed)
            return
    pytest.fail(f"a 0.5 % slower {engine} moved no gated metric in any gated config")


def test_planted_oversized_panel_loads_fail_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """resident panel-mode A loads 3x larger: the gated panel config fails against the
    committed baseline on the exact HBM byte counter (or its data check fails)."""
    real = GemmProgram.a_panel_bytes
    monkeypatch.setattr(gemm.GemmProgram, "a_panel_bytes", lambda self, r: 3 * real(self, r))
    committed = json.loads((ROOT / "baselines" / "gemm.json").read_text())["configs"]
    (params,) = [p for p in gated_params() if bench.MODE_SHAPES.get(tuple(p["shape"]))]
    result = bench.run(params)
    baseline = committed[bench.config_id(params)]["metrics"]
    hbm = compare_metric(
        bench.METRICS["hbm_read_bytes"],
        baseline["hbm_read_bytes"],
        result.metrics["hbm_read_bytes"],
    )
    assert hbm.verdict == "changed"  # an exact counter that moves is changed, never improved
    assert not result.ok or (hbm.change is not None and hbm.change > 0)
