"""The terminal summary: per bench one line of counts, then only the configs that are not plain
passes (regressions first) in human units; the full table with -v, only the lines with -q."""

from __future__ import annotations

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
            "other: 3 measured: 3 pass | 0 regressions",
            "*- npubench: toy -*",
            "toy: 3 measured: 1 improved | 2 regressions",
            "  verdict     config   latency_ns       throughput",
            "  regression  16-slow  40 ns (+25.00%)  10 GB/s",
            "  regression  32-fast  40 ns (+25.00%)  10 GB/s",
            "  improved    32-slow  40 ns (-37.50%)  10 GB/s",
        ]
    )
    assert "  pass     16-slow" not in output(result)


def test_verbose_shows_every_config_and_quiet_only_the_count_lines(project: Project) -> None:
    """-v lists plain passes too; -q keeps one line per bench and no table."""
    two_benches(project)
    verbose = project.run("--npubench", "other", "-v")
    verbose.stdout.fnmatch_lines(["other: 4 measured: 4 pass | 0 regressions", "  pass*16-fast*"])
    quiet = project.run("--npubench", "all", "-q")
    quiet.stdout.fnmatch_lines(["other: 4 measured: 4 pass | 0 regressions"])
    assert "npubench: other" not in output(quiet)
    assert "  verdict     config" not in output(quiet)


def test_reused_regen_only_configs_are_counted_not_listed(project: Project) -> None:
    """Configs not run (regen-only, reusing their baseline) are a count, never a row."""
    project.write("benches/toy.py", TOY.format(name="toy", extra=REGEN_ONLY))
    project.run("--regen-baselines").assert_outcomes(passed=4)
    result = project.run("--npubench", "toy")
    result.stdout.fnmatch_lines(
        ["toy: 3 measured: 3 pass | 1 reused from the baseline (regen-only) | 0 regressions"]
    )
    assert "reused-baseline  32-slow" not in output(result)
