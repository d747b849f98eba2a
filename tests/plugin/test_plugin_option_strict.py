"""--npubench-strict: improvements beyond tolerance fail too; without it they pass, listed."""

from __future__ import annotations

from toyproject import Project


def faster_project(project: Project) -> None:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=0.5)


def test_improvement_passes_and_is_listed_for_acceptance(project: Project) -> None:
    """A metric better than baseline beyond tolerance passes, and the summary says how to
    accept it (terminal and summary.md)."""
    faster_project(project)
    result = project.run("--npubench", "toy")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["improved: run --regen-baselines to accept: toy[16-fast] (latency_ns -50.00%)"]
    )
    summary = project.read("npubench-artifacts/summary.md")
    assert "| toy | `16-fast` | improved | latency_ns | 16 | 8 | -50.00% | 1.00% |" in summary
    assert "run --regen-baselines to accept" in summary


def test_strict_fails_on_improvement_with_the_table(project: Project) -> None:
    """Under --npubench-strict the same improvement fails its item with the change table."""
    faster_project(project)
    result = project.run("--npubench", "toy", "--npubench-strict")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "toy[[]16-fast[]]: 1 gated metric(s) changed beyond tolerance*",
            "  latency_ns  16        8        -50.00%  1.00%      improved",
        ]
    )


def test_strict_ignores_changes_within_tolerance(project: Project) -> None:
    """Strict is about changes beyond tolerance: a 0.5 % change within 1 % still passes."""
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=0.995)
    project.run("--npubench", "toy", "--npubench-strict").assert_outcomes(passed=4)
