"""The terminal summary: one compact table per bench, regressions first."""

from __future__ import annotations

from toyproject import Project


def test_table_per_bench_with_regressions_first_and_deltas(project: Project) -> None:
    """Each bench gets its own section (in discovery order); regressed configs lead its table,
    then the other verdicts, and each key metric shows its change."""
    project.bench("toy")
    project.bench("other")
    project.run("--regen-baselines").assert_outcomes(passed=8)
    project.knobs("toy", override={"latency_ns": 40.0})  # slower for all but 32-slow (64)
    result = project.run("--npubench", "all", "-k", "slow or 32-fast")
    result.stdout.fnmatch_lines(
        [
            "*- npubench: other -*",
            "  pass     16-slow  32               10",
            "*- npubench: toy -*",
            "  verdict     config   latency_ns [[]ns[]]  throughput [[]GB/s[]]",
            "  regression  16-slow  40 (+25.00%)     10",
            "  regression  32-fast  40 (+25.00%)     10",
            "  improved    32-slow  40 (-37.50%)     10",
        ]
    )
