"""--npubench-prune: drop baseline entries of configs that no longer exist."""

from __future__ import annotations

import json

from toyproject import Project, output


def stale_project(project: Project) -> None:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    data = project.baseline()
    data["configs"]["64-gone"] = {"metrics": {"latency_ns": 1.0}, "params": {}}
    project.write("baselines/toy.json", json.dumps(data))


def test_prune_drops_stale_entries_and_keeps_unselected_ones(project: Project) -> None:
    """With --npubench-prune, entries of vanished configs go; entries not run (-k) stay."""
    stale_project(project)
    result = project.run("--regen-baselines", "--npubench-prune", "-k", "fast")
    result.stdout.fnmatch_lines(["  pruned: 64-gone"])
    assert sorted(project.baseline()["configs"]) == ["16-fast", "16-slow", "32-fast", "32-slow"]


def test_without_prune_stale_entries_are_kept_and_listed(project: Project) -> None:
    """Without the flag a stale entry is listed with the hint, and kept."""
    stale_project(project)
    result = project.run("--regen-baselines")
    result.stdout.fnmatch_lines(["*stale (no such config; kept, --npubench-prune drops): 64-gone"])
    assert "64-gone" in project.baseline()["configs"]


def test_prune_without_regen_is_a_usage_error(project: Project) -> None:
    """--npubench-prune alone would do nothing, so it is refused with the fix."""
    project.bench()
    result = project.run("--npubench", "toy", "--npubench-prune")
    assert result.ret == 4
    assert "--npubench-prune only applies to a baseline rewrite; add --regen-baselines" in output(
        result
    )
