"""GEMM programs: plan, exactness against the reference, functional results, bytes, errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.core import program_ops, simulate, simulate_reference
from sim.gemm.buffers import littles_depth
from sim.gemm.check import check_coverage, functional_check
from sim.gemm.layout import MODES
from sim.gemm.model import gemm_model
from sim.gemm.program import GemmProgram
from sim.gemm.run import GemmRun, run_gemm
from sim.gemm.shape import VARIANTS, GemmShape, ShapeError, SramCapacityError, TilePlan
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
    "32x8192x64",  # deep K: output tiles cut into chunks
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
    with pytest.raises(
        ShapeError, match="choose one of load_ref, double_buffer, prefetch, resident"
    ):
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


@pytest.mark.parametrize("shape", ["128x512x128", "256x256x256", "300x200x96", "100x640x200"])
def test_panel_mode_equals_reference(make_topo: Callable[..., Topology], shape: str) -> None:
    """With A too big to stage whole, `resident` keeps row panels; still exact."""
    small = make_topo(sram__capacity_kib=192)
    prog = GemmProgram(GemmShape.parse(shape), "resident", small)
    assert prog.mode == "panel"
    fast, ref = simulate(prog), reference(prog).log
    assert fast.equals(ref), fast.first_difference(ref)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    "shape",
    ["256x256x256", "1024x64x256", "96x640x640", "32x65536x32", "64x16384x64", "320x12288x320"],
)
def test_extrapolation_is_exact(topo: Topology, shape: str, variant: str) -> None:
    """Filling repeated periods gives the same log as timing every block, and it did fill."""
    prog = GemmProgram(GemmShape.parse(shape), variant, topo)
    if shape == "320x12288x320":  # whole output tiles (or panel rows) are waited for
        tiles = prog.Nt if prog.mode == "panel" else 1
        assert prog.outer_blocks == tiles * prog.chunks and prog.chunks > 5
    fast, slow = simulate(prog), simulate(prog, extrapolate=False)
    assert fast.meta["extrapolated_blocks"] > 0
    assert fast.equals(slow), fast.first_difference(slow)


@pytest.mark.parametrize("shape", ["1024x1024x1024", "1000x3000x700", "300x5000x100"])
def test_large_panel_run_extrapolates_exactly(topo: Topology, shape: str) -> None:
    """Resident in row panels on npu-1h matches block-by-block timing, whether the fast
    path jumps whole rows (outer_blocks) or only within rows."""
    fast = run_gemm(shape, "resident", topo)
    slow = run_gemm(shape, "resident", topo, extrapolate=False)
    assert fast.program.mode == "panel"
    assert fast.log.meta["extrapolated_blocks"] > 0
    assert fast.log.equals(slow.log), fast.log.first_difference(slow.log)


shapes = st.builds(GemmShape, st.integers(1, 400), st.integers(1, 400), st.integers(1, 400))


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(shape=shapes)
def test_properties_of_random_shapes(topo: Topology, shape: GemmShape) -> None:
    """For random shapes, every variant: latency >= lower bound, every tile computed once,
    a second run gives the identical log, and so does timing every block (no extrapolation)."""
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        model = gemm_model(shape, variant, topo)
        assert run.latency_ps >= model.lower_bound_ps
        check_coverage(run)
        assert run.log.equals(run_gemm(shape, variant, topo).log)
        assert run.log.equals(run_gemm(shape, variant, topo, extrapolate=False).log)


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
    """Operands staged whole and enough C buffers to hide write-back: PE-bound, model exact."""
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
    """HBM bytes: resident <= prefetch = double_buffer = load_ref, each the model's count."""
    moved = {}
    for variant in VARIANTS:
        run = run_gemm(shape, variant, topo)
        dma = run.log.mask(stage="dma_in") | run.log.mask(stage="dma_out")
        moved[variant] = int(run.log.nbytes[dma].sum())
        assert moved[variant] == gemm_model(GemmShape.parse(shape), variant, topo).hbm_bytes
    assert moved["resident"] <= moved["prefetch"] == moved["double_buffer"] == moved["load_ref"]


def test_deeper_buffers_are_faster(topo: Topology) -> None:
    """Two buffers overlap loading with computing, a Little's-law depth more so."""
    ref = run_gemm("256x256x256", "load_ref", topo).latency_ps
    dbl = run_gemm("256x256x256", "double_buffer", topo).latency_ps
    pre = run_gemm("256x256x256", "prefetch", topo).latency_ps
    assert pre < dbl < ref


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


def test_prefetch_depth_follows_littles_law(topo: Topology) -> None:
    """Depth = ceil(hold / issue interval) + 1, hold = setup + A+B transfer + latency + fetch."""
    prog = GemmProgram(GemmShape(256, 256, 256), "prefetch", topo)
    hbm = topo.hbm
    tile_bytes = prog.plan.a_bytes + prog.plan.b_bytes
    bursts = -(-tile_bytes // hbm.burst_bytes)
    busiest = -(-bursts // hbm.num_pcs) * hbm.burst_ps
    hold = topo.dma.setup_ps + busiest + hbm.latency_ps + prog.fetch_ps
    assert prog.buffers.a == prog.buffers.b == -(-hold // topo.pe.stage_ps) + 1
    assert littles_depth(hold, topo.pe.stage_ps) == prog.buffers.a


def test_prefetch_depth_grows_with_hbm_latency(make_topo: Callable[..., Topology]) -> None:
    """A longer HBM latency needs more loads in flight: the depth is read from the topology."""
    shape = GemmShape(256, 256, 256)
    base = GemmProgram(shape, "prefetch", make_topo()).buffers.a
    slow = GemmProgram(shape, "prefetch", make_topo(hbm__latency_ns=480)).buffers.a
    assert slow > base


def test_c_buffer_is_free_when_its_bytes_left_sram(topo: Topology) -> None:
    """The first tile-op of output tile j waits for the DMA out of j - c to be *released*
    (its last burst served), and some start before that write has landed in HBM."""
    run = run_gemm("1024x64x256", "double_buffer", topo)
    prog, log = run.program, run.log
    start = dict(zip(log.op.tolist(), log.start.tolist(), strict=True))
    end = dict(zip(log.op.tolist(), log.end.tolist(), strict=True))
    early = 0
    for j in range(prog.buffers.c, prog.out_tiles):
        first = start[prog.gemm_id(j * prog.Kt)]
        cout = prog.cout_id(j - prog.buffers.c)
        assert first >= end[cout] - prog.lat
        early += first < end[cout]
    assert early > 0


@pytest.mark.parametrize("variant", ["prefetch", "resident"])
def test_buffer_counts_are_explicit_and_fit(topo: Topology, variant: str) -> None:
    """Every program states its A, B and C buffer counts; together they fit in SRAM."""
    prog = GemmProgram(GemmShape(2048, 2048, 2048), variant, topo)
    bu = prog.buffers
    assert min(bu.a, bu.b, bu.c) >= 1
    assert prog.sram_bytes() <= topo.sram.capacity_bytes
    if variant == "resident":
        assert prog.mode == "panel" and min(bu.a, bu.b) >= 2


def test_signatures_determine_blocks(topo: Topology, make_topo: Callable[..., Topology]) -> None:
    """Blocks with equal signatures have the same ops up to a shift of ids, tiles and time
    (what extrapolation relies on), in every mode."""
    small = make_topo(sram__capacity_kib=192)
    progs = [GemmProgram(GemmShape(300, 640, 200), v, topo) for v in VARIANTS]
    progs.append(GemmProgram(GemmShape(300, 640, 200), "resident", small))
    assert {p.mode for p in progs} == set(MODES)
    for prog in progs:
        seen: dict[object, tuple[object, ...]] = {}
        for b in range(prog.num_blocks):
            f, t0 = prog.first_op(b), prog.first_tile(b)
            norm = tuple(
                op._replace(
                    deps=tuple(d - f if d >= 0 else ~(~d - f) for d in op.deps),
                    tile=op.tile - t0 if op.tile >= 0 else -1,
                )
                for op in prog.block_ops(b)
            )
            sig = prog.block_sig(b)
            if sig in seen:
                # deps on ops long before the window (staged operands) may differ
                near = [n for n in zip(seen[sig], norm, strict=True) if n[0] != n[1]]
                assert all(a._replace(deps=()) == c._replace(deps=()) for a, c in near), (
                    prog.mode,
                    b,
                )
            else:
                seen[sig] = norm


def test_coverage_of_a_compressed_log_catches_a_wrong_period(topo: Topology) -> None:
    """A period whose copies step over tile-ops (or repeat them) fails coverage unexpanded."""
    from sim.oplog import OpLog

    run = run_gemm("1024x1024x1024", "double_buffer", topo)
    log = run.log
    assert log.compressed
    check_coverage(run)
    for step in (2, 0):
        bad = [r._replace(tiles_shift=r.tiles_shift * step) for r in log.repeats]
        broken = OpLog.from_columns(log.engines, log.stages, log.stored, repeats=bad)
        with pytest.raises(AssertionError, match="missing or computed twice"):
            check_coverage(GemmRun(run.program, broken))


@pytest.mark.parametrize(
    ("shape", "variant"),
    [
        ("300x5000x100", "resident"),
        ("1000x3000x700", "resident"),
        ("4096x64x4096", "resident"),
        ("100x300x200", "load_ref"),
        ("128x65536x128", "prefetch"),
        ("24x48x40", "double_buffer"),
    ],
)
def test_vectorised_block_signatures_equal_the_per_block_ones(
    topo: Topology, shape: str, variant: str
) -> None:
    """block_sig_array row b is block_sig(b), component for component, for every block."""
    prog = GemmProgram(GemmShape.parse(shape), variant, topo)
    rows = prog.block_sig_array(np.arange(prog.num_blocks, dtype=np.int64))
    for b in range(prog.num_blocks):
        assert tuple(int(x) for x in rows[b]) == prog.block_sig(b), b


@pytest.mark.parametrize(
    ("shape", "variant"),
    [
        ("4096x64x4096", "prefetch"),
        ("1000x3000x700", "resident"),
        ("16x65536x16", "load_ref"),
        ("300x5000x100", "double_buffer"),
        ("100x300x200", "resident"),
    ],
)
def test_a_block_called_unique_shares_its_signature_with_no_other(
    topo: Topology, shape: str, variant: str
) -> None:
    """The fast path skips the state of a unique_block (no period can start there): that
    is only sound if no other block of the program has the same signature."""
    prog = GemmProgram(GemmShape.parse(shape), variant, topo)
    sigs = [prog.block_sig(b) for b in range(prog.num_blocks)]
    count: dict[object, int] = {}
    for sig in sigs:
        count[sig] = count.get(sig, 0) + 1
    unique = [b for b in range(prog.num_blocks) if prog.unique_block(b)]
    assert unique  # the claim is exercised
    assert len(unique) < prog.num_blocks  # and some blocks are left to find periods in
    assert all(count[sigs[b]] == 1 for b in unique)
