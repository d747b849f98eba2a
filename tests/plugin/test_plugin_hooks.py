"""The pytest_npubench_* hooks: add benches, observe results, add figures, override a compare."""

from __future__ import annotations

import json

import pytest
from toyproject import Project, output

EXTRA_BENCH = """\
from pytest_npubench import Bench, Metric, Result

EXTRA = Bench(
    name="extra",
    sweep={"n": [1, 2]},
    run=lambda p: Result(metrics={"t": float(p["n"])}),
    metrics={"t": Metric(unit="ns", direction="lower")},
    fingerprint=lambda: "hw",
)


def pytest_npubench_add_benches(config):
    return [EXTRA]
"""


def test_conftest_adds_a_bench(project: Project) -> None:
    """A bench returned by pytest_npubench_add_benches runs like a discovered one."""
    project.bench()
    project.write("conftest.py", EXTRA_BENCH)
    listed = project.run("--npubench", "all", "--collect-only", "-q")
    listed.stdout.fnmatch_lines(["conftest.py::extra[[]1[]]", "conftest.py::extra[[]2[]]"])
    listed.stdout.fnmatch_lines(["*6 tests collected*"])
    project.run("--npubench", "extra", "--regen-baselines").assert_outcomes(passed=2)
    assert sorted(project.baseline("extra")["configs"]) == ["1", "2"]


def test_add_benches_returning_something_else_is_a_usage_error(project: Project) -> None:
    """A hook that returns non-Bench objects is named in a usage error."""
    project.bench()
    project.write("conftest.py", "def pytest_npubench_add_benches(config):\n    return ['gemm']\n")
    result = project.run("--npubench", "toy")
    assert result.ret == 4
    assert "pytest_npubench_add_benches returned 'gemm'; it must return a list of" in output(result)


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_result_observer_sees_every_config_on_the_controller(project: Project, xdist: bool) -> None:
    """pytest_npubench_result is called once per config, in the controller process, with the
    rebuilt ConfigResult (params as in the sweep)."""
    project.bench()
    project.write(
        "conftest.py",
        """\
        import json, os

        def pytest_npubench_result(config, bench, result):
            if hasattr(config, "workerinput"):
                raise AssertionError("observer called on a worker")
            with open("observed.jsonl", "a") as f:
                f.write(json.dumps([bench.name, result.config_id, result.verdict,
                                    repr(result.params), result.metrics["latency_ns"]]) + "\\n")
        """,
    )
    project.run("--npubench", "toy", "--regen-baselines", xdist=xdist).assert_outcomes(passed=4)
    lines = sorted(json.loads(line) for line in project.read("observed.jsonl").splitlines())
    assert lines == [
        ["toy", "16-fast", "new", "{'size': 16, 'variant': 'fast'}", 16.0],
        ["toy", "16-slow", "new", "{'size': 16, 'variant': 'slow'}", 32.0],
        ["toy", "32-fast", "new", "{'size': 32, 'variant': 'fast'}", 32.0],
        ["toy", "32-slow", "new", "{'size': 32, 'variant': 'slow'}", 64.0],
    ]


def test_figures_hook_adds_files_next_to_the_benchs_own(project: Project) -> None:
    """A conftest's pytest_npubench_figures writes more files into the bench's artifact
    folder; they are listed in results.json beside the bench's own figure."""
    project.bench(figures=True)
    project.write(
        "conftest.py",
        """\
        def pytest_npubench_figures(config, bench, results, outdir):
            path = outdir / "table.csv"
            rows = [f"{cid},{r.metrics['latency_ns']}\\n" for cid, r in results.items()]
            path.write_text("".join(rows))
            return [path]
        """,
    )
    project.run("--regen-baselines").assert_outcomes(passed=4)
    assert project.results()["benches"]["toy"]["figures"] == ["toy/table.csv", "toy/latency.png"]
    assert project.read("npubench-artifacts/toy/table.csv").startswith("16-fast,16.0\n")


def test_compare_hook_overrides_one_metric_and_defers_the_rest(project: Project) -> None:
    """The first non-None pytest_npubench_compare wins (here: latency never regresses); None
    falls through to the default comparison (throughput still gates)."""
    project.bench()
    project.write(
        "conftest.py",
        """\
        from pytest_npubench import Comparison

        def pytest_npubench_compare(name, baseline, current):
            if name == "latency_ns":
                return Comparison("pass", (current - baseline) / baseline)
            return None
        """,
    )
    project.run("--regen-baselines").assert_outcomes(passed=4)
    project.knobs(scale=2.0)
    project.run("--npubench", "toy").assert_outcomes(passed=4)
    project.knobs(scale=2.0, throughput=5.0)
    project.run("--npubench", "toy").assert_outcomes(failed=4)
