"""GEMM programs: plan, exactness against the reference, functional results, bytes, errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.core import program_ops, simulate, simulate_reference
from sim.kernels.gemm import (
    VARIANTS,
    GemmProgram,
    GemmRun,
    GemmShape,
    ShapeError,
    SramCapacityError,
    TilePlan,
    check_coverage,
    functional_check,
    run_gemm,
)
from sim.model import gemm_model
from sim.topology import Topology

SMALL_SHAPES = [
    "16x32x16",
    "32x64x32",
    "24x48x40",
    "64x128x64",
    "100x300x200",
    "1x64x96",
    "128x64x256",
    "300x200x96",
]


def reference(prog: GemmProgram) -> GemmRun:
    log = simulate_reference(program_ops(prog), prog.engines, prog.stages, prog.channels)
    return GemmRun(prog, log)


def test_plan_pads_partial_tiles(topo: Topology) -> None:
    """Tile counts round up; padded MACs exceed real MACs exactly by the padding."""
    plan = TilePlan.of(GemmShape(100, 300, 200), topo)
    m, k, n = topo.pe.tile_m, topo.pe.tile_k, topo.pe.tile_n
    assert (plan.Mt, plan.Kt, plan.Nt) == (-(-100 // m), -(-300 // k), -(-200 // n))
    assert plan.padded_macs == plan.Mt * m * plan.Kt * k * plan.Nt * n
    assert TilePlan.of(GemmShape(16, 32, 16), topo).under_tile
    assert not TilePlan.of(GemmShape(m, k, n), topo).under_tile


@pytest.mark.parametrize("text", ["512x512", "0x4x4", "ax2x3", "4x-1x4"])
def test_bad_shapes_are_rejected(text: str) -> None:
    """Impossible shapes are one clear error, naming the bad value."""
    with pytest.raises(ShapeError, match=r"shape|dimension"):
        GemmShape.parse(text)


def test_unknown_variant_and_too_few_engines(
    topo: Topology, make_topo: Callable[..., Topology]
) -> None:
    """An unknown variant lists the known ones; a 2-engine topology is refused by key."""
    with pytest.raises(ShapeError, match="choose one of load_ref, double_buffer, resident"):
        GemmProgram(GemmShape(32, 64, 32), "tiled", topo)
    with pytest.raises(ShapeError, match=r"'dma\.engines' = 2"):
        GemmProgram(GemmShape(32, 64, 32), "load_ref", make_topo(dma__engines=2))


def test_sram_overflow_is_an_error_not_a_silent_overflow(
    make_topo: Callable[..., Topology],
) -> None:
    """Buffers larger than SRAM raise with the need, the capacity and the key to change."""
    tiny = make_topo(sram__capacity_kib=16)
    with pytest.raises(SramCapacityError, match=r"needs \d+ bytes .* sram.capacity_kib"):
        GemmProgram(GemmShape(64, 64, 64), "double_buffer", tiny)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SMALL_SHAPES)
def test_fast_path_equals_reference(topo: Topology, shape: str, variant: str) -> None:
    """The fast simulator's op log is identical to the event-driven reference's."""
    prog = GemmProgram(GemmShape.parse(shape), variant, topo)
    fast, ref = simulate(prog), reference(prog).log
    assert fast.equals(ref), fast.first_difference(ref)


@pytest.mark.parametrize("shape", ["128x512x128", "256x256x256", "300x200x96", "64x1024x64"])
def test_panel_mode_equals_reference(make_topo: Callable[..., Topology], shape: str) -> None:
    """With A too big to stage whole, `resident` keeps row panels; still exact."""
    small = make_topo(sram__capacity_kib=192)
    prog = GemmProgram(GemmShape.parse(shape), "resident", small)
    assert prog.mode == "panel"
    fast, ref = simulate(prog), reference(prog).log
    assert fast.equals(ref), fast.first_difference(ref)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", ["256x256x256", "1024x64x256", "96x640x320"])
def test_extrapolation_is_exact(topo: Topology, shape: str, variant: str) -> None:
    """Filling repeated periods gives the same log as timing every block, and it did fill."""
    prog = GemmProgram(GemmShape.parse(shape), variant, topo)
    fast, slow = simulate(prog), simulate(prog, extrapolate=False)
    assert fast.meta["extrapolated_blocks"] > 0
    assert fast.equals(slow), fast.first_difference(slow)


def test_large_panel_run_extrapolates_exactly(topo: Topology) -> None:
    """1024^3 resident (row panels on npu-1h) matches block-by-block timing."""
    fast = run_gemm("1024x1024x1024", "resident", topo)
    slow = run_gemm("1024x1024x1024", "resident", topo, extrapolate=False)
    assert fast.program.mode == "panel"
    assert fast.log.equals(slow.log), fast.log.first_difference(slow.log)


shapes = st.builds(GemmShape, st.integers(1, 600), st.integers(1, 600), st.integers(1, 600))


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(shape=shapes)
def test_properties_of_random_shapes(topo: Topology, shape: GemmShape) -> None:
    """For random shapes, every variant: latency >= roofline bound, exact result,
    every tile computed once, and a second run gives the identical log."""
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        model = gemm_model(shape, variant, topo)
        assert run.latency_ps >= model.lower_bound_ps
        check_coverage(run)
        wrong, _total = functional_check(run)
        assert wrong == 0
        assert run.log.equals(run_gemm(shape, variant, topo).log)


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_tile_op_matches_the_model_and_hand_arithmetic(topo: Topology, variant: str) -> None:
    """With nothing to contend with, latency = load + fetch + pipeline + store, exactly."""
    pe, hbm = topo.pe, topo.hbm
    shape = GemmShape(pe.tile_m, pe.tile_k, pe.tile_n)
    run = run_gemm(shape, variant, topo)
    tile_in = (pe.tile_m * pe.tile_k + pe.tile_k * pe.tile_n) * topo.bpe
    tile_out = pe.tile_m * pe.tile_n * topo.bpe

    def per_channel(nbytes: int) -> int:  # bursts on the busiest channel
        bursts = -(-nbytes // hbm.burst_bytes)
        return -(-bursts // hbm.num_pcs)

    burst_ns = hbm.burst_bytes / hbm.pc_bw_gbs
    expect_ns = (
        topo.dma.setup_ns
        + per_channel(tile_in) * burst_ns
        + hbm.latency_ns  # A and B in
        + tile_in / topo.fetch.fetch_gbs  # fetch
        + pe.pipeline_stages * pe.stage_ns  # issue to retire
        + topo.dma.setup_ns
        + per_channel(tile_out) * burst_ns
        + hbm.latency_ns  # C out
    )
    assert run.latency_ps == round(expect_ns * 1000)
    assert run.latency_ps == gemm_model(shape, variant, topo).ideal_ps


def test_compute_bound_resident_matches_the_model_exactly(topo: Topology) -> None:
    """Operands staged whole and K deep enough to hide write-back: PE-bound, model exact."""
    shape = GemmShape(64, 1024, 64)
    run = run_gemm(shape, "resident", topo)
    model = gemm_model(shape, "resident", topo)
    assert run.program.mode == "whole"
    assert run.latency_ps == model.ideal_ps
    gemm = run.log.stage == run.log.stages.index("gemm")
    issues = np.sort(run.log.start[gemm])
    assert set(np.diff(issues).tolist()) == {topo.pe.stage_ps}  # back to back, every T


@pytest.mark.parametrize("shape", ["32x64x32", "100x300x200", "512x512x512", "1024x64x256"])
def test_resident_moves_least_and_load_ref_most(topo: Topology, shape: str) -> None:
    """HBM bytes: resident <= double_buffer <= load_ref, and each equals the model's count."""
    moved = {}
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        dma = run.log.mask(stage="dma_in") | run.log.mask(stage="dma_out")
        moved[variant] = int(run.log.nbytes[dma].sum())
        assert moved[variant] == gemm_model(GemmShape.parse(shape), variant, topo).hbm_bytes
    assert moved["resident"] <= moved["double_buffer"] <= moved["load_ref"]


def test_double_buffer_overlaps_and_beats_load_ref(topo: Topology) -> None:
    """Two buffers overlap loading with computing: strictly faster on a multi-tile GEMM."""
    ref = run_gemm("256x256x256", "load_ref", topo).latency_ps
    dbl = run_gemm("256x256x256", "double_buffer", topo).latency_ps
    assert dbl < ref


def test_coverage_and_functional_checks_catch_a_broken_plan(topo: Topology) -> None:
    """Dropping or duplicating a tile-op is caught by coverage and by the numeric check."""
    run = run_gemm("64x128x64", "double_buffer", topo)
    log = run.log
    gemm = np.flatnonzero(log.stage == log.stages.index("gemm"))
    broken_tile = log.tile.copy()
    broken_tile[gemm[1]] = broken_tile[gemm[0]]  # tile 0 twice, tile 1 never
    broken = GemmRun(run.program, replace(log, tile=broken_tile))
    with pytest.raises(AssertionError, match="missing or computed twice"):
        check_coverage(broken)
    wrong, total = functional_check(broken)
    assert 0 < wrong <= total
