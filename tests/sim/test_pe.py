"""sim.pe: a tile-op's timing on a systolic array is SCALE-Sim's fold formula (docs/adr/0012)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_project import copy_bench

from sim import load_topology
from sim.gemm.model import gemm_model
from sim.gemm.run import run_gemm
from sim.gemm.shape import GemmShape
from sim.gemm.tile_op import TileOpTiming, tile_op_timing
from sim.pe import systolic_tile_cycles
from sim.scalesim_files import read_scalesim_config, read_scalesim_topology

DATA = Path(__file__).parents[1] / "data"
TOPO = load_topology()


@pytest.mark.parametrize(
    ("tile", "array", "cycles"),
    [
        # one fold, os: Sr = M, Sc = N fit the array, T = K: K + R + C - 2
        ((32, 64, 32), (32, 32, "os"), 64 + 32 + 32 - 2),
        # one fold, ws: Sr = K, Sc = N, T = M: 2R + C + T - 2
        ((8, 16, 8), (16, 8, "ws"), 2 * 16 + 8 + 8 - 2),
        # one fold, is: Sr = K, Sc = M, T = N
        ((4, 16, 8), (16, 4, "is"), 2 * 16 + 4 + 8 - 2),
        # os, 2 x 2 folds of 64 + 16 + 16 - 2
        ((32, 64, 32), (16, 16, "os"), 4 * (64 + 16 + 16 - 2)),
        # os, partial folds still cost a whole fold each: ceil(33/32) * ceil(5/4)
        ((33, 7, 5), (32, 4, "os"), 2 * 2 * (7 + 32 + 4 - 2)),
    ],
)
def test_tile_op_cycles_are_the_fold_formula(
    tile: tuple[int, int, int], array: tuple[int, int, str], cycles: int
) -> None:
    assert systolic_tile_cycles(*tile, *array) == cycles


def test_tile_op_cycles_are_scalesim_total_cycles_plus_one() -> None:
    """On every GEMM layer SCALE-Sim ran for the reference table (two arrays, three
    dataflows), a tile-op of that shape lasts its Total Cycles + 1 (it reports the index
    of its last cycle)."""
    rows = json.loads((DATA / "scalesim_reference.json").read_text())["layers"]
    checked = 0
    for rec in rows:
        if rec["topology"] not in ("edge_gemm.csv", "gpt2.csv"):
            continue
        conf = read_scalesim_config(DATA / "scalesim" / rec["cfg"])
        layer = {x.name: x for x in read_scalesim_topology(DATA / "scalesim" / rec["topology"])}
        gemm = layer[rec["layer"]]
        got = systolic_tile_cycles(
            gemm.m, gemm.k, gemm.n, conf.array.rows, conf.array.cols, rec["dataflow"]
        )
        assert got == int(rec["compute_report"][2]) + 1, rec
        checked += 1
    assert checked == 42


def test_the_tile_model_keeps_its_pipeline_and_the_systolic_one_its_folds() -> None:
    """tile: issue every stage, retire D stages later; systolic at 2 GHz: a 500 ps cycle,
    and the next tile-op issues when this one's last fold has drained."""
    pe = TOPO.pe
    assert tile_op_timing(TOPO) == TileOpTiming(pe.stage_ps, pe.pipeline_stages * pe.stage_ps)
    fast = load_topology().with_systolic_pe(16, 16, "os")
    cycles = systolic_tile_cycles(pe.tile_m, pe.tile_k, pe.tile_n, 16, 16, "os")
    assert tile_op_timing(fast) == TileOpTiming(cycles * 1000, cycles * 1000)
    assert fast.pe.stage_ps == cycles * 1000  # what the rest of the simulator reads


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
@pytest.mark.parametrize("variant", ["prefetch", "resident"])
def test_gemm_latency_on_a_systolic_pe_is_monotone_in_each_dimension(
    dataflow: str, variant: str
) -> None:
    """Growing M, K or N never makes the GEMM faster (under-tile, ragged and whole tiles)."""
    topo = TOPO.with_systolic_pe(TOPO.pe.tile_m, TOPO.pe.tile_n, dataflow)
    steps = [16, 32, 48, 96, 128]
    for axis in range(3):
        latencies = []
        for step in steps:
            dims = [64, 96, 64]
            dims[axis] = step
            latencies.append(run_gemm(GemmShape(*dims), variant, topo).log.makespan_ps)
        assert latencies == sorted(latencies), (axis, latencies)
        assert latencies[-1] > latencies[0]  # it does depend on each dimension


def test_on_a_systolic_pe_the_pe_sets_the_pace_and_the_model_agrees() -> None:
    """A 32x32 os array is ~8x slower per tile-op than the tile pipeline (126 vs 16 ns):
    the analytic model names the PE as the limiter, and the simulator runs the tile-ops
    back to back."""
    topo = TOPO.with_systolic_pe(TOPO.pe.tile_m, TOPO.pe.tile_n, "os")
    shape = GemmShape(256, 256, 256)
    run = run_gemm(shape, "prefetch", topo)
    model = gemm_model(shape, "prefetch", topo)
    issue = tile_op_timing(topo).issue_ps
    assert model.limiter == "pe" and model.ii_ps == issue
    assert run.log.makespan_ps >= run.program.plan.tile_ops * issue
    assert abs(run.log.makespan_ps / model.ideal_ps - 1) < 1e-3


def test_the_gated_systolic_pe_configs_pass_against_their_baselines(
    pytester: pytest.Pytester,
) -> None:
    """The bench's systolic-PE configs are gated and match the committed baseline; the
    figure comparing the two PE models is drawn from them."""
    copy_bench(pytester.path, "gemm")
    result = pytester.runpytest_subprocess(
        "--npubench", "gemm", "-k", "systolic", "-p", "no:cacheprovider"
    )
    # os at 256^3 and 100x300x200, ws and is at 128^3, and the compute-bound replays of
    # double_buffer (128^3) and resident's panels (512x4096x32): issue 26
    result.assert_outcomes(passed=6)
    assert (pytester.path / "npubench-artifacts" / "gemm" / "systolic_vs_tile.png").is_file()
