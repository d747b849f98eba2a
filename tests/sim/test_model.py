"""Analytic models read every constant from the topology, and bound the simulator."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.gemm.metrics import gemm_metrics
from sim.gemm.model import gemm_model, roofline_tflops
from sim.gemm.run import run_gemm
from sim.gemm.shape import VARIANTS, GemmShape, TilePlan
from sim.topology import Topology


def test_compute_bound_is_tile_ops_times_stage(topo: Topology) -> None:
    """The PE bound is N tile-ops x T, with T from the topology."""
    shape = GemmShape(100, 300, 200)
    model = gemm_model(shape, "load_ref", topo)
    assert model.compute_bound_ps == TilePlan.of(shape, topo).tile_ops * topo.pe.stage_ps


def test_models_follow_the_topology_file(
    topo: Topology, make_topo: Callable[..., Topology]
) -> None:
    """Doubling T in the YAML doubles the compute bound; halving HBM bandwidth doubles
    the HBM bound: no constant is baked into the model."""
    shape = GemmShape(256, 256, 256)
    base = gemm_model(shape, "double_buffer", topo)
    slow_pe = gemm_model(shape, "double_buffer", make_topo(pe__stage_ns=topo.pe.stage_ns * 2))
    assert slow_pe.compute_bound_ps == 2 * base.compute_bound_ps
    half_bw = topo.hbm.hbm_to_router_bw_gbs / 2
    slow_hbm = gemm_model(shape, "double_buffer", make_topo(hbm__hbm_to_router_bw_gbs=half_bw))
    assert slow_hbm.hbm_bound_ps == 2 * base.hbm_bound_ps


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", ["512x512x512", "128x1024x128", "1024x64x256"])
def test_simulator_respects_the_roofline(topo: Topology, shape: str, variant: str) -> None:
    """No simulated latency beats max(compute bound, HBM bound)."""
    run = run_gemm(shape, variant, topo)
    assert run.latency_ps >= gemm_model(GemmShape.parse(shape), variant, topo).lower_bound_ps


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    shape=st.builds(GemmShape, st.integers(1, 700), st.integers(1, 700), st.integers(1, 700)),
    variant=st.sampled_from(VARIANTS),
)
def test_the_lower_bound_is_never_beaten(topo: Topology, shape: GemmShape, variant: str) -> None:
    """bound_ns (critical path, PE issue rate, HBM bandwidth) <= simulated latency, always."""
    run = run_gemm(shape, variant, topo)
    model = gemm_model(shape, variant, topo)
    assert model.lower_bound_ps <= run.latency_ps
    assert model.lower_bound_ps <= model.ideal_ps


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", ["100x300x200", "1024x64x256", "128x1024x128", "700x500x300"])
def test_the_model_explains_the_simulator(topo: Topology, shape: str, variant: str) -> None:
    """The steady-state pipeline model is within 5 % of the simulator (ADR 0006)."""
    run = run_gemm(shape, variant, topo)
    model = gemm_model(GemmShape.parse(shape), variant, topo)
    assert run.latency_ps / model.ideal_ps == pytest.approx(1.0, abs=0.05)


def test_panel_mode_is_modelled(make_topo: Callable[..., Topology]) -> None:
    """With row and column panels (small SRAM) the model still tracks the simulator."""
    small = make_topo(sram__capacity_kib=192)
    shape = GemmShape(300, 640, 200)
    run = run_gemm(shape, "resident", small)
    assert run.program.mode == "panel"
    model = gemm_model(shape, "resident", small)
    assert run.latency_ps / model.ideal_ps == pytest.approx(1.0, abs=0.05)


def test_prefetch_reaches_its_roofline_and_resident_the_pe(topo: Topology) -> None:
    """Targets on npu-1h: prefetch >= 90 % of its roofline at 1024^3; resident mac_util
    >= 0.8 at 2048^3 (4096^3 is in baselines/gemm.json)."""
    pre = gemm_metrics(run_gemm("1024x1024x1024", "prefetch", topo))
    assert pre["roofline_frac"] >= 0.9
    res = gemm_metrics(run_gemm("2048x2048x2048", "resident", topo))
    assert res["mac_util"] >= 0.8


def test_load_ref_has_no_overlap_so_the_model_is_exact(topo: Topology) -> None:
    """load_ref serialises load and fetch per tile-op: the ideal pipeline is its timing."""
    shape = GemmShape(512, 512, 512)
    run = run_gemm(shape, "load_ref", topo)
    assert run.latency_ps == gemm_model(shape, "load_ref", topo).ideal_ps


def test_roofline_is_the_lower_of_the_two_roofs(topo: Topology) -> None:
    """Low intensity is HBM-bound (bw x intensity), high intensity compute-bound."""
    peak = 2 * topo.pe.peak_macs_per_ns / 1000
    assert roofline_tflops(topo, 1e9) == peak
    assert roofline_tflops(topo, 1.0) == pytest.approx(topo.hbm.hbm_to_router_bw_gbs / 1000)
