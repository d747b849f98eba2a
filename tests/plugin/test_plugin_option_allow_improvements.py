"""Improvements fail by default (ADR 0007); --npubench-allow-improvements (or the ini setting)
lets them pass, listed for acceptance; --npubench-strict overrides both."""

from __future__ import annotations

import pytest
from toyproject import Project


def faster_project(project: Project) -> None:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=0.5)


@pytest.mark.parametrize("xdist", [False, True], ids=["n0", "n2"])
def test_improvement_fails_by_default_with_table_and_accept_command(
    project: Project, xdist: bool
) -> None:
    """A gated metric 50 % better than its baseline fails its item: verdict improved, the
    table, the accept command and the reason an improvement must be accepted."""
    faster_project(project)
    result = project.run("--npubench", "toy", xdist=xdist)
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(  # 4 failed on metrics: one line each, the tables under -v
        [
            "toy: 4 run: 0 passed, 4 failed (4 improvements)",
            "  improved  16-fast: latency_ns -50.00 % (16 ns -> 8 ns)",
            "if every change is intended: pytest --npubench toy --regen-baselines*",
        ]
    )
    result = project.run("--npubench", "toy", "-v", xdist=xdist)
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "*toy[[]16-fast[]]: 1 gated metric(s) got better beyond tolerance*",
            "  latency_ns  16 ns     8 ns     -50.00 %  1 %        improved",
            "*accept it with: pytest --npubench toy --regen-baselines -k 'toy[[]16-fast[]]'",
            "*would hide a later regression of the same size*",
        ]
    )
    assert project.results()["benches"]["toy"]["configs"]["16-fast"]["verdict"] == "improved"


def test_allow_improvements_flag_passes_and_lists_them(project: Project) -> None:
    """With the flag the same improvement passes, and the terminal, summary.md and index.html
    count it as passed (allowed) and say how to accept it."""
    faster_project(project)
    result = project.run("--npubench", "toy", "--npubench-allow-improvements")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "toy: 4 run: 4 passed (4 improvements allowed)",
            "  improved  16-fast: latency_ns -50.00 % (16 ns -> 8 ns)",
            "if every change is intended: pytest --npubench toy --regen-baselines",
        ]
    )
    summary = project.read("npubench-artifacts/summary.md")
    assert summary.startswith(
        "# npubench summary\n\n- **toy: 4 run: 4 passed (4 improvements allowed)**"
    )
    assert "| toy | `16-fast` | improved | latency_ns -50.00 % (16 ns -&gt; 8 ns) |" in summary
    assert "accept them all with:\n\n    pytest --npubench toy --regen-baselines\n" in summary
    html = project.read("npubench-artifacts/index.html")  # the same counts as the terminal's
    assert "<li>toy: 4 run: 4 passed (4 improvements allowed)</li>" in html


def test_ini_setting_allows_improvements_and_strict_overrides_it(project: Project) -> None:
    """``npubench_allow_improvements = true`` in the ini file lets improvements pass;
    --npubench-strict on the command line makes them fail again."""
    faster_project(project)
    project.pytester.makeini(
        "[pytest]\nfilterwarnings = error\nnpubench_allow_improvements = true\n"
    )
    project.run("--npubench", "toy").assert_outcomes(passed=4)
    project.run("--npubench", "toy", "--npubench-strict").assert_outcomes(failed=4)


def test_a_regression_still_fails_when_improvements_are_allowed(project: Project) -> None:
    """Allowing improvements never lets a regression through."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=1.5)
    result = project.run("--npubench", "toy", "--npubench-allow-improvements")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["  regression  16-fast: latency_ns +50.00 % (16 ns -> 24 ns)"])


def test_changes_within_tolerance_pass(project: Project) -> None:
    """The gate is about changes beyond tolerance: a 0.5 % change within 1 % still passes."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=0.995)
    project.run("--npubench", "toy").assert_outcomes(passed=4)
