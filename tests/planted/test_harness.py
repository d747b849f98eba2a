"""The planted-bug harness plants what it is told and nothing else."""

from __future__ import annotations

from pathlib import Path

from harness import run_gate

SELECT = ("-k", "256x256x256-double_buffer")


def test_nothing_planted_passes_and_the_example_bug_fails_naming_its_metric(
    tmp_path: Path,
) -> None:
    clean = run_gate(None, "gemm", *SELECT, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    planted = run_gate("example-gemm-latency-high", "gemm", *SELECT, tmp_path=tmp_path / "bug")
    assert planted.returncode == 1, planted.stdout[-3000:]
    assert "latency_ns" in planted.stdout


def test_an_unknown_bug_name_is_refused(tmp_path: Path) -> None:
    result = run_gate("no-such-bug", "gemm", *SELECT, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "no such planted bug" in result.stdout + result.stderr
