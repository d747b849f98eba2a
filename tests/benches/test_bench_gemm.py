"""The GEMM bench gates for real: committed baselines pass, a slower plan fails with a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench_project import copy_bench

ROOT = Path(__file__).resolve().parents[2]
PICK = "(256x256x256 or 128x128x128) and not systolic"  # 8 gated configs, quick

SLOWER_DOUBLE_BUFFER = """
import sim.gemm.program as gemm

_init = gemm.GemmProgram.__init__


def _one_buffer(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.variant == "double_buffer":
        self.nbuf = 1  # a regression: loads serialise behind fetch again


gemm.GemmProgram.__init__ = _one_buffer
"""


@pytest.fixture
def bench_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_bench(pytester.path, "gemm")
    return pytester


def test_committed_baselines_cover_every_config_and_match_the_simulator(
    bench_dir: pytest.Pytester,
) -> None:
    """Every config of the sweep has a committed entry, and the gated run passes."""
    from benches.gemm import BENCH  # the repo's bench module

    committed = json.loads((ROOT / "baselines" / "gemm.json").read_text())["configs"]
    assert sorted(committed) == sorted(c.config_id for c in BENCH.configs)
    result = bench_dir.runpytest_subprocess(
        "--npubench", "gemm", "-k", PICK, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=8)


def test_a_slower_tile_plan_fails_the_affected_configs_with_the_metric_table(
    bench_dir: pytest.Pytester,
) -> None:
    """Serialising double_buffer's loads behind its fetches fails exactly those configs,
    each with the latency row of the table; the other variants still pass."""
    bench_dir.makeconftest(SLOWER_DOUBLE_BUFFER)
    result = bench_dir.runpytest_subprocess(
        "--npubench", "gemm", "-k", PICK, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=6, failed=2)
    out = result.stdout.str()
    for shape in ("256x256x256", "128x128x128"):
        assert f"FAILED benches/gemm.py::gemm[{shape}-double_buffer]" in out
    result.stdout.fnmatch_lines(
        [
            "*metric*baseline*current*",
            "*latency_ns*regression*",
            "where it came from (current vs baseline, largest change first):",
            "  *DMA in in flight +*",
        ]
    )
    # loads took longer in flight; the fetch unit's work did not change: it says both
    assert "Fetch busy unchanged" in out
    summary = (bench_dir.path / "npubench-artifacts" / "summary.md").read_text()
    assert "**gemm `256x256x256-double_buffer`** (regression): " in summary
    assert "DMA in in flight +" in summary


def test_traces_of_gemm_configs_follow_the_trace_event_format(
    bench_dir: pytest.Pytester,
) -> None:
    """--npubench-trace writes one valid trace per selected config, merged above the limit."""
    from test_trace import check_trace_event_format

    pick = "32x64x32-load_ref or 256x256x256-resident"
    result = bench_dir.runpytest_subprocess(
        "--npubench",
        "gemm",
        "-k",
        pick,
        "--npubench-trace",
        "--npubench-trace-limit",
        "300",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    traces = bench_dir.path / "npubench-artifacts" / "gemm" / "traces"
    small = json.loads(next(traces.glob("32x64x32-load_ref-*.json")).read_text())
    big = json.loads(next(traces.glob("256x256x256-resident-*.json")).read_text())
    assert len(check_trace_event_format(small)) == small["otherData"]["records"]
    check_trace_event_format(big)
    assert big["otherData"]["merged"] is True


def _baseline_results(measured_ids: frozenset[str] = frozenset()) -> Any:
    """The committed gemm baseline as results; ids in ``measured_ids`` as if run."""
    import benches.gemm as gemm
    from pytest_npubench import ConfigResult

    configs = json.loads((ROOT / "baselines" / "gemm.json").read_text())["configs"]
    return {
        cid: ConfigResult(
            "gemm",
            cid,
            gemm.BENCH.config(cid).params,
            entry["metrics"],
            entry["metrics"],
            "pass" if cid in measured_ids else "reused-baseline",
            "run" if cid in measured_ids else "baseline",
        )
        for cid, entry in configs.items()
    }


def _baseline_grid(measured_ids: frozenset[str] = frozenset()) -> Any:
    """The committed gemm baseline as the figures see it (the bench's own grid builder)."""
    import benches.gemm as gemm

    return gemm.figure_grid(_baseline_results(measured_ids))


def test_stage_breakdown_panels_use_a_readable_time_unit_and_mark_reused_panels() -> None:
    """A panel's numbers stay below 1000 in their unit (ms for the 4096^3 shape, not 200000
    us); the black line is the end-to-end latency; a regen-only shape's panel is reused."""
    import benches._gemm_figures as gemm_figures

    grid = _baseline_grid(frozenset({"128x128x128-load_ref"}))
    big = gemm_figures.stage_panel(grid[(4096, 4096, 4096)])
    assert big["unit"] == "ms"
    assert max(big["latency"]) < 1000 and all(big["reused"])
    row = grid[(4096, 4096, 4096)]
    assert big["latency"][0] == row["load_ref"].metrics["latency_ns"] / 1e6
    small = gemm_figures.stage_panel(grid[(16, 32, 16)])
    assert small["unit"] == "ns"
    mixed = gemm_figures.stage_panel(grid[(128, 128, 128)])
    assert mixed["unit"] == "µs" and mixed["reused"] == [False, True, True, True]
    shapes = list(grid)  # panels in order of M*K*N
    assert [m * k * n for m, k, n in shapes] == sorted(m * k * n for m, k, n in shapes)


def test_useful_efficiency_is_drawn_once_per_shape() -> None:
    """real / padded MACs depends on the shape only: one value per shape, not one per variant;
    an under-tile shape pads (below 1), a tile-multiple shape does not."""
    import benches._gemm_figures as gemm_figures

    grid = _baseline_grid()
    values = dict(zip(grid, gemm_figures.useful_efficiency(grid), strict=True))
    assert len(values) == len(grid)
    assert values[(16, 32, 16)] < 1 and values[(256, 256, 256)] == 1


def test_model_ratio_is_simulated_over_modelled_latency_per_config() -> None:
    """model_vs_simulated.png plots each config's model_ratio (simulated / modelled
    latency), flagged measured or reused."""
    import benches._gemm_figures as gemm_figures

    grid = _baseline_grid(frozenset({"24x48x40-double_buffer"}))
    ratios = gemm_figures.model_ratios(grid)
    index = list(grid).index((24, 48, 40))
    point = next(p for p in ratios["double_buffer"] if p[0] == index)
    metrics = grid[(24, 48, 40)]["double_buffer"].metrics
    assert point == (index, metrics["model_ratio"], True)
    assert sum(len(points) for points in ratios.values()) == sum(len(r) for r in grid.values())
    assert sum(ran for points in ratios.values() for _, _, ran in points) == 1


def test_roofline_labels_every_shape_once() -> None:
    """Every shape's name appears in exactly one label, at its fastest variant's point."""
    import benches._gemm_figures as gemm_figures

    grid = _baseline_grid()
    labels = gemm_figures.roofline_labels(grid)
    names = [name for text in labels for name in text.split("\n")]
    assert sorted(names) == sorted("x".join(map(str, s)) for s in grid)
    by_name = {"x".join(map(str, s)): row for s, row in grid.items()}
    for text, (x, y) in labels.items():  # at the fastest point of the first shape it names
        best = max(by_name[text.split("\n")[0]].values(), key=lambda r: r.metrics["tflops"])
        assert (x, y) == (best.metrics["arith_intensity_flop_per_byte"], best.metrics["tflops"])
    assert len(labels) < len(grid)  # the big shapes at the ridge share one label


def test_the_figure_grid_keeps_every_tile_config_apart() -> None:
    """The four tile-PE figures draw every tile-PE config in a cell of its own (the bench's
    own builder); the systolic-PE twin of a config is not drawn over it; two results in one
    cell are an error naming both."""
    import benches.gemm as gemm
    from pytest_npubench import ConfigResult

    results = _baseline_results()
    grid = gemm.figure_grid(results)
    tile = [c for c in gemm.BENCH.configs if c.params["pe"] == "tile"]
    assert sum(len(row) for row in grid.values()) == len(tile) < len(results)
    cell = grid[(256, 256, 256)]["prefetch"]
    assert cell.config_id == "256x256x256-prefetch"  # not 256x256x256-prefetch-systolic
    first = results[tile[0].config_id]
    twin = ConfigResult("gemm", "twin", first.params, first.metrics, None, "pass", "run")
    with pytest.raises(ValueError, match=f"'{first.config_id}' and 'twin' fall in one"):
        gemm.figure_grid({first.config_id: first, "twin": twin})


def test_the_sweep_is_the_old_cartesian_product_in_the_same_order() -> None:
    """The union (gated shapes, then regen-only shapes) lists exactly the configs of the old
    definition, shape x variant x PE model without the mode shapes' other variants and the
    systolic PE outside its pairs, in the same order and with the same gated set."""
    import itertools

    import benches.gemm as gemm
    from sim import VARIANTS

    old = []
    for shape, variant, pe in itertools.product(
        gemm.GATED + gemm.REGEN_ONLY, VARIANTS, ("tile", "systolic")
    ):
        if gemm.MODE_SHAPES.get(shape, variant) != variant:
            continue
        if pe == "systolic" and gemm.systolic.SYSTOLIC_CONFIGS.get(shape) != variant:
            continue
        old.append({"shape": shape, "variant": variant, "pe": pe})
    first = gemm.BENCH.configs[: len(old)]  # issue 26's path and race configs after, gated
    rest = gemm.BENCH.configs[len(old) :]
    assert len(rest) == 8 and not any(c.regen_only for c in rest)  # 6 paths, 2 races
    assert [(c.config_id, c.params, c.regen_only) for c in first] == [
        (gemm.config_id(p), p, p["shape"] in gemm.REGEN_ONLY) for p in old
    ]
