"""The GEMM bench gates for real: committed baselines pass, a slower plan fails with a table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PICK = "(256x256x256 or 128x128x128) and not systolic"  # 8 gated configs, quick

SLOWER_DOUBLE_BUFFER = """
import sim.kernels.gemm as gemm

_init = gemm.GemmProgram.__init__


def _one_buffer(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.variant == "double_buffer":
        self.nbuf = 1  # a regression: loads serialise behind fetch again


gemm.GemmProgram.__init__ = _one_buffer
"""


@pytest.fixture
def bench_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "benches").mkdir()
    (pytester.path / "baselines").mkdir()
    for name in ("gemm.py", "_gemm_systolic.py"):
        shutil.copy(ROOT / "benches" / name, pytester.path / "benches" / name)
    shutil.copy(ROOT / "baselines" / "gemm.json", pytester.path / "baselines" / "gemm.json")
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
