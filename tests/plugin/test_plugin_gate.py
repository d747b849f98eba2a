"""The regression gate: direction, tolerance, gate=False, functional checks, missing entries."""

from __future__ import annotations

import json

from toyproject import Project, assert_no_plugin_traceback


def gated_project(project: Project) -> None:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)


def test_within_tolerance_passes_beyond_fails(project: Project) -> None:
    """latency_ns has 1 % tolerance: +0.9 % passes, +1.1 % fails."""
    gated_project(project)
    project.knobs(scale=1.009)
    project.run("--npubench", "toy").assert_outcomes(passed=4)
    project.knobs(scale=1.011)
    project.run("--npubench", "toy").assert_outcomes(failed=4)


def test_higher_is_better_metric_fails_when_it_drops(project: Project) -> None:
    """throughput (direction higher, tolerance 0) fails on any drop as a regression; a rise
    is an improvement (it fails until accepted, passes when improvements are allowed)."""
    gated_project(project)
    project.knobs(throughput=9.0)
    result = project.run("--npubench", "toy")
    result.assert_outcomes(failed=4)
    # more than 3 failed on metrics: one line each, led by the headline (latency, unmoved)
    result.stdout.fnmatch_lines(
        ["  regression  16-fast: *; 1 more metric moved: throughput -10.00 %"]
    )
    project.knobs(throughput=11.0)
    result = project.run("--npubench", "toy")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        ["  improved  16-fast: *; 1 more metric moved: throughput +10.00 %"]
    )
    project.run("--npubench", "toy", "--npubench-allow-improvements").assert_outcomes(passed=4)


def test_ungated_metric_never_fails(project: Project) -> None:
    """util has gate=False: halving it is reported but fails nothing."""
    gated_project(project)
    project.knobs(util=0.25)
    result = project.run("--npubench", "toy")
    result.assert_outcomes(passed=4)
    assert project.results()["benches"]["toy"]["configs"]["16-fast"]["comparisons"] == {
        "latency_ns": "pass",
        "throughput": "pass",
        "util": "regression",
    }


def test_failed_functional_check_fails_with_its_message(project: Project) -> None:
    """ok=False fails the item with the bench's message, whatever the metrics say."""
    gated_project(project)
    project.knobs(ok=False, message="chip 3 ended with the wrong sum")
    result = project.run("--npubench", "toy", "-k", "16-fast")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["toy[[]16-fast[]]: functional check failed: chip 3 ended with*"])
    assert_no_plugin_traceback(result)


def test_gated_metric_missing_from_the_entry_fails_with_the_command(project: Project) -> None:
    """A baseline entry without a value for a gated metric (a metric added later) fails with
    the command that records it."""
    gated_project(project)
    data = project.baseline()
    del data["configs"]["16-fast"]["metrics"]["throughput"]
    project.write("baselines/toy.json", json.dumps(data))
    result = project.run("--npubench", "toy")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "toy[16-fast]: baselines/toy.json has no value of throughput for this config; create"
            " it with:",
            "  pytest --npubench toy --regen-baselines -k 'toy[[]16-fast[]]'",
        ]
    )


def test_bench_exception_shows_the_bench_traceback_only(project: Project) -> None:
    """A run function that raises fails its item with the bench's own traceback; no frames of
    the plugin are shown."""
    project.write(
        "benches/crash.py",
        """\
        from pytest_npubench import Bench, Metric, Result


        def run(params):
            raise ZeroDivisionError("tile plan divided by zero")


        BENCH = Bench(name="crash", sweep={"n": [1]}, run=run,
                      metrics={"t": Metric(unit="ns", direction="lower")},
                      fingerprint=lambda: "hw")
        """,
    )
    result = project.run("--npubench", "crash")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>       raise ZeroDivisionError("tile plan divided by zero")',
            "E       ZeroDivisionError: tile plan divided by zero",
            "benches/crash.py:5: ZeroDivisionError",
        ]
    )
    assert_no_plugin_traceback(result)
