"""Baseline files under hostile edits and concurrent writers (issue 13): every unusable file is
one clear error naming the file, the entry and the fix; nothing is ever lost or replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from toyproject import Project, assert_no_plugin_traceback, output

from pytest_npubench.baseline import BaselineError, load


def measured(project: Project) -> str:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    return project.read("baselines/toy.json")


def with_metric(text: str, raw: str) -> str:
    """The baseline text with 16-slow's latency_ns replaced by a raw JSON literal."""
    data = json.loads(text)
    data["configs"]["16-slow"]["metrics"]["latency_ns"] = "@@"
    return json.dumps(data, indent=2, sort_keys=True).replace('"@@"', raw)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('"123"', "entry '16-slow': metric 'latency_ns' is not a finite number ('123')"),
        ("NaN", "entry '16-slow': metric 'latency_ns' is not a finite number (nan)"),
        ("true", "entry '16-slow': metric 'latency_ns' is not a finite number (True)"),
        ("1" + "0" * 400, "holds a number of 401 characters (10000000000000000000...)"),
        ("7" * 5000, "holds a number of 5000 characters"),
        ("1e400", "entry '16-slow': metric 'latency_ns' is not a finite number (inf)"),
    ],
    ids=["string", "nan", "bool", "huge-int", "5000-digits", "float-overflow"],
)
def test_regen_with_k_on_a_bad_value_leaves_the_file_untouched(
    project: Project, raw: str, problem: str
) -> None:
    """The issue's data-loss case: `-k` regen after one metric was hand-edited used to keep 1
    entry of 4. Now the run stops with the file, the entry and the fix; not a byte changes."""
    text = with_metric(measured(project), raw)
    project.write("baselines/toy.json", text)
    result = project.run("--npubench", "toy", "--regen-baselines", "-k", "16-fast")
    assert result.ret != 0
    assert problem in output(result)
    assert "move the file away (mv baselines/toy.json baselines/toy.json.broken)" in output(result)
    assert project.read("baselines/toy.json") == text
    assert_no_plugin_traceback(result)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 200_000, "is nested too deeply to be a baseline file"),
        ('{"schema": 1, "schema": 1, "configs": {}}', "has the key 'schema' twice in one object"),
        ('{"schema": 1, "bench": "gemm", "configs": {}}', "is the baseline of bench 'gemm'"),
        ('{"schema": 1, "meta": [], "configs": {}}', "'meta' must be an object"),
        ('{"schema": "1", "configs": {}}', "has no valid schema version (got '1', expected 1)"),
        ('{"schema": 1, "configs": {"16-fast": null}}', "entry '16-fast' has no 'metrics'"),
        ("\udcff".encode("utf-8", "surrogatepass").decode("latin-1"), "is not valid JSON"),
    ],
    ids=["deep", "duplicate-key", "other-bench", "meta-list", "schema-str", "null-entry", "junk"],
)
def test_unusable_file_is_a_baseline_error_naming_the_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    """load() turns every hostile file into a BaselineError (no RecursionError, ValueError or
    silently-last-wins duplicate)."""
    path = tmp_path / "toy.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load(path, "toy")
    assert problem in str(info.value)


def test_a_directory_in_place_of_the_file_is_one_error(project: Project) -> None:
    """baselines/toy.json being a folder is a clear error for the bench, even under regen."""
    project.bench()
    (project.path / "baselines" / "toy.json").mkdir(parents=True)
    result = project.run("--npubench", "toy", "--regen-baselines")
    result.assert_outcomes(errors=1)
    assert "baselines/toy.json cannot be read (IsADirectoryError" in output(result)
    assert (project.path / "baselines" / "toy.json").is_dir()
    assert_no_plugin_traceback(result)


def test_symlinked_baseline_is_written_through(project: Project) -> None:
    """A baseline that is a symlink to a shared file stays a symlink; the target is updated."""
    measured(project)
    shared = project.path / "shared-toy.json"
    (project.path / "baselines" / "toy.json").rename(shared)
    (project.path / "baselines" / "toy.json").symlink_to(shared)
    project.knobs(scale=2.0)
    project.run("--regen-baselines").assert_outcomes(passed=4)
    link = project.path / "baselines" / "toy.json"
    assert link.is_symlink()
    assert json.loads(shared.read_text())["configs"]["16-fast"]["metrics"]["latency_ns"] == 32


def test_stale_temp_files_of_a_killed_regen_are_removed(project: Project) -> None:
    """Temp files a hard-killed writer left beside the baseline are cleaned by the next regen."""
    measured(project)
    stale = project.path / "baselines" / ".toy.json.abc123.tmp"
    stale.write_text("half a file")
    project.run("--regen-baselines").assert_outcomes(passed=4)
    assert not stale.exists()


def test_summary_does_not_call_a_failed_write_accepted(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the regen cannot write the file, summary.md and index.html say NOT accepted."""
    measured(project)
    project.knobs(scale=2.0)
    real = os.replace

    def disk_full(src: str, dst: str) -> None:
        if str(dst).endswith("toy.json"):
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(os, "replace", disk_full)  # the run is in-process
    result = project.run("--regen-baselines")
    assert result.ret != 0
    summary = project.read("npubench-artifacts/summary.md")
    assert "accepted (baseline rewritten)" not in summary
    assert "NOT accepted: the baseline could not be written (see Errors)" in summary
    assert "NOT written (see Errors): toy." in summary
    html = project.read("npubench-artifacts/index.html")
    assert "baselines rewritten" not in html
