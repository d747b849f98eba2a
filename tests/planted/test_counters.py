"""Exact counters never "improve" (issue 26, class 5): a bug that lowers a count (bytes written,
transfers) fails the gate as ``changed``, also with --npubench-allow-improvements, and the
accept command comes only after the explanation. With every check on, the derived-metric
check (benches._invariants) names the counter first; with it off the comparison still does."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_gate

CASES = [
    (
        "counters-gemm-last-writeback-uncounted",
        "gemm",
        "256x256x256-double_buffer",
        "hbm_write_bytes",
    ),
    (
        "counters-collective-last-reduction-step-uncounted",
        "ccl",
        "reduce_scatter-ring-p8-ring-1MiB",
        "transfers",
    ),
]


@pytest.mark.parametrize(("bug", "bench", "config", "counter"), CASES)
def test_a_counter_that_went_down_is_changed_not_improved(
    bug: str, bench: str, config: str, counter: str, tmp_path: Path
) -> None:
    select = ("-k", config)
    clean = run_gate(None, bench, *select, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    # the whole gate: the derived-metric check (benches._invariants) names the counter first
    gate = run_gate(bug, bench, *select, tmp_path=tmp_path / "gate")
    assert gate.returncode == 1, gate.stdout[-3000:]
    assert f"derived metric {counter} = " in gate.stdout, gate.stdout[-3000:]
    assert "improved" not in gate.stdout and "got better" not in gate.stdout
    # the metric comparison alone (invariants off) calls the lower count changed, not improved
    bug = f"{bug}+invariants-off"
    planted = run_gate(bug, bench, *select, "-v", tmp_path=tmp_path / "bug")
    out = planted.stdout
    assert planted.returncode == 1, out[-3000:]
    assert counter in out
    assert "improved" not in out and "got better" not in out, out[-3000:]
    assert "changed" in out
    explained, accept = out.index("exact counter"), out.index("--regen-baselines")
    assert explained < accept, out[-3000:]
    allowed = run_gate(
        bug, bench, *select, "--npubench-allow-improvements", tmp_path=tmp_path / "a"
    )
    assert allowed.returncode == 1, allowed.stdout[-3000:]  # not an improvement to let through
