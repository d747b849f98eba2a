"""The terminal summary: per bench one line of counts, then only the configs that are not plain
passes (regressions first) in human units; the full table with -v, only the lines with -q."""

from __future__ import annotations

import re

from toyproject import REGEN_ONLY, TOY, Project, output


def two_benches(project: Project) -> None:
    project.bench("toy")
    project.bench("other")
    project.run("--regen-baselines").assert_outcomes(passed=8)
    project.knobs("toy", override={"latency_ns": 40.0})  # slower for all but 32-slow (64)


def test_count_line_then_only_the_configs_that_did_not_plainly_pass(project: Project) -> None:
    """Each bench gets its section (in discovery order) with its count line; regressed configs
    lead its table, improvements follow, plain passes are left out; values carry units."""
    two_benches(project)
    result = project.run("--npubench", "all", "-k", "slow or 32-fast")
    result.stdout.fnmatch_lines(
        [
            "*- npubench: other -*",
            "other: 3 run: 3 passed",
            "*- npubench: toy -*",
            "toy: 3 run: 0 passed, 3 failed (2 regressions, 1 improvement)",
            "configs that moved beyond tolerance (headline first):",
            "  regression  16-slow: latency_ns +25.00 % (32 ns -> 40 ns)",
            "  regression  32-fast: latency_ns +25.00 % (32 ns -> 40 ns)",
            "  improved    32-slow: latency_ns -37.50 % (64 ns -> 40 ns)",
            "if every change is intended: pytest --npubench toy --regen-baselines",
        ]
    )
    assert not re.search(r"^  pass +16-slow", output(result), re.M)  # plain passes left out


def test_verbose_shows_every_config_and_quiet_only_the_count_lines(project: Project) -> None:
    """-v lists plain passes too; -q keeps one line per bench and no table."""
    two_benches(project)
    verbose = project.run("--npubench", "other", "-v")
    verbose.stdout.fnmatch_lines(["other: 4 run: 4 passed", "  pass*16-fast*"])
    quiet = project.run("--npubench", "all", "-q")
    quiet.stdout.fnmatch_lines(["other: 4 run: 4 passed"])
    assert "npubench: other" not in output(quiet)
    assert not re.search(r"^  verdict +config", output(quiet), re.M)  # no table under -q


def test_reused_regen_only_configs_are_counted_not_listed(project: Project) -> None:
    """Configs not run (regen-only, reusing their baseline) are a count, never a row."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=REGEN_ONLY))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    result = project.run("--npubench", "toy")
    result.stdout.fnmatch_lines(
        ["toy: 3 run: 3 passed | 1 regen-only not run (baseline values reused)"]
    )
    assert "reused-baseline  32-slow" not in output(result)
